"""One run end to end: start it, pump and parse its log live, supervise it, record how it ended.

Order matters and is the point of this module: the container is removed only
after its log, its metrics and its status are on disk; the state comes from
the engine's exit code and the steps actually seen, never from hope. The
caller holds the capture's lock (and the GPU's) for the whole of `execute`.

The heat guard (harness.guard) watches the run from the moment its handle
exists: its sensor was opened before the start and its facts are in the
manifest; it is stopped (the run thawed, the open pause window closed) on
every exit path the harness can catch: the end, a failure, Ctrl-C or
SIGTERM, the time limit, `harness stop`, the engine lost (then the window is
left open for `harness recover`), a full disk. `on_max_pause: stop`, and a
pause the engine could not make under `on_pause_failure: stop`, end the run
`stopped` with the guard's reason; its notes become status notes.

Two things may fail under a running trainer, and neither loses data:
- the capture (a full or unwritable disk): writing stops at the last whole
  line, the trainer goes on, and the run ends `failed` with the reason and
  `capture_complete: false`; the engine keeps the container and its log for
  `harness recover`. status.json can always be written (a space reserve).
- the engine (connection refused, dockerd restarting): waited out for a
  while, then the run ends `failed` with that reason, the container left
  labelled for `harness recover`.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from harness.board.session import board_session
from harness.capture.attempts import Attempt, RunAttempts
from harness.capture.files import describe_os_error
from harness.capture.layout import Capture, this_host, utc_now
from harness.capture.outcome import Outcome, RunEnd, decide_outcome
from harness.capture.records import RunState, RunStatus
from harness.capture.writer import CaptureWriter
from harness.engines import Engine, EngineUnavailable, RunGone, RunHandle
from harness.engines.spec import LaunchSpec
from harness.errors import HarnessError
from harness.fs.bounded import MAX_STATUS_BYTES, Unreadable, read_json_file
from harness.fs.failpoints import failpoint
from harness.jsontypes import JSONObject
from harness.lab.milesargv import flag_values
from harness.lab.milesnames import ROLLOUT_SUBMISSION_GRANULARITY_FLAG
from harness.mileslog import LogParser
from harness.run.attempt_checkpoints import AttemptCheckpoints
from harness.run.context import Reporter, RunContext, StopControl
from harness.run.labels import LABEL_ATTEMPT, LABEL_HARNESS_HOST, LABEL_HARNESS_PID, LABEL_KEEP
from harness.run.logpump import CaptureWrites, LogPump
from harness.run.plan import Planned, attempt_container_name, redact_manifest
from harness.secrets import KnownSecrets, redact_userinfo, shown_json

if TYPE_CHECKING:
    from harness.guard import GuardLoop
    from harness.guard.session import GuardSession

__all__ = ["LABEL_ATTEMPT", "LABEL_HARNESS_HOST", "LABEL_HARNESS_PID", "LABEL_KEEP", "execute", "stop_request_reason"]

POLL_S = 0.5
PUMP_DRAIN_TIMEOUT_S = 60.0


def build_manifest(
    spec: LaunchSpec,
    experiment: JSONObject,
    *,
    time_scale: float,
    engine_facts: JSONObject,
    provenance: JSONObject,
    guard_facts: Optional[JSONObject] = None,
    miles_facts: Optional[JSONObject] = None,
) -> dict[str, object]:
    """manifest.json: what ran, from which code, on what, under which heat guard (secrets as ***); `miles`: the
    image preflight's facts (its Miles's commit and version) and the rollout-submission settings when set."""
    return redact_manifest(
        {
            "run": spec.run,
            "run_id": spec.run_id,
            "experiment": experiment,
            "time_scale": time_scale,
            "image": spec.image,
            "trainer_argv": list(spec.trainer_argv),
            "env": spec.display_env(),
            "launch_spec": spec.to_dict(),
            "engine": engine_facts,
            "guard": guard_facts,
            "miles": {
                **(miles_facts or {"checked": False, "reason": "no image preflight"}),
                **rollout_submission(spec),
            },
            **provenance,
            "created_at": utc_now(),
        },
        spec,
    )


LEGACY_ROLLOUT_ENV = "MILES_USE_LEGACY_ROLLOUT_V1"


def rollout_submission(spec: LaunchSpec) -> JSONObject:
    """The settings that change how Miles submits a rollout, where the run sets them: the flag's last value and
    the legacy-rollout variable (pure)."""
    facts: JSONObject = {}
    values = flag_values(list(spec.trainer_argv)).get(ROLLOUT_SUBMISSION_GRANULARITY_FLAG)
    if values is not None:
        facts["rollout_submission_granularity"] = values[-1] if values else True
    if spec.env.get(LEGACY_ROLLOUT_ENV):
        facts[LEGACY_ROLLOUT_ENV] = spec.env[LEGACY_ROLLOUT_ENV]
    return facts


def execute(
    plan: Planned,
    ctx: RunContext,
    *,
    engine: Engine,
    guard: "GuardSession",
    clock: Callable[[], float] = time.monotonic,
) -> RunStatus:
    """Run `plan` as a new attempt to its end and return the final status (also on disk). The caller holds the
    capture lock.

    The attempt becomes the run's current capture when it starts if no
    attempt of the run had succeeded, and when it succeeds
    (harness.capture.attempts). `guard`: the experiment's heat guard, its
    sensor opened (the caller closes it). A run that never started is
    recorded `not_started` and raised as a HarnessError. Every capture write
    is also shown on the run's board (harness.board: TensorBoard events,
    written off this thread), which never stops the run.
    """
    root = Path(plan.spec.capture_dir).parent
    # A Ray node's copy (its capture forwarded) numbers its attempts its own way: the driver's board shows the lineage.
    resume = plan.checkpoints.resume if plan.checkpoints is not None and ctx.forward is None else None
    resumes = (resume.from_attempt, resume.choice.next_rollout_id) if resume is not None else None
    with board_session(plan.spec.run, root, plan.experiment.export, ctx.reporter.warning, resumes) as board:
        shown = replace(ctx, forward=board.forwarding(ctx.forward))
        return _execute_attempt(plan, shown, engine=engine, guard=guard, clock=clock)


@dataclass
class _Attempt:
    """One attempt as it is made: its launch spec, its capture and status, their writer, its checkpoints."""

    spec: LaunchSpec
    attempts: RunAttempts
    attempt: Attempt
    capture: Capture
    status: RunStatus
    writer: CaptureWriter
    checkpoints: Optional[AttemptCheckpoints]
    resumed_steps: Optional[int] = None  # a resume's steps before its checkpoint


@dataclass(frozen=True)
class _Ended:
    """How the trainer's supervision ended: the facts `_record_end` adds to the pump's and the parser's."""

    exit_code: Optional[int]
    engine_error: Optional[str] = None
    outages: Sequence[str] = ()
    guard_notes: Sequence[str] = ()
    gone: Optional[str] = None


def _execute_attempt(
    plan: Planned,
    ctx: RunContext,
    *,
    engine: Engine,
    guard: "GuardSession",
    clock: Callable[[], float],
) -> RunStatus:
    made = _new_attempt(plan, ctx, engine.name)
    handle, manifest = _start_trainer(plan, ctx, made, engine, guard)
    failpoint("after-start")
    if made.checkpoints is not None:
        made.checkpoints.started(handle)
    _say_started(plan, made, ctx.reporter)
    spec, reporter = made.spec, ctx.reporter
    loop = guard.start(
        handle,
        pauses_path=made.capture.pauses_path,
        samples_path=made.capture.guard_path,
        on_note=lambda message: reporter.note(f"{spec.run}: heat guard: {message}"),
        on_stop=lambda reason: _request_stop(ctx.stop, f"heat guard: {reason}"),
        on_reading=lambda reading: reporter.guard(spec.run, reading),
        append=made.writer.jsonl,
    )
    writes = CaptureWrites(made.capture, engine.name, reporter, made.writer)
    known = KnownSecrets(spec.secret_values())
    pump = LogPump(handle, made.capture, LogParser(), reporter, writes, known, made.checkpoints)
    if made.resumed_steps is not None:  # the lineage's steps before the checkpoint: what it proves was trained
        pump.steps_complete = made.status.steps_complete = made.resumed_steps
    outcome, gone = _supervised(made, ctx, handle, manifest, pump, loop, clock)
    failpoint("before-remove")
    if not ctx.options.keep and outcome.capture_complete and gone is None:
        try:
            handle.remove()
        except (EngineUnavailable, HarnessError) as err:
            reporter.note(f"{spec.run}: the container was not removed ({err.message}); `harness recover` does it")
    return made.status


def _new_attempt(plan: Planned, ctx: RunContext, engine: str) -> _Attempt:
    """A new attempt's directory, its space reserve and its first status (`running`); current at once unless it
    resumes (a resumed attempt becomes current once its resume is verified)."""
    attempts = RunAttempts(Path(plan.spec.capture_dir))
    failpoint("before-capture")
    attempt = attempts.new()
    capture = Capture(attempt.directory, plan.spec.run)
    try:
        capture.make_reserve()
    except HarnessError:
        attempt.directory.rmdir()  # empty: no attempt is better than one without a status
        raise
    spec = replace(plan.spec, container_name=attempt_container_name(plan.spec, attempt.number))
    status = RunStatus(
        run=spec.run,
        run_id=spec.run_id,
        state=RunState.RUNNING,
        exit_code=None,
        started_at=utc_now(),
        ended_at=None,
        steps_expected=spec.steps_expected,
        steps_complete=0,
        error=None,
        harness_pid=os.getpid(),
        harness_host=this_host(),
        engine=engine,
        attempt=attempt.number,
    )
    writer = CaptureWriter(capture, ctx.forward)
    writer.status(status)
    checkpoints = _attempt_checkpoints(plan, capture, attempt, writer, ctx.reporter)
    resume = plan.checkpoints.resume if plan.checkpoints is not None else None
    if resume is None:
        attempts.started(attempt)
    resumed = resume.choice.next_rollout_id if resume is not None else None
    return _Attempt(spec, attempts, attempt, capture, status, writer, checkpoints, resumed)


def _start_trainer(
    plan: Planned, ctx: RunContext, made: _Attempt, engine: Engine, guard: "GuardSession"
) -> tuple[RunHandle, dict[str, object]]:
    """The manifest written, then the trainer started under the harness's labels; a start that fails is recorded
    `not_started` and raised."""
    spec, status, writer, checkpoints = made.spec, made.status, made.writer, made.checkpoints
    labels = {
        LABEL_HARNESS_PID: str(os.getpid()),
        LABEL_HARNESS_HOST: this_host(),
        # A run Ray placed is labelled with the driver's attempt, whose capture recover settles.
        LABEL_ATTEMPT: spec.labels.get(LABEL_ATTEMPT, str(made.attempt.number)),
        **({LABEL_KEEP: "1"} if ctx.options.keep else {}),
    }
    try:
        manifest = build_manifest(
            spec,
            plan.experiment.to_dict(),
            time_scale=plan.time_scale,
            engine_facts=engine.facts(),
            provenance=ctx.code_facts(),
            guard_facts=guard.facts(),
            miles_facts=engine.image_facts(spec),
        )
        if checkpoints is not None:
            manifest["checkpoint"] = checkpoints.before()
        writer.json(made.capture.manifest_path, manifest)
        failpoint("before-container")
        return engine.start(spec, labels), manifest
    except HarnessError as err:
        _record_not_started(writer, status, err.message, checkpoints)
        raise HarnessError(f"run {spec.run} did not start: {err.message}", err.exit_code) from None
    except OSError as err:
        message = describe_os_error(err, made.capture.manifest_path.name)
        _record_not_started(writer, status, message, checkpoints)
        raise HarnessError(f"run {spec.run} did not start: {message}") from None


def _say_started(plan: Planned, made: _Attempt, reporter: Reporter) -> None:
    """What the attempt continues: the attempt it resumes, or nothing (a rerun starts from step 0)."""
    run, number = made.spec.run, made.attempt.number
    resume = plan.checkpoints.resume if plan.checkpoints is not None else None
    if resume is not None:
        reporter.note(
            f"{run}: attempt {number} resumes attempt {resume.from_attempt} from "
            f"{resume.choice.check.name} (rollout {resume.choice.next_rollout_id} onward)"
        )
    elif number > 1:  # the trainer starts again from its first step: nothing of an earlier attempt is resumed
        reporter.note(f"{run}: attempt {number}, from step 0 (a rerun does not resume attempt {number - 1})")
    reporter.started(made.spec)


def _supervised(
    made: _Attempt,
    ctx: RunContext,
    handle: RunHandle,
    manifest: dict[str, object],
    pump: LogPump,
    loop: Optional["GuardLoop"],
    clock: Callable[[], float],
) -> tuple[Outcome, Optional[str]]:
    """Pump the log and supervise the trainer to its end, then record the end whatever happened (a lost engine, a
    trainer gone, Ctrl-C); the outcome, and what vanished from the engine (None: nothing)."""
    spec, status, capture, writes, stop = made.spec, made.status, made.capture, pump.writes, ctx.stop
    exit_code: Optional[int] = None
    engine_error: Optional[str] = None
    gone: Optional[str] = None
    try:
        status.container = handle.id
        identity = getattr(handle, "identity", lambda: None)()
        status.process = identity.to_dict() if identity is not None else None
        writes.attempt(capture.status_path.name, lambda: made.writer.status(status))
        manifest["handle"] = shown_json(handle.facts(), KnownSecrets(spec.secret_values()))  # its command, say
        writes.attempt(capture.manifest_path.name, lambda: made.writer.json(capture.manifest_path, manifest))
        pump.start()
        exit_code = _supervise(handle, spec, stop, capture, ctx.options.grace_s, clock, ctx.reporter, loop)
    except RunGone as err:
        gone = err.message
    except EngineUnavailable as err:
        engine_error = err.message
    finally:
        if loop is not None:  # first: a frozen trainer can act on nothing, and the window must close
            loop.stop(thaw=engine_error is None)
        if engine_error is None and gone is None:
            _never_leave_frozen(handle)
            if exit_code is None:  # the harness itself is going down: stop the trainer before recording
                exit_code = _kill_and_wait(handle)
        _drain(pump, engine_error)
        if made.checkpoints is not None:
            made.checkpoints.ended(stopped=stop.state is not None)
        if writes.error is None and not pump.is_alive():
            pump.finish()
        failpoint("at-exit")
        ended = _Ended(
            exit_code,
            engine_error or pump.engine_error,
            getattr(handle, "outages", ()),
            loop.notes if loop is not None else (),
            gone or pump.gone,
        )
        outcome = _record_end(status, pump, stop, ended)
        if outcome.state == RunState.SUCCEEDED:
            made.attempts.succeeded(made.attempt)
        ctx.reporter.finished(status)
    return outcome, gone or pump.gone


def _drain(pump: LogPump, engine_error: Optional[str]) -> None:
    """Wait for the pump to read the trainer's last lines (briefly when the engine is lost)."""
    if pump.ident is not None:  # started
        pump.join(PUMP_DRAIN_TIMEOUT_S if engine_error is None else 5)
    if pump.is_alive() and engine_error is None:
        pump.error = pump.error or f"the log stream did not end within {PUMP_DRAIN_TIMEOUT_S:g} s of the exit"


def _supervise(
    handle: RunHandle,
    spec: LaunchSpec,
    stop: StopControl,
    capture: Capture,
    grace_s: float,
    clock: Callable[[], float],
    reporter: Reporter,
    guard: Optional["GuardLoop"] = None,
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
                stop.request("stopped", stop_request_reason(capture))
        if stop.state is not None and stopper is None:
            if guard is not None:
                guard.stop()  # thawed, its window closed, and no new pause while the trainer shuts down
            reporter.note(f"stopping {spec.run} ({stop.reason}): SIGTERM, then SIGKILL after {grace_s:g} s")
            stopper = threading.Thread(
                target=_quietly, args=(lambda: handle.stop(grace_s),), name="stopper", daemon=True
            )
            stopper.start()
        if stop.kill_requested and not killed:
            reporter.note(f"killing {spec.run} now")
            _quietly(handle.kill)
            killed = True


def _request_stop(stop: StopControl, reason: str) -> None:
    """The heat guard's stop (`on_max_pause: stop`, a pause that failed): the run ends stopped, with its reason."""
    stop.request("stopped", reason)


def _quietly(action: Callable[[], None]) -> None:
    """An action on the trainer whose failure the supervisor's next wait reports anyway."""
    try:
        action()
    except HarnessError:
        pass


def _kill_and_wait(handle: RunHandle) -> Optional[int]:
    try:
        handle.kill()
        return handle.wait(timeout=30)
    except HarnessError:
        return None


def stop_request_reason(capture: Capture) -> str:
    """The reason `harness stop` wrote (read bounded: a FIFO there never blocks the supervisor)."""
    try:
        request = read_json_file(capture.stop_request_path, MAX_STATUS_BYTES)
    except (FileNotFoundError, Unreadable):
        request = None
    reason = request.get("reason") if isinstance(request, dict) else None
    return str(reason or "stopped by harness stop")


def _never_leave_frozen(handle: RunHandle) -> None:
    try:
        if handle.is_paused():
            handle.resume()
    except Exception:
        pass  # the container may be gone already; nothing left to thaw


def _record_not_started(
    writer: CaptureWriter, status: RunStatus, reason: str, checkpoints: Optional[AttemptCheckpoints] = None
) -> None:
    # The engine's reason may quote what it was given (a mount, the command): no URL password in the status.
    status.state, status.error, status.ended_at = RunState.NOT_STARTED, redact_userinfo(reason), utc_now()
    writer.status(status)
    writer.capture.drop_reserve()
    if checkpoints is not None:
        checkpoints.lock.release()


def _attempt_checkpoints(
    plan: Planned, capture: Capture, attempt: Attempt, writer: CaptureWriter, reporter: Reporter
) -> Optional[AttemptCheckpoints]:
    """The attempt's checkpoints and resume (harness.run.attempt_checkpoints), for a run with a checkpoint block."""
    if plan.checkpoints is None:
        return None
    owner: JSONObject = {"run": plan.spec.run, "run_id": plan.spec.run_id, "pid": os.getpid(), "host": this_host()}
    return AttemptCheckpoints(plan.checkpoints, capture, attempt, writer, reporter, owner)


def _record_end(status: RunStatus, pump: LogPump, stop: StopControl, ended: _Ended) -> Outcome:
    """The final status from the pump's steps, the parser's failure, the stop and how supervision ended; written,
    then the stop request and (for a complete capture) the space reserve cleared."""
    capture, parser, writes = pump.capture, pump.parser, pump.writes
    if parser.args is not None:
        writes.attempt(capture.args_path.name, lambda: writes.writer.json(capture.args_path, parser.args))
    outcome = decide_outcome(
        RunEnd(
            exit_code=ended.exit_code,
            steps_complete=pump.steps_complete,
            steps_expected=status.steps_expected,
            stop_state=stop.state,
            stop_reason=stop.reason,
            failure=parser.failure,
            capture_error=writes.error or pump.error,
            engine_error=ended.engine_error,
            outages=ended.outages,
            gone=ended.gone,
        )
    )
    refusal = pump.watch.refusal() if pump.watch is not None else None
    if refusal is not None and outcome.capture_complete:  # the trainer did not resume: nothing it did is the run's
        outcome = Outcome(RunState.FAILED, refusal, False)
    unfinished = pump.watch.unfinished_save() if pump.watch is not None else None
    if unfinished is not None:  # it died in a save (a disk that filled): the cause says what is left to resume
        if outcome.state == RunState.FAILED and refusal is None:
            outcome = replace(outcome, error=f"{outcome.error}; {unfinished}" if outcome.error else unfinished)
        else:
            status.notes.append(unfinished)
    status.state, status.error, status.steps_usable = outcome.state, outcome.error, outcome.steps_usable
    status.capture_complete = outcome.capture_complete
    status.exit_code = ended.exit_code
    status.ended_at = utc_now()
    status.steps_complete = pump.steps_complete
    status.stop_reason = stop.reason if stop.state is not None else None
    status.notes.extend(f"heat guard: {note}" for note in ended.guard_notes)
    if parser.problems:
        status.notes.append(f"{len(parser.problems)} log line(s) could not be read; see harness parse-log")
    if ended.outages and outcome.state == RunState.SUCCEEDED:
        status.notes.extend(ended.outages)
    writes.writer.status(status)
    try:
        capture.stop_request_path.unlink(missing_ok=True)
    except OSError:
        pass
    if outcome.capture_complete:
        capture.drop_reserve()
    return outcome
