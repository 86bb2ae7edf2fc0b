"""The power analysis of `harness plan seeds`: how many seeds per condition a difference in mean reward needs.

From the spread between seeds, by the same functions the summary's
across-seed comparisons use (`harness.stats.seeds`); with an AdaStop design,
also the seeds it is expected to use (`harness.stats.adaptive`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

from harness.errors import HarnessError
from harness.stats import seeds
from harness.stats.adaptive import AdaptivePlan, planned_seeds
from harness.stats.seeds import SeedsNeeded

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

EFFECT_GIVEN = "given (--effect)"
EFFECT_DEFAULT = "the default"  # seeds.DEFAULT_EFFECT, the summary's (docs/summary.md, "Across seeds")


@dataclass(frozen=True)
class SeedsPlan:
    """How many seeds per condition a difference in mean reward needs (`harness plan seeds`).

    The numbers are `harness.stats.seeds.seeds_needed` and `power`, the functions
    behind the summary's across-seed comparisons.
    """

    effect: float
    sd: float
    sd_from: str  # where the standard deviation across seeds came from
    needed: SeedsNeeded
    table: Sequence[tuple[int, float]]  # (seeds per condition, power)
    alpha: float
    power: float
    effect_from: str = EFFECT_GIVEN  # EFFECT_GIVEN, or EFFECT_DEFAULT
    adaptive: Optional[AdaptivePlan] = None  # an AdaStop design's expected seeds (harness.stats.adaptive)

    def to_dict(self) -> JSONObject:
        """The `--json` document."""
        return {
            "effect": self.effect,
            "effect_from": self.effect_from,
            "sd": self.sd,
            "sd_from": self.sd_from,
            "alpha": self.alpha,
            "power": self.power,
            "seeds_needed": self.needed.seeds,
            "why": self.needed.why,
            "table": [{"seeds": n, "power": p} for n, p in self.table],
            "adaptive": dict(self.adaptive.to_dict()) if self.adaptive is not None else None,
        }


def plan_seeds(
    effect: float,
    sd: float,
    sd_from: str,
    effect_from: str = EFFECT_GIVEN,
    adaptive: Optional[tuple[int, int]] = None,
) -> SeedsPlan:
    """Seeds per condition for 80% power at alpha 0.05 (two-sided) to detect `effect`, and power by seeds; with
    `adaptive` (n, K), also the seeds an AdaStop design with them is expected to use (by simulation)."""
    if not (math.isfinite(effect) and effect > 0.0):
        raise HarnessError(f"--effect must be a difference above 0, not {effect}")
    if not (math.isfinite(sd) and sd >= 0.0):
        raise HarnessError(f"the standard deviation across seeds must be 0 or more, not {sd}")
    needed = seeds.seeds_needed(effect, sd)
    rows: list[int] = list(seeds.POWER_TABLE_SEEDS)
    if needed.seeds is not None and needed.seeds not in rows:
        rows = sorted([*rows, needed.seeds])
    table = [(n, seeds.power(n, effect, sd)) for n in rows] if sd > 0.0 else []
    expected = planned_seeds(effect, sd, *adaptive) if adaptive is not None and sd > 0.0 else None
    return SeedsPlan(effect, sd, sd_from, needed, table, seeds.ALPHA, seeds.POWER, effect_from, expected)
