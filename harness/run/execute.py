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
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence

from harness.capture import (
    Capture,
    RunState,
    RunStatus,
    describe_os_error,
    this_host,
    utc_now,
)
from harness.capture.attempts import Attempt, RunAttempts
from harness.capture.bounded import MAX_STATUS_BYTES, Unreadable, read_json_file
from harness.capture.files import NO_SPACE
from harness.capture.writer import CaptureWriter
from harness.engines import Engine, EngineUnavailable, RunGone, RunHandle
from harness.engines.spec import LABEL_PREFIX, LaunchSpec
from harness.errors import HarnessError
from harness.fs.failpoints import failpoint
from harness.fs.files import open_append, write_whole
from harness.jsontypes import JSONObject
from harness.lab.milesnames import ROLLOUT_SUBMISSION_GRANULARITY_FLAG
from harness.run.attempt_checkpoints import AttemptCheckpoints
from harness.run.context import Reporter, RunContext, StopControl
from harness.run.plan import Planned, attempt_container_name, redact_manifest
from harness.secrets import KnownSecrets, redact_userinfo, shown_json

if TYPE_CHECKING:
    from harness.guard import GuardLoop
    from harness.guard.session import GuardSession
    from harness.mileslog import LogParser
    from harness.mileslog.records import Failure, StepRecord

LABEL_HARNESS_PID = f"{LABEL_PREFIX}.harness-pid"
LABEL_HARNESS_HOST = f"{LABEL_PREFIX}.harness-host"
LABEL_KEEP = f"{LABEL_PREFIX}.keep"  # `--keep`: recover never removes it
LABEL_ATTEMPT = f"{LABEL_PREFIX}.attempt"  # which attempt of the run it is (harness.capture.attempts)

POLL_S = 0.5
LOG_FSYNC_EVERY_S = 1.0
LOG_WRITE_CHARS = 64 << 10  # a burst is written in pieces of whole lines about this long: a full disk keeps what fit
PUMP_DRAIN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as facts."""

    state: RunState
    error: Optional[str]
    steps_usable: bool
    capture_complete: bool = True


def decide_outcome(
    *,
    exit_code: Optional[int],
    steps_complete: int,
    steps_expected: int,
    stop_state: Optional[str],
    stop_reason: Optional[str],
    failure: Optional["Failure"],
    capture_error: Optional[str],
    engine_error: Optional[str] = None,
    outages: Sequence[str] = (),
    gone: Optional[str] = None,
) -> Outcome:
    """The final state from the exit code, the complete steps and why the harness stopped it (pure).

    `capture_error`: the capture stopped being written; `engine_error`: the
    engine was lost for good; `outages`: the engine went away and came back;
    `gone`: what ran the trainer vanished from the engine (removed from outside).
    """
    all_steps = steps_complete >= steps_expected
    if gone and stop_state is None:
        # Final, with nothing left to recover: what it printed after the capture's last line went with it.
        return Outcome(
            RunState.FAILED,
            f"{gone}; the lines it printed after the capture's last one are gone with it "
            f"({steps_complete} of {steps_expected} steps were saved)",
            False,
        )
    if capture_error:
        return Outcome(
            RunState.FAILED,
            f"{capture_error}: the capture stops there, so the run cannot be trusted",
            False,
            capture_complete=False,
        )
    if engine_error:
        return Outcome(
            RunState.FAILED,
            f"{engine_error}; the container is left with its labels: once the engine "
            "answers again, `harness recover` saves the rest",
            False,
            capture_complete=False,
        )
    lost = f" (while it ran, {outages[0]})" if outages else ""
    if stop_state is not None:
        error = (stop_reason or stop_state) + lost
        if all_steps:
            error += f"; all {steps_expected} steps had completed, so the steps are usable"
        return Outcome(RunState(stop_state), error, all_steps)
    if exit_code == 0:
        if all_steps:  # every step completed: usable, as for a run stopped after its last step
            return Outcome(RunState.SUCCEEDED, None, True)
        return Outcome(
            RunState.NO_METRICS, f"exited 0 after {steps_complete} of {steps_expected} complete steps" + lost, False
        )
    if failure and "reason" in failure:  # named as such: the image's Miles has no filter path
        reason = f"{failure['reason']} ({failure['line']})"
    else:
        reason = failure["line"] if failure else _exit_reason(exit_code)
    return Outcome(RunState.FAILED, f"exit code {exit_code}: {reason}{lost}", False)


def _exit_reason(exit_code: Optional[int]) -> str:
    if exit_code is None:
        return "no exit code"
    if exit_code == 137:
        return "killed (SIGKILL: out of memory, docker kill, or a hard stop)"
    if exit_code == 143:
        return "terminated (SIGTERM)"
    return "the trainer printed no failure the parser recognises"


class CaptureWrites:
    """The capture's writes after the trainer started: the first failure stops them all, and is said once."""

    def __init__(
        self, capture: Capture, engine: str, reporter: Reporter, writer: Optional[CaptureWriter] = None
    ) -> None:
        self.capture = capture
        self.writer = writer or CaptureWriter(capture)
        self.engine = engine
        self.reporter = reporter
        self.error: Optional[str] = None
        self._lock = threading.Lock()

    def failed(self, err: OSError, what: str) -> None:
        hint = "free space" if err.errno in NO_SPACE else "make the capture directory writable"
        with self._lock:
            if self.error is not None:
                return
            self.error = f"{describe_os_error(err, what)} ({hint}, then run `harness recover`)"
        self.reporter.note(
            f"{self.capture.run}: {self.error}: the capture stops here; the trainer goes on and "
            f"the {self.engine} engine keeps its log"
        )

    def attempt(self, what: str, write: Callable[[], None]) -> bool:
        """Do one write unless writing has stopped; a failure stops writing."""
        if self.error is not None:
            return False
        try:
            write()
            return True
        except OSError as err:
            self.failed(err, what)
            return False


class LogPump(threading.Thread):
    """Reads every line once: to container.log whole, to the parser, and each completed step to metrics.jsonl;
    `known`: the secrets the harness passed, masked in every line before anything reads or writes it."""

    def __init__(
        self,
        handle: RunHandle,
        capture: Capture,
        parser: LogParser,
        reporter: Reporter,
        writes: CaptureWrites,
        known: Optional[KnownSecrets] = None,
        watch: Optional[AttemptCheckpoints] = None,
    ) -> None:
        super().__init__(name="log-pump", daemon=True)
        self.watch = watch  # a checkpointed run's: its save lines, a resume's proof (harness.run.attempt_checkpoints)
        self.handle = handle
        self.known = known if known else None
        self.capture = capture
        self.parser = parser
        self.reporter = reporter
        self.writes = writes
        self.steps_complete = 0
        self.lines = 0
        self.error: Optional[str] = None  # anything but a write failure: a lost engine, a bug
        self.engine_error: Optional[str] = None
        self.gone: Optional[str] = None  # what ran the trainer vanished from the engine

    def run(self) -> None:
        fd = None
        try:
            fd = open_append(self.capture.log_path, root=self.capture.root)
            self._pump(fd)
        except RunGone as err:
            self.gone = err.message
        except EngineUnavailable as err:
            self.engine_error = err.message
        except OSError as err:
            self.writes.failed(err, self.capture.log_path.name)
        except Exception as err:  # a bug: recorded, and the run is not trusted
            self.error = f"{type(err).__name__}: {err}"
        finally:
            if fd is not None:
                os.close(fd)

    def _pump(self, fd: int) -> None:
        # A burst (the lines that came in one read) is written to container.log before any of its lines is parsed,
        # so every record saved has its lines in the log: one write per burst (or per piece of a long one), not
        # per line. A piece that does not fit on the disk ends the capture at the last whole piece before it.
        good = os.fstat(fd).st_size
        last_sync = time.monotonic()
        writer = self.writes.writer
        known = self.known
        watch = self.watch
        for burst in self.handle.log_bursts(follow=True):
            for piece in whole_line_pieces(burst, LOG_WRITE_CHARS):
                if self.writes.error is not None:
                    return  # writing has stopped: the engine keeps the rest
                text = "\n".join(piece)
                if known is not None:
                    # The pieces hold whole lines and no known secret holds a line break: masking the piece masks
                    # each line, and no secret can straddle two reads of the stream.
                    masked = known.mask(text)
                    if masked is not text:
                        text, piece = masked, masked.split("\n")
                data = text.encode("utf-8", "replace") + b"\n"
                try:
                    write_whole(fd, data)
                except OSError as err:
                    os.ftruncate(fd, good)  # never a torn line: the capture ends on the last whole one
                    self.writes.failed(err, self.capture.log_path.name)
                    return
                good += len(data)
                writer.log_lines(piece)
                for line in piece:
                    self.lines += 1
                    if watch is not None:
                        watch.line(line, self.lines)
                    for record in self.parser.feed(line, self.lines):
                        if not self._save(record):
                            return
                    failpoint("mid-stream", self.lines)
            if time.monotonic() - last_sync >= LOG_FSYNC_EVERY_S:
                os.fsync(fd)
                last_sync = time.monotonic()
        os.fsync(fd)

    def finish(self) -> None:
        """Flush the parser: steps still open are written, marked incomplete."""
        try:
            for record in self.parser.finish():
                if not self._save(record):
                    return
        except Exception as err:
            self.error = self.error or f"{type(err).__name__}: {err}"

    def _save(self, record: "StepRecord") -> bool:
        if self.watch is not None and not self.watch.admit(record.step):
            return True  # a resume refused (or undecided at the end): none of its steps is the run's
        row = record.to_json(include_derived=False)
        if not self.writes.attempt(
            self.capture.metrics_path.name, lambda: self.writes.writer.jsonl(self.capture.metrics_path, row)
        ):
            return False
        if record.complete:
            self.steps_complete += 1
        self.reporter.step(self.capture.run, record, self.steps_complete)
        return True


def whole_line_pieces(lines: list[str], chars: int) -> Iterator[list[str]]:
    """`lines` in order, in pieces of whole lines of about `chars` characters (a longer line is a piece alone)."""
    if not lines:
        return
    if sum(map(len, lines)) + len(lines) <= chars:  # the usual burst: one piece
        yield lines
        return
    start, size = 0, 0
    for end, line in enumerate(lines):
        if size and size + len(line) + 1 > chars:
            yield lines[start:end]
            start, size = end, 0
        size += len(line) + 1
    if start < len(lines):
        yield lines[start:]


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
    from harness.lab.milesargv import flag_values

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
    from harness.board.session import board_session

    root = Path(plan.spec.capture_dir).parent
    # A Ray node's copy (its capture forwarded) numbers its attempts its own way: the driver's board shows the lineage.
    resume = plan.checkpoints.resume if plan.checkpoints is not None and ctx.forward is None else None
    resumes = (resume.from_attempt, resume.choice.next_rollout_id) if resume is not None else None
    with board_session(plan.spec.run, root, plan.experiment.export, ctx.reporter.warning, resumes) as board:
        shown = replace(ctx, forward=board.forwarding(ctx.forward))
        return _execute_attempt(plan, shown, engine=engine, guard=guard, clock=clock)


def _execute_attempt(
    plan: Planned,
    ctx: RunContext,
    *,
    engine: Engine,
    guard: "GuardSession",
    clock: Callable[[], float],
) -> RunStatus:
    from harness.mileslog import LogParser

    reporter, stop = ctx.reporter, ctx.stop
    grace_s, keep = ctx.options.grace_s, ctx.options.keep
    parser = LogParser()
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
        engine=engine.name,
        attempt=attempt.number,
    )
    writer = CaptureWriter(capture, ctx.forward)
    writer.status(status)
    checkpoints = _attempt_checkpoints(plan, capture, attempt, writer, reporter)
    if plan.checkpoints is None or plan.checkpoints.resume is None:
        attempts.started(attempt)  # a resumed attempt becomes current once its resume is verified

    labels = {
        LABEL_HARNESS_PID: str(os.getpid()),
        LABEL_HARNESS_HOST: this_host(),
        # A run Ray placed is labelled with the driver's attempt, whose capture recover settles.
        LABEL_ATTEMPT: spec.labels.get(LABEL_ATTEMPT, str(attempt.number)),
        **({LABEL_KEEP: "1"} if keep else {}),
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
        writer.json(capture.manifest_path, manifest)
        failpoint("before-container")
        handle = engine.start(spec, labels)
    except HarnessError as err:
        _record_not_started(writer, status, err.message, checkpoints)
        raise HarnessError(f"run {spec.run} did not start: {err.message}", err.exit_code) from None
    except OSError as err:
        message = describe_os_error(err, capture.manifest_path.name)
        _record_not_started(writer, status, message, checkpoints)
        raise HarnessError(f"run {spec.run} did not start: {message}") from None
    failpoint("after-start")
    if checkpoints is not None:
        checkpoints.started(handle)
    resume = plan.checkpoints.resume if plan.checkpoints is not None else None
    if resume is not None:
        reporter.note(
            f"{spec.run}: attempt {attempt.number} resumes attempt {resume.from_attempt} from "
            f"{resume.choice.check.name} (rollout {resume.choice.next_rollout_id} onward)"
        )
    elif attempt.number > 1:  # the trainer starts again from its first step: nothing of an earlier attempt is resumed
        reporter.note(
            f"{spec.run}: attempt {attempt.number}, from step 0 (a rerun does not resume attempt {attempt.number - 1})"
        )
    reporter.started(spec)
    loop = guard.start(
        handle,
        pauses_path=capture.pauses_path,
        samples_path=capture.guard_path,
        on_note=lambda message: reporter.note(f"{spec.run}: heat guard: {message}"),
        on_stop=lambda reason: _request_stop(stop, f"heat guard: {reason}"),
        on_reading=lambda reading: reporter.guard(spec.run, reading),
        append=writer.jsonl,
    )
    exit_code: Optional[int] = None
    engine_error: Optional[str] = None
    gone: Optional[str] = None
    writes = CaptureWrites(capture, engine.name, reporter, writer)
    pump = LogPump(handle, capture, parser, reporter, writes, KnownSecrets(spec.secret_values()), checkpoints)
    if resume is not None:  # the lineage's steps before the checkpoint: what it proves was trained (stitched later)
        pump.steps_complete = status.steps_complete = resume.choice.next_rollout_id
    try:
        status.container = handle.id
        identity = getattr(handle, "identity", lambda: None)()
        status.process = identity.to_dict() if identity is not None else None
        writes.attempt(capture.status_path.name, lambda: writer.status(status))
        manifest["handle"] = shown_json(handle.facts(), KnownSecrets(spec.secret_values()))  # its command, say
        writes.attempt(capture.manifest_path.name, lambda: writer.json(capture.manifest_path, manifest))
        pump.start()
        exit_code = _supervise(handle, spec, stop, capture, grace_s, clock, reporter, loop)
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
        if pump.ident is not None:  # started
            pump.join(PUMP_DRAIN_TIMEOUT_S if engine_error is None else 5)
        if pump.is_alive() and engine_error is None:
            pump.error = pump.error or f"the log stream did not end within {PUMP_DRAIN_TIMEOUT_S:g} s of the exit"
        if checkpoints is not None:
            checkpoints.ended(stopped=stop.state is not None)
        if writes.error is None and not pump.is_alive():
            pump.finish()
        failpoint("at-exit")
        outcome = _record_end(
            capture,
            status,
            parser,
            pump,
            writes,
            exit_code,
            stop,
            engine_error or pump.engine_error,
            getattr(handle, "outages", ()),
            loop.notes if loop is not None else (),
            gone or pump.gone,
        )
        if outcome.state == RunState.SUCCEEDED:
            attempts.succeeded(attempt)
        reporter.finished(status)
    failpoint("before-remove")
    if not keep and outcome.capture_complete and gone is None and pump.gone is None:
        try:
            handle.remove()
        except (EngineUnavailable, HarnessError) as err:
            reporter.note(f"{spec.run}: the container was not removed ({err.message}); `harness recover` does it")
    return status


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


def _record_end(
    capture: Capture,
    status: RunStatus,
    parser: "LogParser",
    pump: LogPump,
    writes: CaptureWrites,
    exit_code: Optional[int],
    stop: StopControl,
    engine_error: Optional[str],
    outages: Sequence[str],
    guard_notes: Sequence[str] = (),
    gone: Optional[str] = None,
) -> Outcome:
    if parser.args is not None:
        writes.attempt(capture.args_path.name, lambda: writes.writer.json(capture.args_path, parser.args))
    outcome = decide_outcome(
        exit_code=exit_code,
        steps_complete=pump.steps_complete,
        steps_expected=status.steps_expected,
        stop_state=stop.state,
        stop_reason=stop.reason,
        failure=parser.failure,
        capture_error=writes.error or pump.error,
        engine_error=engine_error,
        outages=outages,
        gone=gone,
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
    status.exit_code = exit_code
    status.ended_at = utc_now()
    status.steps_complete = pump.steps_complete
    status.stop_reason = stop.reason if stop.state is not None else None
    status.notes.extend(f"heat guard: {note}" for note in guard_notes)
    if parser.problems:
        status.notes.append(f"{len(parser.problems)} log line(s) could not be read; see harness parse-log")
    if outages and outcome.state == RunState.SUCCEEDED:
        status.notes.extend(outages)
    writes.writer.status(status)
    try:
        capture.stop_request_path.unlink(missing_ok=True)
    except OSError:
        pass
    if outcome.capture_complete:
        capture.drop_reserve()
    return outcome
