#!/usr/bin/env python3
"""The comparator's time per interim: 3 experiments, n = 5, K = 5, B = 10,000, every comparison (three).

Goal: under 0.5 s per interim, so a decision never waits on arithmetic (a GB10 seed takes most of an hour).
Each repetition feeds the package's two comparators (harness.stats.adaptive) interims of values drawn alike for
the three experiments, so no comparison is decided early and every interim is as costly as it gets; a second
case adds a difference, so some are. Prints the wall and CPU seconds of each interim (the worst, the median, the
mean) and the replay of a whole record; nothing is asserted. Run from the repository root:

    .venv/bin/python bench/decide.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.stats.adaptive import AdaptiveComparison, Design, replay  # noqa: E402

GOAL_S = 0.5
EXPERIMENTS = ("e2b-dapo-filter", "plain", "plain-48")


def one(shift: float, seed: int) -> tuple[list[float], list[float], list[dict[str, list[float]]]]:
    """(wall s per interim, CPU s per interim, the values fed) of one comparison run to its end."""
    import numpy as np

    rng = np.random.default_rng(seed)
    comparison = AdaptiveComparison(Design(EXPERIMENTS, per_interim=5, interims=5, permutations=10_000))
    walls, cpus, fed = [], [], []
    while not comparison.finished:
        values = {
            name: rng.normal(shift * (name == EXPERIMENTS[0]), 1.0, 5).tolist()
            for name in comparison.open_experiments()
        }
        fed.append(values)
        wall, cpu = time.perf_counter(), time.process_time()
        comparison.interim(values)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus, fed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="comparisons per case")
    args = parser.parse_args()
    one(0.0, 0)  # imports and first calls, out of the figures
    print(f"{'case':<28} {'interims':>8} {'worst s':>8} {'median s':>9} {'mean s':>7} {'mean CPU s':>10}")
    records = []
    for label, shift in (("no difference (all K)", 0.0), ("a difference of 1.5 SD", 1.5)):
        walls: list[float] = []
        cpus: list[float] = []
        for seed in range(1, args.repeat + 1):
            wall, cpu, fed = one(shift, seed)
            walls += wall
            cpus += cpu
            records.append(fed)
        print(
            f"{label:<28} {len(walls):>8} {max(walls):>8.3f} {statistics.median(walls):>9.3f} "
            f"{statistics.fmean(walls):>7.3f} {statistics.fmean(cpus):>10.3f}"
        )
    start = time.perf_counter()
    replay(Design(EXPERIMENTS), records[0])
    print(f"replay of a record of {len(records[0])} interims: {time.perf_counter() - start:.3f} s")
    print(f"goal: under {GOAL_S} s per interim")


if __name__ == "__main__":
    main()
