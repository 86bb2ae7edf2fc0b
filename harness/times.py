"""RFC 3339 timestamps as integer microseconds since the epoch (UTC).

Accepts what the capture contract allows: `Z`, `z` or a numeric offset, with
or without fractional seconds, any number of fractional digits (Docker gives
nanoseconds): digits below the microsecond are truncated, never rounded, so a
time never moves later than what was logged. Integers keep interval arithmetic
exact; only durations are turned into seconds, once, at the end.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta, timezone
from typing import Optional

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))\Z"
)
_EPOCH = datetime(1970, 1, 1)
US_PER_S = 1_000_000


@functools.lru_cache(maxsize=4096)
def _day_us(year: int, month: int, day: int) -> Optional[int]:
    """Microseconds from the epoch to midnight UTC of a date; None for a date that does not exist."""
    try:
        return (datetime(year, month, day) - _EPOCH).days * 86_400 * US_PER_S
    except ValueError:  # month 13, 31 April
        return None


def parse_time_us(text: object) -> Optional[int]:
    """Microseconds since the epoch for an RFC 3339 string; None for anything else."""
    if not isinstance(text, str):
        return None
    match = _RFC3339.match(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    midnight = _day_us(int(year), int(month), int(day))
    hour_i, minute_i, second_i = int(hour), int(minute), int(second)
    if midnight is None or hour_i > 23 or minute_i > 59 or second_i > 59:  # no leap seconds either
        return None
    micros = midnight + ((hour_i * 60 + minute_i) * 60 + second_i) * US_PER_S
    if fraction:
        micros += int((fraction + "00000")[:6])
    if not zulu:
        offset = (int(off_h) * 60 + int(off_m)) * 60 * US_PER_S
        micros += -offset if sign == "+" else offset
    return micros


def format_time_us(micros: int) -> str:
    """The RFC 3339 form (UTC, `Z`, microseconds) of a time from `parse_time_us`."""
    moment = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_rfc3339() -> str:
    """The current UTC time, RFC 3339 with `Z`."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
