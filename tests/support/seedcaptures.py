"""Hand-made captures of several seeds per condition, and the seeds a t-test needs, for the across-seed tests.

`write_run` writes one run's capture as the harness writes it (status.json,
manifest.json with the resolved experiment and the trainer's argv, args.json,
metrics.jsonl), with the rewards, rollout times and dropped groups given, so
a test can work out every figure by hand. The set `THREE_CONDITIONS` is
three conditions of 3 to 5 seeds: the filter (4 seeds), plain (3) and
plain-48 (5), 6 steps each; the filter is compared with plain and with all
three baselines. `seeds_for_power` works out the seeds needed independently
of harness.stats.seeds (a plain search over scipy.stats' noncentral t).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional, Sequence

FILTER_FLAGS = (
    "--dynamic-sampling-filter-path miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter "
    "--over-sampling-batch-size 48"
)
T0 = 1_800_000_000  # seconds: 2027-01-15


def stamp(seconds: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(T0 + seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def run_name(experiment: str, seed: int) -> str:
    return experiment if seed == 1 else f"{experiment}-s{seed}"


def write_run(
    root: Path,
    experiment: str,
    seed: int,
    rewards: Sequence[Optional[float]],
    *,
    filter_on: bool = False,
    steps_expected: Optional[int] = None,
    rollout_times: Optional[Sequence[float]] = None,
    dropped: Optional[Sequence[tuple[int, int]]] = None,  # (all right, all wrong) per step, filter runs
    compare: Optional[dict[str, Any]] = None,
    state: str = "succeeded",
    simulated: bool = False,
    time_scale: float = 1,
    extra_args: str = "",
    name: Optional[str] = None,
    start: Optional[dict[str, Any]] = None,
) -> Path:
    """One run's capture under `root`; returns its directory. `start`: the manifest's `guard.start` (how it started)."""
    name = name or run_name(experiment, seed)
    steps = steps_expected if steps_expected is not None else len(rewards)
    run = root / name
    run.mkdir(parents=True)
    extra = " ".join(part for part in (FILTER_FLAGS if filter_on else "", extra_args) if part)
    image = "miles-gb10-lab/sim:latest" if simulated else "miles-gb10-lab:latest"
    experiment_doc = {
        "name": experiment,
        "extends": "plain" if experiment != "plain" else None,
        "description": "hand-made",
        "seed": seed,
        "steps": steps,
        "image": image,
        "miles": {"args": {}, "extra_args": extra},
        "container": {"gpus": "none" if simulated else "all", "env": {"HARNESS_SIM_TIME_SCALE": str(time_scale)}}
        if simulated
        else {"gpus": "all", "env": {}},
        "guard": {"sensor": "sim" if simulated else "auto"},
        "compare": compare,
        "limits": {"max_minutes": 240},
    }
    argv = ["python3", "train.py", "--rollout-batch-size", "32", "--n-samples-per-prompt", "8"]
    argv += ["--num-rollout", str(steps), "--seed", str(seed), "--rollout-seed", str(seed), *extra.split()]
    manifest = {
        "run": name,
        "run_id": f"{name}-0000",
        "time_scale": time_scale,
        "image": image,
        "experiment": experiment_doc,
        "trainer_argv": argv,
    }
    if start is not None:
        manifest["guard"] = {"guarded": True, "picked": "sim" if simulated else "nvml", "start": start}
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "args.json").write_text(
        json.dumps(
            {
                "rollout_batch_size": 32,
                "over_sampling_batch_size": 48 if filter_on else None,
                "n_samples_per_prompt": 8,
                "dynamic_sampling_filter_path": "miles.rollout.filter_hub.common_filters.x" if filter_on else None,
            }
        )
    )
    lines, t = [], 10.0
    for step, reward in enumerate(rewards):
        rollout = rollout_times[step] if rollout_times is not None else 60.0
        t += rollout
        metrics: dict[str, Any] = {"perf/rollout_time": rollout, "perf/step_time": rollout + 30.0}
        key = "rollout/raw_reward_unfiltered" if filter_on else "rollout/raw_reward"
        if reward is not None:
            metrics[key] = reward
        if filter_on:
            metrics["rollout/raw_reward"] = 0.5  # the kept groups' reward: never the one compared
            right, wrong = dropped[step] if dropped is not None else (10, 4)
            metrics["rollout/dynamic_filter/drop_zero_std_1"] = right
            metrics["rollout/dynamic_filter/drop_zero_std_0"] = wrong
        else:
            metrics["rollout/zero_std/count_1"] = 8
            metrics["rollout/zero_std/count_0"] = 3
        lines.append(
            {
                "step": step,
                "complete": True,
                "t_rollout_end": stamp(t),
                "t_step_end": stamp(t + 30.0),
                "metrics": metrics,
            }
        )
        t += 30.0
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (run / "status.json").write_text(
        json.dumps(
            {
                "run": name,
                "run_id": f"{name}-0000",
                "state": state,
                "exit_code": 0 if state == "succeeded" else 130,
                "started_at": stamp(0),
                "ended_at": stamp(t + 5),
                "steps_expected": steps,
                "steps_complete": len(rewards),
                "error": None if state == "succeeded" else "interrupted by SIGINT",
            }
        )
    )
    return run


# Per seed, 6 steps of reward: the numbers the tests work every figure out from.
FILTER_REWARDS = {
    1: [0.66, 0.70, 0.68, 0.72, 0.71, 0.69],
    2: [0.64, 0.66, 0.69, 0.70, 0.68, 0.71],
    3: [0.70, 0.69, 0.73, 0.71, 0.74, 0.72],
    4: [0.62, 0.67, 0.66, 0.70, 0.69, 0.70],
}
PLAIN_REWARDS = {
    1: [0.60, 0.64, 0.66, 0.65, 0.67, 0.66],
    2: [0.63, 0.61, 0.64, 0.66, 0.65, 0.68],
    3: [0.58, 0.62, 0.63, 0.61, 0.64, 0.65],
}
PLAIN48_REWARDS = {
    1: [0.66, 0.65, 0.64, 0.69, 0.67, 0.66],
    2: [0.61, 0.62, 0.68, 0.66, 0.64, 0.63],
    3: [0.64, 0.66, 0.65, 0.62, 0.66, 0.67],
    4: [0.60, 0.63, 0.65, 0.64, 0.62, 0.66],
    5: [0.65, 0.67, 0.66, 0.68, 0.66, 0.69],
}
FILTER_DROPS = {seed: [(8 + seed + step, 2 + step % 3) for step in range(6)] for seed in FILTER_REWARDS}
ROLLOUTS = {seed: [60.0 + 10 * seed + 5 * step for step in range(6)] for seed in range(1, 6)}
COMPARE = {"baseline": "plain", "baselines": ["plain", "plain-48", "plain-48-s2"]}


def write_three_conditions(root: Path, *, simulated: bool = False, time_scale: float = 1) -> Path:
    """The filter (4 seeds), plain (3) and plain-48 (5), 6 steps each, under `root`."""
    for seed, rewards in FILTER_REWARDS.items():
        write_run(
            root,
            "e2b-dapo-filter",
            seed,
            rewards,
            filter_on=True,
            dropped=FILTER_DROPS[seed],
            rollout_times=ROLLOUTS[seed],
            compare=COMPARE,
            simulated=simulated,
            time_scale=time_scale,
        )
    for seed, rewards in PLAIN_REWARDS.items():
        write_run(
            root, "plain", seed, rewards, rollout_times=ROLLOUTS[seed], simulated=simulated, time_scale=time_scale
        )
    for seed, rewards in PLAIN48_REWARDS.items():
        write_run(
            root,
            "plain-48",
            seed,
            rewards,
            extra_args="--over-sampling-batch-size 48",
            rollout_times=ROLLOUTS[seed],
            simulated=simulated,
            time_scale=time_scale,
        )
    return root


def seeds_for_power(effect: float, sd: float) -> int:
    """The fewest seeds per side whose two-sided t-test at 0.05 has 80% power: a plain search over the nct."""
    import scipy.stats

    n = 2
    while True:
        dof = 2 * n - 2
        critical = scipy.stats.t.ppf(0.975, dof)
        shift = abs(effect) / sd * math.sqrt(n / 2)
        if scipy.stats.nct.sf(critical, dof, shift) + scipy.stats.nct.cdf(-critical, dof, shift) >= 0.8:
            return n
        n += 1
