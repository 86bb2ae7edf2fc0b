"""A 4-seed sweep on a 1-node and a 2-node Ray cluster: the speed-up, the overhead per run, the line delay.

    .venv/bin/python bench/sweep_scaling.py [--seeds 4] [--time-scale 0.1] [--steps 3]

Real Ray nodes on this machine (`ray.cluster_utils.Cluster`), each declaring
one GPU; the trainer is the simulated Miles trainer at a fixed pace through
the process engine, so every run takes the same time wherever it lands.
Prints:

- the speed-up of the 2-node sweep over the 1-node sweep (goal: at least 1.6x);
- the placement and streaming overhead per run: the 1-node sweep's time less
  the time the same runs take in a local sweep, per run (goal: under 2 s);
  beside it the same against the runners' own time on the node;
- the delay from a line printed on a node (the engine's stamp) to the line
  written on the driver: median and 95th percentile (goal: median under 0.5 s).

On a 2-core machine the two nodes, the driver and the trainers share the
cores, which is the worst case for the speed-up.
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
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.engines.logstream import stamp_to_ns  # noqa: E402


def write_experiment(root: Path, steps: int, time_scale: float) -> Path:
    experiments = root / "experiments"
    experiments.mkdir(parents=True)
    (experiments / "paced.yaml").write_text(
        json.dumps(
            {
                "name": "paced",
                "steps": steps,
                "engine": "process",
                "command": [
                    sys.executable,
                    "-m",
                    "harness.sim",
                    "--num-rollout",
                    str(steps),
                    "--rollout-batch-size",
                    "8",
                    "--n-samples-per-prompt",
                    "4",
                    "--time-scale",
                    str(time_scale),
                ],
                "container": {"gpus": "none"},
                "guard": {"sensor": "none"},
            }
        )
    )
    return experiments


def plans_for(experiments: Path, captures: Path, seeds: list[int]) -> list[Any]:
    from harness.experiments.store import ExperimentStore
    from harness.run.plan import plan_runs

    return plan_runs(ExperimentStore(experiments), "paced", seeds, [], captures, dict(os.environ))


def local_sweep(experiments: Path, captures: Path, seeds: list[int]) -> float:
    from harness.run.context import RunContext, RunOptions
    from harness.run.lifecycle import run_sweep

    start = time.monotonic()
    results = run_sweep(plans_for(experiments, captures, seeds), RunContext(options=RunOptions(mode="force")))
    elapsed = time.monotonic() - start
    assert all(r.status is not None and r.status.state == "succeeded" for r in results), results
    return elapsed


def ray_sweep(root: Path, experiments: Path, nodes: int, seeds: list[int], delays: list[float]) -> tuple[float, Any]:
    """The sweep on a fresh cluster of `nodes` GPU nodes; its wall time and its runs."""
    import ray
    from ray.cluster_utils import Cluster

    from harness.capture import writer
    from harness.cluster.board import Board
    from harness.cluster.driver import RaySweep
    from harness.run.context import RunContext, RunOptions
    from harness.run.provenance import git_facts, harness_facts

    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={
            "num_cpus": 1,
            "num_gpus": 0,
            "object_store_memory": 80 * 1024 * 1024,
            "include_dashboard": False,
        },
    )
    for index in range(nodes):
        home = root / f"{nodes}-nodes" / f"node-{index}"
        cluster.add_node(
            num_cpus=1,
            num_gpus=1,
            object_store_memory=80 * 1024 * 1024,
            env_vars={
                "HARNESS_PROCESS_DIR": str(home / "processes"),
                "HARNESS_NODE_CAPTURE_DIR": str(home / "captures"),
                "HARNESS_LOCK_DIR": str(home / "locks"),
            },
        )
    cluster.wait_for_nodes()
    original_apply = writer.EventSink.apply

    def timed_apply(self: Any, event: Any) -> None:
        original_apply(self, event)
        if event[0] == "log":  # the engine stamped the line when the trainer printed it, on the node
            delays.append(time.time() - stamp_to_ns(event[2].split(" ", 1)[0]) / 1e9)

    writer.EventSink.apply = timed_apply
    try:
        ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
        # Warm each node's worker pool as a long-lived cluster has it: a first task per node starts Python.
        ray.get([ray.remote(lambda: None).options(num_gpus=1, num_cpus=0).remote() for _ in range(nodes)])
        captures = root / f"{nodes}-nodes" / "capture"
        ctx = RunContext(options=RunOptions(mode="force"), provenance={**harness_facts(), **git_facts(REPO)})
        sweep = RaySweep(ray, cluster.address, ctx=ctx, board=Board())
        start = time.monotonic()
        runs = sweep.run(plans_for(experiments, captures, seeds))
        elapsed = time.monotonic() - start
    finally:
        writer.EventSink.apply = original_apply
        ray.shutdown()
        cluster.shutdown()
    assert all(run.state == "succeeded" for run in runs), [(run.run, run.state, run.error) for run in runs]
    return elapsed, runs


def runner_seconds(root: Path, nodes: int) -> float:
    """The runners' own time on the nodes (their copies' status: made to final)."""
    from harness.times import parse_time_us

    total = 0.0
    for copy in (root / f"{nodes}-nodes").glob("node-*/captures/*/status.json"):
        status = json.loads(copy.read_text())
        total += (parse_time_us(status["ended_at"]) - parse_time_us(status["started_at"])) / 1e6
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--time-scale", type=float, default=0.1)
    args = parser.parse_args()
    seeds = list(range(1, args.seeds + 1))
    with tempfile.TemporaryDirectory(prefix="sweep-scaling-") as tmp:
        root = Path(tmp)
        os.environ["HARNESS_LOCK_DIR"] = str(root / "locks")
        os.environ["HARNESS_PROCESS_DIR"] = str(root / "local-processes")
        experiments = write_experiment(root, args.steps, args.time_scale)
        local_s = local_sweep(experiments, root / "local" / "capture", seeds)
        delays: list[float] = []
        one_s, _ = ray_sweep(root, experiments, 1, seeds, delays)
        two_s, two_runs = ray_sweep(root, experiments, 2, seeds, delays)
        runner_s = runner_seconds(root, 1)
    n = len(seeds)
    delays.sort()
    hosts = {}
    for run in two_runs:
        hosts.setdefault(run.node.node_id[:12], []).append(run.run)
    print(
        f"sweep_scaling: {n} seeds x {args.steps} steps of the simulated trainer at time scale {args.time_scale:g} "
        f"(process engine), on {os.cpu_count()} CPU cores"
    )
    print(f"  local sweep (no Ray)       {local_s:6.1f} s   ({local_s / n:.2f} s a run)")
    print(f"  1-node Ray cluster         {one_s:6.1f} s")
    print(
        f"  2-node Ray cluster         {two_s:6.1f} s   placement: "
        + "; ".join(f"node {node}: {', '.join(runs)}" for node, runs in sorted(hosts.items()))
    )
    print(f"  speed-up 2 nodes / 1 node  {one_s / two_s:6.2f}x   (goal: at least 1.6x)")
    print(
        f"  overhead per run           {(one_s - local_s) / n:6.2f} s   over a local run (goal: under 2 s); "
        f"{(one_s - runner_s) / n:.2f} s over the runner's own time on the node"
    )
    print(
        f"  line delay node -> driver  median {statistics.median(delays) * 1000:.0f} ms, "
        f"p95 {delays[int(len(delays) * 0.95)] * 1000:.0f} ms, max {delays[-1] * 1000:.0f} ms over {len(delays)} lines "
        "(goal: median under 0.5 s)"
    )


if __name__ == "__main__":
    main()
