"""What a resume costs the harness: its time from `--resume` to the trainer's start against a fresh start, and the
cost of verifying a 10 GB checkpoint.

1. `run_planned` on the simulator (process engine, no heat guard), timed from the call to the engine's start,
   for a fresh start and for a resume of a run with a lineage of --attempts attempts whose checkpoint directory
   holds --keep checkpoints of 10 GB each (sparse files: no block written) and a torn newer one. The difference
   is what deciding and preparing the resume costs: the lineage read, each checkpoint verified, the disk rule,
   the tracker rewritten, resume.json written. Goal: at most 1 s more.
2. `verify_checkpoint` of a 10 GB checkpoint, and the bytes the process read meanwhile (/proc/self/io rchar).
   Goal: under 50 ms, no tensor data read.

Usage: python bench/resume.py [--repeat 5] [--attempts 20] [--keep 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

GB = 10**9
EXPERIMENT = {
    "name": "long",
    "steps": 200,
    "miles": {"args": {"rollout-global-dataset": True, "rollout-batch-size": 4, "n-samples-per-prompt": 4}},
    "guard": {"sensor": "none"},
    "checkpoint": {"every": 10, "keep": 2},
}


def read_bytes() -> int:
    """The bytes this process has read so far (every read(2), cached or not)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar"):
            return int(line.split()[1])
    return 0


def bench_verify(repeat: int) -> None:
    from harness.checkpoints.verify import verify_checkpoint
    from support.checkpoints import write_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        write_checkpoint(directory, 60, sparse_bytes=10 * GB, data_state=True)
        times, reads = [], []
        for _ in range(max(repeat, 20)):
            before = read_bytes()
            started = time.perf_counter()
            check = verify_checkpoint(str(directory), 60, data_state=True)
            times.append((time.perf_counter() - started) * 1000)
            reads.append(read_bytes() - before)
        assert check.complete and check.bytes > 10 * GB
        print(
            f"verify a {check.bytes / GB:.1f} GB checkpoint: median {statistics.median(times):.3f} ms, max "
            f"{max(times):.3f} ms over {len(times)} (goal: under 50 ms); bytes read: at most {max(reads):,} "
            "(meta.json and /proc/self/io itself; no tensor data)"
        )


class TimedEngine:
    """A real engine whose start is timed: the moment the harness hands it the spec."""

    def __init__(self, engine: object) -> None:
        self.engine = engine
        self.started_at: float = 0.0

    def __getattr__(self, name: str) -> object:
        return getattr(self.engine, name)

    def start(self, spec: object, labels: object) -> object:
        self.started_at = time.perf_counter()
        return self.engine.start(spec, labels)  # type: ignore[attr-defined]


def one_start(root: Path, *, resume: bool) -> float:
    """Seconds from run_planned's call to the engine's start (the trainer then runs to its end, untimed)."""
    from harness.engines.process import ProcessEngine
    from harness.experiments.store import ExperimentStore
    from harness.run.context import RunContext, RunOptions
    from harness.run.lifecycle import run_planned
    from harness.run.plan import plan_runs
    from harness.run.simswap import SimTarget

    sim = SimTarget("process", 0.0001, sys.executable, "the bench")
    store = ExperimentStore(root / "experiments")
    environ = {"HARNESS_CHECKPOINT_DIR": str(root / "checkpoints")}
    (plan,) = plan_runs(store, "long", [], ["steps=12"], root / "capture", environ, sim=sim)
    engine = TimedEngine(ProcessEngine(root / "processes"))
    ctx = RunContext(options=RunOptions(mode="retry", resume=resume), engine=engine)  # type: ignore[arg-type]
    ctx.code_facts()  # computed once per command, before any run: not the resume's cost
    called = time.perf_counter()
    run_planned(plan, ctx)
    return engine.started_at - called


def lineage(root: Path, attempts: int, keep: int) -> None:
    """A run with `attempts` attempts, the last failed, and `keep` 10 GB checkpoints and a torn one on disk."""
    from harness.capture import Capture, RunAttempts, RunStatus
    from harness.experiments.store import ExperimentStore
    from harness.run.plan import plan_runs
    from harness.run.simswap import SimTarget
    from support.checkpoints import torn_model_write, write_checkpoint

    sim = SimTarget("process", 0.0001, sys.executable, "the bench")
    (plan,) = plan_runs(
        ExperimentStore(root / "experiments"),
        "long",
        [],
        ["steps=12"],
        root / "capture",
        {"HARNESS_CHECKPOINT_DIR": str(root / "checkpoints")},
        sim=sim,
    )
    run_attempts = RunAttempts(root / "capture" / "long")
    for _ in range(attempts):
        attempt = run_attempts.new()
        status = RunStatus(
            "long", plan.spec.run_id, "failed", 137, "2026-08-20T10:00:00Z", "2026-08-20T11:00:00Z", 12, 5, "killed"
        )
        status.attempt = attempt.number
        Capture(attempt.directory, "long").write_status(status)
        run_attempts.started(attempt)
    directory = Path(plan.spec.checkpoint.directory)
    directory.mkdir(parents=True)
    (directory / ".harness-run.json").write_text(json.dumps({"run": "long", "run_id": plan.spec.run_id}))
    for k in range(keep):
        write_checkpoint(directory, 3 * (k + 1), sparse_bytes=10 * GB, data_state=True)
    torn_model_write(directory, 3 * (keep + 1))


def bench_start(repeat: int, attempts: int, keep: int) -> None:
    fresh, resumed = [], []
    for _ in range(repeat):
        for resume, into in ((False, fresh), (True, resumed)):
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                (root / "experiments").mkdir()
                (root / "experiments" / "long.yaml").write_text(json.dumps(EXPERIMENT))
                if resume:
                    lineage(root, attempts, keep)
                into.append(one_start(root, resume=resume))
    extra = statistics.median(resumed) - statistics.median(fresh)
    print(
        f"run_planned to the engine's start: fresh median {statistics.median(fresh) * 1000:.1f} ms, resume (a lineage "
        f"of {attempts} attempts, {keep} checkpoints of 10 GB and a torn one) median "
        f"{statistics.median(resumed) * 1000:.1f} ms: {extra * 1000:+.1f} ms (goal: at most 1 s more), over {repeat}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--attempts", type=int, default=20)
    parser.add_argument("--keep", type=int, default=2)
    options = parser.parse_args()
    os.environ.setdefault("HARNESS_LOCK_DIR", tempfile.mkdtemp(prefix="bench-locks-"))
    bench_verify(options.repeat)
    bench_start(options.repeat, options.attempts, options.keep)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
