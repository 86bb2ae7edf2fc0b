#!/usr/bin/env python3
"""How the summarizer scales: synthetic captures of 10 and 100 runs x 100 and 1,000 steps.

Goal: `python summarize_miles.py` on 100 runs x 1,000 steps (100,000 step
rows) in at most 2 s end to end on 2 cores, growing about linearly. Prints
one table; nothing is asserted (the test suite checks correctness). Run from
the repository root:

    .venv/bin/python bench/summarize_scale.py [--repeat N] [--sizes 100x1000,...] [--figures]

Each run gets Miles-shaped metrics (about 30 keys a step: timers,
throughput, response lengths, the filter's drop keys or the zero-variance
counts) and a pause window every tenth step, half of them cutting a rollout,
some touching or overlapping; every other run is a filter run compared with
three baselines.

Columns (best of --repeat; seconds of wall time unless said):
- `read`: every capture read (`read_capture`: metrics.jsonl as columns);
- `summarize`: frames, rows, aggregates and comparisons, in this process;
- `serialize`, `write`: the JSON text, and the file written atomically;
- `e2e`: `python summarize_miles.py --no-figures` as a new process, start-up
  and the JSON file included (runs summarized in parallel where large);
  `e2e cpu`: the CPU seconds that process used (all its processes);
- with --figures, for the largest size: the script with figures, first
  drawing them all, then again with nothing changed (every figure kept).

The machine's load is printed first: the figures are only as quiet as it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.capture.files import write_bytes_atomic  # noqa: E402
from harness.capture.reader import find_runs, read_capture  # noqa: E402
from harness.summary.serialize import dumps_summary  # noqa: E402
from harness.summary.summarize import summarize_captures  # noqa: E402
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
        "name": "filter" if filtered else "plain",
        "extends": None,
        "description": "synthetic",
        "seed": index + 1,
        "steps": steps,
        "image": "x",
        "miles": {"args": {}, "extra_args": ""},
        "container": {},
        "guard": {},
        "compare": {"baseline": "run-000", "baselines": ["run-000", "run-002", "run-004"]} if filtered else None,
        "limits": {"max_minutes": 240},
    }
    (run / "manifest.json").write_text(
        json.dumps({"run": name, "run_id": name, "time_scale": 1, "experiment": experiment})
    )
    (run / "args.json").write_text(
        json.dumps(
            {
                "rollout_batch_size": 32,
                "over_sampling_batch_size": 48 if filtered else None,
                "n_samples_per_prompt": 8,
                "dynamic_sampling_filter_path": "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter"
                if filtered
                else None,
            }
        )
    )
    t = 5.0  # the container starts a few seconds after the harness wrote started_at
    lines, pauses = [], []
    for step in range(steps):
        rollout = rng.uniform(50, 170)
        t += rollout
        metrics = {
            "perf/rollout_time": rollout,
            "perf/tokens_per_gpu_per_sec": rng.uniform(800, 1200),
            "perf/longest_sample_tokens_per_sec": rng.uniform(20, 40),
            "perf/effective_tokens_per_gpu_per_sec": 900.0,
            "rollout/response_len/mean": rng.uniform(200, 600),
            "rollout/response_len/median": 300.0,
            "rollout/response_len/max": 1024,
            "rollout/response_len/min": 12,
            "rollout/truncated_ratio": rng.random() / 10,
            "rollout/raw_reward": rng.random(),
            "rollout/rewards": 0.0,
            "rollout/response_lengths": 400.0,
            "rollout/truncated": 0.01,
            "rollout/log_probs": -0.4,
            "rollout/ref_log_probs": -0.41,
            "rollout/advantages": 0.0,
            "rollout/returns": 0.0,
            "perf/train_wait_time": rollout,
            "perf/train_time": 30.0,
            "perf/actor_train_time": 20.0,
            "perf/update_weights_time": 4.0,
            "perf/sleep_time": 1.0,
            "perf/wake_up_time": 1.0,
            "perf/step_time": rollout + 30.0,
        }
        if filtered:
            metrics["rollout/dynamic_filter/drop_zero_std_1"] = rng.randint(8, 36)
            metrics["rollout/dynamic_filter/drop_zero_std_0"] = rng.randint(0, 12)
            metrics["rollout/raw_reward_unfiltered"] = rng.random()
        else:
            metrics["rollout/zero_std/count_0"] = rng.randint(0, 6)
            metrics["rollout/zero_std/count_1"] = rng.randint(6, 16)
        lines.append(
            json.dumps(
                {
                    "step": step,
                    "complete": True,
                    "t_rollout_end": stamp(t),
                    "t_step_end": stamp(t + 30.0),
                    "metrics": metrics,
                }
            )
        )
        if step % 10 == 3:  # a window cutting this rollout, and sometimes one overlapping it
            start = t - rng.uniform(0, rollout)
            pauses.append({"start": stamp(start), "end": None, "reason": "hot", "peak_c": 86.0})
            pauses.append({"start": stamp(start), "end": stamp(start + 40.0), "reason": "hot", "peak_c": 86.4})
            if step % 20 == 3:
                pauses.append(
                    {"start": stamp(start + 20.0), "end": stamp(start + 55.0), "reason": "hot", "peak_c": 87.0}
                )
        t += 30.0
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run / "pauses.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pauses))
    (run / "status.json").write_text(
        json.dumps(
            {
                "run": name,
                "run_id": name,
                "state": "succeeded",
                "exit_code": 0,
                "started_at": stamp(0),
                "ended_at": stamp(t),
                "steps_expected": steps,
                "steps_complete": steps,
                "error": None,
            }
        )
    )


def make_captures(root: Path, runs: int, steps: int) -> None:
    root.mkdir(parents=True)
    rng = random.Random(runs * 100_003 + steps)
    for i in range(runs):
        make_run(root, i, steps, rng)


def best_of(repeat: int, fn):  # noqa: ANN001, ANN201
    times, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), value


def script(root: Path, *extra: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of it and its children) of summarize_miles.py in a new process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, str(REPO / "summarize_miles.py"), "--capture-dir", str(root), *extra],
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is shown")
    parser.add_argument(
        "--sizes",
        default=",".join(f"{r}x{s}" for r, s in SIZES),
        help="runs x steps to measure, e.g. 100x1000 (default: all four)",
    )
    parser.add_argument(
        "--figures",
        action="store_true",
        help="also time the script with figures on the largest size (first draw, then unchanged)",
    )
    args = parser.parse_args()
    sizes = [tuple(int(n) for n in size.split("x")) for size in args.sizes.split(",")]

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{cores} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; best of {args.repeat}")
    print(
        f"{'runs':>5} {'steps':>6} {'rows':>8} {'read s':>7} {'summarize s':>12} {'serialize s':>12} "
        f"{'write s':>8} {'MB':>6} {'e2e s':>7} {'e2e cpu s':>10}"
    )
    for runs, steps in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "gpu"
            make_captures(root, runs, steps)
            run_dirs, _ = find_runs(root)
            read_s, captures = best_of(args.repeat, lambda: [read_capture(d) for d in run_dirs])
            summarize_s, summary = best_of(args.repeat, lambda: summarize_captures(captures))
            serialize_s, data = best_of(args.repeat, lambda: dumps_summary(summary.document))
            out = root / "summary" / "bench.json"
            write_s, _ = best_of(args.repeat, lambda: write_bytes_atomic(out, data))
            rows = sum(len(r.steps) for r in summary.document.runs.values())
            e2e = min((script(root, "--no-figures") for _ in range(args.repeat)), key=lambda t: t[0])
            print(
                f"{runs:>5} {steps:>6} {rows:>8} {read_s:>7.3f} {summarize_s:>12.3f} {serialize_s:>12.3f} "
                f"{write_s:>8.3f} {len(data) / 1e6:>6.1f} {e2e[0]:>7.3f} {e2e[1]:>10.3f}",
                flush=True,
            )
            if args.figures and (runs, steps) == sizes[-1]:
                comparisons = len(summary.document.comparisons)
                first = script(root)
                again = min((script(root) for _ in range(args.repeat)), key=lambda t: t[0])
                print(
                    f"with figures ({2 * comparisons} SVGs): first {first[0]:.3f} s, then unchanged "
                    f"{again[0]:.3f} s (cpu {again[1]:.3f} s)"
                )
                shutil.rmtree(root / "summary")
    return 0


if __name__ == "__main__":
    sys.exit(main())
