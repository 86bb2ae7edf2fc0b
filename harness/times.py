"""RFC 3339 timestamps: the one parser the harness reads every time with.

Accepts what the capture contract allows: `Z`, `z` or a numeric offset (up to
23:59), `T`, `t` or a space between date and time, with or without fractional
seconds, any number of fractional digits (Docker gives nanoseconds). Digits
below the unit asked for are truncated, never rounded, so a time never moves
later than what was logged. No leap seconds, no impossible dates, ASCII digits
only. Times are integers since the epoch (UTC): nanoseconds where a log
stream resumes at an exact line, microseconds elsewhere, so interval
arithmetic is exact; only durations become seconds, once, at the end.

- `parse_time_ns` / `parse_time_us`: one value (None for anything that is not
  such a time);
- `split_time_prefix`: Docker's `<RFC3339Nano> ` in front of a log line;
- `parse_times_us`: many values at once (a capture's step times), columnar,
  with exactly the answers of `parse_time_us`.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:  # numpy is loaded only for a column of times
    import numpy as np
    from numpy.typing import NDArray

_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})([Tt ])([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))"
)
_EPOCH = datetime(1970, 1, 1)
US_PER_S = 1_000_000
NS_PER_S = 1_000_000_000
_NS_PER_DAY = 86_400 * NS_PER_S


@functools.lru_cache(maxsize=4096)
def _day_ns(year: int, month: int, day: int) -> Optional[int]:
    """Nanoseconds from the epoch to midnight UTC of a date; None for a date that does not exist."""
    try:
        return (datetime(year, month, day) - _EPOCH).days * _NS_PER_DAY
    except ValueError:  # month 13, 31 April, year 0
        return None


def _match_ns(match: re.Match[str]) -> Optional[int]:
    year, month, day, _, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    midnight = _day_ns(int(year), int(month), int(day))
    hour_i, minute_i, second_i = int(hour), int(minute), int(second)
    if midnight is None or hour_i > 23 or minute_i > 59 or second_i > 59:
        return None
    ns = midnight + ((hour_i * 60 + minute_i) * 60 + second_i) * NS_PER_S
    if fraction:
        ns += int((fraction + "00000000")[:9])
    if not zulu:
        off_h_i, off_m_i = int(off_h), int(off_m)
        if off_h_i > 23 or off_m_i > 59:
            return None
        offset = (off_h_i * 60 + off_m_i) * 60 * NS_PER_S
        ns += -offset if sign == "+" else offset
    return ns


def parse_time_ns(text: object) -> Optional[int]:
    """Nanoseconds since the epoch for an RFC 3339 string; None for anything else."""
    if not isinstance(text, str):
        return None
    match = _RFC3339.fullmatch(text)
    return None if match is None else _match_ns(match)


def parse_time_us(text: object) -> Optional[int]:
    """Microseconds since the epoch for an RFC 3339 string; None for anything else."""
    ns = parse_time_ns(text)
    return None if ns is None else ns // 1000


# Docker's prefix: groups (whole second, fractional digits, zone), then the one space.
_PREFIX = re.compile(
    r"([0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.([0-9]+))?([Zz]|[+-][0-9]{2}:[0-9]{2}) "
)


def split_time_prefix(line: str) -> tuple[Optional[int], str]:
    """(nanoseconds, rest of the line) for a line that starts with `<RFC 3339 with T> `; else (None, line).

    This is the prefix `docker logs --timestamps` puts on every line. A
    prefix that is not a valid time is not a prefix. Exactly
    `parse_time_ns(prefix)`, faster: the lines of a log share their seconds.
    """
    match = _PREFIX.match(line)
    if match is None:
        return None, line
    head, fraction, zone = match.groups()
    base = _second_ns(head, zone)
    if base is None:
        return None, line
    if fraction:
        base += int((fraction + "00000000")[:9])
    return base, line[match.end() :]


@functools.lru_cache(maxsize=1024)
def _second_ns(head: str, zone: str) -> Optional[int]:
    """`parse_time_ns(head + zone)` (cached: the lines of a log share their seconds)."""
    return parse_time_ns(head + zone)


@functools.lru_cache(maxsize=1024)
def _utc_second(seconds: int) -> str:
    # isoformat, not strftime: strftime writes the year 1 as `1`, not `0001`.
    return (_EPOCH + timedelta(seconds=seconds)).isoformat()


def format_time_us(micros: int) -> str:
    """The RFC 3339 form (UTC, `Z`, microseconds) of a time from `parse_time_us`."""
    seconds, fraction = divmod(micros, US_PER_S)
    return f"{_utc_second(seconds)}.{fraction:06d}Z"


def now_rfc3339() -> str:
    """The current UTC time, RFC 3339 with `Z`."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---- many values at once ----------------------------------------------------

# The forms the harness itself writes (`...T08:00:00Z`, `...T08:00:00.814948Z`, Docker's nine
# digits): fixed-width, so a column of them is read with array arithmetic. Anything else, and
# any value the arrays find odd, goes through `parse_time_us`, which has the last word.
_COLUMNAR_LENGTHS = frozenset(range(22, 31)) | {20}
_COLUMNAR_MIN = 64  # below this many values the arrays cost more than they save


def parse_times_us(values: Sequence[object]) -> list[Optional[int]]:
    """`[parse_time_us(v) for v in values]`, computed column-wise for the fixed-width `Z` forms."""
    count = len(values)
    if count < _COLUMNAR_MIN:
        return [parse_time_us(value) for value in values]
    import numpy as np

    texts = [value if type(value) is str else "" for value in values]
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=count)
    out: list[Optional[int]] = [None] * count
    for length in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == length)
        if length not in _COLUMNAR_LENGTHS or len(rows) < _COLUMNAR_MIN:
            for i in rows.tolist():
                out[i] = parse_time_us(values[i])
            continue
        whole = len(rows) == count
        micros, readable = _fixed_width_us(texts if whole else [texts[i] for i in rows.tolist()], length)
        if whole:
            out = micros.tolist()
        else:
            for i, value in zip(rows.tolist(), micros.tolist()):
                out[i] = value
        for i in rows[~readable].tolist():
            out[i] = parse_time_us(values[i])
    return out


def _fixed_width_us(texts: list[str], length: int) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """(microseconds, readable) for ASCII `YYYY-MM-DDTHH:MM:SS[.f...]Z` strings of one length."""
    import numpy as np

    # One byte per character: a non-ASCII character becomes `?` and its row is not readable here.
    codes = np.frombuffer("".join(texts).encode("ascii", "replace"), dtype=np.uint8).reshape(len(texts), length)
    digit = codes.astype(np.int16) - ord("0")

    def number(start: int, stop: int) -> NDArray[np.int64]:
        value = digit[:, start].astype(np.int64)
        for column in range(start + 1, stop):
            value = value * 10 + digit[:, column]
        return value

    digit_columns = [c for c in range(19) if c not in (4, 7, 10, 13, 16)] + list(range(20, length - 1))
    ok = ((digit[:, digit_columns] >= 0) & (digit[:, digit_columns] <= 9)).all(axis=1)
    ok &= (
        (codes[:, 4] == ord("-")) & (codes[:, 7] == ord("-")) & (codes[:, 13] == ord(":")) & (codes[:, 16] == ord(":"))
    )
    ok &= ((codes[:, 10] == ord("T")) | (codes[:, 10] == ord("t"))) & (codes[:, length - 1] == ord("Z"))
    if length > 20:
        ok &= codes[:, 19] == ord(".")
    year, month, day = number(0, 4), number(5, 7), number(8, 10)
    hour, minute, second = number(11, 13), number(14, 16), number(17, 19)
    fraction = number(20, min(length - 1, 26)) * 10 ** max(0, 26 - (length - 1)) if length > 20 else 0
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[np.clip(month, 0, 12)]
    ok &= (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= month_days + ((month == 2) & leap))
    ok &= (hour <= 23) & (minute <= 59) & (second <= 59)
    # Days from 1970-01-01 to the civil date (H. Hinnant's algorithm, proleptic Gregorian).
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    days = era * 146_097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719_468
    micros = ((days * 24 + hour) * 60 + minute) * 60 + second
    return micros * US_PER_S + fraction, ok


def clock_text(seconds: float) -> str:
    """How long, as every duration the harness shows a person reads: `m:ss`, or `h:mm:ss` from an hour on."""
    hours, rest = divmod(max(0, int(round(seconds))), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
