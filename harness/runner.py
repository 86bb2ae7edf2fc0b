"""One run end to end: start it, pump and parse its log live, supervise it, record how it ended.

Order matters and is the point of this module: the container is removed only
after its log, its metrics and its status are on disk; the state comes from
the engine's exit code and the steps actually seen, never from hope.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Protocol

from harness.capture import Capture, RunStatus, append_jsonl, this_host, utc_now, write_json_atomic
from harness.engines import Engine, RunHandle
from harness.errors import HarnessError
from harness.launch import LABEL_PREFIX, LaunchSpec, redact_manifest

LABEL_HARNESS_PID = f"{LABEL_PREFIX}.harness-pid"
LABEL_HARNESS_HOST = f"{LABEL_PREFIX}.harness-host"

DEFAULT_GRACE_S = 60.0  # Ray and SGLang need a while to shut down cleanly on SIGTERM
POLL_S = 0.5
LOG_FSYNC_EVERY_S = 1.0
PUMP_DRAIN_TIMEOUT_S = 60.0


class Progress(Protocol):
    """What the runner reports while it works (the CLI renders it)."""

    def started(self, spec: LaunchSpec) -> None: ...

    def step(self, record: Any, steps_complete: int) -> None: ...

    def note(self, message: str) -> None: ...

    def finished(self, status: RunStatus) -> None: ...


class NullProgress:
    """Reports nothing."""

    def started(self, spec: LaunchSpec) -> None:
        pass

    def step(self, record: Any, steps_complete: int) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def finished(self, status: RunStatus) -> None:
        pass


class StopControl:
    """Requests to end a run early: Ctrl-C/SIGTERM, the time limit, `harness stop`. The first one wins."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.state: Optional[str] = None  # "interrupted" or "stopped"
        self.reason: Optional[str] = None
        self.kill_requested = False

    def request(self, state: str, reason: str) -> bool:
        """Ask for a graceful stop; False if one was already asked for."""
        with self._lock:
            if self.state is not None:
                return False
            self.state, self.reason = state, reason
            return True

    def request_kill(self) -> None:
        """Ask for SIGKILL now (a second Ctrl-C)."""
        self.kill_requested = True


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as facts."""

    state: str
    error: Optional[str]
    steps_usable: bool


def decide_outcome(
    *,
    exit_code: Optional[int],
    steps_complete: int,
    steps_expected: int,
    stop_state: Optional[str],
    stop_reason: Optional[str],
    failure: Optional[dict[str, Any]],
    capture_error: Optional[str],
) -> Outcome:
    """The final state from the exit code, the complete steps and why the harness stopped it (pure)."""
    all_steps = steps_complete >= steps_expected
    if capture_error:
        return Outcome("failed", f"the capture failed, so the run cannot be trusted: {capture_error}", False)
    if stop_state is not None:
        error = stop_reason or stop_state
        if all_steps:
            error += f"; all {steps_expected} steps had completed, so the steps are usable"
        return Outcome(stop_state, error, all_steps)
    if exit_code == 0:
        if all_steps:
            return Outcome("succeeded", None, False)
        return Outcome("no_metrics", f"exited 0 after {steps_complete} of {steps_expected} complete steps", False)
    reason = failure["line"] if failure else _exit_reason(exit_code)
    return Outcome("failed", f"exit code {exit_code}: {reason}", False)


def _exit_reason(exit_code: Optional[int]) -> str:
    if exit_code is None:
        return "no exit code"
    if exit_code == 137:
        return "killed (SIGKILL: out of memory, docker kill, or a hard stop)"
    if exit_code == 143:
        return "terminated (SIGTERM)"
    return "the trainer printed no failure the parser recognises"


class LogPump(threading.Thread):
    """Reads every line once: to container.log whole, to the parser, and each completed step to metrics.jsonl."""

    def __init__(self, handle: RunHandle, capture: Capture, parser: Any, progress: Progress) -> None:
        super().__init__(name="log-pump", daemon=True)
        self.handle = handle
        self.capture = capture
        self.parser = parser
        self.progress = progress
        self.steps_complete = 0
        self.lines = 0
        self.error: Optional[str] = None

    def run(self) -> None:
        try:
            with self.capture.log_path.open("ab") as log:
                last_sync = time.monotonic()
                for line in self.handle.log_lines():
                    self.lines += 1
                    log.write(line.encode("utf-8", "replace") + b"\n")
                    log.flush()
                    for record in self.parser.feed(line, self.lines):
                        self._save(record)
                    if time.monotonic() - last_sync >= LOG_FSYNC_EVERY_S:
                        os.fsync(log.fileno())
                        last_sync = time.monotonic()
                os.fsync(log.fileno())
        except Exception as err:  # a full disk, a lost engine: recorded, and the run is not trusted
            self.error = f"{type(err).__name__}: {err}"

    def finish(self) -> None:
        """Flush the parser: steps still open are written, marked incomplete."""
        try:
            for record in self.parser.finish():
                self._save(record)
        except Exception as err:
            self.error = self.error or f"{type(err).__name__}: {err}"

    def _save(self, record: Any) -> None:
        append_jsonl(self.capture.metrics_path, record.to_json(include_derived=False))
        if record.complete:
            self.steps_complete += 1
        self.progress.step(record, self.steps_complete)


def build_manifest(
    spec: LaunchSpec,
    experiment: dict[str, Any],
    *,
    time_scale: float,
    engine_facts: dict[str, Any],
    provenance: dict[str, Any],
) -> dict[str, Any]:
    """manifest.json: what ran, from which code, on what (secrets as ***)."""
    return redact_manifest({
        "run": spec.run,
        "run_id": spec.run_id,
        "experiment": experiment,
        "time_scale": time_scale,
        "image": spec.image,
        "trainer_argv": list(spec.trainer_argv),
        "env": spec.display_env(),
        "launch_spec": spec.to_dict(),
        "engine": engine_facts,
        **provenance,
        "created_at": utc_now(),
    }, spec)


def execute(
    spec: LaunchSpec,
    experiment: dict[str, Any],
    *,
    engine: Engine,
    parser: Any,
    progress: Progress,
    stop: StopControl,
    provenance: dict[str, Any],
    grace_s: float = DEFAULT_GRACE_S,
    keep: bool = False,
    time_scale: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
) -> RunStatus:
    """Run `spec` to its end and return the final status (also on disk)."""
    capture = Capture(Path(spec.capture_dir))
    capture.start_fresh()
    status = RunStatus(
        run=spec.run, run_id=spec.run_id, state="running", exit_code=None, started_at=utc_now(), ended_at=None,
        steps_expected=spec.steps_expected, steps_complete=0, error=None,
        harness_pid=os.getpid(), harness_host=this_host(),
    )
    try:
        engine_facts = engine.facts()
    except HarnessError as err:
        _fail_before_start(capture, status, err)
        raise
    manifest = build_manifest(spec, experiment, time_scale=time_scale, engine_facts=engine_facts,
                              provenance=provenance)
    write_json_atomic(capture.manifest_path, manifest)
    capture.write_status(status)

    labels = {LABEL_HARNESS_PID: str(os.getpid()), LABEL_HARNESS_HOST: this_host()}
    try:
        handle = engine.start(spec, labels)
    except HarnessError as err:
        _fail_before_start(capture, status, err)
        raise
    status.container = handle.id
    capture.write_status(status)
    manifest["handle"] = handle.facts()
    write_json_atomic(capture.manifest_path, manifest)
    progress.started(spec)

    pump = LogPump(handle, capture, parser, progress)
    pump.start()
    exit_code: Optional[int] = None
    try:
        exit_code = _supervise(handle, spec, stop, capture, grace_s, clock, progress)
    finally:
        _never_leave_frozen(handle)
        if exit_code is None:  # the harness itself is going down: stop the trainer before recording
            handle.kill()
            exit_code = handle.wait(timeout=30)
        pump.join(PUMP_DRAIN_TIMEOUT_S)
        if pump.is_alive():
            pump.error = pump.error or f"the log stream did not end within {PUMP_DRAIN_TIMEOUT_S:g} s of the exit"
        pump.finish()
        _record_end(capture, status, parser, pump, exit_code, stop)
        progress.finished(status)
    if not keep:
        handle.remove()
    return status


def _supervise(
    handle: RunHandle,
    spec: LaunchSpec,
    stop: StopControl,
    capture: Capture,
    grace_s: float,
    clock: Callable[[], float],
    progress: Progress,
) -> int:
    """Wait for the exit; meanwhile act on stop requests and the time limit. Returns the exit code."""
    deadline = clock() + spec.max_minutes * 60 if spec.max_minutes else None
    stopper: Optional[threading.Thread] = None
    killed = False
    while True:
        exit_code = handle.wait(timeout=POLL_S)
        if exit_code is not None:
            return exit_code
        if stop.state is None:
            if deadline is not None and clock() >= deadline:
                stop.request("stopped", f"time limit of {spec.max_minutes:g} min reached")
            elif capture.stop_request_path.exists():
                stop.request("stopped", _stop_request_reason(capture))
        if stop.state is not None and stopper is None:
            progress.note(f"stopping {spec.run} ({stop.reason}): SIGTERM, then SIGKILL after {grace_s:g} s")
            stopper = threading.Thread(target=handle.stop, args=(grace_s,), name="stopper", daemon=True)
            stopper.start()
        if stop.kill_requested and not killed:
            progress.note(f"killing {spec.run} now")
            handle.kill()
            killed = True


def _stop_request_reason(capture: Capture) -> str:
    try:
        return str(json.loads(capture.stop_request_path.read_text()).get("reason") or "stopped by harness stop")
    except (OSError, ValueError):
        return "stopped by harness stop"


def _never_leave_frozen(handle: RunHandle) -> None:
    try:
        if handle.is_paused():
            handle.resume()
    except Exception:
        pass  # the container may be gone already; nothing left to thaw


def _fail_before_start(capture: Capture, status: RunStatus, err: HarnessError) -> None:
    status.state, status.error, status.ended_at = "failed", f"did not start: {err.message}", utc_now()
    capture.write_status(status)


def _record_end(
    capture: Capture,
    status: RunStatus,
    parser: Any,
    pump: LogPump,
    exit_code: Optional[int],
    stop: StopControl,
) -> None:
    if parser.args is not None:
        write_json_atomic(capture.args_path, parser.args)
    outcome = decide_outcome(
        exit_code=exit_code,
        steps_complete=pump.steps_complete,
        steps_expected=status.steps_expected,
        stop_state=stop.state,
        stop_reason=stop.reason,
        failure=parser.failure,
        capture_error=pump.error,
    )
    status.state, status.error, status.steps_usable = outcome.state, outcome.error, outcome.steps_usable
    status.exit_code = exit_code
    status.ended_at = utc_now()
    status.steps_complete = pump.steps_complete
    if parser.problems:
        status.notes.append(f"{len(parser.problems)} log line(s) could not be read; see harness parse-log")
    capture.write_status(status)
    capture.stop_request_path.unlink(missing_ok=True)

