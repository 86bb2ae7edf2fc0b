"""Pause windows: their union, and how much of it falls inside each rollout.

Pure functions over integer microseconds. Windows can touch or overlap (the
guard may log a new window starting the instant the last one ended, and a
restarted guard may log one that overlaps): they are merged first, so no
second is ever counted twice. The overlap of a rollout with the merged
windows is found by bisection: prefix sums of whole-window lengths (exact
integers) plus the two partly covered ends, so a run of many steps costs
little more per step than a run of one.

Intervals are half-open in effect: a window that only touches a rollout
(ends the instant it starts, or starts the instant it ends) overlaps it by 0.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from itertools import accumulate, compress, count, repeat
from operator import gt
from typing import Iterable, Sequence, Tuple


def merge_windows(windows: Iterable[Tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Sorted, disjoint (starts, ends) covering exactly the union of the windows.

    Touching and overlapping windows become one; empty or reversed windows
    cover nothing and are dropped (callers note them).
    """
    starts: list[int] = []
    ends: list[int] = []
    for start, end in sorted((int(s), int(e)) for s, e in windows if e > s):
        if ends and start <= ends[-1]:
            if end > ends[-1]:
                ends[-1] = end
        else:
            starts.append(start)
            ends.append(end)
    return starts, ends


def union_length(starts: Sequence[int], ends: Sequence[int]) -> int:
    """Total length of merged windows (same unit as the inputs)."""
    return sum(end - start for start, end in zip(starts, ends))


class Coverage:
    """Merged windows, as times from `origin`, that say how much of any interval they cover.

    Keep the times small (relative to the run's first timestamp) so floats
    hold an interval's ends to well under a microsecond.
    """

    def __init__(self, windows: Iterable[Tuple[int, int]], origin: int = 0) -> None:
        starts, ends = merge_windows(windows)
        self._starts = [float(start - origin) for start in starts]
        self._ends = [float(end - origin) for end in ends]
        self._before = [0, *accumulate(end - start for start, end in zip(starts, ends))]  # exact integers
        self._last_end = [-math.inf, *self._ends]  # [k]: the end of the last of the first k windows
        self.total = self._before[-1]  # the union's length

    def __bool__(self) -> bool:
        return bool(self._starts)

    def cover(self, lo: Sequence[float], hi: Sequence[float]) -> list[tuple[int, float]]:
        """(k, length covered) for each interval [lo[k], hi[k]] the windows cover some of, in order of k."""
        if not self._starts:
            return []
        # The windows before bisect_left(starts, hi) start before hi; as they are disjoint and sorted, one of them
        # ends after lo (the interval meets a window) exactly when the last of them does (`_last_end`).
        last_ends = map(self._last_end.__getitem__, map(bisect_left, repeat(self._starts), hi))
        met = compress(count(), map(gt, last_ends, lo))
        covered = [(k, self._covered(lo[k], hi[k])) for k in met]
        return [(k, length) for k, length in covered if length != 0.0]

    def _covered(self, lo: float, hi: float) -> float:
        """What the windows cover of [lo, hi]: the whole windows between, less the outer ones' parts outside it."""
        first = bisect_right(self._ends, lo)  # the first window ending after lo
        stop = bisect_left(self._starts, hi)  # windows [first, stop) start before hi
        whole = float(self._before[stop] - self._before[first])
        return whole - max(0.0, lo - self._starts[first]) - max(0.0, self._ends[stop - 1] - hi)
