"""The family-wise error is held: values drawn from one distribution for every experiment, 2,000 comparisons of
the default design (n 5, K 5, alpha 0.05, B 10,000: at n = 5 every B above 252 draws the same permutations), and
the share that decided `larger` or `smaller` anywhere is at most alpha plus three standard errors.

No simulator: the values are drawn here. The repetitions are handed to the machine's cores in chunks of CHUNK, each
to the first process free (a comparison takes about 0.1 CPU s, nearly all of it the package's permutations): a core
that other tests keep busy takes fewer chunks, and none waits idle for it. Hence `integration`: seconds to minutes,
not the fast tier's milliseconds."""

from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor

import pytest

REPETITIONS = 2_000
ALPHA = 0.05
CHUNK = 50  # repetitions a task: 40 tasks, about 5 CPU s each


def wrong_decisions(first: int, count: int) -> int:
    """How many of repetitions first..first+count-1 decided a difference where there is none."""
    import numpy as np

    from harness.stats.adaptive import AdaptiveComparison, Design

    wrong = 0
    for repetition in range(first, first + count):
        rng = np.random.default_rng(1_000 + repetition)
        comparison = AdaptiveComparison(Design(("a", "b"), alpha=ALPHA))
        while not comparison.finished:
            comparison.interim({name: rng.normal(0.0, 1.0, 5).tolist() for name in comparison.open_experiments()})
        wrong += any(decision in ("larger", "smaller") for decision in comparison.decisions)
    return wrong


@pytest.mark.integration
@pytest.mark.timeout(1_800)  # about 160 CPU s: on two idle cores under two minutes, far longer on a loaded machine
def test_no_difference_is_decided_more_often_than_alpha_allows() -> None:
    workers = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))
    starts = list(range(0, REPETITIONS, CHUNK))
    with ProcessPoolExecutor(workers) as pool:
        wrong = sum(pool.map(wrong_decisions, starts, [min(CHUNK, REPETITIONS - s) for s in starts]))

    rate = wrong / REPETITIONS
    standard_error = math.sqrt(ALPHA * (1 - ALPHA) / REPETITIONS)
    assert rate <= ALPHA + 3 * standard_error, f"{wrong} of {REPETITIONS} comparisons decided a difference"
