"""Runs and sweeps as a user starts them: take the capture, decide, check, take the GPU, run.

The CLI parses options, makes a RunContext (harness.run.context) and calls
these; the mechanics of one run are in `harness.run.execute`.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence

from harness.capture import Capture, CaptureLock, RunState, RunStatus, StatusRead, this_host, utc_now
from harness.capture.lock import holder
from harness.engines import engine_for, engine_named, listed_engine_names
from harness.errors import ExitCode, HarnessError
from harness.experiments.schema import redacted_experiment
from harness.guard.session import GuardSession
from harness.run.context import RunContext, StopControl
from harness.run.decide import Decision, Mode, configuration_changes, decide, exit_code_for_state
from harness.run.execute import execute
from harness.run.gpulock import GpuLock
from harness.run.plan import Planned
from harness.run.settle import plan_all, settle_for_run

if TYPE_CHECKING:
    from harness.engines import Engine
    from harness.guard.session import GuardSession
from harness.run.resume import auto_resume_problem, plan_checkpoint_start


def decide_on_capture(plan: Planned, mode: Mode, found: Optional[StatusRead] = None) -> Decision:
    """Whether `plan` should start given its capture as it is now (`found`: its status read, else read here);
    a changed configuration is named from the capture's manifest."""
    capture = Capture(Path(plan.spec.capture_dir))
    found = found or capture.status_read()
    changes: list[str] = []
    if found.status is not None and found.status.run_id != plan.spec.run_id:
        changes = configuration_changes(
            capture.read_manifest(),
            redacted_experiment(plan.experiment),
            plan.spec.shown().trainer_argv,  # as its manifest holds it
            plan.spec.image,
            plan.time_scale,
        )
    return decide(plan.spec.run, plan.spec.run_id, found.status, mode, found.broken, changes)


def leftover_warnings(capture_root: Path, engine_names: Sequence[str]) -> list[str]:
    """Read-only: captures and engine objects `harness recover` would act on (nothing is changed)."""
    listed = listed_engine_names()
    engines = [engine_named(name) for name in dict.fromkeys(engine_names) if name in listed]
    # Only this capture root's leftovers, as `harness recover --capture-dir` sees them: another root's are
    # that root's business (and its own recover's).
    plans = plan_all(capture_root, engines, [], outside=[])
    return [f"{plan.describe()}; `harness recover` settles it" for plan in plans if plan.action != "leave"]


@dataclass(frozen=True)
class SweepResult:
    """What happened to one run: the decision made under its capture's lock, and its status after."""

    decision: Decision
    status: Optional[RunStatus]


def run_planned(plan: Planned, ctx: RunContext) -> SweepResult:
    """Take the capture's lock, decide, check, take the GPU, open the guard's sensor, run; both locks are held
    to the last write.

    A capture left `running` by a dead harness is settled first (if nothing
    of it still runs). Pre-flight problems, and a sensor the experiment names
    that cannot read here, fail here, before a capture is made: nothing is
    written and an earlier capture is left as it was (`not_started` is for a
    run that failed after its capture was made).
    """
    spec, options, stop, reporter = plan.spec, ctx.options, ctx.stop, ctx.reporter
    engine = ctx.engine or engine_for(spec)
    capture = Capture(Path(spec.capture_dir))
    owner = {"run": spec.run, "run_id": spec.run_id, "pid": os.getpid(), "host": this_host(), "since": utc_now()}
    with CaptureLock(capture.directory, owner) as capture_lock:
        if options.resume and not capture_lock.try_acquire():  # never waits: both would continue one checkpoint
            raise resume_busy(spec.run, capture.directory)
        if not capture_lock.held:
            capture_lock.acquire(wait=options.wait_for_gpu, on_wait=reporter.warning, cancelled=lambda: stop.requested)
        refusal = settle_for_run(capture.directory, engine, grace_s=options.grace_s)
        found = capture.status_read()
        if refusal is not None:
            decision = Decision(spec.run, "skip", refusal)
        else:
            decision = decide_on_capture(plan, options.mode, found)
        reporter.decided(decision)
        if decision.action == "skip" or stop.requested:
            return SweepResult(decision, found.status)
        fresh = plan
        plan = checkpoint_start(plan, ctx, found)
        spec = plan.spec
        problems = engine.preflight(spec)
        if problems:
            # Without a GPU, image or data here, the same run still runs on the simulator: say how.
            hint = "" if plan.sim is not None else "; on the simulator instead: --sim (make: SIM=1)"
            raise HarnessError(
                f"run {spec.run} not started: " + "; ".join(p.message for p in problems) + hint, problems[0].exit_code
            )
        ctx.code_facts()  # before the GPU is taken: git and NVML may take a moment
        with GpuLock(plan.experiment.container.gpus, owner) as gpu_lock:
            gpu_lock.acquire(
                wait=options.wait_for_gpu, on_wait=reporter.warning, cancelled=lambda: stop.requested, poll_s=0.5
            )
            # Opened once the GPU is ours: the simulated sensor's model starts with the run, not with the wait.
            try:
                guard = GuardSession.open(plan.experiment.guard)
            except HarnessError as err:
                raise HarnessError(f"run {spec.run} not started: {err.message}", err.exit_code) from None
            try:
                for message in guard.warnings:
                    reporter.warning(f"{spec.run}: {message}")
                # The cooled start, still holding the GPU (so no other run heats it): its facts go in the manifest.
                start = guard.wait_to_start(
                    on_progress=lambda reading: reporter.cooling(spec.run, reading), cancelled=lambda: stop.requested
                )
                if start.outcome == "interrupted":
                    raise HarnessError(
                        f"run {spec.run}: interrupted while waiting to cool; nothing was started", ExitCode.INTERRUPTED
                    )
                if start.outcome == "refused":
                    raise HarnessError(f"run {spec.run} not started: heat guard: {start.note}", ExitCode.BUSY)
                if start.note:
                    reporter.note(f"{spec.run}: heat guard: {start.note}")
                with stop.acted_on():  # from here the run's supervisor acts on a stop: a signal asks it to
                    if stop.requested:
                        raise HarnessError(f"run {spec.run}: {stop.reason}; nothing was started", ExitCode.INTERRUPTED)
                    status = execute(plan, ctx, engine=engine, guard=guard)
                    status = _auto_resume(fresh, status, ctx, engine, guard)
            finally:
                guard.close()
    return SweepResult(decision, status)


def resume_busy(run: str, directory: Path) -> HarnessError:
    """A resume of a run whose capture's lock another harness holds: refused, never waited for (both would continue
    one checkpoint)."""
    return HarnessError(
        f"run {run} not resumed: another harness is running it ({holder(directory)}); two resumes of one run never "
        "run at once",
        ExitCode.BUSY,
    )


def checkpoint_start(plan: Planned, ctx: RunContext, found: StatusRead) -> Planned:
    """`plan` with its checkpoints decided (harness.run.resume): `--resume` continues the run's lineage; a run that
    never ran has none to continue, and starts from step 0 (said). A plan decided already (by a Ray driver, which
    holds the captures) is kept as it is."""
    if plan.checkpoints is not None:
        return plan
    resume = ctx.options.resume
    if resume and plan.spec.checkpoint is not None and found.status is None and found.broken is None:
        ctx.reporter.note(f"{plan.spec.run}: it never ran, so there is nothing to resume: it starts from step 0")
        resume = False
    return plan_checkpoint_start(plan, resume=resume, mode=ctx.options.mode)


def _auto_resume(
    fresh: Planned, status: RunStatus, ctx: RunContext, engine: "Engine", guard: "GuardSession"
) -> RunStatus:
    """`resume.auto` (or `--auto-resume N`): an attempt that failed or was interrupted with a complete checkpoint
    behind it is resumed by itself, after the cooled start, up to N times. Never after a stop the person asked for,
    nor after a resume the trainer did not make (it would fail the same way)."""
    limit = ctx.options.auto_resume if ctx.options.auto_resume is not None else fresh.experiment.resume.auto
    spec = fresh.spec
    for done in range(limit):
        why_not = auto_resume_problem(status, spec, ctx.stop.requested)
        if why_not is not None:
            if status.state != RunState.SUCCEEDED:
                ctx.reporter.note(f"{spec.run}: no automatic resume: {why_not}")
            return status
        try:
            plan = plan_checkpoint_start(fresh, resume=True, mode="retry")
        except HarnessError as err:
            ctx.reporter.note(f"{spec.run}: no automatic resume: {err.message}")
            return status
        ctx.reporter.note(f"{spec.run}: {status.state} ({status.error}); automatic resume {done + 1} of {limit}")
        start = guard.wait_to_start(
            on_progress=lambda reading: ctx.reporter.cooling(spec.run, reading), cancelled=lambda: ctx.stop.requested
        )
        if not start.started or ctx.stop.requested:
            ctx.reporter.note(f"{spec.run}: no automatic resume: {start.note or ctx.stop.reason or start.outcome}")
            return status
        status = execute(plan, ctx, engine=engine, guard=guard)
    return status


def run_sweep(plans: Sequence[Planned], ctx: RunContext) -> list[SweepResult]:
    """The runs of a sweep: one after another, or `options.parallel` at a time where none takes a GPU.

    A failure stops the runs not yet started only with `fail_fast`, an interrupt always.
    """
    if ctx.options.parallel > 1 and all(takes_no_gpu(plan) for plan in plans):
        return run_in_parallel(plans, ctx, ctx.options.parallel)
    results = []
    for plan in plans:
        if ctx.stop.requested:
            results.append(SweepResult(Decision(plan.spec.run, "skip", "the sweep was interrupted"), None))
            continue
        result = run_planned(plan, ctx)
        results.append(result)
        if _ends_the_sweep(result, ctx):
            break
    return results


def takes_no_gpu(plan: Planned) -> bool:
    """A run that holds no GPU's lock: on the simulator, or with `container.gpus: none`."""
    return plan.sim is not None or plan.experiment.container.gpus == "none"


def run_in_parallel(plans: Sequence[Planned], ctx: RunContext, workers: int) -> list[SweepResult]:
    """`workers` runs at a time, each as `run_planned` runs it; the results in the plans' order.

    Call from the main thread: it waits in short joins, so Ctrl-C reaches the
    signal handler (which asks `ctx.stop` to stop every run).
    """
    ctx.code_facts()  # once, before the runs start: they share it
    ended = threading.Event()  # a run ended the sweep (--fail-fast)

    def one(plan: Planned) -> SweepResult:
        if ctx.stop.requested or ended.is_set():
            why = "the sweep was interrupted" if ctx.stop.requested else "the sweep stopped at the first failure"
            return SweepResult(Decision(plan.spec.run, "skip", why), None)
        result = run_planned(plan, ctx)
        if _ends_the_sweep(result, ctx):
            ended.set()
        return result

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="run") as pool:
        futures = [pool.submit(one, plan) for plan in plans]
        while not all(future.done() for future in futures):
            time.sleep(0.2)
        return [future.result() for future in futures]


def _ends_the_sweep(result: SweepResult, ctx: RunContext) -> bool:
    status = result.status
    return (
        result.decision.action == "run"
        and status is not None
        and (status.state == RunState.INTERRUPTED or (ctx.options.fail_fast and status.state != RunState.SUCCEEDED))
    )


def exit_code_for(states: Sequence[str]) -> ExitCode:
    """0 only when every run succeeded; 130 if interrupted; 1 otherwise (each run's as `exit_code_for_state`)."""
    codes = [exit_code_for_state(state) for state in states]
    if ExitCode.INTERRUPTED in codes:
        return ExitCode.INTERRUPTED
    if all(code == ExitCode.OK for code in codes):
        return ExitCode.OK
    return ExitCode.RUN_FAILED


@contextmanager
def stop_on_signals(stop: StopControl, note: Callable[[str], None]) -> Iterator[None]:
    """First Ctrl-C or SIGTERM: graceful stop, marked interrupted; a second Ctrl-C: kill at once.

    Before any run's trainer is under way (`stop.acted_on`), nothing would act
    on the request (a preflight waiting on an image, a read that blocks): the
    signal ends the command at once, raising KeyboardInterrupt from wherever
    the main thread waits (an open() or a socket read is cut short by it).
    """

    def handle(signum: int, frame: Optional[FrameType]) -> None:
        name = signal.Signals(signum).name
        first = stop.request("interrupted", f"interrupted by {name}")
        if not stop.acting:
            note(f"{name}: no trainer is running: ending now")
            raise KeyboardInterrupt
        if first:
            note(f"{name}: stopping gracefully and saving what there is (Ctrl-C again kills at once)")
        elif signum == signal.SIGINT:
            stop.request_kill()
            note("second Ctrl-C: killing now")

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
