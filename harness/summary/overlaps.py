"""Each rollout's pause overlap: where a step's rollout lies against the run's pause windows, and how much of it
they cover (docs/summary.md, "The rules"), a column at a time for `rows`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, cast

from harness.lab.milesnames import ROLLOUT_TIME
from harness.summary.frames import RunFrame
from harness.summary.notes import CHECK_NON_FINITE, CHECK_ROLLOUT_END, StepsFound
from harness.summary.sanity import SPAN_SLACK_US
from harness.summary.windows import Coverage
from harness.times import US_PER_S, format_time_us

_INF = math.inf


@dataclass
class Overlaps:
    """Each step's pause overlap, adjusted rollout time and clean flag (None where unknown), and the run's pause
    total."""

    overlap: list[Optional[float]]
    adjusted: list[Optional[float]]
    clean: list[Optional[bool]]
    pause_total_s: float


def pause_overlaps(frame: RunFrame, rollout: list[Optional[float]], found: StepsFound) -> Overlaps:
    """Each rollout's pause overlap, adjusted time and clean flag (None where unknown), and the pause total.

    A column at a time in plain floats: the windows each rollout meets are
    found by bisection (`windows.Coverage`), and only the rollouts a window
    cuts are computed one by one, so a run of one step sets nothing up and a
    run of thousands costs a few passes over its columns.
    """
    time_scale = frame.time_scale if frame.time_scale is not None else 1  # unknown: see below
    origin = frame.first_time_us if frame.first_time_us is not None else 0
    windows = Coverage(frame.windows, origin)
    count = len(rollout)
    ends = frame.steps.t_rollout_end_us
    # Times as floats: exact, as integers of microseconds below 2^53 (until the year 2255).
    end_us = _floats(ends)
    known = _placed(frame, rollout, end_us, bool(windows), found)
    if frame.time_scale is None and windows:  # where the rollouts lie against the windows is unknown (a note)
        known = []
    every = len(known) == count  # the common run: its columns are taken as they are
    seconds = cast("list[float]", rollout if every else [rollout[i] for i in known])
    float_origin = float(origin)  # as a float subtracts it: a float minus a float is faster, and the same
    hi = [end - float_origin for end in cast("list[float]", end_us if every else [end_us[i] for i in known])]
    wall_per_s = float(time_scale) * US_PER_S  # a rollout time of 1e303 s is infinite in wall time: said below
    lo = [end - s * wall_per_s for end, s in zip(hi, seconds)]
    early = _before_the_run(frame, origin, lo, known, seconds, found) if frame.time_scale is not None else []
    if early:
        keep = sorted(set(range(len(known))) - set(early))
        known, seconds = [known[k] for k in keep], [seconds[k] for k in keep]
        hi, lo = [hi[k] for k in keep], [lo[k] for k in keep]
        every = False
    overlap_k: list[Optional[float]] = [0.0] * len(known)
    adjusted_k: list[Optional[float]] = list(seconds)
    clean_k = [True] * len(known)
    covered_whole: list[int] = []
    for k, covered_us in windows.cover(lo, hi):  # the rollouts a window cuts
        trainer_us = covered_us / time_scale if time_scale != 1 else covered_us
        step_overlap = trainer_us / US_PER_S
        step_adjusted = (seconds[k] * US_PER_S - trainer_us) / US_PER_S
        if -_INF < step_overlap + step_adjusted < _INF:  # both finite (or a sum past the float range: looked at)
            overlap_k[k], adjusted_k[k] = step_overlap, step_adjusted
        else:  # strict JSON: an overflow is null, with a note per value
            overlap_k[k], adjusted_k[k] = _finite_or_noted(known[k], step_overlap, step_adjusted, found)
        clean_k[k] = False
        # Times are whole microseconds: less than one left of the rollout is nothing left (0, -0.0, 3e-14).
        if seconds[k] * wall_per_s - covered_us < 1.0 or seconds[k] == 0.0:
            covered_whole.append(known[k])
            adjusted_k[k] = None
    zero = [k for k, s in enumerate(seconds) if s == 0.0 and clean_k[k]] if 0.0 in seconds else []
    for k in zero:
        adjusted_k[k] = None
    found.add(
        "the pause windows cover the whole rollout in {steps}: rollout_time_adjusted_s null (nothing of it "
        "is left once the pauses are taken out)",
        sorted(covered_whole),
        rank=CHECK_ROLLOUT_END,
        flag=True,
    )
    found.add(
        f"{ROLLOUT_TIME} is 0 in {{steps}}: rollout_time_adjusted_s null",
        [known[k] for k in zero],
        rank=CHECK_ROLLOUT_END,
        flag=True,
    )
    pause_total_s = windows.total / time_scale / US_PER_S
    if every:
        return Overlaps(overlap_k, adjusted_k, cast("list[Optional[bool]]", clean_k), pause_total_s)
    overlap: list[Optional[float]] = [None] * count
    adjusted: list[Optional[float]] = [None] * count
    clean: list[Optional[bool]] = [None] * count
    for k, i in enumerate(known):
        overlap[i], adjusted[i], clean[i] = overlap_k[k], adjusted_k[k], clean_k[k]
    return Overlaps(overlap, adjusted, clean, pause_total_s)


def _before_the_run(
    frame: RunFrame, origin: int, lo: list[float], known: list[int], seconds: list[float], found: StepsFound
) -> list[int]:
    """Which of the rollouts (by their place in `lo`, their starts) would start before the run did, noted."""
    span = frame.span
    if span.start_us is None or not lo:
        return []
    first_allowed = span.start_us - SPAN_SLACK_US - origin
    early = [k for k, start in enumerate(lo) if not start >= first_allowed] if min(lo) < first_allowed else []
    if not early:
        return early
    found.add(
        f"{ROLLOUT_TIME} ({{values}}) would start the rollout before the run did "
        f"({format_time_us(span.start_us)}) in {{steps}}: pause overlap unknown, not counted clean",
        [known[k] for k in early],
        [seconds[k] for k in early],
        rank=CHECK_ROLLOUT_END,
        flag=True,
    )
    return early


def _placed(
    frame: RunFrame,
    rollout: Sequence[Optional[float]],
    end_us: Sequence[Optional[float]],
    has_windows: bool,
    found: StepsFound,
) -> list[int]:
    """The steps whose rollout can be placed against the pause windows: a rollout time, and an end that is there,
    inside the run, and not back in time (in a run with windows); each of the others is noted."""
    span = frame.span
    ends = frame.steps.t_rollout_end_us
    low = -_INF if span.start_us is None else span.start_us - SPAN_SLACK_US
    high = _INF if span.end_us is None else span.end_us + SPAN_SLACK_US
    present = cast("list[float]", end_us)  # when None is not in it
    if None not in end_us and (not present or low <= min(present) and max(present) <= high):
        timed = list(range(len(end_us)))  # every end is there, inside the run
    else:
        timed = [i for i, end in enumerate(end_us) if end is not None and low <= end <= high]
        # A note's text is made only where it has steps (the common run has none).
        positions = [i for i, (r, end) in enumerate(zip(rollout, end_us)) if r is not None and end is None]
        found.add("t_rollout_end missing in {steps}: pause overlap unknown there", positions, rank=CHECK_ROLLOUT_END)
        positions = [
            i
            for i, (r, end) in enumerate(zip(rollout, end_us))
            if r is not None and end is not None and not low <= end <= high
        ]
        if positions:
            found.add(
                f"t_rollout_end ({{values}}) is outside the run ({span.text()}) in {{steps}}: "
                "pause overlap unknown, not counted clean",
                positions,
                [_time_text(ends[i]) for i in positions],
                rank=CHECK_ROLLOUT_END,
                flag=True,
            )
    suspect = _back_in_time(ends, end_us, timed, has_windows, found)
    if len(timed) == len(rollout) and not suspect and None not in rollout:
        return timed
    return [i for i in timed if rollout[i] is not None and i not in suspect]


def _back_in_time(
    ends: Sequence[Optional[int]],
    end_us: Sequence[Optional[float]],
    timed: list[int],
    has_windows: bool,
    found: StepsFound,
) -> set[int]:
    """The steps whose t_rollout_end goes back in time from the step before (both of each pair), noted.

    Rollouts end in the order of their steps, so one of the two times is
    wrong, and which one cannot be told: where the run has pause windows,
    neither step's pause overlap is known. Without windows nothing depends on
    the times (no pause can overlap), so the note is all. `timed`: the steps
    whose end is there and inside the run.
    """
    times = cast("list[float]", end_us if len(timed) == len(end_us) else [end_us[i] for i in timed])
    if times == sorted(times):
        return set()
    suspect: set[int] = set()
    for k in range(len(times) - 1):
        if not times[k + 1] < times[k]:
            continue
        before, after = timed[k], timed[k + 1]
        unknown = ": pause overlap unknown in both, not counted clean" if has_windows else ""
        found.add(
            f"t_rollout_end goes back in time from step {found.steps[before]} "
            f"({_time_text(ends[before])}) to step {found.steps[after]} ({_time_text(ends[after])})" + unknown,
            [before, after],
            rank=CHECK_ROLLOUT_END,
            flag=True,
        )
        if has_windows:
            suspect.update((before, after))
    return suspect


def _floats(values: Sequence[Optional[int]]) -> list[Optional[float]]:
    """Each value as a float, None kept."""
    if None in values:
        return [None if value is None else float(value) for value in values]
    return list(map(float, cast("Sequence[int]", values)))


def _finite_or_noted(
    position: int, overlap: float, adjusted: float, found: StepsFound
) -> tuple[Optional[float], Optional[float]]:
    """A step's overlap and adjusted time, each None (with a note naming its value) where it is not finite."""
    kept: list[Optional[float]] = []
    for rank, (name, value) in enumerate((("pause_overlap_s", overlap), ("rollout_time_adjusted_s", adjusted))):
        if -_INF < value < _INF:
            kept.append(value)
            continue
        found.add(
            f"{name} is not a finite number ({value!r}) in {{steps}}: null",
            [position],
            rank=(CHECK_NON_FINITE, rank),
            flag=True,
        )
        kept.append(None)
    return kept[0], kept[1]


def _time_text(micros: Optional[int]) -> str:
    return "?" if micros is None else format_time_us(micros)
