"""Runs and sweeps as a user starts them: refuse to clobber, take the GPU, run, settle.

The CLI parses options and calls these; the mechanics of one run are in
`harness.runner`.
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from harness.capture import Capture, RunStatus, this_host
from harness.errors import ExitCode, HarnessError
from harness.experiments import Experiment, ExperimentStore
from harness.gpulock import GpuLock
from harness.launch import LaunchSpec, plan_launch
from harness.runner import DEFAULT_GRACE_S, Progress, StopControl, execute
from harness.sweep import Decision, Mode, decide


@dataclass(frozen=True)
class RunOptions:
    """How to start runs."""

    wait_for_gpu: bool = True
    keep: bool = False
    grace_s: float = DEFAULT_GRACE_S


@dataclass(frozen=True)
class Planned:
    """One run, resolved and planned, with the warnings to show before it starts."""

    experiment: Experiment
    spec: LaunchSpec
    warnings: tuple[str, ...] = ()


def plan_runs(
    store: ExperimentStore,
    name: str,
    seeds: Sequence[int],
    overrides: Sequence[str],
    capture_root: Path,
    environ: dict[str, str],
) -> list[Planned]:
    """Every run of experiment `name` over `seeds` (the file's own seed when none)."""
    plans = []
    for seed in seeds or [None]:
        loaded = store.load(name, seed=seed, overrides=overrides)
        spec = plan_launch(loaded.experiment, base_args=store.base_args, capture_root=str(capture_root),
                           project_root=str(Path.cwd()), environ=environ)
        missing = tuple(f"{env} is listed in container.pass_env but not set in this environment; the container "
                        "gets none" for env in spec.missing_env)
        plans.append(Planned(loaded.experiment, spec, loaded.warnings + missing))
    return plans


def existing_status(spec: LaunchSpec) -> Optional[RunStatus]:
    """The status of the capture this run would write to, if there is one."""
    return Capture(Path(spec.capture_dir)).read_status()


def refuse_to_clobber(spec: LaunchSpec, force: bool) -> None:
    """A single run replaces a failed capture, a succeeded one only with --force, a live one never."""
    decision = decide(spec.run, spec.run_id, existing_status(spec), "force" if force else "retry")
    if decision.action == "skip":
        raise HarnessError(f"run {spec.run} not started: {decision.reason}")


def leftover_warnings() -> list[str]:
    """Read-only: labelled containers whose harness is gone (nothing is changed)."""
    try:
        from harness.engines.docker import connect
        from harness.recover import find_leftovers

        leftovers = find_leftovers(connect())
    except HarnessError:
        return []
    return [f"{item.describe()}; `harness recover` settles it" for item in leftovers]


def run_planned(
    plan: Planned,
    *,
    options: RunOptions,
    progress: Progress,
    stop: StopControl,
    on_wait: Callable[[str], None],
    engine: Any = None,
    provenance: Optional[dict[str, Any]] = None,
) -> RunStatus:
    """Take the GPU lock, run, release; the final status is returned (and on disk)."""
    from harness.engines import engine_for
    from harness.mileslog import LogParser
    from harness.provenance import git_facts, harness_facts, nvml_probe

    spec = plan.spec
    if provenance is None:
        provenance = {**harness_facts(), **git_facts(Path.cwd()), "nvml": nvml_probe()}
    owner = {"run": spec.run, "pid": os.getpid(), "host": this_host()}
    with GpuLock(plan.experiment.container.gpus, owner) as lock:
        lock.acquire(wait=options.wait_for_gpu, on_wait=on_wait, cancelled=lambda: stop.state is not None,
                     poll_s=0.5)
        return execute(
            spec,
            plan.experiment.to_dict(),
            engine=engine or engine_for(spec),
            parser=LogParser(),
            progress=progress,
            stop=stop,
            provenance=provenance,
            grace_s=options.grace_s,
            keep=options.keep,
        )


@dataclass(frozen=True)
class SweepResult:
    """What happened to one run of a sweep."""

    decision: Decision
    status: Optional[RunStatus]


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
    engine: Any = None,
) -> list[SweepResult]:
    """Runs one after another; a failure stops the rest only with `fail_fast`, an interrupt always."""
    results = []
    for plan in plans:
        decision = decide(plan.spec.run, plan.spec.run_id, existing_status(plan.spec), mode)
        on_decision(decision)
        if decision.action == "skip" or stop.state is not None:
            results.append(SweepResult(decision, existing_status(plan.spec)))
            continue
        status = run_planned(plan, options=options, progress=progress, stop=stop, on_wait=on_wait, engine=engine)
        results.append(SweepResult(decision, status))
        if status.state == "interrupted" or (fail_fast and status.state != "succeeded"):
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
