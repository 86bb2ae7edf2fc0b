"""How fast the Miles log parser reads a log: a benchmark that prints its figures (not a timed test).

Builds a large `container.log` in the real mix (Docker timestamp on every
line; mostly noise: SGLang access lines, tqdm bars, timers, memory dumps; the
metric lines of one step every few hundred lines) and prints lines per second:

- end to end: a `harness parse-log FILE --json` process, start-up included;
- in process, batch: `parse_file(path)` (chunked reader that skips noise);
- in process, live: `LogParser.feed(line)` on every line, as the runner does;
- `harness --help`: median wall time of 5 runs.

Goal: at least 500,000 lines/s end to end on a 2-core machine; `--help`
under 0.4 s.

    .venv/bin/python bench/parse_throughput.py [--lines 2000000] [--noise-per-step 400]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RM = "(RolloutManager pid=2411)"
TA = "(MegatronTrainRayActor pid=2590)"


def rollout_perf(n: int, rng: random.Random) -> str:
    keys = {
        "perf/rollout_time": round(rng.uniform(50, 170), 3),
        "perf/tokens_per_gpu_per_sec": round(rng.uniform(1500, 2200), 2),
        "perf/longest_sample_tokens_per_sec": round(rng.uniform(20, 40), 2),
        "rollout/dynamic_filter/drop_zero_std_1": rng.randint(8, 36),
        "rollout/dynamic_filter/drop_zero_std_0": rng.randint(0, 12),
        "rollout/raw_reward_unfiltered": rng.random(),
        "rollout/zero_std/all_zero_percentage": 0.0,
        "rollout/zero_std/all_one_percentage": 0.0,
        "rollout/truncated_ratio": rng.random() / 10,
    }
    for stat in ("mean", "median", "max", "min"):
        keys[f"rollout/response_len/{stat}"] = round(rng.uniform(100, 8192), 1)
    for i in range(20):
        keys[f"rollout/extra/metric_{i}"] = rng.random()
    return f"{RM} [2026-10-02 09:14:03.512 rollout_manager] metrics.py:88 - perf {n}: {keys!r}"


def train_lines(n: int, rng: random.Random) -> list[str]:
    rollout = {"rollout/raw_reward": rng.random(), "rollout/rewards": 0.0, "rollout/response_lengths": 512.0,
               "rollout/truncated": 0.02, "rollout/log_probs": -0.4, "rollout/advantages": 0.0}
    out = [f"{TA} [2026-10-02 09:14:05.101 actor_cell0_rank0] log_utils.py:40 - rollout {n}: {rollout!r}"]
    for m in (2 * n, 2 * n + 1):
        step = {"train/loss": rng.random() / 10, "train/pg_loss": rng.random() / 10, "train/entropy_loss": 0.3,
                "train/pg_clipfrac": 0.01, "train/ppo_kl": 0.0, "train/grad_norm": 0.3, "train/lr-pg_0": 1e-06,
                "train/step": m}
        for where in ("model.py:512", "train_metric_utils.py:77"):  # Megatron prints each step line twice
            out.append(f"{TA} [2026-10-02 09:14:20.900 actor_cell0_rank0] {where} - step {m}: {step!r}")
    perf = {"perf/train_wait_time": 60.1, "perf/train_time": 21.9, "perf/actor_train_time": 15.2,
            "perf/update_weights_time": 3.1, "perf/sleep_time": 0.5, "perf/wake_up_time": 0.7, "perf/step_time": 82.0}
    out.append(f"{TA} [2026-10-02 09:14:25.300 actor_cell0_rank0] train_metric_utils.py:120 - perf {n}: {perf!r}")
    return out


def noise_line(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.80:
        return f'{RM} INFO:     127.0.0.1:{rng.randint(40000, 60000)} - "POST /generate HTTP/1.1" 200 OK'
    if roll < 0.88:
        return (f"{RM} [2026-10-02 09:13:{rng.randint(10, 59)}.{rng.randint(100, 999)} rollout_manager] "
                f"sglang_engine.py:210 - Decode batch. #running-req: {rng.randint(1, 384)}, #token: "
                f"{rng.randint(1000, 90000)}, token usage: 0.{rng.randint(10, 99)}, gen throughput (token/s): "
                f"{rng.uniform(500, 2500):.2f}, #queue-req: 0")
    if roll < 0.93:
        bars = "\r".join(f"Rollout generation: {p:3d}%|{'#' * (p // 10):10s}| {p * 48 // 100}/48" for p in (0, 50, 100))
        return f"{RM} {bars}"
    if roll < 0.97:
        return f"{TA} [2026-10-02 09:14:21.000 actor_cell0_rank0] timer.py:24 - Timer train end (elapsed: {rng.random():.1f}s)"
    return (f"{TA} [2026-10-02 09:14:04.020 actor_cell0_rank0] memory_utils.py:41 - [Rank 0] Memory-Usage "
            f"before train: {{'gpu': '0', 'total_GB': 119.7, 'free_GB': {rng.uniform(10, 60):.1f}, 'used_GB': 79.5}}")


def build_log(path: Path, lines: int, noise_per_step: int, seed: int = 7) -> int:
    """Write a container.log of about `lines` lines; returns the exact count."""
    rng = random.Random(seed)
    written = 0
    step = 0
    with path.open("w", encoding="utf-8", newline="\n") as out:
        while written < lines:
            block = [noise_line(rng) for _ in range(noise_per_step)]
            block.insert(noise_per_step // 2, rollout_perf(step, rng))
            block.extend(train_lines(step, rng))
            for text in block:
                seconds = written // 1000
                out.write(f"2026-11-29T{7 + seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}."
                          f"{written % 1000:03d}948044Z {text}\n")
            written += len(block)
            step += 1
    return written


def harness_command() -> list[str]:
    script = Path(sys.executable).parent / "harness"
    if script.exists():
        return [str(script)]
    found = shutil.which("harness")
    if found:
        return [found]
    return [sys.executable, "-c", "from harness.cli import main; main()"]


def wall(command: list[str], stdout: int = subprocess.DEVNULL) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=stdout, cwd=REPO)
    return time.perf_counter() - start


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--lines", type=int, default=2_000_000, help="size of the generated log (lines)")
    options.add_argument("--noise-per-step", type=int, default=400, help="noise lines between two steps")
    options.add_argument("--repeat", type=int, default=3, help="runs per figure (the best is kept)")
    options.add_argument("--log", type=Path, help="use this log instead of generating one")
    args = options.parse_args()

    from harness.mileslog import LogParser, parse_file

    tmp = Path(tempfile.mkdtemp(prefix="parse-bench-"))
    try:
        if args.log:
            log = args.log
            with log.open("rb") as handle:
                lines = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
        else:
            log = tmp / "container.log"
            lines = build_log(log, args.lines, args.noise_per_step)
        size_mb = log.stat().st_size / 1e6
        print(f"log: {lines:,} lines, {size_mb:.0f} MB; cpus: {os.cpu_count()}; python {sys.version.split()[0]}")

        command = harness_command() + ["parse-log", str(log), "--json"]
        end_to_end = min(wall(command) for _ in range(args.repeat))
        batch = None
        for _ in range(args.repeat):
            start = time.perf_counter()
            parsed = parse_file(log)
            elapsed = time.perf_counter() - start
            batch = elapsed if batch is None else min(batch, elapsed)
        with log.open(encoding="utf-8", errors="replace", newline="\n") as handle:
            text_lines = handle.read().split("\n")
        if text_lines and text_lines[-1] == "":
            text_lines.pop()
        live = None
        for _ in range(args.repeat):
            parser = LogParser()
            feed = parser.feed
            start = time.perf_counter()
            for line in text_lines:
                feed(line)
            parser.finish()
            elapsed = time.perf_counter() - start
            live = elapsed if live is None else min(live, elapsed)
        agree = json.dumps(parser.result().to_json()) == json.dumps(parsed.to_json())
        del text_lines
        help_times = [wall(harness_command() + ["--help"]) for _ in range(5)]

        complete = sum(1 for record in parsed.steps if record.complete)
        print(f"steps read: {len(parsed.steps)} ({complete} complete), problems: {len(parsed.problems)}, "
              f"line by line and batch agree: {'yes' if agree else 'NO'}")
        print(f"end to end  (harness parse-log --json): {lines / end_to_end:>12,.0f} lines/s  ({end_to_end:.2f} s)")
        print(f"in process  (parse_file, batch)       : {lines / batch:>12,.0f} lines/s  ({batch:.2f} s)")
        print(f"in process  (LogParser.feed per line) : {lines / live:>12,.0f} lines/s  ({live:.2f} s)")
        print(f"harness --help median of 5            : {statistics.median(help_times):.3f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
