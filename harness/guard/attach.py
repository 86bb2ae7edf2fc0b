"""`harness guard --container ID | --pid PID`: guard anything, not only harness runs.

The sequence is the core's: attach through the engine, check the target
runs, open the sensor, guard until the target exits or the caller stops,
always thaw on the way out, and say how it ended. The CLI parses options,
installs the signal handlers and renders.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from harness.engines.base import RunHandle
from harness.engines.docker import DockerEngine
from harness.engines.process import ProcessEngine
from harness.errors import ExitCode, HarnessError
from harness.fs.files import RefusedPath, check_target, prepare_directory
from harness.guard.config import GuardConfig
from harness.guard.loop import GuardReading
from harness.guard.session import GuardEnd, GuardSession, guard_until_exit


def check_request(container: Optional[str], pid: Optional[int], record: Optional[Path]) -> Path:
    """One target and a record directory, or one line saying what is missing; the record directory."""
    if (container is None) == (pid is None):
        raise HarnessError("give the target: --container ID or --pid PID (one of them)")
    if record is None:
        raise HarnessError("--record DIR is needed: the directory pauses.jsonl and guard.jsonl are written to")
    if pid is not None and pid == os.getpid():
        raise HarnessError("--pid: that is this harness itself")
    return record


def attach_target(container: Optional[str], pid: Optional[int]) -> tuple[RunHandle, str]:
    """The engine's handle on the running target (`check_request` first), and how to name it."""
    handle: RunHandle
    if container is not None:
        handle, what = DockerEngine().attach(container), f"container {container}"
    else:
        handle, what = ProcessEngine().attach(str(pid)), f"process {pid}"
    state = handle.describe().state
    if state not in ("running", "paused"):
        raise HarnessError(f"{what} is not running (it is {state})", ExitCode.NOT_FOUND)
    return handle, what


@dataclass(frozen=True)
class GuardTargetHooks:
    """What `guard_target` tells its caller: what is guarded (once), each warning, and each reading."""

    on_guarding: Callable[[str], None]
    on_warning: Callable[[str], None]
    on_reading: Callable[[GuardReading], None]


def guard_target(
    handle: RunHandle,
    what: str,
    config: GuardConfig,
    record: Path,
    *,
    grace_s: float,
    stopped: threading.Event,
    hooks: GuardTargetHooks,
) -> GuardEnd:
    """Open the sensor, say what is guarded (`hooks.on_guarding`), guard until the target exits or `stopped` is set."""
    session = GuardSession.open(config)
    try:
        if not session.guarded:
            raise HarnessError(session.warnings[0] if session.warnings else "--sensor none: nothing would guard it")
        for message in session.warnings:
            hooks.on_warning(message)
        try:
            prepare_directory(record)
            for name in ("pauses.jsonl", "guard.jsonl"):  # refused now, not as a note at the first write
                check_target(record / name)
        except RefusedPath as err:
            raise HarnessError(f"--record: {err}") from None
        except OSError as err:
            raise HarnessError(f"--record {record}: {err.strerror or err}") from None
        hooks.on_guarding(
            f"guarding {what} with the {session.facts().get('picked')} sensor: pause at {config.pause_at_c:g} C, "
            f"resume at {config.resume_at_c:g} C, a reading every {config.poll_s:g} s; recording into {record}. "
            "Ctrl-C ends (the target is thawed first)."
        )
        return guard_until_exit(
            handle,
            session,
            record,
            stopped=stopped,
            on_reading=hooks.on_reading,
            on_note=lambda message: hooks.on_warning(f"heat guard: {message}"),
            grace_s=grace_s,
        )
    finally:
        session.close()


def how_it_ended(end: GuardEnd) -> tuple[str, ExitCode]:
    """How the guarding ended, in words, and the command's exit code (1 when the guard had to stop the target)."""
    if end.stop_reason is not None:
        return f"stopped by the heat guard ({end.stop_reason})", ExitCode.RUN_FAILED
    if end.exit_code is not None:
        return "ended" + (f" (exit code {end.exit_code})" if end.exit_code >= 0 else ""), ExitCode.OK
    return "left running: guarding ended", ExitCode.OK
