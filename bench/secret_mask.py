"""What masking the known secrets costs the log pump: CPU per line, and per wall second at a run's line rate.

The log pump masks each piece of whole lines it writes (harness.secrets.KnownSecrets, run/execute.py LogPump)
before anything reads or writes it. This times that step alone on Miles-shaped lines (the fake trainer's, with
its long metric dicts), in the pieces a burst makes (`--burst` lines), for a run that passed `--secrets` values:
first with none of them in the output (every run, every line), then with one in every 100th line. Prints
microseconds per line and the CPU seconds per wall second at `--rate` lines a second (the pump's whole budget,
TensorBoard included, is 0.05: docs/architecture.md). Also the rule's other pass, `redact_userinfo`, per
manifest-sized text, which the harness runs once per written value, not per line.

Usage: python bench/secret_mask.py [--lines 200000] [--burst 40] [--secrets 4] [--rate 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.secrets import KnownSecrets, redact_userinfo  # noqa: E402

ROLLOUT = "\x1b[36m(RolloutManager pid=311)\x1b[0m [2026-12-03 10:00:00] metrics.py:123 - perf {n}: "
LINES = [
    ROLLOUT + "{'perf/rollout_time': 50.0, 'rollout/raw_reward_unfiltered': 0.61, 'rollout/truncated_ratio': 0.02}",
    "(MegatronTrainRayActor pid=412) [2026-12-03 10:00:01] log_utils.py:90 - step {n}: {'train/step': 3, 'loss': 0.1}",
    'INFO:     127.0.0.1:51234 - "POST /generate HTTP/1.1" 200 OK',
    "(SGLangEngine pid=999) Decode batch. #running-req: 256, #token: 81920, token usage: 0.41, gen throughput: 9000",
]


def pieces(count: int, burst: int, secret: str, every: int) -> list[str]:
    """`count` lines joined in pieces of `burst`, as the pump joins them; `secret` in every `every`th line."""
    lines = [LINES[i % len(LINES)].replace("{n}", str(i)) for i in range(count)]
    if every:
        for i in range(0, count, every):
            lines[i] += f" wandb host https://u:{secret}@h"
    return ["\n".join(lines[start : start + burst]) for start in range(0, count, burst)]


def time_mask(known: KnownSecrets, texts: list[str], rounds: int = 5) -> float:
    """Median seconds over `rounds` for masking every text."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for text in texts:
            known.mask(text)
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--burst", type=int, default=40)
    parser.add_argument("--secrets", type=int, default=4)
    parser.add_argument("--rate", type=float, default=2000.0)
    args = parser.parse_args()

    values = [f"s3cret-value-{i:02d}-{'x' * (8 + 3 * i)}" for i in range(args.secrets)]
    known = KnownSecrets([*values, *(f"u:{value}" for value in values)])
    for label, every in (("no secret in the output", 0), ("a secret in every 100th line", 100)):
        texts = pieces(args.lines, args.burst, values[0], every)
        seconds = time_mask(known, texts)
        per_line_us = seconds / args.lines * 1e6
        print(
            f"{label}: {per_line_us:.3f} us a line ({args.secrets * 2} known values, pieces of {args.burst} lines); "
            f"{per_line_us * args.rate / 1e6:.5f} CPU s per wall s at {args.rate:g} lines/s"
        )

    manifest = json.dumps({"trainer_argv": [f"--flag-{i}" for i in range(200)], "url": "https://u:pw@h/x"})
    calls = 1000
    start = time.process_time()
    for _ in range(calls):
        redact_userinfo(manifest)
    each_ms = (time.process_time() - start) / calls * 1000
    print(f"redact_userinfo on a {len(manifest)}-character text holding a URL: {each_ms:.3f} ms a call")


if __name__ == "__main__":
    main()
