#!/usr/bin/env python3
"""How fast `harness plan` answers, from an easy drop rate to one no over-sampling size can serve.

Goal: every drop rate answered in under a second (the recommendation with
every candidate's exact figures, or at once that none up to the limit reaches
the target). Prints one table; nothing is asserted (tests/test_planner.py
checks the figures). Run from the repository root:

    .venv/bin/python bench/plan_speed.py [--cli] [--repeat N]

`plan` is the core (harness.stats.oversampling.plan, best of N); `--cli` also times
`harness plan ... --json` end to end in a fresh process.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.errors import HarnessError  # noqa: E402
from harness.stats import oversampling as planner  # noqa: E402

CASES = [
    (32, 0.5),
    (32, 0.9),
    (32, 0.95),
    (32, 0.98),
    (32, 0.99),
    (32, 0.999),
    (32, 0.9999),
    (256, 0.5),
    (256, 0.95),
    (256, 0.98),
]


def timed_plan(batch: int, drop_rate: float, repeat: int) -> tuple[float, str]:
    best = float("inf")
    answer = ""
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            result = planner.plan(batch, 1.0 - drop_rate)
            answer = f"O = {result.recommended} ({len(result.candidates)} candidates)"
        except HarnessError as err:
            answer = "none reaches 0.9: " + err.message.split(": ", 1)[1].split(";")[0]
        best = min(best, time.perf_counter() - start)
    return best, answer


def timed_cli(batch: int, drop_rate: float) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "plan",
            "--drop-rate",
            str(drop_rate),
            "--rollout-batch-size",
            str(batch),
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", action="store_true", help="also time `harness plan --json` in a fresh process")
    parser.add_argument("--repeat", type=int, default=3, help="best of N for the core")
    args = parser.parse_args()
    print(f"| B | drop rate | plan | {'CLI end to end | ' if args.cli else ''}answer |")
    print(f"|---|---|---|{'---|' if args.cli else ''}---|")
    for batch, drop_rate in CASES:
        seconds, answer = timed_plan(batch, drop_rate, args.repeat)
        cli = f"{timed_cli(batch, drop_rate):.2f} s | " if args.cli else ""
        print(f"| {batch} | {drop_rate:g} | {seconds * 1000:.1f} ms | {cli}{answer} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
