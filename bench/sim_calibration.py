"""How close the simulator lands to the lab's write-up: a benchmark that prints its figures.

Runs the simulated trainer (harness.sim) on simulated time at the write-up's
settings (B=32, 8 answers per prompt, 12 steps, answers cut at 1024 tokens)
over several seeds: plain GRPO (O = B), the DAPO filter at O=48, and plain-48
(O=48 without the filter, the write-up's control). Each run's log is read by
the project's parser (harness.mileslog), so the figures are what the summary
would read. Prints each figure beside the write-up's (one seed of 12 steps in
the lab; the sim's over all seeds).

    .venv/bin/python bench/sim_calibration.py [--seeds 1 2 3 4 5] [--steps 12] [--json]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.lab.milesargv import read_base_args  # noqa: E402
from harness.lab.milesnames import FILTER_PATH  # noqa: E402
from harness.mileslog import parse_lines  # noqa: E402
from harness.sim.rollout import RolloutResult  # noqa: E402
from harness.sim.trainer import simulate  # noqa: E402

FILTER = ["--dynamic-sampling-filter-path", FILTER_PATH, "--over-sampling-batch-size", "48"]
PLAIN_48 = ["--over-sampling-batch-size", "48"]

# The write-up's figures (plain: 12 steps, seed 1; filter: 12 steps, seed 1; five baselines).
WRITE_UP = {
    "plain_zero_std_share": "about half",
    "plain_zero_std_split": "mostly all right",
    "plain_median_rollout_s": 58.0,
    "dropped_range": "16-48",
    "dropped_median": 36,
    "dropped_all_right_share": "most",
    "one_batch_steps": "3 of 12",
    "one_batch_median_s": 88.7,
    "one_batch_ratio": 1.5,
    "two_batch_steps": "9 of 12",
    "two_batch_median_s": 164.4,
    "two_batch_ratio": 2.8,
    "more_batch_steps": "0 of 12",
    "plain_reward_mean": 0.657,
    "plain_reward_first4": 0.625,
    "filter_unfiltered_mean": 0.686,
    "filter_unfiltered_first4": 0.672,
    "filter_above_plain": "1 of 1 seed",
    "baseline_reward_range": "0.638-0.660 (e6a-base, plain, plain-48 x3)",
    "plain_step_time_sum_min": "60 (heat pauses in)",
    "filter_step_time_sum_min": "113 (heat pauses in)",
}


def run(argv: list[str]) -> list[dict[str, Any]]:
    """One simulated run, read back by the parser: per step, its metrics, derived values and batches.

    Also the model's own truth, which no log shows: `abort_bias`, the mean
    reward of the judged answers minus that of every answer submitted
    (aborted ones included, as drawn).
    """
    stream = io.StringIO()
    logs = simulate(argv, stream=stream)
    parsed = parse_lines(stream.getvalue().splitlines())
    if parsed.problems or len(parsed.steps) != len(logs):
        raise SystemExit(f"the parser did not read the sim's log cleanly: {parsed.problems[:3]}")
    return [
        {
            "metrics": record.metrics,
            "derived": record.derived,
            "batches": log.result.batches,
            "abort_bias": abort_bias(log.result),
        }
        for record, log in zip(parsed.steps, logs)
    ]


def abort_bias(result: RolloutResult) -> float:
    judged = [reward for group in result.judged for reward in group.rewards]
    submitted = judged + [reward for group in result.aborted for reward in group.rewards]
    return mean(judged) - mean(submitted)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def calibrate(seeds: list[int], steps: int) -> dict[str, Any]:
    base = [*read_base_args(), "--num-rollout", str(steps)]
    per_seed: list[dict[str, Any]] = []
    for seed in seeds:
        argv = [*base, "--seed", str(seed), "--rollout-seed", str(seed)]
        per_seed.append(
            {"seed": seed, "plain": run(argv), "filter": run([*argv, *FILTER]), "plain48": run([*argv, *PLAIN_48])}
        )

    zero_right, zero_wrong, plain_times = [], [], []
    drops, drops_right, one_batch, two_batch, more_batches = [], [], [], [], []
    bias: dict[str, list[float]] = {"filter": [], "plain48": []}
    seed1: dict[str, Any] | None = None
    rewards: dict[str, list[float]] = {k: [] for k in ("plain", "plain4", "filter", "filter4", "plain48")}
    sums = {"plain": [], "filter": []}
    for runs in per_seed:
        plain, filtered = runs["plain"], runs["filter"]
        median_plain = statistics.median(s["metrics"]["perf/rollout_time"] for s in plain)
        for s in plain:
            zero_right.append(s["derived"]["zero_std_all_right"])
            zero_wrong.append(s["derived"]["zero_std_all_wrong"])
            plain_times.append(s["metrics"]["perf/rollout_time"])
        for s in filtered:
            drops.append(s["derived"]["dropped_groups"])
            drops_right.append(s["derived"]["dropped_all_right"])
            seconds = s["metrics"]["perf/rollout_time"]
            kind = {1: one_batch, 2: two_batch}.get(s["batches"], more_batches)
            kind.append((seconds, seconds / median_plain))
        for name in bias:
            bias[name] += [s["abort_bias"] for s in runs[name]]
        if runs["seed"] == 1:
            seed_drops = [s["derived"]["dropped_groups"] for s in filtered]
            seed_batches = [s["batches"] for s in filtered]
            seed1 = {
                "dropped_min": min(seed_drops),
                "dropped_median": statistics.median(seed_drops),
                "dropped_max": max(seed_drops),
                "one_batch_steps": seed_batches.count(1),
                "two_batch_steps": seed_batches.count(2),
                "steps": len(seed_batches),
            }
        rewards["plain"].append(mean([s["metrics"]["rollout/raw_reward"] for s in plain]))
        rewards["plain4"].append(mean([s["metrics"]["rollout/raw_reward"] for s in plain[:4]]))
        rewards["filter"].append(mean([s["metrics"]["rollout/raw_reward_unfiltered"] for s in filtered]))
        rewards["filter4"].append(mean([s["metrics"]["rollout/raw_reward_unfiltered"] for s in filtered[:4]]))
        rewards["plain48"].append(mean([s["metrics"]["rollout/raw_reward"] for s in runs["plain48"]]))
        for name in sums:
            sums[name].append(sum(s["metrics"]["perf/step_time"] for s in runs[name]) / 60)

    total = len(drops)
    deciles = statistics.quantiles(drops, n=10, method="inclusive")
    return {
        "seeds": seeds,
        "steps": steps,
        "plain_zero_std_share": (mean(zero_right) + mean(zero_wrong)) / 32,
        "plain_zero_std_all_right": mean(zero_right),
        "plain_zero_std_all_wrong": mean(zero_wrong),
        "plain_median_rollout_s": statistics.median(plain_times),
        "dropped_min": min(drops),
        "dropped_median": statistics.median(drops),
        "dropped_max": max(drops),
        "dropped_p10": deciles[0],
        "dropped_p90": deciles[-1],
        "dropped_all_right_share": sum(drops_right) / max(1, sum(drops)),
        "one_batch_steps": len(one_batch),
        "two_batch_steps": len(two_batch),
        "more_batch_steps": len(more_batches),
        "filter_steps": total,
        "one_batch_median_s": statistics.median(t for t, _ in one_batch) if one_batch else None,
        "one_batch_ratio": statistics.median(r for _, r in one_batch) if one_batch else None,
        "two_batch_median_s": statistics.median(t for t, _ in two_batch) if two_batch else None,
        "two_batch_ratio": statistics.median(r for _, r in two_batch) if two_batch else None,
        "rewards": rewards,
        "filter_above_plain": sum(f > p for f, p in zip(rewards["filter"], rewards["plain"])),
        "abort_bias": {name: mean(values) for name, values in bias.items()},
        "seed1_filter": seed1,
        "step_time_sum_min": sums,
    }


def fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def seed1_rows(seed1: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """The filter run of seed 1 alone (the demo's run), the write-up's one seed of 12 steps."""
    if seed1 is None:
        return []
    return [
        (
            "filter, seed 1 alone (the demo's run)",
            f"dropped {seed1['dropped_min']}-{seed1['dropped_max']}, median {fmt(seed1['dropped_median'])}; "
            f"{seed1['one_batch_steps']} one-batch, {seed1['two_batch_steps']} two-batch of {seed1['steps']}",
            f"dropped {WRITE_UP['dropped_range']}, median {WRITE_UP['dropped_median']}; "
            f"{WRITE_UP['one_batch_steps'].split()[0]} one-batch, {WRITE_UP['two_batch_steps'].split()[0]} two-batch",
        )
    ]


def render(figures: dict[str, Any]) -> str:
    r = figures["rewards"]
    n = len(figures["seeds"])

    def seeds3(values: list[float]) -> str:
        return " ".join(f"{v:.3f}" for v in values)

    rows = [
        (
            "plain: zero-variance groups per step",
            f"{figures['plain_zero_std_share']:.0%} of 32 ({fmt(figures['plain_zero_std_all_right'])} all right, "
            f"{fmt(figures['plain_zero_std_all_wrong'])} all wrong)",
            f"{WRITE_UP['plain_zero_std_share']}, {WRITE_UP['plain_zero_std_split']}",
        ),
        (
            "plain: median rollout",
            f"{fmt(figures['plain_median_rollout_s'])} s",
            f"{WRITE_UP['plain_median_rollout_s']} s",
        ),
        (
            "filter O=48: dropped per step",
            f"{figures['dropped_min']}-{figures['dropped_max']} (10th-90th pct {fmt(figures['dropped_p10'], 0)}-"
            f"{fmt(figures['dropped_p90'], 0)}), median {fmt(figures['dropped_median'])}",
            f"{WRITE_UP['dropped_range']}, median {WRITE_UP['dropped_median']}",
        ),
        (
            "filter: dropped groups all right",
            f"{figures['dropped_all_right_share']:.0%}",
            WRITE_UP["dropped_all_right_share"],
        ),
        (
            "filter: one-batch steps",
            f"{figures['one_batch_steps']} of {figures['filter_steps']}, median {fmt(figures['one_batch_median_s'])} s, "
            f"{fmt(figures['one_batch_ratio'], 2)}x plain",
            f"{WRITE_UP['one_batch_steps']}, {WRITE_UP['one_batch_median_s']} s, {WRITE_UP['one_batch_ratio']}x",
        ),
        (
            "filter: two-batch steps",
            f"{figures['two_batch_steps']} of {figures['filter_steps']}, median {fmt(figures['two_batch_median_s'])} s, "
            f"{fmt(figures['two_batch_ratio'], 2)}x plain",
            f"{WRITE_UP['two_batch_steps']}, {WRITE_UP['two_batch_median_s']} s, {WRITE_UP['two_batch_ratio']}x",
        ),
        (
            "filter: steps of three or more batches",
            f"{figures['more_batch_steps']} of {figures['filter_steps']}",
            WRITE_UP["more_batch_steps"],
        ),
        *seed1_rows(figures["seed1_filter"]),
        ("plain: reward, 12-step mean per seed", seeds3(r["plain"]), f"{WRITE_UP['plain_reward_mean']}"),
        ("plain: reward, first 4 steps", seeds3(r["plain4"]), f"{WRITE_UP['plain_reward_first4']}"),
        ("filter: unfiltered reward, 12-step mean", seeds3(r["filter"]), f"{WRITE_UP['filter_unfiltered_mean']}"),
        ("filter: unfiltered reward, first 4 steps", seeds3(r["filter4"]), f"{WRITE_UP['filter_unfiltered_first4']}"),
        (
            "filter's unfiltered reward above plain's",
            f"{figures['filter_above_plain']} of {n} seeds",
            WRITE_UP["filter_above_plain"],
        ),
        ("plain-48: reward, 12-step mean", seeds3(r["plain48"]), WRITE_UP["baseline_reward_range"]),
        (
            "abort bias, filter / plain-48 (model only)",
            f"{figures['abort_bias']['filter']:+.3f} / {figures['abort_bias']['plain48']:+.3f} "
            "(judged answers minus all submitted)",
            "not in any log",
        ),
        (
            "sum of step times, plain / filter",
            f"{mean(figures['step_time_sum_min']['plain']):.0f} / {mean(figures['step_time_sum_min']['filter']):.0f}"
            " min (no pauses)",
            f"{WRITE_UP['plain_step_time_sum_min'].split()[0]} / {WRITE_UP['filter_step_time_sum_min']}",
        ),
    ]
    width = max(len(name) for name, _, _ in rows)
    sim_width = max(len(sim) for _, sim, _ in rows)
    head = f"sim: {n} seeds x {figures['steps']} steps; write-up: seed 1 x 12 steps"
    lines = [head, "", f"{'figure':<{width}}  {'sim':<{sim_width}}  write-up", "-" * (width + sim_width + 30)]
    lines += [f"{name:<{width}}  {sim:<{sim_width}}  {lab}" for name, sim, lab in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    args = parser.parse_args()
    started = time.perf_counter()
    figures = calibrate(args.seeds, args.steps)
    figures["cpu_seconds"] = round(time.perf_counter() - started, 2)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(render(figures))
    print(f"\n{3 * len(args.seeds)} runs simulated and parsed in {figures['cpu_seconds']} s")


if __name__ == "__main__":
    main()
