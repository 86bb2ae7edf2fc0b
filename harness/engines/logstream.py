"""Log lines as Docker gives them: `<RFC3339Nano UTC> <text>`, split from a byte stream, resumable.

Reopening a log at a timestamp is how a broken stream (or `harness recover`)
continues without losing or repeating a line: Docker returns every line at
or after `since`, and `LogPosition` drops the ones already seen, also when
Docker wrote them slightly out of timestamp order.
"""

from __future__ import annotations

import functools
import re
import struct
import time
from collections import Counter, deque
from datetime import datetime, timezone
from itertools import chain
from typing import Callable, Iterable, Iterator, Optional

from harness.times import parse_time_ns


def stamp_now() -> str:
    """Now as Docker's RFC3339Nano (always nine digits, `Z`)."""
    return format_stamp(time.time_ns())


def format_stamp(ns: int) -> str:
    """Nanoseconds since the epoch as Docker's RFC3339Nano (always nine digits, `Z`)."""
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
        pieces.append(raw[stamp.end() : stamp.end() + PARTIAL_BYTES])
        pos = stamp.end() + PARTIAL_BYTES
    return b"".join(pieces)


def split_bursts(chunks: Iterable[bytes]) -> Iterator[list[str]]:
    """Whole lines from a byte stream, a list per piece that completes one or more: the lines that arrived
    together, which the log pump writes at once. If the stream breaks, its partial last line is not yielded
    (a reopen sends it whole)."""
    pending: list[bytes] = []
    for chunk in chunks:
        cut = chunk.rfind(b"\n")
        if cut < 0:
            if chunk:  # an empty read is no line
                pending.append(chunk)
            continue
        if pending:
            pending.append(chunk[:cut])
            block = b"".join(pending)
        else:
            block = chunk[:cut]
        pending = [chunk[cut + 1 :]] if cut + 1 < len(chunk) else []
        if len(block) <= PARTIAL_BYTES:
            # No line here is one Docker cut into pieces; and a newline is never inside a UTF-8 sequence, so
            # decoding the block and splitting it gives what decoding each line would, in one call.
            yield block.decode("utf-8", "replace").split("\n")
        else:
            yield [_decode(piece) for piece in block.split(b"\n")]
    if pending:  # the stream ended cleanly on output without a final newline
        yield [_decode(b"".join(pending))]


def split_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """Whole lines from a byte stream, one at a time (split_bursts)."""
    return chain.from_iterable(split_bursts(chunks))


class StreamBroken(ConnectionError):
    """A log stream that ended inside its framing: the connection dropped (reopen after the last whole line)."""


class ChunkedBody:
    """HTTP/1.1 chunked transfer coding to the body's bytes, a burst at a time (RFC 9112, section 7.1).

    Fed whatever the socket had, `feed` returns the data of every chunk now
    whole or partly there; `done` is set by the last (zero-size) chunk, which
    is how a stream that ended is told from one that broke.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._left = 0  # data bytes of the current chunk still to come
        self._crlf = False  # the CRLF after a chunk's data is still to come
        self.done = False

    def feed(self, data: bytes) -> bytes:
        buffer = self._buffer
        buffer += data
        body: list[bytes | bytearray] = []
        at, size = 0, len(buffer)
        while at < size and not self.done:
            if self._left:  # the rest of a chunk that came in pieces
                take = min(self._left, size - at)
                body.append(buffer[at : at + take])
                at += take
                self._left -= take
                self._crlf = self._left == 0
                continue
            if self._crlf:
                if size - at < 2:
                    break
                if buffer[at : at + 2] != b"\r\n":
                    raise StreamBroken("the log stream's chunked encoding is broken (no CRLF after a chunk)")
                at += 2
                self._crlf = False
                continue
            end = buffer.find(b"\r\n", at)
            if end < 0:
                if size - at > 1024:
                    raise StreamBroken("the log stream's chunked encoding is broken (a chunk size line too long)")
                break
            length = _chunk_size(buffer[at:end])
            at = end + 2
            if length == 0:
                self.done = True  # trailers, if any, are not read: the body is over
                break
            stop = at + length
            if stop + 2 <= size:  # the whole chunk is here (Docker sends a frame a chunk): taken in one step
                if buffer[stop : stop + 2] != b"\r\n":
                    raise StreamBroken("the log stream's chunked encoding is broken (no CRLF after a chunk)")
                body.append(buffer[at:stop])
                at = stop + 2
            else:
                self._left = length
        del buffer[:at]
        return b"".join(body)


def _chunk_size(line: bytearray) -> int:
    try:
        return int(line, 16)
    except ValueError:
        pass
    head = bytes(line).split(b";", 1)[0].strip()  # a chunk extension is ignored
    try:
        return int(head, 16)
    except ValueError:
        raise StreamBroken(f"the log stream's chunked encoding is broken (chunk size {head[:20]!r})") from None


_frame_size = struct.Struct(">I").unpack_from  # a frame header's last 4 bytes


class DockerFrames:
    """Docker's multiplexed log stream (8-byte headers: stream, 3 zero bytes, big-endian size) to its lines.

    Fed the body a burst at a time, `feed` returns the whole lines of every
    whole frame in one piece, in the order their ends came, and keeps a frame
    cut mid-way for the next feed. Docker copies stdout and stderr side by
    side, so a line it sent in pieces (one longer than 16 KiB) can have the
    other stream's lines between its frames: each stream's unfinished line is
    held apart until its end comes, so no line is cut by another.
    `unfinished_since` is the stamp of the oldest line held (a reopened
    stream must start at or before it), and `finish` gives the lines a stream
    that ended cleanly left unfinished.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._open: dict[int, bytearray] = {}  # stream -> the start of its line whose end has not come

    def feed(self, data: bytes) -> bytes:
        buffer = self._buffer
        buffer += data
        lines: list[bytearray] = []
        opened = self._open
        at, size = 0, len(buffer)
        while size - at >= 8:
            end = at + 8 + _frame_size(buffer, at + 4)[0]
            if end > size:
                break
            stream, piece = buffer[at], buffer[at + 8 : end]
            at = end
            # Before `cut`: whole lines (the first may end one held); after it, the start of an unfinished one.
            # Only the new piece is searched, so a held line costs its length once.
            cut = piece.rfind(b"\n") + 1
            held = opened.get(stream)
            if held is not None:
                if not cut:
                    held += piece
                    continue
                held += piece[:cut]
                lines.append(held)
                del opened[stream]
            elif cut:
                lines.append(piece if cut == len(piece) else piece[:cut])
            if cut < len(piece):
                opened[stream] = piece[cut:]
        del buffer[:at]
        return b"".join(lines)

    def unfinished_since(self) -> Optional[int]:
        """The stamp (ns) that begins the oldest line held unfinished (None when none is, or it has no stamp)."""
        if not self._open:
            return None
        stamps = [_stamp_ns_or_none(bytes(held[:40]).decode("ascii", "replace")) for held in self._open.values()]
        known = [ns for ns in stamps if ns is not None]
        return min(known) if known else None

    def finish(self) -> bytes:
        """The lines each stream left unfinished when the log ended, each ended (empty once given)."""
        rest = b"".join(held + b"\n" for held in self._open.values())
        self._open.clear()
        return rest

    @property
    def pending(self) -> int:
        """Bytes of a frame not yet whole (a stream that ends with some broke off mid-frame)."""
        return len(self._buffer)


def _decode(raw: bytes) -> str:
    if len(raw) > PARTIAL_BYTES:
        raw = join_partials(raw)
    return raw.decode("utf-8", "replace")


# Docker stamps a line in the copier of its stream (stdout or stderr) before the logger writes it, so
# on a busy machine the log holds lines slightly out of timestamp order (a millisecond and more has
# been seen). A resume therefore starts this far before the newest line delivered, and skips the
# lines delivered since then by content; older lines are forgotten, oldest first.
RESUME_WINDOW_NS = 2_000_000_000
RESUME_MAX_LINES = 20_000


class LogPosition:
    """Where a reopened log resumes: a floor timestamp, and every line delivered with a stamp at or after it.

    `LogPosition(stamp, lines)` rebuilds a position from `last_stamp` and
    `lines_at_last` (the floor and those lines), which is how a position
    travels between processes.
    """

    def __init__(self, last_stamp: Optional[str] = None, lines_at_last: Iterable[str] = ()) -> None:
        self._floor: Optional[int] = None if last_stamp is None else stamp_to_ns(last_stamp)
        self._newest: Optional[int] = self._floor
        self._recent: deque[tuple[int, str]] = deque()
        self._held: Optional[int] = None  # the stamp of a line the stream has begun and not ended (new_bursts)
        # How a delivered line was stored (its known secrets masked): a reopened stream's line is compared so.
        self.stored: Optional[Callable[[str], str]] = None
        for line in lines_at_last:
            self.advance(line)

    @classmethod
    def after(cls, lines: Iterable[str]) -> "LogPosition":
        """The position after `lines` were delivered in this order (e.g. the tail of a saved log)."""
        position = cls()
        for line in lines:
            position.advance(line)
        return position

    def floor_ns(self) -> Optional[int]:
        """Every delivered line stamped at or after this is remembered; None when nothing was delivered. Not later
        than the start of a line still unfinished, unless what was delivered since had to be forgotten."""
        known = [ns for ns in (min((ns for ns, _ in self._recent), default=None), self._held) if ns is not None]
        if not known:
            return self._floor
        low = min(known)
        return low if self._floor is None else max(self._floor, low)

    @property
    def last_stamp(self) -> Optional[str]:
        """The floor as an RFC 3339 stamp (None when nothing was delivered)."""
        floor = self.floor_ns()
        return None if floor is None else format_stamp(floor)

    @property
    def lines_at_last(self) -> list[str]:
        """The delivered lines a reopened stream will send again (stamped at or after the floor), in order."""
        floor = self.floor_ns()
        return [line for ns, line in self._recent if floor is not None and ns >= floor]

    def since(self) -> Optional[float]:
        """The `since` to reopen with: just before the floor, so nothing at it is missed."""
        floor = self.floor_ns()
        return None if floor is None else floor / 1e9 - 1e-6

    def advance(self, line: str) -> None:
        """Record a delivered line."""
        self.advance_all((line,))

    def advance_all(self, lines: Iterable[str]) -> None:
        """Record delivered lines, in order (what is forgotten is forgotten once, after them: the same as one by
        one, since the newest stamp only grows)."""
        recent, newest = self._recent, self._newest
        for line in lines:
            ns = _stamp_ns_or_none(line)
            if ns is None:  # no stamp: remembered as of the newest one, so a resend of it is still recognised
                if newest is None:
                    continue
                ns = newest
            recent.append((ns, line))
            if newest is None or ns > newest:
                newest = ns
        self._newest = newest
        if newest is None:
            return
        oldest = newest - RESUME_WINDOW_NS
        if self._held is not None:  # what came since an unfinished line began is kept (to the count's bound)
            oldest = min(oldest, self._held)
        while recent and (recent[0][0] < oldest or len(recent) > RESUME_MAX_LINES):
            forgotten, _ = recent.popleft()
            self._floor = forgotten + 1 if self._floor is None else max(self._floor, forgotten + 1)

    def new_lines(self, reopened: Iterable[str]) -> Iterator[str]:
        """The lines of a reopened stream not delivered before (advancing the position)."""
        return chain.from_iterable(self.new_bursts([line] for line in reopened))

    def new_bursts(
        self, reopened: Iterable[list[str]], unfinished: Optional[Callable[[], Optional[int]]] = None
    ) -> Iterator[list[str]]:
        """new_lines a burst at a time: of each burst of a reopened stream, the lines not delivered before
        (advancing the position by the burst before it is yielded; a burst with none is not yielded).

        `unfinished`: the stamp of the oldest line the stream has begun and
        not ended (DockerFrames.unfinished_since), asked at each burst: the
        position then resumes no later than it, so a break while a long line
        is held loses none of its pieces.
        """
        floor = self.floor_ns()
        replay: Counter[str] = Counter(self.lines_at_last)
        left = sum(replay.values())
        stored = self.stored or (lambda line: line)
        for burst in reopened:
            if left:
                fresh = []
                for line in burst:
                    if left:
                        ns = _stamp_ns_or_none(line)
                        if ns is not None and floor is not None and ns < floor:
                            continue
                        if replay[stored(line)] > 0:
                            replay[stored(line)] -= 1
                            left -= 1
                            continue
                    fresh.append(line)
                burst = fresh
            if unfinished is not None:
                self._held = unfinished()
            if burst:
                self.advance_all(burst)
                yield burst


def _stamp_ns_or_none(line: str) -> Optional[int]:
    """The stamp of a `<stamp> <text>` line in nanoseconds; None when it has none. On every line: kept fast."""
    end = line.find(" ")
    stamp = line if end < 0 else line[:end]
    fraction = stamp[20:-1]
    if len(stamp) > 21 and stamp[19] == "." and stamp[-1] == "Z" and len(fraction) <= 9 and fraction.isdigit():
        second = _second_ns(stamp[:19])
        if second is not None:
            return second + int(fraction) * _SCALE[len(fraction)]
    return parse_time_ns(stamp)


_SCALE: list[int] = [10 ** (9 - digits) for digits in range(10)]


@functools.lru_cache(maxsize=256)
def _second_ns(head: str) -> Optional[int]:
    return parse_time_ns(head + "Z")  # the lines of a log share their seconds
