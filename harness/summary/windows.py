"""Pause windows: their union, and how much of it falls inside each rollout.

Pure functions over integer microseconds. Windows can touch or overlap (the
guard may log a new window starting the instant the last one ended, and a
restarted guard may log one that overlaps): they are merged first, so no
second is ever counted twice. The overlap of many rollouts with the merged
windows is computed at once with numpy: prefix sums of whole-window lengths
(exact int64) plus the two partly covered ends.

Intervals are half-open in effect: a window that only touches a rollout
(ends the instant it starts, or starts the instant it ends) overlaps it by 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Tuple

if TYPE_CHECKING:  # numpy is imported where it is used: a short run's overlaps (`merged_lists`) never need it
    import numpy as np
    from numpy.typing import ArrayLike, NDArray


def merge_windows(windows: Iterable[Tuple[int, int]]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Sorted, disjoint (starts, ends) covering exactly the union of the windows.

    Touching and overlapping windows become one; empty or reversed windows
    cover nothing and are dropped (callers note them).
    """
    import numpy as np

    starts, ends = merged_lists(windows)
    return np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)


def merged_lists(windows: Iterable[Tuple[int, int]]) -> tuple[list[int], list[int]]:
    """`merge_windows` as two lists of ints."""
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


def union_length(starts: NDArray[np.int64], ends: NDArray[np.int64]) -> int:
    """Total length of merged windows (same unit as the inputs)."""
    return int((ends - starts).sum()) if starts.size else 0


def overlap_lengths(
    starts: NDArray[np.int64], ends: NDArray[np.int64], lo: ArrayLike, hi: ArrayLike
) -> NDArray[np.float64]:
    """For each interval [lo[i], hi[i]], the length covered by the merged windows.

    `starts`/`ends` must come from `merge_windows`. `lo`/`hi` may be floats
    (a rollout starts `rollout_time` before its logged end). Keep magnitudes
    small (times relative to the run's first timestamp) so float64 holds them
    to well under a microsecond.
    """
    import numpy as np

    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    if starts.size == 0 or lo.size == 0:
        return np.zeros(lo.shape, dtype=np.float64)
    covered_before = np.concatenate(([0], np.cumsum(ends - starts)))  # int64, exact
    fstarts = starts.astype(np.float64)
    fends = ends.astype(np.float64)
    first = np.searchsorted(fends, lo, side="right")  # first window ending after lo
    stop = np.searchsorted(fstarts, hi, side="left")  # windows [first, stop) start before hi
    hit = stop > first
    first_c = np.minimum(first, starts.size - 1)
    last_c = np.maximum(stop - 1, 0)
    whole = (covered_before[stop] - covered_before[first]).astype(np.float64)
    cut_front = np.maximum(0.0, lo - fstarts[first_c])
    cut_back = np.maximum(0.0, fends[last_c] - hi)
    return np.where(hit, whole - cut_front - cut_back, 0.0)
