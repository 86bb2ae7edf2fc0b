"""The step merger: Miles log lines in, one record per training step out.

`LogParser.feed(line)` is the hot path the runner calls on every line of a
live log: a line that holds none of a handful of marker substrings costs a few
substring tests, nothing more, unless the parser is inside an argument dump or
a traceback. `feed_stream` reads a whole file (or stdin) in large chunks,
counts their noise at once and jumps from marker to marker; it calls the same
per-line code on every line that has anything to read (a dict that is no
metric, such as a memory dump, it passes over undecoded), so it yields
exactly what feeding every line would.

Only the first launch line and the first argument dump are read: runs read
together each bring theirs, and values of different runs must not mix (a
later dump costs no more than noise, and a later launch line is not split).

Lines are split on `\\n` only. A carriage return (tqdm progress bars) splits a
line into segments that are each read as if they were a line of their own,
with the same line number and Docker timestamp.

Each metric line goes to the step merger (`steps.StepMerger`, whose docstring
says how lines merge into steps). The noise lines Miles prints (`ft key=value`
lines, tqdm bars, "First rollout sample", "Finish rollout") are counted by kind
(`noise`) and never parsed: in a line nothing else reads, each kind's marker
where it occurs (`lines.count_noise`: a tqdm line of three renders is three);
in a line that is read, each segment by `lines.noise_kind` before anything
else, so model text in a sample line can never read as a metric, a dump or a
failure.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, Protocol

from harness.errors import ExitCode, HarnessError
from harness.fs.bounded import WholeLines
from harness.mileslog.keys import filter_path
from harness.mileslog.lines import (
    LAUNCH_MARKER,
    NOISE_MARKERS,
    SKIPPED_MARKER,
    TRACEBACK_MARKER,
    argument_marker,
    count_noise,
    count_noise_bytes,
    exception_line,
    find_metric,
    is_oom,
    job_failed,
    may_end_metric_head,
    may_hold_metric,
    missing_path,
    noise_kind,
    read_argument,
    read_eval_skipped,
    read_launch,
    read_metric,
    split_ray_prefix,
    strip_ansi,
    strip_ansi_bytes,
)
from harness.mileslog.records import EvalRecord, Failure, Metrics, ParsedLog, Problem, StepRecord
from harness.mileslog.steps import StepMerger
from harness.times import split_time_prefix

# A line holding none of these is not read unless an argument dump or a traceback is open;
# its noise markers (lines.NOISE_MARKERS) are only counted. `feed` tests them on the str;
# `_scan` finds them in the bytes (the first one as a `{` preceded by `: `: finding one byte
# is several times faster than three) and counts the noise of the lines between in bulk.
# These are read wherever they occur: a dict (a metric line), a traceback, a job's failure,
# a skipped eval.
MARKERS = (": {", TRACEBACK_MARKER, "' failed", SKIPPED_MARKER)
# These are read once: the first argument dump and the first launch line. Once read, a later
# one is a line like any other and is no longer looked for: each marker sought costs a pass
# over the whole log, and a single run's log holds each once, near its start.
DUMP_MARKER = " arguments -"
ONCE_MARKERS = (DUMP_MARKER, LAUNCH_MARKER)

# An argument dump or a traceback that goes this many lines without a line of
# its own is taken as cut off and closed.
STALE_LINES = 2000
# A traceback whose exception line has been read waits only for what continues it
# right away (a chained exception, a RayTaskError's frames): while it is open every
# line is looked at, so it closes after this many lines without a line of its own.
FINISHED_TRACEBACK_LINES = 50

CHUNK_BYTES = 1 << 23
_NOISE_BYTES = tuple(marker.encode() for marker in NOISE_MARKERS)
_READ_BYTES = tuple(marker.encode() for marker in MARKERS[1:] + ONCE_MARKERS) + _NOISE_BYTES


@dataclass
class _Traceback:
    in_frames: bool  # False once its exception line has been read
    last_line: int


class ByteStream(Protocol):
    """What `feed_stream` reads: a binary file, or anything with its `read`."""

    def read(self, size: int = -1, /) -> bytes: ...


class LogParser:
    """Feed Miles log lines one at a time (or a whole stream); get step records as they complete."""

    def __init__(self) -> None:
        self._line_no = 0
        self._idle = True  # no argument dump and no traceback open: noise lines can be skipped
        self._finished = False
        self._steps = StepMerger()
        self._args: Metrics | None = None
        self._args_source: str | None = None  # Ray source of the open argument dump
        self._args_last = 0
        self._launch: list[str] | None = None
        self._tracebacks: dict[str, _Traceback] = {}
        self._exception: Failure | None = None
        self._exception_source = ""  # the Ray source that printed it
        self._job_failed: Failure | None = None
        self._noise: dict[str, int] = {}
        self._markers: tuple[str, ...] = MARKERS + ONCE_MARKERS  # what a line must hold to be read, while idle
        self._other_bytes = tuple(marker.encode() for marker in self._markers[1:])  # all but `: {`, for `_scan`

    # ---- what has been read so far --------------------------------------------------

    @property
    def lines_read(self) -> int:
        """The number of the last line read."""
        return self._line_no

    @property
    def records(self) -> list[StepRecord]:
        """The step records emitted so far, in the order they were emitted."""
        return list(self._steps.records)

    @property
    def evals(self) -> list[EvalRecord]:
        evals = self._steps.evals
        return [evals[n] for n in sorted(evals)]

    @property
    def args(self) -> Metrics | None:
        """The first argument dump: name -> value (None, bool, int, float, list/dict literal, else str)."""
        return None if self._args is None else dict(self._args)

    @property
    def launch(self) -> list[str] | None:
        """The argv of the first `Running entrypoint for job ...: <command>` line."""
        return None if self._launch is None else list(self._launch)

    @property
    def failure(self) -> Failure | None:
        """{"kind", "line", "line_number"[, "reason"]} of what ended the run, or None.

        The last exception line of a traceback after the last metric line (an
        out-of-memory one outranks a later other one, which is usually its
        consequence); else a `Job '...' failed` line. A traceback followed by
        metric lines was survived and is not the run's failure. An exception
        that says the run's filter path cannot be loaded (Miles imports it at
        the first rollout) is `missing_filter`, its reason naming the path.
        """
        found = self._exception or self._job_failed
        if found is None:
            return None
        found = found.copy()
        path = filter_path(self._args, self._launch) if found["kind"] == "exception" else None
        if path is not None and missing_path(found["line"], path):
            found["kind"] = "missing_filter"
            found["reason"] = f"the image's Miles has no {path}"
        return found

    @property
    def noise(self) -> dict[str, int]:
        """The noise lines recognised so far, by kind (`lines.NOISE_KINDS`)."""
        return {kind: found for kind, found in self._noise.items() if found}

    @property
    def problems(self) -> list[Problem]:
        """What could not be read: {"line": n, "reason": str[, "step": N]}."""
        return [problem.copy() for problem in self._steps.problems]

    def result(self) -> ParsedLog:
        """Finish (if not yet) and return everything read, steps in step order."""
        if not self._finished:
            self.finish()
        return ParsedLog(
            steps=sorted(self._steps.records, key=lambda record: record.step),
            evals=self.evals,
            args=self.args,
            launch=self.launch,
            failure=self.failure,
            problems=self.problems,
            lines=self._line_no,
            noise=self.noise,
        )

    # ---- feeding ----------------------------------------------------------------------

    def feed(self, line: str, line_number: int | None = None) -> list[StepRecord]:
        """Read one line (its trailing newline, if any, is ignored); return the steps it completed."""
        if self._finished:
            raise RuntimeError("LogParser.feed after finish()")
        n = self._line_no + 1 if line_number is None else line_number
        self._line_no = n
        if (
            self._idle
            and ": {" not in line
            and TRACEBACK_MARKER not in line
            and "' failed" not in line
            and SKIPPED_MARKER not in line
            and (self._args is not None or DUMP_MARKER not in line)
            and (self._launch is not None or LAUNCH_MARKER not in line)
            and "First rollout sample" not in line
            and "Finish rollout" not in line
            and "%|" not in line
            and "ft " not in line
        ):
            return []
        return self._process(line, n)

    def feed_stream(self, stream: ByteStream, chunk_bytes: int = CHUNK_BYTES) -> list[StepRecord]:
        """Read a binary stream to its end (bytes decoded as UTF-8, bad bytes replaced).

        Same result as feeding every line; a last line without a newline is a line.
        """
        if self._finished:
            raise RuntimeError("LogParser.feed_stream after finish()")
        out: list[StepRecord] = []
        carry = b""  # the start of a line that goes on in the next chunk
        while True:
            chunk = stream.read(chunk_bytes)
            if not chunk:
                break
            start = 0
            if carry:
                # Only the line that spans the two chunks is joined: joining whole chunks costs a copy of each.
                start = chunk.find(b"\n") + 1
                if not start:
                    carry += chunk
                    continue
                line = carry + chunk[:start]
                self._scan(line, 0, len(line), out)
            end = chunk.rfind(b"\n") + 1
            if end > start:
                self._scan(chunk, start, end, out)
            carry = chunk[max(start, end) :]
        if carry:
            out.extend(self.feed(carry.decode("utf-8", "replace")))
        return out

    def finish(self) -> list[StepRecord]:
        """The steps still open, marked incomplete, in step order. No feeding after this."""
        if self._finished:
            return []
        self._finished = True
        out = self._steps.finish()
        self._args_source = None
        self._tracebacks.clear()
        self._idle = True
        return out

    # ---- the per-line work --------------------------------------------------------------

    def _scan(self, buf: bytes, begin: int, end: int, out: list[StepRecord]) -> None:
        """Process the complete lines of buf[begin:end] (begin is where a line starts, end is just past a newline)."""
        find, count, rfind = buf.find, buf.count, buf.rfind
        # Every line's noise is counted here at once, as if nothing read it; a line `_process` sees has its own
        # taken back first, and `_process` counts it as `feed` would.
        self._add_noise(count_noise_bytes(buf, begin, end), 1)
        # The next `: {` (a dict) and the next of the other markers, each searched for once per buffer (`end`: none;
        # below pos: look again).
        others = self._other_bytes  # as they are now: a marker no longer sought that is found here is read as any line
        other_at = [-1] * len(others)
        other = dict_at = -1
        heads_only = find(b"\x1b", begin, end) < 0  # no ANSI code that removed could join a head
        pos = begin
        n = self._line_no
        while pos < end:
            if self._idle:
                if other < pos:
                    other = _next_others(buf, pos, end, others, other_at)
                if dict_at < pos:
                    dict_at = _next_dict(buf, pos, end, heads_only)
                best = dict_at if dict_at < other else other
                if best >= end:
                    n += count(b"\n", pos, end)
                    break
                start = rfind(b"\n", pos, best) + 1 or pos
                n += count(b"\n", pos, start)
            else:
                start = pos
            stop = find(b"\n", start, end)
            n += 1
            self._line_no = n
            line = buf[start:stop]
            if self._idle and other >= stop and _only_noise(line):
                pos = stop + 1
                continue
            noisy = _NOISE_BYTES[0] in line or _NOISE_BYTES[1] in line or _NOISE_BYTES[2] in line or b"ft " in line
            if noisy:
                self._add_noise(count_noise_bytes(line, 0, len(line)), -1)
            # Decoding keeps every ASCII byte, so a line without a noise marker has none once decoded, unless
            # removing ANSI codes joins one.
            done = self._process(line.decode("utf-8", "replace"), n, noisy or b"\x1b" in line)
            if done:
                out.extend(done)
            pos = stop + 1
        self._line_no = n

    def _count_noise(self, line: str) -> None:
        """Count the noise in a line nothing reads: each noise marker's occurrences (`lines.count_noise`)."""
        if any(map(line.__contains__, NOISE_MARKERS)):
            for kind, found in count_noise(line).items():
                self._noise[kind] = self._noise.get(kind, 0) + found

    def _add_noise(self, counts: dict[str, int], sign: int) -> None:
        for kind, found in counts.items():
            self._noise[kind] = self._noise.get(kind, 0) + sign * found

    def _process(self, line: str, n: int, may_be_noise: bool = True) -> list[StepRecord]:
        """Read one line; `may_be_noise` False says that no noise marker is in it (no segment is a noise line)."""
        if self._idle and ": {" not in line and not any(map(line.__contains__, self._markers[1:])):
            self._count_noise(line)  # a noise line: counted, never read (ANSI codes or not, as `_scan` counts it)
            return []
        if (
            self._idle
            and "\x1b" not in line
            and find_metric(line) is None
            and not any(map(line.__contains__, self._markers[1:]))
        ):
            self._count_noise(line)  # a noise line, or a dict that is not a metric (memory dumps): nothing to read
            return []
        out: list[StepRecord] = []
        # The Docker time as integer nanoseconds; written out only for the metric lines that keep it.
        stamp, text = split_time_prefix(line.rstrip("\r\n"))
        if "\x1b" in text:
            text = strip_ansi(text)
        if "\r" in text:
            for segment in text.split("\r"):
                self._segment(segment, stamp, n, out, may_be_noise)
        else:
            self._segment(text, stamp, n, out, may_be_noise)
        if self._args_source is not None and n - self._args_last > STALE_LINES:
            self._args_source = None
        if self._tracebacks:
            for source in [
                s
                for s, tb in self._tracebacks.items()
                if n - tb.last_line > (STALE_LINES if tb.in_frames else FINISHED_TRACEBACK_LINES)
            ]:
                del self._tracebacks[source]
        self._idle = self._args_source is None and not self._tracebacks
        return out

    def _segment(self, segment: str, stamp: int | None, n: int, out: list[StepRecord], may_be_noise: bool) -> None:
        source, body = split_ray_prefix(segment)
        # Never a frame or a dump line.
        noise = noise_kind(body) if may_be_noise and body[:1] not in (" ", "\t") else None
        if noise is not None:
            self._noise[noise] = self._noise.get(noise, 0) + 1
            return
        head = find_metric(segment)
        if head is None and SKIPPED_MARKER in body:
            skipped = read_eval_skipped(body)
            if skipped is not None:
                self._steps.eval_skipped(skipped[0], skipped[1], stamp, n)
                return
        if head is not None:
            self._tracebacks.pop(source, None)
            if source == self._exception_source:
                # Metrics after a traceback from the process that printed it: it survived. Another's may have been
                # written before it (Docker merges stdout and stderr as they arrive), and prove nothing.
                self._exception = None
            self._steps.metric(read_metric(segment, head), stamp, n, out)
            return
        if self._args_source is not None and source == self._args_source:
            marker = argument_marker(body) if " arguments -" in body else None
            if marker == "end":
                self._args_source = None
                return
            argument = None if marker else read_argument(body)
            if marker or argument:
                if argument and self._args is not None and argument[0] not in self._args:
                    self._args[argument[0]] = argument[1]
                self._args_last = n
                return
        elif self._args is None and DUMP_MARKER in body and argument_marker(body) == "start":
            # the first dump only: a later one is another run's or a copy
            self._args_source = source
            self._args_last = n
            self._args = {}
            self._seek_once_markers()
            return
        if self._launch is None and LAUNCH_MARKER in body:
            # only the first is kept, so only it is split (runs read together repeat it)
            argv, problem = read_launch(body)
            if problem:
                self._steps.problem(n, problem)
            self._launch = argv
            self._seek_once_markers()
            return
        if self._tracebacks or TRACEBACK_MARKER in body:
            self._traceback_line(source, body, n)
        if "' failed" in body:
            failed = job_failed(body)
            if failed is not None:
                self._job_failed = {"kind": "job_failed", "line": body.strip(), "line_number": n}

    def _seek_once_markers(self) -> None:
        """Look only for the once-read markers (ONCE_MARKERS) whose line has not been read yet."""
        wanted = (self._args is None, self._launch is None)
        self._markers = MARKERS + tuple(marker for marker, want in zip(ONCE_MARKERS, wanted) if want)
        self._other_bytes = tuple(marker.encode() for marker in self._markers[1:])

    def _traceback_line(self, source: str, body: str, n: int) -> None:
        if TRACEBACK_MARKER in body:
            self._tracebacks[source] = _Traceback(in_frames=True, last_line=n)
            return
        tb = self._tracebacks.get(source)
        if tb is None:
            return
        tb.last_line = n
        stripped = body.strip()
        if not stripped:
            return
        if body[0] in " \t":
            if not tb.in_frames and stripped.startswith('File "'):
                tb.in_frames = True  # a traceback inside the message (RayTaskError), or a chained one
            return
        if tb.in_frames and exception_line(stripped):
            tb.in_frames = False
            found: Failure = {"kind": "oom" if is_oom(stripped) else "exception", "line": stripped, "line_number": n}
            if self._exception is None or found["kind"] == "oom" or self._exception["kind"] != "oom":
                self._exception, self._exception_source = found, source
            return
        if not tb.in_frames and stripped.startswith(
            ("During handling of the above exception", "The above exception was the direct cause")
        ):
            return
        del self._tracebacks[source]


def _only_noise(line: bytes) -> bool:
    """True for an undecoded line with no marker but `: {`, read while idle, in which `_process` would find nothing
    to read and count the noise as `count_noise_bytes` counted it: a dict that is no metric (memory dumps). ANSI
    codes are taken out first, as `_process` takes them out (one may part a metric head or another marker); a line
    with them and a noise marker is left to `_process`, which then counts the noise segment by segment."""
    if b"\x1b" not in line:
        return not may_hold_metric(line)
    bare = strip_ansi_bytes(line)
    return not (
        may_hold_metric(bare) or any(map(line.__contains__, _READ_BYTES)) or any(map(bare.__contains__, _READ_BYTES))
    )


def _next_dict(buf: bytes, pos: int, end: int, heads_only: bool) -> int:
    """Where the next `: {` is at or after pos, at its `{` (`end`: none): one byte, found faster than three. Only one
    that may end a metric head, in a line without ANSI codes (all of them with `heads_only`: the buffer has none): a
    dict no head leads to (memory dumps) is passed over without its line being read. A line with ANSI codes is read,
    as `feed` reads it: removing them may join a head, a marker or a noise marker."""
    find = buf.find
    at = find(b"{", pos, end)
    while at >= 0 and (buf[at - 2 : at] != b": " or not _may_hold_head(buf, at, end, heads_only)):
        at = find(b"{", at + 1, end)
    return end if at < 0 else at


def _may_hold_head(buf: bytes, brace: int, end: int, heads_only: bool) -> bool:
    """False when the line of the `: {` at `brace` has no ANSI code and that `{` ends no metric head."""
    if not heads_only:
        line_end = buf.find(b"\n", brace, end)
        if buf.find(b"\x1b", buf.rfind(b"\n", 0, brace) + 1, end if line_end < 0 else line_end) >= 0:
            return True
    return may_end_metric_head(buf, brace)


def _next_others(buf: bytes, pos: int, end: int, others: tuple[bytes, ...], other_at: list[int]) -> int:
    """Where the next of the other markers is at or after pos (`end`: none); `other_at` keeps where each one is
    next, so a buffer is searched once per marker."""
    for i, at in enumerate(other_at):
        if at < pos:
            at = buf.find(others[i], pos, end)
            other_at[i] = end if at < 0 else at
    return min(other_at)


def parse_lines(lines: Iterable[str]) -> ParsedLog:
    """Read an iterable of lines (e.g. an open text file) and return everything found."""
    parser = LogParser()
    for line in lines:
        parser.feed(line)
    return parser.result()


def parse_file(source: str | Path | BinaryIO) -> ParsedLog:
    """Read a plain log or a `container.log` (Docker timestamp prefixes) from a path or binary stream.

    Only its whole lines are read, never a torn one (NUL bytes a power loss
    left, or a last line cut short: harness.fs.bounded.WholeLines, the
    one rule for torn tails); each line left out is a problem naming it.
    A path that cannot be opened or read raises `HarnessError` (BAD_INPUT).
    """
    parser = LogParser()
    if not isinstance(source, (str, Path)):
        _feed_whole_lines(parser, source)
        return parser.result()
    path = Path(source)
    try:
        # Never blocking on a FIFO no one writes to (it reads as empty); `<(zcat log.gz)` is still read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as stream:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
                raise HarnessError(f"not a log file but a device or socket: {path}", ExitCode.BAD_INPUT)
            os.set_blocking(fd, True)
            _feed_whole_lines(parser, stream)
    except FileNotFoundError:
        raise HarnessError(f"no such log file: {path}", ExitCode.BAD_INPUT) from None
    except IsADirectoryError:
        raise HarnessError(f"not a log file but a directory: {path}", ExitCode.BAD_INPUT) from None
    except OSError as err:
        raise HarnessError(f"cannot read log file {path}: {err.strerror or err}", ExitCode.BAD_INPUT) from None
    return parser.result()


def _feed_whole_lines(parser: LogParser, stream: BinaryIO) -> None:
    whole = WholeLines(stream)
    parser.feed_stream(whole)
    for number, why in whole.finish():
        parser._steps.problem(number, why)
