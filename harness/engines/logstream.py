"""Log lines as Docker gives them: `<RFC3339Nano UTC> <text>`, split from a byte stream, resumable.

Reopening a log at a timestamp is how a broken stream (or `harness recover`)
continues without losing or repeating a line: Docker returns every line at
or after `since`, and `LogPosition` drops the ones already seen.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from datetime import datetime, timezone
from typing import Iterable, Iterator, Optional

from harness.times import parse_time_ns


def stamp_now() -> str:
    """Now as Docker's RFC3339Nano (always nine digits, `Z`)."""
    ns = time.time_ns()
    seconds, nanos = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


def stamp_to_ns(stamp: str) -> int:
    """`2026-11-29T08:02:04.891725514Z` (Docker trims trailing zeros) -> nanoseconds since the epoch."""
    ns = parse_time_ns(stamp)
    if ns is None:
        raise ValueError(f"not an RFC 3339 time: {stamp!r}")
    return ns


# Docker's log copier cuts a line longer than its 16 KiB buffer into partial
# messages; a live (follow) stream prefixes every piece with its own
# timestamp, while a finished log returns the pieces joined.
PARTIAL_BYTES = 16 * 1024
_STAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z ")


def join_partials(raw: bytes) -> bytes:
    """A long line as one `<first stamp> <text>`: the stamps Docker put before each 16 KiB piece removed."""
    head = _STAMP.match(raw)
    if head is None or len(raw) - head.end() <= PARTIAL_BYTES:
        return raw
    pieces = [raw[: head.end() + PARTIAL_BYTES]]
    pos = head.end() + PARTIAL_BYTES
    while pos < len(raw):
        stamp = _STAMP.match(raw, pos)
        if stamp is None:  # not Docker's partial format after all: keep the rest as it is
            pieces.append(raw[pos:])
            break
        pieces.append(raw[stamp.end(): stamp.end() + PARTIAL_BYTES])
        pos = stamp.end() + PARTIAL_BYTES
    return b"".join(pieces)


def split_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """Whole lines from a byte stream; if the stream breaks, its partial last line is not yielded (a reopen sends it whole)."""
    pending: list[bytes] = []
    for chunk in chunks:
        if b"\n" not in chunk:
            pending.append(chunk)
            continue
        pieces = chunk.split(b"\n")
        pending.append(pieces[0])
        yield _decode(b"".join(pending))
        for piece in pieces[1:-1]:
            yield _decode(piece)
        pending = [pieces[-1]] if pieces[-1] else []
    if pending:  # the stream ended cleanly on output without a final newline
        yield _decode(b"".join(pending))


def _decode(raw: bytes) -> str:
    if len(raw) > PARTIAL_BYTES:
        raw = join_partials(raw)
    return raw.decode("utf-8", "replace")


class LogPosition:
    """The last timestamp delivered and the lines that carry it: where a reopened stream resumes."""

    def __init__(self, last_stamp: Optional[str] = None, lines_at_last: Iterable[str] = ()) -> None:
        self.last_stamp = last_stamp
        self.lines_at_last = list(lines_at_last)

    def since(self) -> Optional[float]:
        """The `since` to reopen with: just before the last timestamp, so nothing at it is missed."""
        return None if self.last_stamp is None else stamp_to_ns(self.last_stamp) / 1e9 - 1e-6

    def advance(self, line: str) -> None:
        """Record a delivered line."""
        stamp = line.split(" ", 1)[0]
        if stamp == self.last_stamp:
            self.lines_at_last.append(line)
        else:
            self.last_stamp, self.lines_at_last = stamp, [line]

    def new_lines(self, reopened: Iterable[str]) -> Iterator[str]:
        """The lines of a reopened stream not delivered before (advancing the position)."""
        if self.last_stamp is None:
            for line in reopened:
                self.advance(line)
                yield line
            return
        last_ns = stamp_to_ns(self.last_stamp)
        replay: Optional[Counter[str]] = Counter(self.lines_at_last)
        for line in reopened:
            if replay is not None:
                ns = _stamp_ns_or_none(line.split(" ", 1)[0])
                if ns is not None and ns < last_ns:
                    continue
                if ns == last_ns and replay[line] > 0:
                    replay[line] -= 1
                    continue
                replay = None  # past the resume point: everything from here on is new
            self.advance(line)
            yield line


def _stamp_ns_or_none(stamp: str) -> Optional[int]:
    return parse_time_ns(stamp)
