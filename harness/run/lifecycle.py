"""Runs and sweeps as a user starts them: take the capture, decide, check, take the GPU, run.

The CLI parses options and calls these; the mechanics of one run are in
`harness.run.execute`.
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from harness.capture import Capture, CaptureLock, RunState, RunStatus, this_host, utc_now
from harness.engines.spec import LaunchSpec
from harness.errors import ExitCode, HarnessError
from harness.experiments.schema import Experiment, redacted_experiment
from harness.experiments.store import ExperimentStore
from harness.run.decide import Decision, Mode, configuration_changes, decide
from harness.run.execute import DEFAULT_GRACE_S, Progress, StopControl, execute
from harness.run.gpulock import GpuLock
from harness.run.plan import plan_launch
from harness.run.simswap import SimTarget, simulated


@dataclass(frozen=True)
class RunOptions:
    """How to start runs; `wait_for_gpu` covers the capture's lock too (--no-wait)."""

    wait_for_gpu: bool = True
    keep: bool = False
    grace_s: float = DEFAULT_GRACE_S


@dataclass(frozen=True)
class Planned:
    """One run, resolved and planned, with the warnings to show before it starts."""

    experiment: Experiment
    spec: LaunchSpec
    warnings: tuple[str, ...] = ()
    sim: Optional[SimTarget] = None  # on the simulator (harness.run.simswap), at its time scale

    @property
    def time_scale(self) -> float:
        """Wall seconds per trainer second: 1 for a real run."""
        return self.sim.time_scale if self.sim is not None else 1.0


def plan_runs(
    store: ExperimentStore,
    name: str,
    seeds: Sequence[int],
    overrides: Sequence[str],
    capture_root: Path,
    environ: dict[str, str],
    sim: Optional[SimTarget] = None,
) -> list[Planned]:
    """Every run of experiment `name` over `seeds` (the file's own seed when none); on the simulator with `sim`."""
    plans = []
    for seed in seeds or [None]:
        loaded = store.load(name, seed=seed, overrides=overrides)
        experiment = loaded.experiment if sim is None else simulated(loaded.experiment, sim)
        spec = plan_launch(
            experiment,
            base_args=store.base_args,
            capture_root=str(capture_root),
            project_root=str(Path.cwd()),
            environ=environ,
        )
        missing = tuple(
            f"{env} is listed in container.pass_env but not set in this environment; the container gets none"
            for env in spec.missing_env
        )
        plans.append(Planned(experiment, spec, loaded.warnings + missing, sim))
    return plans


def decide_on_capture(plan: Planned, mode: Mode, found: Any = None) -> Decision:
    """Whether `plan` should start given its capture as it is now (`found`: its status read, else read here);
    a changed configuration is named from the capture's manifest."""
    capture = Capture(Path(plan.spec.capture_dir))
    found = found or capture.status_read()
    changes: list[str] = []
    if found.status is not None and found.status.run_id != plan.spec.run_id:
        changes = configuration_changes(
            capture.read_manifest(),
            redacted_experiment(plan.experiment),
            plan.spec.trainer_argv,
            plan.spec.image,
            plan.time_scale,
        )
    return decide(plan.spec.run, plan.spec.run_id, found.status, mode, found.broken, changes)


def leftover_warnings(capture_root: Path, engine_names: Sequence[str]) -> list[str]:
    """Read-only: captures and engine objects `harness recover` would act on (nothing is changed)."""
    from harness.engines import engine_named, listed_engine_names
    from harness.run.settle import plan_all

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


def run_planned(
    plan: Planned,
    *,
    options: RunOptions,
    progress: Progress,
    stop: StopControl,
    on_wait: Callable[[str], None],
    mode: Mode = "retry",
    on_decision: Callable[[Decision], None] = lambda decision: None,
    on_warning: Callable[[str], None] = lambda message: None,
    engine: Any = None,
    provenance: Optional[dict[str, Any]] = None,
    forward: Optional[Callable[[Any], None]] = None,
) -> SweepResult:
    """Take the capture's lock, decide, check, take the GPU, open the guard's sensor, run; both locks are held
    to the last write.

    A capture left `running` by a dead harness is settled first (if nothing
    of it still runs). Pre-flight problems, and a sensor the experiment names
    that cannot read here, fail here, before a capture is made: nothing is
    written and an earlier capture is left as it was (`not_started` is for a
    run that failed after its capture was made). `forward`: see `execute`.
    """
    from harness.engines import engine_for
    from harness.guard.session import GuardSession
    from harness.mileslog import LogParser
    from harness.run.provenance import git_facts, harness_facts, nvml_probe
    from harness.run.settle import settle_for_run

    spec = plan.spec
    engine = engine or engine_for(spec)
    capture = Capture(Path(spec.capture_dir))
    owner = {"run": spec.run, "run_id": spec.run_id, "pid": os.getpid(), "host": this_host(), "since": utc_now()}
    with CaptureLock(capture.directory, owner) as capture_lock:
        capture_lock.acquire(wait=options.wait_for_gpu, on_wait=on_wait, cancelled=lambda: stop.state is not None)
        refusal = settle_for_run(capture.directory, engine, grace_s=options.grace_s)
        found = capture.status_read()
        if refusal is not None:
            decision = Decision(spec.run, "skip", refusal)
        else:
            decision = decide_on_capture(plan, mode, found)
        on_decision(decision)
        if decision.action == "skip" or stop.state is not None:
            return SweepResult(decision, found.status)
        problems = engine.preflight(spec)
        if problems:
            raise HarnessError(
                f"run {spec.run} not started: " + "; ".join(p.message for p in problems), problems[0].exit_code
            )
        if provenance is None:
            provenance = {**harness_facts(), **git_facts(Path.cwd()), "nvml": nvml_probe()}
        with GpuLock(plan.experiment.container.gpus, owner) as gpu_lock:
            gpu_lock.acquire(
                wait=options.wait_for_gpu, on_wait=on_wait, cancelled=lambda: stop.state is not None, poll_s=0.5
            )
            # Opened once the GPU is ours: the simulated sensor's model starts with the run, not with the wait.
            try:
                guard = GuardSession.open(plan.experiment.guard)
            except HarnessError as err:
                raise HarnessError(f"run {spec.run} not started: {err.message}", err.exit_code) from None
            try:
                for message in guard.warnings:
                    on_warning(f"{spec.run}: {message}")
                status = execute(
                    spec,
                    plan.experiment.to_dict(),
                    engine=engine,
                    parser=LogParser(),
                    progress=progress,
                    stop=stop,
                    provenance=provenance,
                    guard=guard,
                    grace_s=options.grace_s,
                    keep=options.keep,
                    time_scale=plan.time_scale,
                    keep_old=decision.keep_old,
                    forward=forward,
                )
            finally:
                guard.close()
    return SweepResult(decision, status)


def run_sweep(
    plans: Sequence[Planned],
    *,
    mode: Mode,
    fail_fast: bool,
    options: RunOptions,
    progress: Progress,
    stop: StopControl,
    on_decision: Callable[[Decision], None],
    on_wait: Callable[[str], None],
    on_warning: Callable[[str], None] = lambda message: None,
    engine: Any = None,
) -> list[SweepResult]:
    """Runs one after another; a failure stops the rest only with `fail_fast`, an interrupt always."""
    results = []
    for plan in plans:
        if stop.state is not None:
            results.append(SweepResult(Decision(plan.spec.run, "skip", "the sweep was interrupted"), None))
            continue
        result = run_planned(
            plan,
            options=options,
            progress=progress,
            stop=stop,
            on_wait=on_wait,
            mode=mode,
            on_decision=on_decision,
            on_warning=on_warning,
            engine=engine,
        )
        results.append(result)
        status = result.status
        if (
            result.decision.action == "run"
            and status is not None
            and (status.state == RunState.INTERRUPTED or (fail_fast and status.state != RunState.SUCCEEDED))
        ):
            break
    return results


def exit_code_for(states: Sequence[str]) -> ExitCode:
    """0 only when every run succeeded; 130 if interrupted; 1 otherwise."""
    if "interrupted" in states:
        return ExitCode.INTERRUPTED
    if all(state == "succeeded" for state in states):
        return ExitCode.OK
    return ExitCode.RUN_FAILED


@contextmanager
def stop_on_signals(stop: StopControl, note: Callable[[str], None]) -> Iterator[None]:
    """First Ctrl-C or SIGTERM: graceful stop, marked interrupted; a second Ctrl-C: kill at once."""

    def handle(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if stop.request("interrupted", f"interrupted by {name}"):
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
