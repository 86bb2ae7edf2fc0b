"""Write harness/stats/expected_table.py: the seeds an AdaStop design of the defaults expects, by simulation.

For each effect in standard deviations (effect / SD) on a grid, `expected_seeds` simulates REPETITIONS
comparisons of two experiments through the package's comparators (harness.stats.adaptive) from one fixed random
state, and the table keeps the mean seeds, its standard error and the power. `harness plan seeds` interpolates in
it for the default design (n 5, K 5, alpha 0.05, B 10,000) and simulates any other design when asked. Run again
when the comparator or its defaults change (minutes: every point is a few hundred comparisons):

    .venv/bin/python scripts/adaptive-table.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.stats import adaptive  # noqa: E402

GRID = tuple(i / 8 for i in range(25)) + (3.5, 4.0)  # effect / SD: 0 to 3 in eighths, then 3.5 and 4
REPETITIONS = 200


def main() -> None:
    rows = []
    for shift in GRID:
        plan = adaptive.expected_seeds(shift, 1.0, repetitions=REPETITIONS)
        rows.append((shift, round(plan.expected_seeds, 4), round(plan.standard_error, 4), round(plan.power, 4)))
        print(
            f"effect/SD {shift:5.3f}: {plan.expected_seeds:6.2f} seeds (SE {plan.standard_error:.2f}), "
            f"power {plan.power:.3f}",
            flush=True,
        )
    body = "\n".join(f"    {row!r}," for row in rows)
    design = (
        f"n {adaptive.DEFAULT_PER_INTERIM}, K {adaptive.DEFAULT_INTERIMS}, alpha {adaptive.DEFAULT_ALPHA}, "
        f"B {adaptive.DEFAULT_PERMUTATIONS:,}"
    )
    text = f'''"""The seeds an AdaStop design of the defaults expects, by simulation (written by scripts/adaptive-table.py).

Rows: (effect / SD, mean seeds per experiment, its standard error, power), each from {REPETITIONS} simulated
comparisons of two experiments ({design}), values drawn from random state {adaptive.RANDOM_STATE}.
"""

REPETITIONS = {REPETITIONS}
RANDOM_STATE = {adaptive.RANDOM_STATE}
DESIGN = ({adaptive.DEFAULT_PER_INTERIM}, {adaptive.DEFAULT_INTERIMS}, {adaptive.DEFAULT_ALPHA}, {adaptive.DEFAULT_PERMUTATIONS})
ROWS: tuple[tuple[float, float, float, float], ...] = (
{body}
)
'''
    (ROOT / "harness" / "stats" / "expected_table.py").write_text(text)


if __name__ == "__main__":
    main()
