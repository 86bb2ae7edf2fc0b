"""The process engine: the trainer as a supervised process group, for bare-metal Miles and machines without Docker.

Each run gets a directory under the engine's root (HARNESS_PROCESS_DIR, else
`$XDG_STATE_HOME/miles-gb10-lab/processes`), and a supervisor
(`harness.engines.shim`, in a session of its own) that starts the trainer in
its own process group, stamps its lines into the directory's output.log and
records its exit. So, as with Docker, the trainer and its log outlive a
harness that dies, and `attach`, `list`, `logs`, `stop` and `recover` find
them again.

A pid is trusted only with its start time and the boot id: a later harness
compares them with what was recorded before it signals anything, so a pid
reused by another process is never paused or killed. Pause and resume are
SIGSTOP and SIGCONT to the whole group, as `docker pause` freezes the whole
container.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping, Optional, Sequence, Union

from harness.capture.records import ProcessIdentity
from harness.engines.base import CREATED, EXITED, GONE, PAUSED, RUNNING, Description, NotStarted, Problem, RunGone
from harness.engines.logstream import LogPosition, stamp_now
from harness.engines.shim import LiveProcess, process_identity
from harness.engines.spec import LaunchSpec
from harness.errors import ExitCode, HarnessError
from harness.fs.bounded import Unreadable, WholeLines, open_regular, read_bounded, read_json_file
from harness.fs.failpoints import ENV as FAILPOINT_ENV
from harness.fs.failpoints import failpoint
from harness.fs.files import open_append, write_json_atomic
from harness.fs.paths import state_dir

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject, JSONValue

START_TIMEOUT_S = 30.0
POLL_S = 0.05
GONE_CHECK_S = 1.0  # how often a follower looks whether the run vanished (the end record: every poll)
SIGNAL_SETTLE_S = 2.0  # how long pause/resume wait to see the process stopped or running


def process_root() -> Path:
    """Where the process engine keeps its runs."""
    return state_dir("HARNESS_PROCESS_DIR", "processes")


class ProcessEngine:
    """Starts launch specs as supervised local process groups."""

    name = "process"

    def __init__(self, root: Optional[Path] = None) -> None:
        self.root = Path(root) if root else process_root()

    def preflight(self, spec: LaunchSpec) -> list[Problem]:
        """The command must be there and executable (GPUs are the machine's own: not checked)."""
        if not spec.command:
            return [Problem(f"run {spec.run}: the process engine needs a `command`")]
        if shutil.which(spec.command[0]) is None:
            return [
                Problem(
                    f"the command {spec.command[0]!r} is not found or not executable "
                    f"(command: {' '.join(spec.command)})"
                )
            ]
        return []

    def image_facts(self, spec: LaunchSpec) -> Optional[JSONObject]:
        """A process run has no image: nothing to look at."""
        return {"checked": False, "reason": "the process engine runs no image"}

    def start(self, spec: LaunchSpec, extra_labels: dict[str, str]) -> "SupervisedRun":
        """Start the supervisor and, through it, the trainer; NotStarted if the trainer could not start."""
        if not spec.command:
            raise NotStarted(f"run {spec.run}: the process engine needs a `command`")
        run_id = f"{spec.run}-{secrets.token_hex(4)}"
        directory = self.root / run_id
        directory.mkdir(parents=True)
        labels = {**spec.labels, **extra_labels}
        write_json_atomic(directory / "run.json", {"id": run_id, "labels": labels, "command": list(spec.command)})
        failpoint("after-create")
        try:
            with os.fdopen(open_append(directory / "shim.err"), "wb") as errors:
                shim = subprocess.Popen(
                    [sys.executable, "-m", "harness.engines.shim", "--detach", str(directory)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=errors,
                    env={**_inherited_env(), **spec.env},
                    start_new_session=True,
                )
        except OSError as err:
            shutil.rmtree(directory, ignore_errors=True)
            raise NotStarted(
                f"run {spec.run}: cannot start the process supervisor: {err.strerror or err}",
                ExitCode.ENGINE_UNAVAILABLE,
            ) from None
        run = SupervisedRun(directory)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            # The launcher's end is read before the files: it exits 0 only once state.json or start-error.json is
            # written, so only a launcher that had ended before this look, and left neither, ended without a word.
            # (Read after, a launcher that ended between the two looks made a started run "ended at once".)
            launcher_ended = shim.poll() is not None
            if run.state_path.exists():
                return run
            problem = run.start_error()
            if problem is None and launcher_ended:
                problem = "the process supervisor ended at once: " + _tail(directory / "shim.err")
            if problem is None and time.monotonic() > deadline:
                problem = f"the process supervisor did not start it within {START_TIMEOUT_S:g} s"
            if problem is not None:
                shutil.rmtree(directory, ignore_errors=True)
                raise NotStarted(f"run {spec.run}: {problem}", ExitCode.ENGINE_UNAVAILABLE)
            time.sleep(POLL_S / 5)

    def attach(self, id: str) -> "SupervisedRun | ForeignProcess":
        """A run by its id, or by its trainer's pid; any other live pid as a bare process group."""
        if "/" not in id and (self.root / id / "run.json").exists():
            return SupervisedRun(self.root / id)
        if id.isdigit():
            pid = int(id)
            for run in self._runs():
                identity = run.identity()
                if identity is not None and identity.pid == pid and run.describe().alive:
                    return run
            if process_identity(pid) is not None:
                return ForeignProcess(pid)
        raise HarnessError(
            f"no process run or live process {id!r} (process runs live in {self.root})", ExitCode.NOT_FOUND
        )

    def list(self, labels: Mapping[str, Optional[str]]) -> list["SupervisedRun"]:
        """Every run in the engine's root, running or not, that carries these labels."""
        return [run for run in self._runs() if _matches(run.labels, labels)]

    def _runs(self) -> Sequence["SupervisedRun"]:
        if not self.root.is_dir():
            return []
        return [SupervisedRun(path) for path in sorted(self.root.iterdir()) if (path / "run.json").is_file()]

    def facts(self) -> JSONObject:
        import socket

        return {"engine": "process", "host": socket.gethostname(), "process_root": str(self.root)}


MAX_STATE_BYTES = 1 << 20  # run.json, state.json, exit.json, shim.err: a few hundred bytes each


def _inherited_env() -> dict[str, str]:
    """The harness's environment for the trainer, less its own fault-injection switch."""
    return {name: value for name, value in os.environ.items() if name != FAILPOINT_ENV}


def _matches(have: Mapping[str, str], wanted: Mapping[str, Optional[str]]) -> bool:
    return all(name in have and (value is None or have[name] == value) for name, value in wanted.items())


def _tail(path: Path, limit: int = 300) -> str:
    try:
        text = read_bounded(path, MAX_STATE_BYTES).decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return "(no output)"
    except Unreadable as err:
        return f"({err})"
    return text[-limit:] or "(no output)"


def _read_json(path: Path) -> Optional[JSONObject]:
    """A state file of the run directory; None when absent, or not what the supervisor writes."""
    try:
        data = read_json_file(path, MAX_STATE_BYTES)
    except (FileNotFoundError, Unreadable):
        return None
    return data if isinstance(data, dict) else None


class _ProcessGroup:
    """Signals to a verified process group: nothing is sent to a pid that is no longer the same process."""

    def identity(self) -> Optional[ProcessIdentity]:
        raise NotImplementedError

    def _live(self) -> Optional[LiveProcess]:
        """/proc's facts of the process if it is still the one recorded (same start time, same boot)."""
        recorded = self.identity()
        if recorded is None:
            return None
        now = process_identity(recorded.pid)
        if now is None or now["state"] in ("Z", "X"):
            return None
        if recorded.start_ticks is not None and now["start_ticks"] != recorded.start_ticks:
            return None
        if recorded.boot_id and now["boot_id"] and now["boot_id"] != recorded.boot_id:
            return None
        return now

    def _signal(self, signum: int) -> None:
        recorded = self.identity()
        if recorded is None or self._live() is None:
            return
        try:
            if recorded.pgid == recorded.pid:
                os.killpg(recorded.pgid, signum)
            else:  # not a group leader (a process the harness did not start): only that process
                os.kill(recorded.pid, signum)
        except ProcessLookupError:
            pass

    def pause(self) -> None:
        """Freeze the group; returns once the process is stopped, as `docker pause` returns frozen, and raises, as
        `docker pause` does when it cannot freeze, when the live process is still not stopped."""
        self._signal(signal.SIGSTOP)
        self._settle(paused=True)
        if self._live() is not None and not self.is_paused():
            raise HarnessError(f"SIGSTOP sent, but the process was not stopped within {SIGNAL_SETTLE_S:g} s")

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self._settle(paused=False)

    def _settle(self, *, paused: bool) -> None:
        deadline = time.monotonic() + SIGNAL_SETTLE_S
        while time.monotonic() < deadline and self._live() is not None and self.is_paused() != paused:
            time.sleep(0.005)

    def is_paused(self) -> bool:
        live = self._live()
        return live is not None and live["state"] in ("T", "t")

    def kill(self) -> None:
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)

    def stop(self, grace_s: float) -> None:
        self._signal(signal.SIGCONT)  # a frozen process cannot act on SIGTERM
        self._signal(signal.SIGTERM)
        if self.wait(grace_s) is None:
            self.kill()
            self.wait(30)

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        raise NotImplementedError


class SupervisedRun(_ProcessGroup):
    """A run the process engine started (its directory under the engine's root)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.id = self.directory.name
        self.state_path = self.directory / "state.json"
        self.exit_path = self.directory / "exit.json"
        self.output_path = self.directory / "output.log"
        self._identity: Optional[ProcessIdentity] = None
        self._run: Optional[JSONObject] = None
        self._gone_checked_at = -GONE_CHECK_S

    @property
    def run_record(self) -> JSONObject:
        if self._run is None:
            self._run = _read_json(self.directory / "run.json") or {}
        return self._run

    @property
    def labels(self) -> dict[str, str]:
        labels = self.run_record.get("labels")
        if not isinstance(labels, dict):
            return {}
        return {name: value for name, value in labels.items() if isinstance(value, str)}  # the engine writes str

    def identity(self) -> Optional[ProcessIdentity]:
        if self._identity is None:
            state = _read_json(self.state_path)
            if state is not None:
                try:
                    self._identity = ProcessIdentity.from_dict(state)
                except ValueError:
                    return None
        return self._identity

    def given_values(self) -> Optional[tuple[dict[str, str], list[str]]]:
        """The environment (while the trainer lives: it is kept nowhere else) and the command it was given, to know
        the secrets its output may repeat."""
        command = self.run_record.get("command")
        words = [str(word) for word in command] if isinstance(command, list) else []
        live, identity = self._live(), self.identity()
        env: dict[str, str] = {}
        if live is not None and identity is not None:
            try:
                raw = Path(f"/proc/{identity.pid}/environ").read_bytes()
            except OSError:
                raw = b""
            for entry in raw.split(b"\0"):
                name, _, value = entry.decode("utf-8", "replace").partition("=")
                if name:
                    env[name] = value
        return env, words

    def start_error(self) -> Optional[str]:
        problem = _read_json(self.directory / "start-error.json")
        return None if problem is None else str(problem.get("error"))

    def _exit(self) -> Optional[JSONObject]:
        return _read_json(self.exit_path)

    def describe(self) -> Description:
        ended = self._exit()
        started = _read_json(self.state_path) or {}
        started_at = _text(started.get("started_at"))

        def described(state: str, exit_code: Optional[int] = None, finished_at: Optional[str] = None) -> Description:
            return Description(self.id, self.id, state, exit_code, self.labels, started_at, finished_at)

        if ended is not None:
            return described(EXITED, _integer(ended.get("exit_code")), _text(ended.get("finished_at")))
        if not started:
            return described(CREATED if self.directory.exists() else GONE)
        live = self._live()
        if live is None:
            if self._supervisor_alive(started):
                return described(RUNNING)  # ended; the supervisor is recording it
            # The supervisor's last acts are to record the end and exit: it may have done both since the first look.
            ended = self._exit()
            if ended is not None:
                return described(EXITED, _integer(ended.get("exit_code")), _text(ended.get("finished_at")))
            # The trainer is gone and nobody recorded its end (the supervisor was killed too).
            return described(GONE)
        return described(PAUSED if live["state"] in ("T", "t") else RUNNING)

    def logs(self, since: Optional[LogPosition] = None, *, follow: bool = False) -> Iterator[str]:
        """The lines of output.log after `since`; with `follow`, until the trainer's end is recorded."""
        return chain.from_iterable(self.log_bursts(since, follow=follow))

    def log_bursts(self, since: Optional[LogPosition] = None, *, follow: bool = False) -> Iterator[list[str]]:
        """The lines of `logs`, in the groups that came in one read of output.log."""
        position = since if since is not None else LogPosition()
        yield from position.new_bursts(self._tail(follow))

    def _tail(self, follow: bool) -> Iterator[list[str]]:
        while not self.output_path.exists():
            if not follow or self._finished():
                return
            time.sleep(POLL_S)
        try:
            handle = open_regular(self.output_path)
        except (OSError, Unreadable):
            return
        with handle:
            # The shim writes each line whole and stamped: an empty line is a torn one (blanked), and a last line
            # without its newline was cut short; neither is given (harness.fs.bounded.WholeLines).
            lines = WholeLines(handle, live=True)
            last_look = False
            while True:
                data = lines.read()
                burst = [raw.decode("utf-8", "replace") for raw in data.split(b"\n")[:-1] if raw]
                if burst:
                    yield burst
                if data:
                    continue
                if last_look or not follow:
                    break
                if self._finished():
                    last_look = True  # one more read: lines written between the last read and the end
                    continue
                time.sleep(POLL_S)

    @staticmethod
    def _supervisor_alive(started: JSONObject) -> bool:
        pid, ticks = started.get("shim_pid"), started.get("shim_start_ticks")
        if not isinstance(pid, int):
            return False
        now = process_identity(pid)
        return now is not None and now["state"] not in ("Z", "X") and (ticks is None or now["start_ticks"] == ticks)

    def _finished(self) -> bool:
        return self.exit_path.exists() or self._gone()

    def _gone(self) -> bool:
        """True when the trainer and its supervisor went away with no end recorded; looked at once a second at most.

        Followers poll every POLL_S; the full look (state file, /proc) costs more than the cheap check of the
        end record, and a second's delay in noticing a vanished run changes nothing.
        """
        now = time.monotonic()
        if now - self._gone_checked_at < GONE_CHECK_S:
            return False
        self._gone_checked_at = now
        return self.describe().state == GONE

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ended = self._exit()
            if ended is not None:
                code = _integer(ended.get("exit_code"))
                return -1 if code is None else code
            if self._gone():
                raise RunGone(
                    f"its process run {self.id} vanished while it ran: the trainer and its supervisor are gone "
                    "and no end was recorded"
                )
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(POLL_S)

    def remove(self) -> None:
        """Forget the run (its output.log with it): only once it has ended."""
        if self.describe().alive:
            raise HarnessError(f"process run {self.id} is still running; stop it first")
        shutil.rmtree(self.directory, ignore_errors=True)

    def facts(self) -> JSONObject:
        identity = self.identity()
        command = self.run_record.get("command")
        return {
            "process_run": self.id,
            "run_dir": str(self.directory),
            "command": list(command) if isinstance(command, list) else [],
            **(identity.to_dict() if identity else {}),
        }


class ProcessRun(_ProcessGroup):
    """A process group the caller started itself, its output on a pipe (tests and tools drive the guard with it).

    The engine's own runs are SupervisedRun: they outlive the harness; this
    one lives and dies with its caller, and its lines are stamped as they are read.
    """

    def __init__(self, process: Union[subprocess.Popen[bytes], subprocess.Popen[str]]) -> None:
        self.process = process
        self.id = str(process.pid)
        found = process_identity(process.pid)
        self._identity = ProcessIdentity(
            process.pid, process.pid, found["start_ticks"] if found else None, found["boot_id"] if found else None
        )

    def identity(self) -> ProcessIdentity:
        return self._identity

    def describe(self) -> Description:
        code = self.process.poll()
        if code is not None:
            return Description(self.id, self.id, EXITED, exit_code=128 - code if code < 0 else code)
        return Description(self.id, self.id, PAUSED if self.is_paused() else RUNNING)

    def log_lines(self) -> Iterator[str]:
        """Every line of the pipe, stamped as it is read."""
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
            yield f"{stamp_now()} {text.rstrip(chr(10))}"

    def logs(self, since: Optional[LogPosition] = None, *, follow: bool = False) -> Iterator[str]:
        position = since if since is not None else LogPosition()
        yield from position.new_lines(self.log_lines())

    def log_bursts(self, since: Optional[LogPosition] = None, *, follow: bool = False) -> Iterator[list[str]]:
        """A line at a time: each is stamped as it is read from the pipe."""
        for line in self.logs(since, follow=follow):
            yield [line]

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return 128 - code if code < 0 else code  # killed by signal N -> 128+N, as Docker reports it

    def remove(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()

    def facts(self) -> JSONObject:
        args = self.process.args
        words = args if isinstance(args, (list, tuple)) else [args]
        return {"command": [str(word) for word in words], **self._identity.to_dict()}


class ForeignProcess(_ProcessGroup):
    """A live process the engine did not start (`harness guard --pid`): pause, resume, stop; no log."""

    def __init__(self, pid: int) -> None:
        found = process_identity(pid)
        if found is None:
            raise HarnessError(f"no process {pid}", ExitCode.NOT_FOUND)
        self.id = str(pid)
        self._identity = ProcessIdentity(pid, found["pgid"], found["start_ticks"], found["boot_id"])
        if self._identity.pgid == os.getpgrp():
            # Its group is the harness's own: signal only the process, never ourselves.
            self._identity = ProcessIdentity(pid, -1, found["start_ticks"], found["boot_id"])

    def identity(self) -> ProcessIdentity:
        return self._identity

    def describe(self) -> Description:
        live = self._live()
        state = GONE if live is None else PAUSED if live["state"] in ("T", "t") else RUNNING
        return Description(self.id, self.id, state)

    def logs(self, since: Optional[LogPosition] = None, *, follow: bool = False) -> Iterator[str]:
        raise HarnessError(f"process {self.id} was not started by the harness: it has no log here", ExitCode.NOT_FOUND)

    def log_bursts(self, since: Optional[LogPosition] = None, *, follow: bool = False) -> Iterator[list[str]]:
        raise HarnessError(f"process {self.id} was not started by the harness: it has no log here", ExitCode.NOT_FOUND)

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._live() is not None:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(POLL_S)
        return -1  # not our child: its exit code is its parent's to know

    def remove(self) -> None:
        pass

    def facts(self) -> JSONObject:
        return self._identity.to_dict()


def _integer(value: JSONValue) -> Optional[int]:
    """An integer from a file the supervisor wrote (None for anything else)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: JSONValue) -> Optional[str]:
    return value if isinstance(value, str) else None
