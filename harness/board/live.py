"""A run's board written live: the capture's events, taken off the writers' threads, to TensorBoard (and W&B).

`execute` fans every capture write out to `LiveBoard.put` (status, manifest,
metrics, pauses, guard samples; log lines are not taken), which only puts it
on a queue: the log pump and the guard never wait for the board. The board's
own thread turns events into records (`harness.board.translate`) and writes
them, flushing once per batch, so a step's events are on disk as soon as the
harness recorded the step.

The events are the lesser record: nothing that happens here stops the run or
its capture. A write that fails (a full disk, a directory made unwritable) is
said once, as a warning, and writing stops; `harness export --format
tensorboard` rebuilds the events from the capture later. A bug is said the
same way.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Protocol, Sequence

from harness.board.eventfile import FILE_PREFIX, EventFile
from harness.board.names import TENSORBOARD_DIR_NAME, board_run_name
from harness.board.records import Record
from harness.board.translate import RunBoard
from harness.capture.files import describe_os_error
from harness.fs.files import prepare_directory

if TYPE_CHECKING:
    from harness.capture.writer import Event, Forward
    from harness.jsontypes import JSONObject

CLOSE_TIMEOUT_S = 30.0
_SKIPPED_KINDS = frozenset({"log"})  # the bulk of the events, and nothing the board shows


class LeadIn(Protocol):
    """What a resumed attempt's board shows before its own steps (`harness.board.replay.LeadIn`); a protocol so the
    live board need not import the replay, which builds on it."""

    def first_status(self, status: JSONObject) -> JSONObject:
        """The attempt's first status as the one run's."""
        ...

    def records(self, board: RunBoard, status: JSONObject) -> list[Record]:
        """The lineage's records fed to `board`, then the markers up to the attempt's own resume."""
        ...


class Sink(Protocol):
    """Somewhere records go: a TensorBoard event file, an offline W&B run."""

    name: str  # what it writes, as the warnings name it: `tensorboard`, `wandb`
    lost: str  # what a failure costs and what gets it back, said after the reason (`tensorboard: ...: <lost>`)

    def write(self, records: Sequence[Record]) -> None:
        """Write and flush (OSError when the disk refuses)."""

    def close(self) -> None:
        """Flush and release what the sink holds."""


SinkFactory = Callable[[str], list[Sink]]  # the TensorBoard run's name -> the sinks of the run


TENSORBOARD_LOST = (
    "its events stop here; the run and its capture go on "
    "(`harness export --format tensorboard` rebuilds them from the capture)"
)


class TensorBoardSink:
    """One run's event file under `<capture root>/tensorboard/<board run>/`, replacing the events there."""

    name = "tensorboard"
    lost = TENSORBOARD_LOST

    def __init__(self, directory: Path, root: Optional[Path] = None) -> None:
        self.directory = prepare_directory(directory, root)  # inside the capture root, or refused: nothing cleared
        clear_events(directory)
        self.file = EventFile(directory, root)

    def write(self, records: Sequence[Record]) -> None:
        self.file.write(records)

    def close(self) -> None:
        self.file.close()


def clear_events(directory: Path) -> None:
    """Remove the event files directly in `directory` (a run's earlier attempt); nothing else, nothing below."""
    if not directory.is_dir():
        return
    for path in directory.iterdir():
        if path.name.startswith(FILE_PREFIX) and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)


def tensorboard_sinks(capture_root: Path) -> SinkFactory:
    """The sink factory that writes a run's events under `<capture_root>/tensorboard/`."""

    def make(board_run: str) -> list[Sink]:
        return [TensorBoardSink(capture_root / TENSORBOARD_DIR_NAME / board_run, capture_root)]

    return make


class LiveBoard(threading.Thread):
    """One run's board, fed by `put` from any thread, written by its own thread."""

    def __init__(
        self,
        run: str,
        sinks: SinkFactory,
        warn: Callable[[str], None],
        lead_in: Optional[LeadIn] = None,
    ) -> None:
        super().__init__(name=f"board-{run}", daemon=True)
        self.run_name = run
        self.board = RunBoard(run)
        self._lead_in = lead_in  # a resumed attempt's: the lineage it continues
        self._first_status: Optional[JSONObject] = None
        self._make_sinks = sinks
        self._warn = warn
        self._queue: queue.SimpleQueue[Optional[Event]] = queue.SimpleQueue()
        self._sinks: Optional[list[Sink]] = None
        self._pending: list[Record] = []
        self.failed: Optional[str] = None  # why the TensorBoard events are not whole (None: they are)
        self._stopped = False  # nothing more is written: a bug, or no sink left
        self.written = 0  # records written

    # --------------------------------------------------------------------------- the writers' side

    def put(self, event: Event) -> None:
        """Take one capture event; never blocks, never raises."""
        if event[0] not in _SKIPPED_KINDS:
            self._queue.put(event)

    def forwarding(self, forward: Optional["Forward"]) -> "Forward":
        """A forward that gives each event to `forward` (when there is one), then to the board."""
        if forward is None:
            return self.put

        def both(event: Event) -> None:
            forward(event)
            self.put(event)

        return both

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Write what is queued, then stop; a board that cannot finish in `timeout_s` is left (a daemon)."""
        if self.ident is None:
            return
        self._queue.put(None)
        self.join(timeout_s)
        if self.is_alive():
            self._say(f"its events were not all written within {timeout_s:g} s")

    # --------------------------------------------------------------------------- the board's thread

    def run(self) -> None:
        closing = False
        while not closing:
            events = [self._queue.get()]
            while True:  # a batch: whatever else is queued already
                try:
                    events.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if None in events:
                closing = True
                events = [event for event in events if event is not None]
            try:
                records: list[Record] = []
                for event in events:
                    if event is not None:
                        records += self._translate(event)
                if closing:
                    records += self.board.finish()
                self._write(records)
            except Exception as err:  # a bug: said once, and the run goes on
                self._fail(f"{type(err).__name__}: {err}")
        self._close_sinks()
        if self.board.skipped and self.failed is None:
            self._warn(f"{self.run_name}: tensorboard: {self.board.skipped_text()}")

    def _translate(self, event: Event) -> list[Record]:
        """The records of one event; a resumed attempt's board takes the lineage it continues first: started when
        the lineage started, the earlier steps right after the run's manifest, as the stitched run's rebuild."""
        if self._lead_in is None:
            return self.board.feed(event)
        lead_in = self._lead_in
        kind, name, payload = event
        if kind == "status" and self._first_status is None and isinstance(payload, dict):
            self._first_status = payload
            event = (kind, name, lead_in.first_status(payload))
        records = self.board.feed(event)
        if self.board.manifest is not None:
            self._lead_in = None
            records += lead_in.records(self.board, self._first_status or {})
        return records

    def _write(self, records: list[Record]) -> None:
        if self._stopped or not records:
            return
        self._pending += records
        if self._sinks is None:
            if self.board.manifest is None:
                return  # where the run goes on the board comes with the manifest
            try:
                self._sinks = self._make_sinks(board_run_name(self.run_name, self.board.seed))
            except OSError as err:
                self._fail(_describe(err))
                return
        batch, self._pending = self._pending, []
        for sink in list(self._sinks):
            try:
                sink.write(batch)
            except OSError as err:
                self._lose(sink, _describe(err))
        if self._sinks:
            self.written += len(batch)

    def _lose(self, sink: Sink, why: str) -> None:
        """One sink failed: it is said once, with what it costs, and dropped; the others go on."""
        assert self._sinks is not None
        self._sinks.remove(sink)
        try:
            sink.close()
        except Exception:
            pass  # it failed already: what it still holds is lost with it
        if sink.name == TensorBoardSink.name or not self._sinks:
            self.failed = self.failed or why  # the run's end rebuilds no events over a board that failed
        self._stopped = not self._sinks
        self._say(f"{why}: {sink.lost}", sink.name)

    def _fail(self, why: str) -> None:
        """Nothing more is written: said for the events, and for each other sink with what it costs there."""
        self._stopped = True
        if self.failed is None:
            self.failed = why
            self._say(f"{why}: {TENSORBOARD_LOST}")
            for sink in self._sinks or ():
                if sink.name != TensorBoardSink.name:
                    self._say(f"{why}: {sink.lost}", sink.name)

    def _say(self, message: str, name: str = "tensorboard") -> None:
        try:
            self._warn(f"{self.run_name}: {name}: {message}")
        except Exception:
            pass  # the person's channel failed too: nothing more to do

    def _close_sinks(self) -> None:
        for sink in list(self._sinks or ()):
            try:
                sink.close()
            except OSError as err:
                self._lose(sink, _describe(err))


def _describe(err: OSError) -> str:
    return describe_os_error(err, err.filename if isinstance(err.filename, str) else "the event file")
