"""The range of time scales the simulator runs at: one definition for `harness sim` and `run/sweep/demo --sim`.

A time scale is wall seconds per simulated second. Below the range, the
scaled clock's durations (wall / scale) overflow or read as noise of the
process's own overheads (a 12-step run at 1e-4 already takes about a third
of a second); above it, a run hardly moves (a 12-step run at 100 takes
about four days). 0 is `harness sim`'s own: simulated seconds, no sleeping.
Standard library only, like the rest of harness.sim.
"""

from __future__ import annotations

import math
from typing import Optional

TIME_SCALE_MIN = 1e-4
TIME_SCALE_MAX = 100.0
TIME_SCALE_RANGE = f"{TIME_SCALE_MIN:g} to {TIME_SCALE_MAX:g}"


def time_scale_problem(value: float, *, zero_allowed: bool) -> Optional[str]:
    """Why `value` cannot be a time scale (None when it can); 0 passes only where `zero_allowed`."""
    if zero_allowed and value == 0:
        return None
    if math.isfinite(value) and TIME_SCALE_MIN <= value <= TIME_SCALE_MAX:
        return None
    zero = "0 (as fast as possible) or " if zero_allowed else ""
    return f"must be {zero}from {TIME_SCALE_RANGE} wall seconds per simulated second"
