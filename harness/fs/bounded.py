"""Bounded, tolerant reads of one capture file: only regular files, never more than a cap, never a hang.

A FIFO named status.json would block a reader forever and /dev/zero never
ends, so only regular files are opened and never more than a size cap; JSON
nested deeper than the recursion limit is a reason, not a crash; JSONL is
read line by line under a line-length cap, a bad line a note naming the
file and the line number.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Generator, Iterator, Optional

import orjson

from harness.fs.files import PathLike
from harness.fs.paths import file_kind

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject, JSONValue

MAX_STATUS_BYTES = 1 << 20
MAX_JSON_BYTES = 64 << 20  # manifest.json, args.json
MAX_JSONL_BYTES = 1 << 30  # metrics.jsonl of a very long run; lines past the cap are noted, not read
MAX_LINE_BYTES = 16 << 20
READ_CHUNK = 1 << 20
NUL = b"\0"  # a file's tail a power loss left: its blocks allocated, never written
TAIL_BYTES = 64 << 10  # `last_jsonl`: a guard.jsonl of a week's run is never read whole for its last sample


# Each byte as 1 where it is an ASCII digit, else 0: a run of _LONG_DIGITS ones is that many digits in a row.
_DIGIT_BYTES = bytes(1 if byte in b"0123456789" else 0 for byte in range(256))
_LONG_DIGITS = 19  # 19 digits or more: maybe beyond 64 bits
_LONG_RUN = b"\x01" * _LONG_DIGITS
_CHECK_BYTES = 1 << 20  # translated a piece at a time: a large file costs a piece more memory, not its size again


def orjson_reads_as_json(data: bytes) -> bool:
    """Whether orjson reads `data` as the standard reader would, where it reads it at all: it reads an integer beyond
    64 bits as a float, so text with 19 digits or more in a row goes to the standard reader.

    (A byte translation and a substring search: a regular expression took five times as long as orjson's own
    read of a capture's metrics line.)"""
    overlap = _LONG_DIGITS - 1  # a run of digits across two pieces is whole in the second
    return not any(
        _LONG_RUN in data[max(0, start - overlap) : start + _CHECK_BYTES].translate(_DIGIT_BYTES)
        for start in range(0, len(data), _CHECK_BYTES)
    )


class Unreadable(Exception):
    """A capture file that cannot be read; the message is the reason, naming the file."""


def read_bounded(path: PathLike, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; FileNotFoundError when absent, else Unreadable."""
    fd, size = _open_regular_sized(path)
    try:
        if size > max_bytes:
            raise Unreadable(f"{os.path.basename(path)} is too large ({size:,} bytes; the cap is {max_bytes:,})")
        chunks: list[bytes] = []
        total = 0
        want = size + 1  # its size and a byte more: a file that did not grow is read in one call, at its size
        while True:
            chunk = os.read(fd, want)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > max_bytes:  # it grew while being read
                raise Unreadable(f"{os.path.basename(path)} is too large (over the cap of {max_bytes:,} bytes)")
            chunks.append(chunk)
            want = READ_CHUNK
    except OSError as err:
        raise Unreadable(f"{os.path.basename(path)} unreadable: {err.strerror or err}") from None
    finally:
        os.close(fd)


def _open_regular(path: PathLike) -> int:
    """Open for reading without blocking on a FIFO; anything but a regular file is Unreadable (see below)."""
    return _open_regular_sized(path)[0]


def _open_regular_sized(path: PathLike) -> tuple[int, int]:
    """(descriptor, size) of a file opened for reading without blocking on a FIFO; anything but a regular file is
    Unreadable.

    A capture's files are never links (the harness writes regular files only), so a link is not followed:
    it could lead anywhere out of the capture root.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as err:
        if err.errno == errno.ELOOP and os.path.islink(path):
            raise Unreadable(
                f"{os.path.basename(path)} is not a regular file (it is a symbolic link, never followed)"
            ) from None
        raise Unreadable(f"{os.path.basename(path)} unreadable: {err.strerror or err}") from None
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        os.close(fd)
        raise Unreadable(f"{os.path.basename(path)} is not a regular file (it is {file_kind(found.st_mode)})")
    return fd, found.st_size


def open_regular(path: Path) -> BinaryIO:
    """A regular file opened for reading (never blocking on a FIFO); FileNotFoundError, else Unreadable."""
    fd = _open_regular(path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def loads_json(data: bytes) -> JSONValue:
    """Parsed JSON; ValueError for anything that is not, however deep or long.

    `NaN` and `Infinity` are read (captures written before strict JSON have
    them); the typed records and the summary reject or null them.
    """
    if orjson_reads_as_json(data):
        try:
            parsed: JSONValue = orjson.loads(data)  # about five times faster on a capture's small files
            return parsed
        except orjson.JSONDecodeError:
            pass  # NaN, Infinity, UTF-16, deep nesting: the standard reader decides
    try:
        value: JSONValue = json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    return value


def read_json_file(path: Path, max_bytes: int = MAX_JSON_BYTES) -> JSONValue:
    """A parsed JSON file; FileNotFoundError when absent, Unreadable (with the reason) otherwise."""
    data = read_bounded(path, max_bytes)
    try:
        return loads_json(data)
    except ValueError as err:
        raise Unreadable(f"{path.name} is not valid JSON ({err})") from None


def iter_lines(
    path: Path, *, max_bytes: int = MAX_JSONL_BYTES, max_line: int = MAX_LINE_BYTES
) -> Generator[tuple[int, Optional[bytes], bool], None, None]:
    """(line number, bytes or None if over `max_line`, whether the line lacks its newline) of a regular file.

    FileNotFoundError when absent, Unreadable when it cannot be opened; reading
    stops at `max_bytes` (the caller is told by a final (0, None, False)).
    """
    fd = _open_regular(path)
    try:
        number, pending, too_long, total = 0, b"", False, 0
        while True:
            chunk = os.read(fd, READ_CHUNK)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                yield 0, None, False
                return
            pieces = chunk.split(b"\n")
            for piece in pieces[:-1]:
                number += 1
                yield number, None if too_long or len(pending) + len(piece) > max_line else pending + piece, False
                pending, too_long = b"", False
            rest = pieces[-1]
            if too_long or len(pending) + len(rest) > max_line:
                pending, too_long = b"", True
            else:
                pending += rest
            hole = _hole_after(fd) if chunk.endswith(NUL) else 0  # a power loss's NUL tail: a sparse gigabyte, maybe
            if hole:  # passed, not read: NUL bytes and no newline, as if read
                total += hole
                if total > max_bytes:
                    yield 0, None, False
                    return
                if too_long or len(pending) + hole > max_line:
                    pending, too_long = b"", True
                else:
                    pending += NUL * hole
        if pending or too_long:
            yield number + 1, None if too_long else pending, True
    except OSError as err:
        raise Unreadable(f"{path.name} unreadable: {err.strerror or err}") from None
    finally:
        os.close(fd)


def _hole_after(fd: int) -> int:
    """The length of the hole of a sparse file at `fd`'s position (moved past it); 0 where none, or where the file
    system cannot say."""
    try:
        here = os.lseek(fd, 0, os.SEEK_CUR)
        try:
            data_at = os.lseek(fd, here, os.SEEK_DATA)
        except OSError as err:
            if err.errno != errno.ENXIO:
                os.lseek(fd, here, os.SEEK_SET)
                return 0
            data_at = os.fstat(fd).st_size  # a hole to the end
        os.lseek(fd, data_at, os.SEEK_SET)
        return max(0, data_at - here)
    except OSError:
        return 0


def iter_jsonl(
    path: Path,
    notes: list[str],
    *,
    max_bytes: int = MAX_JSONL_BYTES,
    loads: Optional[Callable[[bytes], JSONValue]] = None,
) -> Iterator[tuple[int, JSONObject]]:
    """(line number, object) for each good line of a JSONL file; a note for each bad one.

    `loads` decodes a line (default `loads_json`; ValueError for a bad line).
    """
    loads = loads or loads_json
    try:
        lines = iter_lines(path, max_bytes=max_bytes)
        for number, raw, torn in lines:
            if number == 0:
                notes.append(f"{path.name}: over {max_bytes:,} bytes: the rest is not read")
                return
            if raw is None:
                notes.append(f"{path.name} line {number}: longer than {MAX_LINE_BYTES:,} bytes: skipped")
                continue
            nuls = raw.count(NUL)
            if nuls:  # what a power loss leaves where a line was being written: never parsed
                notes.append(f"{path.name} line {number}: {torn_reason(nuls)}")
                continue
            if not raw.strip():
                continue
            try:
                obj = loads(raw)
            except ValueError as err:
                why = "cut short (the writer stopped mid-line)" if torn else f"not JSON ({err})"
                notes.append(f"{path.name} line {number}: {why}: skipped")
                continue
            if not isinstance(obj, dict):
                notes.append(f"{path.name} line {number}: not a JSON object: skipped")
                continue
            yield number, obj
    except FileNotFoundError:
        return
    except Unreadable as err:
        notes.append(str(err))


def last_jsonl(
    path: Path,
    notes: list[str],
    *,
    tail_bytes: int = TAIL_BYTES,
    where: Optional[Callable[[JSONObject], bool]] = None,
) -> Optional[JSONObject]:
    """The last whole JSON object line of a JSONL file (`where`: the last one it accepts), reading only its last
    `tail_bytes` (None if none there).

    A torn last line (the writer stopped mid-line, or a power-off left NUL
    bytes) and lines that are not JSON objects are passed over for the line
    before them.
    """
    try:
        fd = _open_regular(path)
    except FileNotFoundError:
        return None
    except Unreadable as err:
        notes.append(str(err))
        return None
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - tail_bytes)
        data = os.pread(fd, size - start, start)
    except OSError as err:
        notes.append(f"{path.name} unreadable: {err.strerror or err}")
        return None
    finally:
        os.close(fd)
    lines = data.split(b"\n")[:-1]  # what follows the last newline is torn (or nothing)
    if start > 0:
        lines = lines[1:]  # the first piece may be the end of a longer line
    for raw in reversed(lines):
        try:
            obj = loads_json(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and (where is None or where(obj)):
            return obj
    return None


def read_jsonl(path: Path) -> Iterator[JSONObject]:
    """The objects of a JSONL file; bad lines (a torn last line after a power-off) are skipped."""
    for _, obj in iter_jsonl(Path(path), []):
        yield obj


# --------------------------------------------------------------------------- status


def torn_reason(nuls: int) -> str:
    """Why a line that holds NUL bytes is never parsed (iter_jsonl and WholeLines say it alike)."""
    return f"torn ({nuls:,} NUL bytes: a power loss?): skipped"


class WholeLines:
    """A binary file's whole lines, every torn one blanked: what a reader after the fact may parse.

    The one rule for torn tails, as `iter_jsonl` reads metrics.jsonl: a line
    that holds a NUL byte is what a power loss leaves where a line was being
    written (blocks allocated, never written), and is never parsed; a last line
    without its newline was cut short (the writer stopped mid-line) and is never
    given out. A torn line is given as an empty line (so the lines after it keep
    their numbers) and is never held: its NUL bytes are counted, and a run of
    them in a hole of a sparse file is skipped, not read, so a tail of
    gigabytes costs nothing. A line that grows past `max_line` before its
    newline comes is passed over as well. `problems` lists each line not given
    out, by number; `read(n)` as a file's.

    `live`: the file may still grow (a follower's): its end gives b"" without
    ending it, so `read` may be called again for lines written since; `finish`
    says what was left once the caller knows the writer is done.
    """

    PROBLEMS_KEPT = 20  # a file of a million torn lines is noted in a few lines, then a count

    def __init__(self, handle: BinaryIO, *, max_line: int = MAX_LINE_BYTES, live: bool = False) -> None:
        self.handle = handle
        self.max_line = max_line
        self.live = live
        self.held = b""  # the start of a line whose newline has not come yet
        self.passing: Optional[str] = None  # "torn" or "long": within a line passed over up to its newline
        self.passed_nuls = 0
        self.ended = False
        self.lines = 0  # lines ended so far, given out or blanked
        self.problems: list[tuple[int, str]] = []  # (line number, why) of the lines not given out
        self.more_problems = 0

    def read(self, size: int = -1) -> bytes:
        while not self.ended:
            chunk = self.handle.read(READ_CHUNK if size < 0 else max(size, 1))
            if not chunk:
                if self.live:
                    return b""
                self.ended = True
                break
            given = self._take(chunk)
            if self.passing == "torn" and chunk.endswith(NUL):
                self._skip_hole()
            if given:
                return given
        return b""  # what is held is a last line cut short: never given out

    def finish(self) -> list[tuple[int, str]]:
        """Every line not given out (the last one too, once the writer is done), by number; then the count of the
        ones not listed, if any."""
        if self.passing is not None:
            self._end_passed()
        elif self.held:
            self._problem(self.lines + 1, "cut short (no newline at the end: the writer stopped mid-line): skipped")
            self.held = b""
        self.ended = True
        more = [(self.lines, f"and {self.more_problems:,} more lines skipped")] if self.more_problems else []
        return [*self.problems, *more]

    def _take(self, chunk: bytes) -> bytes:
        """The lines `chunk` ends (torn ones blanked); the rest held, or passed over."""
        given = b""
        if self.passing is not None:
            newline = chunk.find(b"\n")
            if newline < 0:
                self.passed_nuls += chunk.count(NUL)
                return b""
            self.passed_nuls += chunk.count(NUL, 0, newline)
            self._end_passed()
            given, chunk = b"\n", chunk[newline + 1 :]
        end = chunk.rfind(b"\n") + 1
        if end:
            # One copy of the chunk, not two (held + chunk, then its lines): a log's chunks are megabytes
            whole = chunk if end == len(chunk) and not self.held else b"".join((self.held, memoryview(chunk)[:end]))
            rest = chunk[end:]
        else:
            whole, rest = b"", self.held + chunk
        if NUL in whole:
            whole = self._blank_torn(whole)
        self.lines += whole.count(b"\n")
        self.held = b""
        if NUL in rest:
            self.passing, self.passed_nuls = "torn", rest.count(NUL)
        elif len(rest) > self.max_line:
            self.passing = "long"
        else:
            self.held = rest
        return given + whole if given else whole

    def _blank_torn(self, whole: bytes) -> bytes:
        lines = whole.split(b"\n")[:-1]
        for index, line in enumerate(lines):
            if NUL in line:
                self._problem(self.lines + index + 1, torn_reason(line.count(NUL)))
                lines[index] = b""
        return b"\n".join(lines) + b"\n"

    def _end_passed(self) -> None:
        why = (
            torn_reason(self.passed_nuls) if self.passing == "torn" else f"longer than {self.max_line:,} bytes: skipped"
        )
        self.lines += 1
        self._problem(self.lines, why)
        self.passing, self.passed_nuls = None, 0

    def _problem(self, number: int, why: str) -> None:
        if len(self.problems) < self.PROBLEMS_KEPT:
            self.problems.append((number, why))
        else:
            self.more_problems += 1

    def _skip_hole(self) -> None:
        """Within a torn line, past the hole of a sparse file that follows (all NUL bytes), without reading it."""
        try:
            fd, here = self.handle.fileno(), self.handle.tell()
            raw_at = os.lseek(fd, 0, os.SEEK_CUR)
        except (AttributeError, OSError, ValueError):
            return  # a pipe, or a stream in memory: read as it comes
        try:
            try:
                data_at = os.lseek(fd, here, os.SEEK_DATA)
            except OSError as err:
                if err.errno != errno.ENXIO:
                    return  # no hole to skip here, or a file system that cannot say
                data_at = os.fstat(fd).st_size  # a hole to the end
            finally:
                os.lseek(fd, raw_at, os.SEEK_SET)  # where the handle's buffer has its file: asked, never moved
        except OSError:
            return
        if data_at > here:
            self.handle.seek(data_at)
            self.passed_nuls += data_at - here
