"""The process engine: the trainer as a subprocess in its own process group.

For bare-metal Miles installs and machines without Docker. Pause and resume
are SIGSTOP and SIGCONT to the whole group, as `docker pause` freezes the
whole container; lines are stamped by the harness in Docker's format.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from typing import Any, Iterator, Optional

from harness.engines.logstream import stamp_now
from harness.errors import ExitCode, HarnessError
from harness.launch import LaunchSpec


class ProcessEngine:
    """Starts launch specs as local process groups."""

    name = "process"

    def start(self, spec: LaunchSpec, extra_labels: dict[str, str]) -> "ProcessRun":
        if not spec.command:
            raise HarnessError(f"run {spec.run}: the process engine needs a `command`")
        env = {**os.environ, **spec.env}
        try:
            process = subprocess.Popen(
                list(spec.command),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: pause/stop reach every child
            )
        except OSError as err:
            raise HarnessError(
                f"run {spec.run}: cannot start {spec.command[0]!r}: {err.strerror or err}",
                ExitCode.ENGINE_UNAVAILABLE,
            ) from None
        return ProcessRun(process)

    def facts(self) -> dict[str, Any]:
        return {"engine": "process", "host": socket.gethostname()}


class ProcessRun:
    """A started process group."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.id = str(process.pid)
        self._paused = False
        self._lock = threading.Lock()

    def log_lines(self) -> Iterator[str]:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            text = raw.rstrip(b"\n").decode("utf-8", "replace")
            yield f"{stamp_now()} {text}"

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return 128 - code if code < 0 else code  # killed by signal N -> 128+N, as Docker reports it

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass

    def pause(self) -> None:
        with self._lock:
            self._signal(signal.SIGSTOP)
            self._paused = True

    def resume(self) -> None:
        with self._lock:
            self._signal(signal.SIGCONT)
            self._paused = False

    def is_paused(self) -> bool:
        return self._paused and self.process.poll() is None

    def stop(self, grace_s: float) -> None:
        if self.is_paused():
            self.resume()
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()
            self.process.wait()

    def kill(self) -> None:
        if self.is_paused():
            self.resume()
        self._signal(signal.SIGKILL)

    def remove(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()

    def facts(self) -> dict[str, Any]:
        return {"pid": self.process.pid, "command": list(self.process.args)}
