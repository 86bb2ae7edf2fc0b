"""The process engine's supervisor: what containerd's shim is to a container, for one trainer process.

`python -m harness.engines.shim [--detach] RUN_DIR` starts the command of
RUN_DIR/run.json in a process group of its own, stamps every line it prints in
Docker's format into RUN_DIR/output.log, and writes RUN_DIR/exit.json when it
ends. It runs in a session of its own (with `--detach`, as a child of init),
so the trainer and its log outlive a harness that dies: `harness recover`
finds them again, as Docker keeps a container and its log.

Files (all written here, read by harness.engines.process):
    state.json        the trainer's pid, process group, start time (written once it runs)
    start-error.json  why it could not be started (nothing runs)
    output.log        `<RFC3339Nano UTC> <line>` per line of its stdout and stderr
    exit.json         its exit code (128+N for signal N, as Docker reports) and end time

Only the standard library and harness's light modules are imported: this
starts with every process run.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Iterable, Optional, TypedDict

from harness.engines.logstream import stamp_now
from harness.fs.files import open_append, write_text_atomic

PROC = Path("/proc")


class LiveProcess(TypedDict):
    """What /proc says of a live process (`state` is /proc's one letter: R, S, T, Z...)."""

    pid: int
    pgid: int
    start_ticks: int
    boot_id: Optional[str]
    state: str


def process_identity(pid: int) -> Optional[LiveProcess]:
    """pid, process group, start ticks and boot id of a live process (None when it is gone)."""
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    boot_id = _boot_id(PROC)
    return {"pid": pid, "pgid": int(fields[2]), "start_ticks": int(fields[19]), "boot_id": boot_id, "state": fields[0]}


@functools.lru_cache(maxsize=4)
def _boot_id(proc: Path) -> Optional[str]:
    # Read once: a process that watches another lives within one boot, and a run's supervisor polls this often.
    try:
        return (proc / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def write_json(path: Path, data: object) -> None:
    """A state file, whole or not at all, by the harness's one writer."""
    write_text_atomic(path, json.dumps(data, allow_nan=False))


def pump(stream: Iterable[bytes], out_fd: int) -> None:
    """Each line of the trainer's output, stamped as it arrives, appended whole."""
    for raw in stream:
        os.write(out_fd, stamp_now().encode() + b" " + raw.rstrip(b"\n") + b"\n")


def main(run_dir: Path) -> int:
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)  # the run ends when the trainer does, not with a terminal
    command = json.loads((run_dir / "run.json").read_text())["command"]
    out_fd = open_append(run_dir / "output.log")
    try:
        child = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_default_signals,
        )
    except OSError as err:
        write_json(run_dir / "start-error.json", {"error": f"cannot start {command[0]!r}: {err.strerror or err}"})
        return 1
    found = process_identity(child.pid)
    identity: dict[str, object] = {"pid": child.pid, "pgid": child.pid}
    if found is not None:
        identity = {key: value for key, value in found.items() if key != "state"}
    shim = process_identity(os.getpid())
    write_json(
        run_dir / "state.json",
        {
            **identity,
            "shim_pid": os.getpid(),
            "shim_start_ticks": shim["start_ticks"] if shim else None,
            "started_at": stamp_now(),
        },
    )
    reader = threading.Thread(target=pump, args=(child.stdout, out_fd), daemon=True)
    reader.start()
    code = child.wait()
    try:  # the leader is gone: the rest of its group goes too, as a container ends with its first process
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    reader.join(10)
    os.fsync(out_fd)
    write_json(run_dir / "exit.json", {"exit_code": 128 - code if code < 0 else code, "finished_at": stamp_now()})
    return 0


def detach(run_dir: Path) -> int:
    """Run the supervisor in a child that outlives this launcher; return once the trainer started (or could not).

    The launcher exits then, so the supervisor's parent is init: a harness
    that dies, and whatever kills a dying process's children with it (a Ray
    worker's raylet does), leave the trainer and its log running.
    """
    child = os.fork()
    if child == 0:
        code = 1
        try:
            code = main(run_dir)
        except BaseException:  # os._exit below would drop the traceback: shim.err is where the engine says why
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(code)
    while not ((run_dir / "state.json").exists() or (run_dir / "start-error.json").exists()):
        ended, _ = os.waitpid(child, os.WNOHANG)
        if ended:
            return 1  # the supervisor ended without a word: the engine reports it
        time.sleep(0.002)
    return 0


def _default_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)


if __name__ == "__main__":
    if sys.argv[1] == "--detach":
        sys.exit(detach(Path(sys.argv[2])))
    sys.exit(main(Path(sys.argv[1])))
