"""Pause windows: union and overlap with rollouts, never counting a second twice."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.summary.windows import merge_windows, overlap_lengths, union_length
from support.properties import examples


def overlap(windows, lo, hi):  # noqa: ANN001, ANN201
    starts, ends = merge_windows(windows)
    return float(overlap_lengths(starts, ends, np.array([lo]), np.array([hi]))[0])


def test_touching_windows_merge_into_one():
    starts, ends = merge_windows([(10, 20), (20, 30)])
    assert starts.tolist() == [10] and ends.tolist() == [30]
    assert union_length(starts, ends) == 20


def test_overlapping_and_contained_windows_count_once():
    starts, ends = merge_windows([(250, 300), (280, 320), (290, 295)])
    assert (starts.tolist(), ends.tolist()) == ([250], [320])
    assert overlap([(250, 300), (280, 320)], 240, 400) == 70


def test_unsorted_windows_and_empty_or_reversed_ones():
    starts, ends = merge_windows([(50, 60), (5, 5), (30, 20), (0, 10)])
    assert (starts.tolist(), ends.tolist()) == ([0, 50], [10, 60])


def test_window_cutting_the_start_or_the_end_of_a_rollout():
    assert overlap([(230, 250)], 240, 300) == 10  # starts before the rollout
    assert overlap([(290, 310)], 240, 300) == 10  # ends after it
    assert overlap([(200, 400)], 240, 300) == 60  # covers it whole


def test_two_windows_inside_one_rollout():
    # windows are whole microseconds; here tenths of a second for readability: 10 s + 10.5 s
    assert overlap([(200, 300), (500, 605)], 113, 1000) == 205


def test_a_window_that_only_touches_a_rollout_does_not_overlap_it():
    assert overlap([(500, 520)], 438, 500) == 0
    assert overlap([(600, 644)], 644, 700) == 0


def test_no_windows_no_overlap():
    starts, ends = merge_windows([])
    assert overlap_lengths(starts, ends, np.array([0.0, 5.0]), np.array([1.0, 9.0])).tolist() == [0.0, 0.0]
    assert union_length(starts, ends) == 0


def test_fractional_rollout_start_stays_exact_in_microseconds():
    # rollout of 88.7 s ending at 100 s, in microseconds: starts at 11_300_000
    lo = 100_000_000 - 88.7 * 1_000_000
    assert overlap([(20_000_000, 30_000_000), (50_000_000, 60_500_000)], lo, 100_000_000) == 20_500_000


windows_strategy = st.lists(
    st.tuples(st.integers(0, 200), st.integers(0, 60)).map(lambda t: (t[0], t[0] + t[1])), max_size=8
)


@settings(max_examples=examples(300), deadline=None)
@given(windows=windows_strategy, lo=st.integers(0, 250), length=st.integers(0, 120))
def test_overlap_equals_a_second_by_second_count(windows, lo, length):
    hi = lo + length
    covered = {t for start, end in windows for t in range(start, end)}
    assert overlap(windows, lo, hi) == sum(1 for t in range(lo, hi) if t in covered)
    starts, ends = merge_windows(windows)
    assert union_length(starts, ends) == len(covered)


@settings(max_examples=examples(100), deadline=None)
@given(windows=windows_strategy, intervals=st.lists(st.tuples(st.integers(0, 250), st.integers(0, 120)), max_size=10))
def test_vectorised_overlap_matches_one_interval_at_a_time(windows, intervals):
    starts, ends = merge_windows(windows)
    lo = np.array([float(a) for a, _ in intervals])
    hi = np.array([float(a + n) for a, n in intervals])
    together = overlap_lengths(starts, ends, lo, hi).tolist()
    one_by_one = [overlap(windows, a, b) for a, b in zip(lo.tolist(), hi.tolist())]
    assert together == one_by_one


# --- a short run's overlaps step by step = a long run's a column at a time ---------------------------

T0_US = 1_800_000_000_000_000  # 2027: times as the captures hold them, whole microseconds
_times = st.one_of(st.none(), st.integers(T0_US - 5_000_000, T0_US + 900_000_000))
_rollouts = st.one_of(
    st.none(),
    st.sampled_from([0.0, 1e-9, 1e303]),
    st.floats(min_value=0.0, max_value=900.0, allow_nan=False),
)
_windows = st.lists(
    st.tuples(st.integers(T0_US - 10_000_000, T0_US + 900_000_000), st.integers(0, 200_000_000)).map(
        lambda w: (w[0], w[0] + w[1])
    ),
    max_size=5,
)


@settings(max_examples=examples(400), deadline=None)
@given(
    steps=st.lists(st.tuples(_rollouts, _times), min_size=0, max_size=8),
    windows=_windows,
    span=st.tuples(st.one_of(st.none(), st.just(T0_US)), st.one_of(st.none(), st.just(T0_US + 800_000_000))),
    time_scale=st.sampled_from([None, 1, 0.01, 2.5]),
    origin=st.one_of(st.none(), st.just(T0_US)),
)
def test_a_short_run_s_overlaps_by_step_are_those_by_column(steps, windows, span, time_scale, origin):
    """The step-by-step path for short runs gives the very numbers and notes of the numpy path."""
    from types import SimpleNamespace

    from harness.summary import rows
    from harness.summary.notes import RunNotes
    from harness.summary.sanity import Span

    frame = SimpleNamespace(
        span=Span(*span),
        time_scale=time_scale,
        steps=SimpleNamespace(t_rollout_end_us=[end for _, end in steps]),
        windows=windows,
        first_time_us=origin,
    )
    rollout = [r for r, _ in steps]
    results, notes = [], []
    for compute in (rows._pause_overlaps_by_step, rows._pause_overlaps_by_column):
        found = rows._Found(list(range(10, 10 + len(steps))))
        results.append(compute(frame, list(rollout), found))
        said = RunNotes()
        found.notes.emit(said)
        notes.append((list(said), said.flags))

    by_step, by_column = results
    assert by_step.overlap == by_column.overlap
    assert by_step.adjusted == by_column.adjusted
    assert by_step.clean == by_column.clean
    assert by_step.pause_total_s == by_column.pause_total_s
    assert notes[0] == notes[1]
