"""The log pump: every line the trainer prints, read once, to container.log whole, to the parser, and each
completed step to metrics.jsonl; the capture's writes behind it stop at the first failure, said once.

A burst (the lines one read of the engine's log brought) is written to
container.log before any of its lines is parsed, so a step in metrics.jsonl
always has its lines in container.log (docs/architecture.md, "A run's path").
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from harness.capture.files import NO_SPACE, describe_os_error
from harness.capture.layout import Capture
from harness.capture.writer import CaptureWriter
from harness.engines import EngineUnavailable, RunGone, RunHandle
from harness.fs.failpoints import failpoint
from harness.fs.files import open_append, write_whole
from harness.run.attempt_checkpoints import AttemptCheckpoints
from harness.run.context import Reporter
from harness.secrets import KnownSecrets

if TYPE_CHECKING:
    from harness.mileslog import LogParser
    from harness.mileslog.records import StepRecord

LOG_FSYNC_EVERY_S = 1.0
LOG_WRITE_CHARS = 64 << 10  # a burst is written in pieces of whole lines about this long: a full disk keeps what fit


class CaptureWrites:
    """The capture's writes after the trainer started: the first failure stops them all, and is said once."""

    def __init__(
        self, capture: Capture, engine: str, reporter: Reporter, writer: Optional[CaptureWriter] = None
    ) -> None:
        self.capture = capture
        self.writer = writer or CaptureWriter(capture)
        self.engine = engine
        self.reporter = reporter
        self.error: Optional[str] = None
        self._lock = threading.Lock()

    def failed(self, err: OSError, what: str) -> None:
        hint = "free space" if err.errno in NO_SPACE else "make the capture directory writable"
        with self._lock:
            if self.error is not None:
                return
            self.error = f"{describe_os_error(err, what)} ({hint}, then run `harness recover`)"
        self.reporter.note(
            f"{self.capture.run}: {self.error}: the capture stops here; the trainer goes on and "
            f"the {self.engine} engine keeps its log"
        )

    def attempt(self, what: str, write: Callable[[], None]) -> bool:
        """Do one write unless writing has stopped; a failure stops writing."""
        if self.error is not None:
            return False
        try:
            write()
            return True
        except OSError as err:
            self.failed(err, what)
            return False


class LogPump(threading.Thread):
    """Reads every line once: to container.log whole, to the parser, and each completed step to metrics.jsonl;
    `known`: the secrets the harness passed, masked in every line before anything reads or writes it."""

    def __init__(
        self,
        handle: RunHandle,
        capture: Capture,
        parser: LogParser,
        reporter: Reporter,
        writes: CaptureWrites,
        known: Optional[KnownSecrets] = None,
        watch: Optional[AttemptCheckpoints] = None,
    ) -> None:
        super().__init__(name="log-pump", daemon=True)
        self.watch = watch  # a checkpointed run's: its save lines, a resume's proof (harness.run.attempt_checkpoints)
        self.handle = handle
        self.known = known if known else None
        self.capture = capture
        self.parser = parser
        self.reporter = reporter
        self.writes = writes
        self.steps_complete = 0
        self.lines = 0
        self.error: Optional[str] = None  # anything but a write failure: a lost engine, a bug
        self.engine_error: Optional[str] = None
        self.gone: Optional[str] = None  # what ran the trainer vanished from the engine

    def run(self) -> None:
        fd = None
        try:
            fd = open_append(self.capture.log_path, root=self.capture.root)
            self._pump(fd)
        except RunGone as err:
            self.gone = err.message
        except EngineUnavailable as err:
            self.engine_error = err.message
        except OSError as err:
            self.writes.failed(err, self.capture.log_path.name)
        except Exception as err:  # a bug: recorded, and the run is not trusted
            self.error = f"{type(err).__name__}: {err}"
        finally:
            if fd is not None:
                os.close(fd)

    def _pump(self, fd: int) -> None:
        # A burst (the lines that came in one read) is written to container.log before any of its lines is parsed,
        # so every record saved has its lines in the log: one write per burst (or per piece of a long one), not
        # per line. A piece that does not fit on the disk ends the capture at the last whole piece before it.
        good = os.fstat(fd).st_size
        last_sync = time.monotonic()
        writer = self.writes.writer
        known = self.known
        watch = self.watch
        for burst in self.handle.log_bursts(follow=True):
            for piece in whole_line_pieces(burst, LOG_WRITE_CHARS):
                if self.writes.error is not None:
                    return  # writing has stopped: the engine keeps the rest
                text = "\n".join(piece)
                if known is not None:
                    # The pieces hold whole lines and no known secret holds a line break: masking the piece masks
                    # each line, and no secret can straddle two reads of the stream.
                    masked = known.mask(text)
                    if masked is not text:
                        text, piece = masked, masked.split("\n")
                data = text.encode("utf-8", "replace") + b"\n"
                try:
                    write_whole(fd, data)
                except OSError as err:
                    os.ftruncate(fd, good)  # never a torn line: the capture ends on the last whole one
                    self.writes.failed(err, self.capture.log_path.name)
                    return
                good += len(data)
                writer.log_lines(piece)
                for line in piece:
                    self.lines += 1
                    if watch is not None:
                        watch.line(line, self.lines)
                    for record in self.parser.feed(line, self.lines):
                        if not self._save(record):
                            return
                    failpoint("mid-stream", self.lines)
            if time.monotonic() - last_sync >= LOG_FSYNC_EVERY_S:
                os.fsync(fd)
                last_sync = time.monotonic()
        os.fsync(fd)

    def finish(self) -> None:
        """Flush the parser: steps still open are written, marked incomplete."""
        try:
            for record in self.parser.finish():
                if not self._save(record):
                    return
        except Exception as err:
            self.error = self.error or f"{type(err).__name__}: {err}"

    def _save(self, record: "StepRecord") -> bool:
        if self.watch is not None and not self.watch.admit(record.step):
            return True  # a resume refused (or undecided at the end): none of its steps is the run's
        row = record.to_json(include_derived=False)
        if not self.writes.attempt(
            self.capture.metrics_path.name, lambda: self.writes.writer.jsonl(self.capture.metrics_path, row)
        ):
            return False
        if record.complete:
            self.steps_complete += 1
        self.reporter.step(self.capture.run, record, self.steps_complete)
        return True


def whole_line_pieces(lines: list[str], chars: int) -> Iterator[list[str]]:
    """`lines` in order, in pieces of whole lines of about `chars` characters (a longer line is a piece alone)."""
    if not lines:
        return
    if sum(map(len, lines)) + len(lines) <= chars:  # the usual burst: one piece
        yield lines
        return
    start, size = 0, 0
    for end, line in enumerate(lines):
        if size and size + len(line) + 1 > chars:
            yield lines[start:end]
            start, size = end, 0
        size += len(line) + 1
    if start < len(lines):
        yield lines[start:]
