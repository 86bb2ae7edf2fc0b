"""The adaptive comparison: AdaStop's group-sequential permutation test, fed interim by interim.

AdaStop (Mathieu et al. 2023, "AdaStop: adaptive statistical testing for
sound comparisons of Deep RL agents") compares several experiments on one
value per seed: run n seeds of each, test, stop the comparisons that are
decided, run n more for the rest, for at most K interims, with the
family-wise error held at alpha. The test is the `adastop` package's own
comparator (`MultipleAgentsComparator`, by the paper's authors), never a
copy: this module feeds it and reads its state.

- **Fed as the package feeds it.** At interim k the comparator is given
  every experiment's values so far (k x n for those still in an undecided
  comparison, what they had for the others), in the design's experiment
  order; it decides each open comparison `larger`, `smaller` or
  `continue`, and at the last interim every undecided one `equal`
  (no difference found; not a proof of none).
- **Replay.** Its only state is what it was fed and its random state
  (`numpy.random.RandomState(random_state)`, drawn from in a fixed order), so
  `replay` rebuilds it exactly by feeding the recorded interims again: a
  comparison resumed after an interruption decides as one that never
  stopped.
- **Two-sided, at alpha: one comparator per direction.** The package
  rejects when the largest |difference| passes a boundary it takes from the
  upper tail of the permutation distribution of the largest *signed*
  difference, and spends the level on that tail alone: at the first
  interim (every permutation of n = 5 enumerated) its two-sided error is
  twice the level it was given, and at the later ones, where it draws one
  permutation for each that survived (about 250 for n = 5, whatever B), the
  lower tail, which it never counted, rejects more often still (given
  alpha / 2, 0.061 in 6,000 simulated comparisons of equal distributions,
  n = 5, K = 5, alpha 0.05). Its upper tail is exact. So two comparators
  run side by side, each given alpha / 2: one on the pairs as given, whose
  `larger` is taken, one on each pair reversed, whose `larger` is taken as
  `smaller`; what either decides in the tail it does not count is not a
  decision. The family-wise error is then at most alpha / 2 + alpha / 2
  (0.048 and 0.0505 in two sets of 2,000 simulated comparisons). A comparison is `equal` once
  neither comparator can still decide it (at the last interim, where the
  package calls every undecided comparison equal). A comparator that still
  tracks a comparison decided by the other, while no experiment of it runs
  more seeds, is retired (fed no more): it can only decide less.
  `alpha_spent` is the sum of what the two report spent.
- **Speed.** The package keys its per-comparison state by `str(comparison)`
  inside its loops, and a numpy row prints slowly; the comparisons are given
  as tuples (the form its docstring names), which changes no decision
  (a test holds the two forms equal) and makes an interim about three times
  faster.

`expected_seeds` estimates, by simulation with a fixed random state, how many
seeds such a design uses for a given effect (`harness plan seeds`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import ModuleType
from typing import Mapping, Optional, Sequence

from harness.errors import HarnessError
from harness.jsontypes import JSONObject
from harness.stats import expected_table

DEFAULT_PER_INTERIM = 5
DEFAULT_INTERIMS = 5
DEFAULT_ALPHA = 0.05
DEFAULT_PERMUTATIONS = 10_000
# Fixed, and recorded with each comparison: the same values always give the same decisions.
RANDOM_STATE = 20_210
MAX_SEEDS_EACH = 1_000  # n x K: a design that could need more seeds than this is refused
DEFAULT_REPETITIONS = 200  # simulated comparisons behind `expected_seeds`

LARGER = "larger"
SMALLER = "smaller"
EQUAL = "equal"
CONTINUE = "continue"
DECISIONS = (LARGER, SMALLER, EQUAL, CONTINUE)


class DesignError(HarnessError):
    """A design that cannot be run; the message is one line naming the option (exit 2)."""


@dataclass(frozen=True)
class Design:
    """What an adaptive comparison is: the experiments, which pairs are compared, n, K, alpha, B, the random state."""

    experiments: tuple[str, ...]
    against_first: bool = False
    per_interim: int = DEFAULT_PER_INTERIM  # n: seeds of each open experiment per interim
    interims: int = DEFAULT_INTERIMS  # K: at most this many interims
    alpha: float = DEFAULT_ALPHA  # the two-sided family-wise error
    permutations: int = DEFAULT_PERMUTATIONS  # B
    random_state: int = RANDOM_STATE

    @property
    def comparisons(self) -> tuple[tuple[int, int], ...]:
        """The pairs compared, as indices into `experiments`: every pair (the package's own order), or each
        experiment against the first."""
        count = len(self.experiments)
        if self.against_first:
            return tuple((0, j) for j in range(1, count))
        return tuple((i, j) for i in range(count) for j in range(count) if i < j)

    @property
    def comparison_names(self) -> tuple[str, ...]:
        """`A vs B` for each comparison."""
        return tuple(f"{self.experiments[i]} vs {self.experiments[j]}" for i, j in self.comparisons)

    @property
    def max_seeds_each(self) -> int:
        """The most seeds one experiment can need: n x K."""
        return self.per_interim * self.interims


def check_design(design: Design) -> None:
    """DesignError (one line) for a design that cannot be run."""
    names = design.experiments
    if len(names) < 2:
        shown = f" ({names[0]})" if names else ""
        raise DesignError(f"decide compares two experiments or more; got {len(names)}{shown}")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise DesignError(f"{twice[0]} is named twice: name each experiment once")
    if design.per_interim < 2:
        raise DesignError(
            f"--per-interim {design.per_interim}: at least 2 seeds of each experiment per interim (a permutation "
            "test needs two values a side)"
        )
    if design.interims < 1:
        raise DesignError(f"--interims {design.interims}: at least 1")
    if design.max_seeds_each > MAX_SEEDS_EACH:
        raise DesignError(
            f"--per-interim {design.per_interim} x --interims {design.interims} = {design.max_seeds_each:,} seeds "
            f"of each experiment at most: above {MAX_SEEDS_EACH:,}"
        )
    if not (math.isfinite(design.alpha) and 0.0 < design.alpha < 0.5):
        raise DesignError(f"--alpha {design.alpha:g}: give a level above 0 and below 0.5")
    if design.permutations < 1:
        raise DesignError(f"--permutations {design.permutations}: at least 1")


@dataclass(frozen=True)
class InterimOutcome:
    """What one interim decided. Per comparison, in the design's order."""

    interim: int  # 1 for the first
    decisions: tuple[str, ...]  # larger, smaller, equal or continue, after this interim
    decided_at: tuple[Optional[int], ...]  # the interim each comparison was decided at (None: not yet)
    # The package's statistic, k x |mean difference| over the k x n values of each side, for the comparisons open
    # at this interim (None for those decided before it).
    statistics: tuple[Optional[float], ...]
    differences: tuple[Optional[float], ...]  # mean of the first minus mean of the second, over their values so far
    boundary: Optional[float]  # the `larger` comparator's boundary for the statistic (None: it cannot reject now)
    boundary_smaller: Optional[float]  # the `smaller` comparator's
    alpha_spent: float  # the two-sided family-wise error spent so far: both comparators' levels spent
    finished: bool  # every comparison decided


@dataclass
class AdaptiveComparison:
    """One adaptive comparison in progress: the package's two comparators (one per direction) and what they were
    fed."""

    design: Design
    values: dict[str, list[float]] = field(init=False)
    outcomes: list[InterimOutcome] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        check_design(self.design)
        self.values = {name: [] for name in self.design.experiments}
        pairs = self.design.comparisons
        # (comparator, the pairs it was given, the decision of its own that is taken), each given alpha / 2
        self._sides = [
            _Side(_comparator(self.design, pairs), pairs, LARGER),
            _Side(_comparator(self.design, tuple((j, i) for i, j in pairs)), tuple((j, i) for i, j in pairs), SMALLER),
        ]

    @property
    def decisions(self) -> tuple[str, ...]:
        """Each comparison's decision so far (all `continue` before the first interim)."""
        if not self.outcomes:
            return tuple(CONTINUE for _ in self.design.comparisons)
        return self.outcomes[-1].decisions

    @property
    def finished(self) -> bool:
        return bool(self.outcomes) and self.outcomes[-1].finished

    def open_experiments(self) -> tuple[str, ...]:
        """The experiments in a comparison still undecided, in the design's order: those the next interim runs."""
        names = self.design.experiments
        wanted = {
            index
            for pair, decision in zip(self.design.comparisons, self.decisions)
            if decision == CONTINUE
            for index in pair
        }
        return tuple(names[i] for i in sorted(wanted))

    def interim(self, new: Mapping[str, Sequence[float]]) -> InterimOutcome:
        """Feed the next n values of each open experiment (exactly those) and decide; ValueError for values that
        do not fit."""
        import numpy as np

        design = self.design
        if self.finished:
            raise ValueError("every comparison is decided: there is no next interim")
        wanted = self.open_experiments()
        if set(new) != set(wanted):
            raise ValueError(
                f"interim {len(self.outcomes) + 1} takes values of {', '.join(wanted)}, not of {', '.join(new) or 'none'}"
            )
        for name in wanted:
            values = [float(v) for v in new[name]]
            if len(values) != design.per_interim:
                raise ValueError(f"{name}: {len(values)} values, not the {design.per_interim} of an interim")
            if not all(math.isfinite(v) for v in values):
                raise ValueError(f"{name}: a value that is not a finite number")
        for name in wanted:
            self.values[name].extend(float(v) for v in new[name])
        k = len(self.outcomes)  # the package counts interims from 0
        before = self.decisions
        fed = {name: np.asarray(self.values[name], dtype=np.float64) for name in design.experiments}
        for side in self._sides:
            side.feed(fed)
        decisions, decided_at = [], []
        previous = self.outcomes[-1].decided_at if self.outcomes else tuple(None for _ in design.comparisons)
        for index, was in enumerate(before):
            decision = was if was != CONTINUE else _combined([side.decision(index) for side in self._sides])
            decisions.append(decision)
            decided_at.append(previous[index] if was != CONTINUE else (k + 1 if decision != CONTINUE else None))
        seen = (k + 1) * design.per_interim
        statistics: list[Optional[float]] = []
        differences: list[Optional[float]] = []
        for (i, j), was in zip(design.comparisons, before):
            first, second = self.values[design.experiments[i]], self.values[design.experiments[j]]
            difference = math.fsum(first) / len(first) - math.fsum(second) / len(second)
            differences.append(difference if math.isfinite(difference) else None)
            if was == CONTINUE:  # as the package computes it, over the first (k + 1) n values of each side
                shared = math.fsum(first[:seen]) / seen - math.fsum(second[:seen]) / seen
                statistics.append(abs((k + 1) * shared) if math.isfinite(shared) else None)
            else:
                statistics.append(None)
        outcome = InterimOutcome(
            interim=k + 1,
            decisions=tuple(decisions),
            decided_at=tuple(decided_at),
            statistics=tuple(statistics),
            differences=tuple(differences),
            boundary=self._sides[0].boundary(),
            boundary_smaller=self._sides[1].boundary(),
            alpha_spent=sum(side.spent() for side in self._sides),
            finished=CONTINUE not in decisions,
        )
        self.outcomes.append(outcome)
        needed = set(self.open_experiments())
        for side in self._sides:
            side.retire_unless_fed(needed, design.experiments)
        return outcome


def _combined(decisions: Sequence[Optional[str]]) -> str:
    """One comparison's decision from the two comparators' (None: a comparator that no longer decides it)."""
    if LARGER in decisions:
        return decisions[0] if decisions[0] == LARGER else SMALLER  # each side's own `larger`, in its direction
    return CONTINUE if CONTINUE in decisions else EQUAL


@dataclass
class _Side:
    """One of the two comparators: the package's, the pairs it was given, the decision of it that is taken."""

    comparator: object
    pairs: tuple[tuple[int, int], ...]
    taken: str
    retired: bool = False
    fed: bool = False

    @property
    def _it(self) -> ModuleType:  # the package's comparator is untyped
        it: ModuleType = self.comparator  # type: ignore[assignment]
        return it

    def feed(self, values: Mapping[str, object]) -> None:
        """One interim of the package's comparator, unless it is retired or done."""
        if self.retired or getattr(self._it, "is_finished", False):
            return
        self._it.partial_compare(dict(values), verbose=False)
        self.fed = True

    def decision(self, index: int) -> Optional[str]:
        """`larger` where it decided in the direction it counts, `continue`, or None where it can decide no more."""
        if not self.fed:
            return CONTINUE
        own = str(self._it.decisions[str(self.pairs[index])])
        if own == LARGER:
            return LARGER
        if own == CONTINUE and not self.retired:
            return CONTINUE
        return None

    def boundary(self) -> Optional[float]:
        found = self._it.boundary
        if self.retired or not found:
            return None
        bound = float(found[-1][1])
        return bound if math.isfinite(bound) else None

    def spent(self) -> float:
        return float(self._it.level_spent)

    def retire_unless_fed(self, needed: set[str], names: Sequence[str]) -> None:
        """Retire the comparator when a comparison it still tracks has an experiment that runs no more seeds."""
        if self.retired or getattr(self._it, "is_finished", False):
            return
        tracking = {
            names[i]
            for index, pair in enumerate(self.pairs)
            if str(self._it.decisions[str(pair)]) == CONTINUE
            for i in pair
        }
        if not tracking <= needed:
            self.retired = True


def _comparator(design: Design, pairs: Sequence[tuple[int, int]]) -> object:
    """The package's comparator for `pairs`, given alpha / 2 (see the module doc)."""
    return _adastop().MultipleAgentsComparator(
        n=design.per_interim,
        K=design.interims,
        B=design.permutations,
        comparisons=_adastop_pairs(pairs),
        alpha=design.alpha / 2,
        beta=0.0,
        seed=design.random_state,
    )


def replay(design: Design, interims: Sequence[Mapping[str, Sequence[float]]]) -> AdaptiveComparison:
    """The comparison rebuilt by feeding the recorded interims again, in order (the state an uninterrupted one
    would have)."""
    comparison = AdaptiveComparison(design)
    for values in interims:
        comparison.interim(values)
    return comparison


def _adastop_pairs(pairs: Sequence[tuple[int, int]]) -> object:
    """The comparisons as the package indexes them (an array it can mask), each a tuple (see the module doc)."""
    import numpy as np

    array = np.empty(len(pairs), dtype=object)
    array[:] = list(pairs)
    return array


def _adastop() -> ModuleType:  # adastop ships no type information: its comparator is untyped
    import adastop  # type: ignore[import-untyped]

    module: ModuleType = adastop
    return module


# --------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class AdaptivePlan:
    """How many seeds an adaptive design is expected to use for one effect, by simulation (`expected_seeds`)."""

    per_interim: int
    interims: int
    alpha: float
    permutations: int
    repetitions: int
    random_state: int
    expected_seeds: float  # per experiment, the mean over the simulated comparisons
    standard_error: float  # of that mean
    power: float  # the share of simulated comparisons that decided the right way
    source: str = "simulated now"  # or how the table was made and read (`planned_seeds`)

    @property
    def max_seeds(self) -> int:
        return self.per_interim * self.interims

    def to_dict(self) -> JSONObject:
        """The plan's `--json` part."""
        return {
            "source": self.source,
            "per_interim": self.per_interim,
            "interims": self.interims,
            "alpha": self.alpha,
            "permutations": self.permutations,
            "max_seeds": self.max_seeds,
            "expected_seeds": self.expected_seeds,
            "standard_error": self.standard_error,
            "power": self.power,
            "repetitions": self.repetitions,
            "random_state": self.random_state,
        }


def expected_seeds(
    effect: float,
    sd: float,
    *,
    per_interim: int = DEFAULT_PER_INTERIM,
    interims: int = DEFAULT_INTERIMS,
    alpha: float = DEFAULT_ALPHA,
    permutations: int = DEFAULT_PERMUTATIONS,
    repetitions: int = DEFAULT_REPETITIONS,
    random_state: int = RANDOM_STATE,
) -> AdaptivePlan:
    """The seeds per experiment an adaptive comparison of two experiments uses when their per-seed values are
    normal with standard deviation `sd` and means `effect` apart: the mean over `repetitions` simulated
    comparisons, each through the package's comparator, the values drawn from one fixed random state.

    The test depends on the values only through their differences over their spread, so `effect / sd` is all
    that matters. ValueError when `sd` is not above 0.
    """
    import numpy as np

    if not (math.isfinite(sd) and sd > 0.0):
        raise ValueError(f"the standard deviation must be above 0, not {sd:g}")
    if repetitions < 1:
        raise ValueError(f"at least one repetition, not {repetitions}")
    design = Design(("a", "b"), False, per_interim, interims, alpha, permutations, random_state)
    check_design(design)
    rng = np.random.default_rng(random_state)
    shift = effect / sd
    used: list[int] = []
    right = 0
    for _ in range(repetitions):
        comparison = AdaptiveComparison(design)
        while not comparison.finished:
            comparison.interim(
                {"a": rng.normal(shift, 1.0, per_interim).tolist(), "b": rng.normal(0.0, 1.0, per_interim).tolist()}
            )
        used.append(per_interim * len(comparison.outcomes))
        right += comparison.decisions[0] == (LARGER if effect > 0 else SMALLER if effect < 0 else EQUAL)
    mean = math.fsum(used) / len(used)
    spread = math.sqrt(math.fsum((u - mean) ** 2 for u in used) / (len(used) - 1)) if len(used) > 1 else 0.0
    return AdaptivePlan(
        per_interim=per_interim,
        interims=interims,
        alpha=alpha,
        permutations=permutations,
        repetitions=repetitions,
        random_state=random_state,
        expected_seeds=mean,
        standard_error=spread / math.sqrt(len(used)),
        power=right / repetitions,
        source=f"{repetitions} comparisons simulated now",
    )


def planned_seeds(
    effect: float,
    sd: float,
    per_interim: int = DEFAULT_PER_INTERIM,
    interims: int = DEFAULT_INTERIMS,
    alpha: float = DEFAULT_ALPHA,
    permutations: int = DEFAULT_PERMUTATIONS,
) -> AdaptivePlan:
    """`expected_seeds` for the design asked: the default design's from its table (simulated once, by
    scripts/adaptive-table.py, on a grid of effect / SD; interpolated between its points, its last point beyond
    it), any other simulated now."""
    shift = abs(effect) / sd if sd > 0.0 else math.inf
    if (per_interim, interims, alpha, permutations) != expected_table.DESIGN or not math.isfinite(shift):
        return expected_seeds(
            abs(effect), sd, per_interim=per_interim, interims=interims, alpha=alpha, permutations=permutations
        )
    rows = expected_table.ROWS
    above = next((i for i, row in enumerate(rows) if row[0] >= shift), len(rows) - 1)
    low, high = rows[max(0, above - 1)], rows[above]
    weight = 0.0 if high[0] == low[0] else min(1.0, max(0.0, (shift - low[0]) / (high[0] - low[0])))
    seeds, error, power = (low[k] + weight * (high[k] - low[k]) for k in (1, 2, 3))
    beyond = " (the table's last effect, below this one)" if shift > rows[-1][0] else ""
    return AdaptivePlan(
        per_interim=per_interim,
        interims=interims,
        alpha=alpha,
        permutations=permutations,
        repetitions=expected_table.REPETITIONS,
        random_state=expected_table.RANDOM_STATE,
        expected_seeds=seeds,
        standard_error=error,
        power=power,
        source=f"the table of {expected_table.REPETITIONS} simulated comparisons at each of {len(rows)} effects / SD, "
        f"interpolated{beyond}",
    )
