#!/usr/bin/env python3
"""How the summarizer scales: synthetic captures of 10 and 100 runs x 100 and 1,000 steps.

Goal: 100 runs x 1,000 steps (100,000 step rows) summarized in under 5 s,
growing about linearly. Prints one table; nothing is asserted (see the test
suite for correctness). Run from the repository root:

    .venv/bin/python bench/summarize_scale.py [--cli] [--repeat N]

Each run gets Miles-shaped metrics (about 30 keys a step: timers, throughput,
response lengths, the filter's drop keys or the zero-variance counts) and a
pause window every tenth step, half of them cutting a rollout, some touching or
overlapping. `summarize` is the core (read every capture, rows, aggregates,
comparisons); `write` is the JSON file; `--cli` also times `harness summarize
--no-figures` end to end in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.summary.summarize import summarize, write_summary  # noqa: E402
from harness.times import format_time_us, parse_time_us  # noqa: E402

T0 = parse_time_us("2026-11-29T08:00:00Z")
SIZES = [(10, 100), (10, 1000), (100, 100), (100, 1000)]


def stamp(seconds: float) -> str:
    return format_time_us(T0 + int(seconds * 1_000_000))


def make_run(root: Path, index: int, steps: int, rng: random.Random) -> None:
    filtered = index % 2 == 1
    name = f"run-{index:03d}"
    run = root / name
    run.mkdir()
    experiment = {
        "name": "filter" if filtered else "plain", "extends": None, "description": "synthetic", "seed": index + 1,
        "steps": steps, "image": "x", "miles": {"args": {}, "extra_args": ""}, "container": {}, "guard": {},
        "compare": {"baseline": "run-000", "baselines": ["run-000", "run-002", "run-004"]} if filtered else None,
        "limits": {"max_minutes": 240},
    }
    (run / "manifest.json").write_text(json.dumps({"run": name, "run_id": name, "time_scale": 1, "experiment": experiment}))
    (run / "args.json").write_text(json.dumps({
        "rollout_batch_size": 32, "over_sampling_batch_size": 48 if filtered else None, "n_samples_per_prompt": 8,
        "dynamic_sampling_filter_path": "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter"
        if filtered else None,
    }))
    t = 0.0
    lines, pauses = [], []
    for step in range(steps):
        rollout = rng.uniform(50, 170)
        t += rollout
        metrics = {
            "perf/rollout_time": rollout, "perf/tokens_per_gpu_per_sec": rng.uniform(800, 1200),
            "perf/longest_sample_tokens_per_sec": rng.uniform(20, 40), "perf/effective_tokens_per_gpu_per_sec": 900.0,
            "rollout/response_len/mean": rng.uniform(200, 600), "rollout/response_len/median": 300.0,
            "rollout/response_len/max": 1024, "rollout/response_len/min": 12, "rollout/truncated_ratio": rng.random() / 10,
            "rollout/raw_reward": rng.random(), "rollout/rewards": 0.0, "rollout/response_lengths": 400.0,
            "rollout/truncated": 0.01, "rollout/log_probs": -0.4, "rollout/ref_log_probs": -0.41,
            "rollout/advantages": 0.0, "rollout/returns": 0.0, "perf/train_wait_time": rollout,
            "perf/train_time": 30.0, "perf/actor_train_time": 20.0, "perf/update_weights_time": 4.0,
            "perf/sleep_time": 1.0, "perf/wake_up_time": 1.0, "perf/step_time": rollout + 30.0,
        }
        if filtered:
            metrics["rollout/dynamic_filter/drop_zero_std_1"] = rng.randint(8, 36)
            metrics["rollout/dynamic_filter/drop_zero_std_0"] = rng.randint(0, 12)
            metrics["rollout/raw_reward_unfiltered"] = rng.random()
        else:
            metrics["rollout/zero_std/count_0"] = rng.randint(0, 6)
            metrics["rollout/zero_std/count_1"] = rng.randint(6, 16)
        lines.append(json.dumps({"step": step, "complete": True, "t_rollout_end": stamp(t),
                                 "t_step_end": stamp(t + 30.0), "metrics": metrics}))
        if step % 10 == 3:  # a window cutting this rollout, and sometimes one overlapping it
            start = t - rng.uniform(0, rollout)
            pauses.append({"start": stamp(start), "end": None, "reason": "hot", "peak_c": 86.0})
            pauses.append({"start": stamp(start), "end": stamp(start + 40.0), "reason": "hot", "peak_c": 86.4})
            if step % 20 == 3:
                pauses.append({"start": stamp(start + 20.0), "end": stamp(start + 55.0), "reason": "hot", "peak_c": 87.0})
        t += 30.0
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run / "pauses.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pauses))
    (run / "status.json").write_text(json.dumps({
        "run": name, "run_id": name, "state": "succeeded", "exit_code": 0, "started_at": stamp(0),
        "ended_at": stamp(t), "steps_expected": steps, "steps_complete": steps, "error": None,
    }))


def best_of(repeat: int, fn):  # noqa: ANN001, ANN201
    times, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", action="store_true", help="also time `harness summarize --no-figures` in a new process")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is shown")
    args = parser.parse_args()

    header = f"{'runs':>5} {'steps':>6} {'rows':>8} {'summarize s':>12} {'us/row':>7} {'write s':>8} {'MB':>6}"
    if args.cli:
        header += f" {'cli s':>7}"
    print(header)
    for runs, steps in SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "gpu"
            root.mkdir()
            rng = random.Random(runs * 100_003 + steps)
            for i in range(runs):
                make_run(root, i, steps, rng)
            seconds, document = best_of(args.repeat, lambda: summarize(root))
            rows = sum(len(r["steps"]) for r in document["runs"].values())
            out = root / "summary" / "miles-gb10-lab.json"
            write_seconds, _ = best_of(args.repeat, lambda: write_summary(document, out))
            line = (f"{runs:>5} {steps:>6} {rows:>8} {seconds:>12.3f} {seconds / rows * 1e6:>7.1f} "
                    f"{write_seconds:>8.3f} {out.stat().st_size / 1e6:>6.1f}")
            if args.cli:
                harness = Path(sys.executable).with_name("harness")
                start = time.perf_counter()
                subprocess.run([str(harness), "summarize", "--capture-dir", str(root), "--no-figures", "--json"],
                               check=True, capture_output=True)
                line += f" {time.perf_counter() - start:>7.3f}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
