"""Over-sampling batch size advice: how many prompts to submit at a time (docs/summary.md, "The planner").

The model is Miles's rollout rule with the dynamic filter: submit O prompts
whenever kept + running groups fall below B; judge groups as they finish,
each kept with probability k (the keep rate, 1 - drop rate), independently;
stop once B are kept. With D the groups
dropped before the B-th keep, the step submits ceil((B + D) / O) batches,
the same formula the summary applies to measured steps.

- One batch suffices when D <= O - B, that is when at least B of the first
  O judged groups are kept: P(one batch) = P(Binomial(O, k) >= B).
- E[batches] = sum over m >= 1 of P(batches >= m)
             = 1 + sum over m >= 1 of P(Binomial(m O, k) < B).
- Expected prompts submitted = O x E[batches].

`plan` recommends the smallest O >= B whose one-batch probability reaches
the target.

From measured runs (`keep_rate_from_runs`, then `plan_from_steps`) k is not
one number: it moves from step to step with the prompts drawn and with
learning, and a pooled rate hides the hard steps that need a second batch.
Each complete step i of the runs gives its own keep rate k_i (a filter run's
step judged B + dropped groups and kept B; a step of a run without the
filter kept B groups, of which the zero-variance ones would have been
dropped). The plan is the empirical mixture over those steps: a step is
like one of the observed steps, each with weight 1/N, so

- P(one batch) = (1/N) sum_i P(Binomial(O, k_i) >= B),
- E[batches]   = (1/N) sum_i E[batches | k_i].

The pooled rate (kept / judged over all steps) is still reported as
`keep_rate`.

`simulate` is a Monte Carlo of the same rule, submission by submission and
group by group, seeded: a cross-check of the algebra above, not a model of
the GB10 (it knows nothing of times, lengths or learning).

The other plan, `harness plan seeds` (seeds per condition), is
`harness.stats.power`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional, Sequence, TypedDict

from harness.errors import HarnessError
from harness.lab.milesnames import OVER_SAMPLING_BATCH_SIZE_FLAG

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

DEFAULT_TARGET = 0.9
MAX_OVER_SAMPLING_FACTOR = 64  # search O up to this many times B before giving up


def _pmf(n: int, j: int, k: float) -> float:
    """P(Binomial(n, k) = j) with the exact binomial coefficient; in log space only when floats would not hold it."""
    q = 1.0 - k
    if k == 0.0:
        return 1.0 if j == 0 else 0.0
    if q == 0.0:
        return 1.0 if j == n else 0.0
    coefficient = math.comb(n, j)
    if coefficient < 2**1000:
        powers = (k**j) * (q ** (n - j))
        if powers > 1e-290:  # no underflow: the direct product is the most accurate
            return coefficient * powers
    return math.exp(math.log(coefficient) + j * math.log(k) + (n - j) * math.log(q))


def p_at_least(n: int, b: int, k: float) -> float:
    """P(Binomial(n, k) >= b): one minus the lower tail, or the upper tail summed when it is the small side."""
    if b <= 0:
        return 1.0
    if b > n:
        return 0.0
    lower = p_below(n, b, k)
    if lower < 0.5:
        return 1.0 - lower
    # The upper tail is the small side: past the mean its terms fall at least geometrically,
    # so it is summed until they no longer count (not over all n - b terms).
    terms = []
    for j in range(b, n + 1):
        term = _pmf(n, j, k)
        terms.append(term)
        if j > n * k and term <= terms[0] * 1e-18 and term * (n - j) <= math.fsum(terms) * 1e-17:
            break
    return min(1.0, math.fsum(terms))


def p_below(n: int, b: int, k: float) -> float:
    """P(Binomial(n, k) < b)."""
    if b <= 0:
        return 0.0
    if b > n:
        return 1.0
    return min(1.0, math.fsum(_pmf(n, j, k) for j in range(0, b)))


def p_one_batch(over_sampling: int, batch: int, keep_rate: float) -> float:
    """P(a step needs only its first batch of O prompts) = P(Binomial(O, k) >= B)."""
    return p_at_least(over_sampling, batch, keep_rate)


def expected_batches(over_sampling: int, batch: int, keep_rate: float) -> float:
    """E[ceil((B + D) / O)] = 1 + sum_{m>=1} P(Binomial(m O, k) < B)."""
    _check(batch, over_sampling, keep_rate)
    return Drops(batch, keep_rate).expected_batches(over_sampling)


class Drops:
    """D, the groups dropped before the B-th keep: a negative binomial, tabulated once for every O.

    P(D = d) = C(d + B - 1, d) k^B q^d. It is anchored at its mode with the
    exact binomial term and extended both ways by the ratio of neighbours, so
    no term underflows on the way; the tail is cut where terms are below
    1e-20 of the mode's. With F its distribution function, for any O:
    P(one batch) = F(O - B), and since ceil((B + D) / O) > m exactly when
    D > m O - B, E[batches] = 1 + sum over m >= 1 of (1 - F(m O - B)), the
    same identities as the binomial forms above (P(D > x) = P(Binomial(x + B, k) < B)).
    """

    CUT = 1e-20

    def __init__(self, batch: int, keep_rate: float) -> None:
        b, k, q = batch, keep_rate, 1.0 - keep_rate
        mode = int((b - 1) * q / k) if q > 0.0 else 0
        peak = b / (b + mode) * _pmf(b + mode, b, k)
        below = []
        term = peak
        for d in range(mode, 0, -1):  # P(D = d - 1) = P(D = d) d / ((d + B - 1) q)
            term = term * d / ((d + b - 1) * q)
            below.append(term)
        above = []
        term, d = peak, mode
        while q > 0.0:  # P(D = d + 1) = P(D = d) (d + B) q / (d + 1)
            term = term * (d + b) * q / (d + 1)
            d += 1
            if term < peak * self.CUT:
                break
            above.append(term)
        pmf = [*reversed(below), peak, *above]
        self.cdf = _running_sums(pmf)  # F(d)
        self.survival = list(reversed(_running_sums(list(reversed(pmf)))))[1:] + [0.0]  # 1 - F(d), from the tail
        self.batch = b

    def p_one_batch(self, over_sampling: int) -> float:
        x = over_sampling - self.batch
        return min(1.0, self.cdf[x]) if x < len(self.cdf) else min(1.0, self.cdf[-1])

    def expected_batches(self, over_sampling: int) -> float:
        tails = self.survival[over_sampling - self.batch :: over_sampling]
        return math.fsum([1.0, *tails])


def _running_sums(values: list[float]) -> list[float]:
    """Prefix sums, compensated (Neumaier), so a long sum of small terms stays exact to the last bits."""
    sums = []
    total = compensation = 0.0
    for value in values:
        t = total + value
        compensation += (total - t) + value if abs(total) >= abs(value) else (value - t) + total
        total = t
        sums.append(total + compensation)
    return sums


def _check(batch: int, over_sampling: int, keep_rate: float) -> None:
    if batch < 1:
        raise HarnessError(f"rollout batch size must be at least 1, not {batch}")
    if over_sampling < batch:
        raise HarnessError(f"over-sampling batch size {over_sampling} is below the rollout batch size {batch}")
    if not 0.0 < keep_rate <= 1.0:
        raise HarnessError(f"keep rate must be in (0, 1], not {keep_rate} (a drop rate of 1 never fills a batch)")


@dataclass(frozen=True)
class Candidate:
    """One over-sampling batch size and what the model predicts for it."""

    over_sampling_batch_size: int
    p_one_batch: float
    expected_batches: float

    @property
    def expected_prompts(self) -> float:
        return self.over_sampling_batch_size * self.expected_batches

    def to_dict(self) -> JSONObject:
        return {
            "over_sampling_batch_size": self.over_sampling_batch_size,
            "p_one_batch": self.p_one_batch,
            # infinite when a measured step kept nothing: strict JSON has no infinity
            "expected_batches": self.expected_batches if math.isfinite(self.expected_batches) else None,
        }


@dataclass(frozen=True)
class Measured:
    """A keep rate measured from runs: pooled, with its per-step spread."""

    keep_rate: float
    kept: int
    judged: int
    steps: int
    step_keep_min: float
    step_keep_max: float
    runs: Mapping[str, str]  # run -> how it was measured
    rollout_batch_sizes: Sequence[int] = ()
    step_keep_rates: Sequence[float] = ()  # each complete step's, in the order read: the mixture's components
    one_batch_seen: Mapping[int, tuple[int, int]] = field(
        default_factory=dict
    )  # filter runs' O -> (one-batch steps, steps)

    def to_dict(self) -> JSONObject:
        return {
            "keep_rate": self.keep_rate,
            "kept": self.kept,
            "judged": self.judged,
            "steps": self.steps,
            "step_keep_rate_min": self.step_keep_min,
            "step_keep_rate_max": self.step_keep_max,
            "model": "per-step mixture",
            "step_keep_rates": list(self.step_keep_rates),
            "runs": dict(self.runs),
        }


@dataclass(frozen=True)
class OneBatchCheck:
    """The model against the runs: at an O the filter runs used, the share of their steps that needed one batch."""

    over_sampling_batch_size: int
    steps: int
    one_batch_steps: int
    p_one_batch: float  # the model's, at that O

    def to_dict(self) -> JSONObject:
        return {
            "over_sampling_batch_size": self.over_sampling_batch_size,
            "steps": self.steps,
            "one_batch_steps": self.one_batch_steps,
            "p_one_batch": self.p_one_batch,
        }


@dataclass(frozen=True)
class Simulated:
    """The Monte Carlo of the rollout rule for one O."""

    over_sampling_batch_size: int
    trials: int
    seed: int
    p_one_batch: float
    mean_batches: float

    def to_dict(self) -> JSONObject:
        return {
            "over_sampling_batch_size": self.over_sampling_batch_size,
            "trials": self.trials,
            "seed": self.seed,
            "p_one_batch": self.p_one_batch,
            "mean_batches": self.mean_batches,
        }


@dataclass(frozen=True)
class Plan:
    """The recommendation and the candidates from B up to it."""

    rollout_batch_size: int
    keep_rate: float
    target: float
    recommended: int
    candidates: Sequence[Candidate]
    measured: Optional[Measured] = None
    simulated: Sequence[Simulated] = field(default_factory=tuple)
    checks: Sequence[OneBatchCheck] = field(default_factory=tuple)

    def to_dict(self) -> JSONObject:
        """The `--json` document: the contract keys, plus `measured`/`simulated` when asked for."""
        out: JSONObject = {
            "recommended_over_sampling_batch_size": self.recommended,
            "keep_rate": self.keep_rate,
            "candidates": [c.to_dict() for c in self.candidates],
        }
        if self.measured is not None:
            measured = self.measured.to_dict()
            if self.checks:
                measured["one_batch_observed"] = [c.to_dict() for c in self.checks]
            out["measured"] = measured
        if self.simulated:
            out["simulated"] = [s.to_dict() for s in self.simulated]
        return out


def plan(rollout_batch_size: int, keep_rate: float, target: float = DEFAULT_TARGET) -> Plan:
    """Candidates O = B, B+1, ... up to the smallest whose P(one batch) >= target, which is recommended."""
    return _plan(rollout_batch_size, [keep_rate], target, keep_rate, f"at keep rate {keep_rate:.4g}")


def plan_from_steps(rollout_batch_size: int, measured: Measured, target: float = DEFAULT_TARGET) -> Plan:
    """`plan` over the empirical mixture of the measured steps' keep rates (see the module doc)."""
    rates = list(measured.step_keep_rates) or [measured.keep_rate]
    if not any(rate > 0.0 for rate in rates):
        raise HarnessError("no measured step kept a group: no keep rate to plan with")
    result = _plan(
        rollout_batch_size, rates, target, measured.keep_rate, f"over the {len(rates)} measured steps' keep rates"
    )
    checks = tuple(
        OneBatchCheck(over, steps, one_batch, mixture_p_one_batch(over, rollout_batch_size, rates))
        for over, (one_batch, steps) in sorted(measured.one_batch_seen.items())
        if over >= rollout_batch_size
    )
    return Plan(
        result.rollout_batch_size,
        result.keep_rate,
        target,
        result.recommended,
        result.candidates,
        measured=measured,
        checks=checks,
    )


def mixture_p_one_batch(over_sampling: int, batch: int, keep_rates: Sequence[float]) -> float:
    """(1/N) sum_i P(Binomial(O, k_i) >= B): P(one batch) under the mixture of the steps' keep rates."""
    return math.fsum(p_at_least(over_sampling, batch, rate) if rate > 0.0 else 0.0 for rate in keep_rates) / len(
        keep_rates
    )


def _plan(batch: int, keep_rates: Sequence[float], target: float, keep_rate: float, how: str) -> Plan:
    """The candidates for the mixture of `keep_rates`, each weighted equally (one rate: the plain binomial)."""
    _check(batch, batch, keep_rate)
    for rate in keep_rates:
        if rate != 0.0:  # a step that kept nothing is a component that never fills a batch in one go
            _check(batch, batch, rate)
    if not 0.0 < target < 1.0:
        raise HarnessError(f"target must be between 0 and 1 (exclusive), not {target}")
    limit = batch * MAX_OVER_SAMPLING_FACTOR
    weights = Counter(keep_rates)  # steps with the same rate share one table of D
    total = len(keep_rates)

    def mixed(values: dict[float, float]) -> float:
        return math.fsum(values[rate] * count for rate, count in weights.items()) / total

    # P(one batch) grows with O, so the largest O allowed is the best: if it falls short, none reaches the target.
    best = mixture_p_one_batch(limit, batch, keep_rates)
    if best < target:
        raise HarnessError(
            f"no over-sampling batch size up to {limit} ({MAX_OVER_SAMPLING_FACTOR} x {batch}) reaches "
            f"P(one batch) >= {target} {how}: the best is {OVER_SAMPLING_BATCH_SIZE_FLAG} "
            f"{limit}, with P(one batch) {best:.3g}; lower the target or the drop rate"
        )
    drops = {rate: Drops(batch, rate) for rate in weights if rate > 0.0}
    candidates: list[Candidate] = []
    for over in range(batch, limit + 1):
        p = mixed({rate: drops[rate].p_one_batch(over) if rate in drops else 0.0 for rate in weights})
        expected = (
            mixed({rate: drops[rate].expected_batches(over) for rate in weights})
            if len(drops) == len(weights)
            else math.inf
        )
        candidates.append(Candidate(over, p, expected))
        if p >= target:
            break
    return Plan(batch, keep_rate, target, candidates[-1].over_sampling_batch_size, candidates)


class StepRowRead(TypedDict):
    """The keys of a summary's step row that the planner reads."""

    complete: bool
    dropped_groups: Optional[int]
    batches: Optional[int]
    zero_std_all_right: Optional[int]
    zero_std_all_wrong: Optional[int]
    zero_std_other: Optional[int]


class SummarizedRunRead(TypedDict):
    """The keys of a summary's `runs.<run>` document that the planner reads."""

    filter: bool
    rollout_batch_size: Optional[int]
    over_sampling_batch_size: Optional[int]
    steps: list[StepRowRead]


def keep_rate_from_runs(runs: Mapping[str, SummarizedRunRead]) -> Measured:
    """The pooled keep rate over the complete steps of summarized runs (their `runs.<run>` documents)."""
    kept_total = judged_total = 0
    per_step: list[float] = []
    how: dict[str, str] = {}
    sizes: set[int] = set()
    seen: dict[int, list[int]] = {}
    for name, run in runs.items():
        batch = run.get("rollout_batch_size")
        if not batch:
            raise HarnessError(f"{name}: rollout batch size unknown, so no keep rate")
        steps = 0
        for row in run["steps"]:
            if not row["complete"]:
                continue
            if run["filter"]:
                if row["dropped_groups"] is None:
                    continue
                kept, judged = batch, batch + row["dropped_groups"]
                over = run.get("over_sampling_batch_size")
                if over and row.get("batches") is not None:
                    counts = seen.setdefault(int(over), [0, 0])
                    counts[0] += row["batches"] == 1
                    counts[1] += 1
            else:
                zero_std = [row["zero_std_all_right"], row["zero_std_all_wrong"], row.get("zero_std_other")]
                if row["zero_std_all_right"] is None:
                    continue
                kept, judged = batch - sum(c or 0 for c in zero_std), batch
            kept_total += kept
            judged_total += judged
            per_step.append(kept / judged)
            steps += 1
        if not steps:
            raise HarnessError(f"{name}: no complete step with dropped groups or zero-variance counts")
        how[name] = (
            f"{steps} steps, filter on: kept B of B + dropped groups"
            if run["filter"]
            else f"{steps} steps, no filter: groups not zero-variance among the B kept"
        )
        sizes.add(int(batch))
    if not judged_total or not kept_total:
        raise HarnessError("the runs kept no group: no keep rate to plan with")
    return Measured(
        keep_rate=kept_total / judged_total,
        kept=kept_total,
        judged=judged_total,
        steps=len(per_step),
        step_keep_min=min(per_step),
        step_keep_max=max(per_step),
        runs=how,
        rollout_batch_sizes=tuple(sorted(sizes)),
        step_keep_rates=tuple(per_step),
        one_batch_seen={over: (one, steps) for over, (one, steps) in seen.items()},
    )


def simulate(
    over_sampling: int,
    batch: int,
    keep_rate: float,
    *,
    trials: int = 20_000,
    seed: int = 1,
    step_keep_rates: Sequence[float] = (),
) -> Simulated:
    """Monte Carlo of the rollout rule: the share of one-batch steps and the mean batches over `trials` steps.

    Each trial runs the rule literally: while kept + running < B, submit O
    more prompts; then one running group finishes (groups are exchangeable,
    so which one does not matter) and is kept with probability k; stop at B
    kept. All trials advance together (numpy), seeded. With `step_keep_rates`
    each trial draws its k from them, uniformly (the mixture `plan_from_steps` models).
    """
    import numpy as np

    _check(batch, over_sampling, keep_rate)
    if any(not 0.0 < rate <= 1.0 for rate in step_keep_rates):
        raise HarnessError("a measured step kept no group: the Monte Carlo of such a step would never end")
    rng = np.random.default_rng(seed)
    rates = (
        np.asarray(step_keep_rates, dtype=float)[rng.integers(0, len(step_keep_rates), trials)]
        if len(step_keep_rates)
        else np.full(trials, keep_rate)
    )
    kept = np.zeros(trials, dtype=np.int64)
    running = np.zeros(trials, dtype=np.int64)
    batches = np.zeros(trials, dtype=np.int64)
    active = np.ones(trials, dtype=bool)
    while active.any():
        submit = active & (kept + running < batch)
        running[submit] += over_sampling
        batches[submit] += 1
        finish = active & (running > 0)
        running[finish] -= 1
        keep = finish & (rng.random(trials) < rates)
        kept[keep] += 1
        active &= kept < batch
    return Simulated(over_sampling, trials, seed, float(np.mean(batches == 1)), float(np.mean(batches)))
