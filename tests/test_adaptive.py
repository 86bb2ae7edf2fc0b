"""The adaptive comparison (harness.stats.adaptive): the `adastop` package's own comparators decide, interim by
interim; a replay rebuilds the same state; a design that cannot run is one line."""

from __future__ import annotations

import numpy as np
import pytest
from adastop import MultipleAgentsComparator

from harness.errors import HarnessError
from harness.stats.adaptive import AdaptiveComparison, Design, check_design, replay


def adastop_decisions(values: list[dict[str, list[float]]], alpha: float = 0.05) -> list[str]:
    """The decision of A vs B after each interim, by the package's comparators fed as the module doc says: one on
    (A, B) whose `larger` is taken, one on (B, A) whose `larger` is taken as `smaller`, each at alpha / 2, each with
    the package's own comparisons (its default, and an integer array) and the fixed random state."""
    upper = MultipleAgentsComparator(n=5, K=5, B=10_000, comparisons=None, alpha=alpha / 2, beta=0, seed=20_210)
    lower = MultipleAgentsComparator(
        n=5, K=5, B=10_000, comparisons=np.array([(1, 0)]), alpha=alpha / 2, beta=0, seed=20_210
    )
    so_far = {"a": [], "b": []}
    out = []
    for interim in values:
        for name in so_far:
            so_far[name] += interim[name]
        fed = {name: np.array(v) for name, v in so_far.items()}
        for comparator in (upper, lower):
            if not comparator.is_finished:
                comparator.partial_compare(fed, verbose=False)
        mine, theirs = upper.decisions["[0 1]"], lower.decisions["[1 0]"]
        if mine == "larger":
            out.append("larger")
        elif theirs == "larger":
            out.append("smaller")
        elif "continue" in (mine, theirs):
            out.append("continue")
        else:
            out.append("equal")
        if out[-1] != "continue":
            break
    return out


@pytest.mark.parametrize("shift", [0.0, 0.6, -0.6, 1.5, -1.5])
@pytest.mark.parametrize("data_seed", [1, 2])
def test_each_interim_decides_as_the_package_s_comparators_fed_the_same_values(shift: float, data_seed: int) -> None:
    rng = np.random.default_rng(data_seed)
    comparison = AdaptiveComparison(Design(("a", "b")))
    fed = []
    while not comparison.finished:
        interim = {"a": rng.normal(shift, 1, 5).tolist(), "b": rng.normal(0, 1, 5).tolist()}
        fed.append(interim)
        comparison.interim(interim)

    ours = [outcome.decisions[0] for outcome in comparison.outcomes]

    assert ours == adastop_decisions(fed)
    assert ours[-1] in ("larger", "smaller", "equal")


def test_a_strong_effect_is_decided_at_the_first_interim_in_its_direction() -> None:
    comparison = AdaptiveComparison(Design(("slow", "fast")))
    outcome = comparison.interim({"slow": [150.0, 149.0, 121.0, 149.5, 130.0], "fast": [69.0, 61.5, 66.3, 60.1, 64.2]})
    assert outcome.decisions == ("larger",) and outcome.decided_at == (1,) and outcome.finished
    assert outcome.statistics[0] is not None and outcome.boundary is not None
    assert outcome.statistics[0] > outcome.boundary
    assert outcome.alpha_spent == pytest.approx(2 / 252)  # one permutation of 252 in each comparator's tail

    reverse = AdaptiveComparison(Design(("fast", "slow")))
    reverse.interim({"fast": [69.0, 61.5, 66.3, 60.1, 64.2], "slow": [150.0, 149.0, 121.0, 149.5, 130.0]})
    assert reverse.decisions == ("smaller",)


def test_three_experiments_run_only_the_seeds_of_undecided_comparisons() -> None:
    comparison = AdaptiveComparison(Design(("a", "b", "c")))
    comparison.interim({"a": [10.0, 11, 12, 13, 14], "b": [0.0, 1, 2, 3, 4], "c": [0.5, 1.5, 2.5, 3.5, 4.5]})

    assert comparison.decisions == ("larger", "larger", "continue")
    assert comparison.open_experiments() == ("b", "c")
    with pytest.raises(ValueError, match="takes values of b, c"):
        comparison.interim({"a": [1.0] * 5, "b": [1.0] * 5, "c": [1.0] * 5})


def test_a_replay_of_the_recorded_interims_is_the_comparison_that_never_stopped() -> None:
    rng = np.random.default_rng(5)
    interims = [{name: rng.normal(0.3 * i, 1, 5).tolist() for i, name in enumerate("abc")} for _ in range(3)]
    whole = AdaptiveComparison(Design(("a", "b", "c"), per_interim=5, interims=5))
    fed = []
    for interim in interims:
        if whole.finished:
            break
        wanted = {name: interim[name] for name in whole.open_experiments()}
        fed.append(wanted)
        whole.interim(wanted)

    resumed = replay(Design(("a", "b", "c")), fed[:-1])
    resumed.interim(fed[-1])

    assert resumed.outcomes == whole.outcomes


@pytest.mark.parametrize(
    "design, said",
    [
        (Design(("a",)), "got 1 (a)"),
        (Design(("a", "a")), "a is named twice"),
        (Design(("a", "b"), per_interim=1), "--per-interim 1"),
        (Design(("a", "b"), per_interim=250, interims=5), "1,250 seeds of each experiment at most: above 1,000"),
        (Design(("a", "b"), alpha=0.5), "--alpha 0.5"),
        (Design(("a", "b"), alpha=-0.1), "--alpha -0.1"),
    ],
)
def test_a_design_that_cannot_run_is_one_line(design: Design, said: str) -> None:
    with pytest.raises(HarnessError, match=said.replace("(", r"\(").replace(")", r"\)")) as caught:
        check_design(design)
    assert "\n" not in caught.value.message
