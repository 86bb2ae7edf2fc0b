"""Pause windows: union and overlap with rollouts, never counting a second twice."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.summary import notes, overlaps
from harness.summary.notes import RunNotes
from harness.summary.sanity import SPAN_SLACK_US, Span
from harness.summary.windows import Coverage, merge_windows, union_length
from support.properties import examples


def overlap(windows, lo, hi):  # noqa: ANN001, ANN201
    covered = dict(Coverage(windows).cover([float(lo)], [float(hi)]))
    return covered.get(0, 0.0)


def test_touching_windows_merge_into_one():
    starts, ends = merge_windows([(10, 20), (20, 30)])
    assert starts == [10] and ends == [30]
    assert union_length(starts, ends) == 20 == Coverage([(10, 20), (20, 30)]).total


def test_overlapping_and_contained_windows_count_once():
    assert merge_windows([(250, 300), (280, 320), (290, 295)]) == ([250], [320])
    assert overlap([(250, 300), (280, 320)], 240, 400) == 70


def test_unsorted_windows_and_empty_or_reversed_ones():
    assert merge_windows([(50, 60), (5, 5), (30, 20), (0, 10)]) == ([0, 50], [10, 60])


def test_window_cutting_the_start_or_the_end_of_a_rollout():
    assert overlap([(230, 250)], 240, 300) == 10  # starts before the rollout
    assert overlap([(290, 310)], 240, 300) == 10  # ends after it
    assert overlap([(200, 400)], 240, 300) == 60  # covers it whole


def test_two_windows_inside_one_rollout():
    # windows are whole microseconds; here tenths of a second for readability: 10 s + 10.5 s
    assert overlap([(200, 300), (500, 605)], 113, 1000) == 205


def test_a_window_that_only_touches_a_rollout_does_not_overlap_it():
    assert Coverage([(500, 520)]).cover([438.0], [500.0]) == []
    assert Coverage([(600, 644)]).cover([644.0], [700.0]) == []


def test_no_windows_no_overlap():
    coverage = Coverage([])
    assert not coverage and coverage.total == 0
    assert coverage.cover([0.0, 5.0], [1.0, 9.0]) == []
    assert union_length(*merge_windows([])) == 0


def test_times_are_taken_from_the_origin():
    coverage = Coverage([(1_000_010, 1_000_020)], origin=1_000_000)
    assert coverage.cover([5.0, 15.0], [12.0, 30.0]) == [(0, 2.0), (1, 5.0)]


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
    assert union_length(*merge_windows(windows)) == len(covered) == Coverage(windows).total


@settings(max_examples=examples(100), deadline=None)
@given(windows=windows_strategy, intervals=st.lists(st.tuples(st.integers(0, 250), st.integers(0, 120)), max_size=10))
def test_many_intervals_at_once_are_each_interval_alone(windows, intervals):
    lo = [float(a) for a, _ in intervals]
    hi = [float(a + n) for a, n in intervals]
    together = Coverage(windows).cover(lo, hi)
    one_by_one = [(k, overlap(windows, a, b)) for k, (a, b) in enumerate(zip(lo, hi))]
    assert together == [(k, length) for k, length in one_by_one if length]


# --- a run's rollouts against its windows -------------------------------------------------------------------

T0_US = 1_800_000_000_000_000  # 2027: times as the captures hold them, whole microseconds
S = 1_000_000


@settings(max_examples=examples(300), deadline=None)
@given(
    rollouts=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 30)), min_size=1, max_size=30),
    windows=st.lists(st.tuples(st.integers(0, 800), st.integers(1, 40)), max_size=6),
)
def test_each_rollout_s_pause_overlap_is_the_seconds_a_window_covers_counted_one_by_one(rollouts, windows):
    """Whole seconds, steps of any number: the overlap, the adjusted time and the clean flag by a plain count."""
    ends, t = [], 0
    for seconds, gap in rollouts:
        t += seconds + gap
        ends.append(t)
    frame = SimpleNamespace(
        span=Span(T0_US, T0_US + (t + 1) * S),
        time_scale=1,
        steps=SimpleNamespace(t_rollout_end_us=[T0_US + end * S for end in ends]),
        windows=[(T0_US + start * S, T0_US + (start + length) * S) for start, length in windows],
        first_time_us=T0_US,
    )
    found = notes.StepsFound(list(range(len(rollouts))))
    result = overlaps.pause_overlaps(frame, [float(seconds) for seconds, _ in rollouts], found)

    paused = {second for start, length in windows for second in range(start, start + length)}
    for k, ((seconds, _), end) in enumerate(zip(rollouts, ends)):
        cut = sum(1 for second in range(end - seconds, end) if second in paused)
        assert result.overlap[k] == cut
        assert result.clean[k] is (cut == 0)
        assert result.adjusted[k] == (seconds - cut if seconds - cut > 0 else None)  # nothing left: null, noted
    assert result.pause_total_s == len(paused)
    said = RunNotes()
    found.notes.emit(said)
    cuts = [
        sum(1 for second in range(end - seconds, end) if second in paused) for (seconds, _), end in zip(rollouts, ends)
    ]
    covered_whole = any(seconds and cut == seconds for (seconds, _), cut in zip(rollouts, cuts))
    zero = any(seconds == 0 for seconds, _ in rollouts)
    assert [note.split(" in ")[0] for note in said] == [
        *(["the pause windows cover the whole rollout"] if covered_whole else []),
        *(["perf/rollout_time is 0"] if zero else []),
    ] or sorted(note.split(" in ")[0] for note in said) == sorted(
        ["the pause windows cover the whole rollout", "perf/rollout_time is 0"]
    )


@settings(max_examples=examples(200), deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from([0.0, 1e303]), st.floats(0.0, 900.0)),
            st.one_of(st.none(), st.integers(T0_US - 5 * S, T0_US + 900 * S)),
        ),
        max_size=12,
    ),
    windows=st.lists(st.tuples(st.integers(T0_US - 10 * S, T0_US + 900 * S), st.integers(0, 200 * S)), max_size=5),
    time_scale=st.sampled_from([None, 1, 0.01, 2.5]),
)
def test_a_step_s_pause_overlap_is_known_only_where_its_rollout_can_be_placed(steps, windows, time_scale):
    """Unknown (null, with a note) where a time is missing or outside the run, the run has windows and no time
    scale, or the end goes back in time in a run with windows; known and finite everywhere else."""
    frame = SimpleNamespace(
        span=Span(T0_US, T0_US + 800 * S),
        time_scale=time_scale,
        steps=SimpleNamespace(t_rollout_end_us=[end for _, end in steps]),
        windows=[(start, start + length) for start, length in windows],
        first_time_us=T0_US,
    )
    found = notes.StepsFound(list(range(len(steps))))
    result = overlaps.pause_overlaps(frame, [r for r, _ in steps], found)
    said = RunNotes()
    found.notes.emit(said)

    merged = any(length for _, length in windows)
    ends = [end for _, end in steps]
    for k, (seconds, end) in enumerate(steps):
        placeable = (
            seconds is not None and end is not None and T0_US - SPAN_SLACK_US <= end <= T0_US + 800 * S + SPAN_SLACK_US
        )
        if not placeable or (merged and time_scale is None):
            assert result.clean[k] is None and result.overlap[k] is None and result.adjusted[k] is None
        if result.clean[k] is not None:
            assert result.overlap[k] is None or result.overlap[k] >= 0.0
            assert (result.overlap[k] == 0.0) is result.clean[k] or result.overlap[k] is None
        if result.adjusted[k] is None and result.clean[k] is not None:
            assert said  # a known rollout without an adjusted time is always said
    timed = [end for end in ends if end is not None and T0_US - SPAN_SLACK_US <= end <= T0_US + 800 * S + SPAN_SLACK_US]
    assert any("goes back in time" in note for note in said) is any(b < a for a, b in zip(timed, timed[1:]))
