"""A run's board around one attempt: opened before its first write, closed after its last.

`execute` wraps each attempt in `board_session`: the capture's forward fans
out to the live board (harness.board.live), whose thread writes the events;
a resumed attempt's board starts with the lineage it continues (the run's one
curve while it runs). At the end the board is drained, and if the run's
current capture is not the attempt just written (a `--force` rerun that
failed leaves the succeeded one current; a resume refused leaves the one it
would have continued), or is a resume, the run's events are rebuilt from the
current capture, so the board shows what the summary reads.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from harness.board.eventfile import missing_writer
from harness.board.live import LiveBoard, Sink, SinkFactory, TensorBoardSink, tensorboard_sinks
from harness.board.names import TENSORBOARD_DIR_NAME
from harness.board.replay import Rebuilt, lead_in, lineage_parts, rebuild_run
from harness.board.wandb import WandbSink, wandb_missing
from harness.capture.files import describe_os_error
from harness.capture.reader import attempt_number

if TYPE_CHECKING:
    from harness.capture.writer import Forward
    from harness.experiments.schema import ExportConfig


class NoBoard:
    """The board of a run that has none: captures are forwarded as they were."""

    def forwarding(self, forward: Optional["Forward"]) -> Optional["Forward"]:
        return forward


def sinks_for(capture_root: Path, export: "ExportConfig", warn: Callable[[str], None]) -> Optional[SinkFactory]:
    """The sinks the experiment's `export` block asks for and this machine can write (None: none); a warning for
    each one asked for that cannot be."""
    tensorboard = export.tensorboard
    if tensorboard:
        why = missing_writer()
        if why is not None:
            warn(f"tensorboard: {why}: no events for this run")
            tensorboard = False
    wandb = export.wandb == "offline"
    if wandb:
        why = wandb_missing()
        if why is not None:
            warn(f"wandb: {why}: no offline W&B run")
            wandb = False
    if not (tensorboard or wandb):
        return None

    def make(board_run: str) -> list[Sink]:
        sinks: list[Sink] = []
        if tensorboard:
            sinks.append(TensorBoardSink(capture_root / TENSORBOARD_DIR_NAME / board_run, capture_root))
        if wandb:
            sinks.append(WandbSink(capture_root, board_run))
        return sinks

    return make


@contextmanager
def board_session(
    run: str,
    capture_root: Path,
    export: "ExportConfig",
    warn: Callable[[str], None],
    resumes: Optional[tuple[int, int]] = None,
) -> Iterator["LiveBoard | NoBoard"]:
    """The live board of one attempt of `run` (see the module doc); never raises for the board's own faults.

    `resumes`: (the attempt it continues, the rollout it continues from) when it is a resume: its board starts with
    the lineage it continues, a marker at the resume, as the run's one curve."""
    sinks = sinks_for(capture_root, export, warn)
    if sinks is None:
        yield NoBoard()
        return
    board = LiveBoard(run, sinks, warn, lead_in(capture_root / run, *resumes) if resumes is not None else None)
    board.start()
    try:
        yield board
    finally:
        board.close()
        if export.tensorboard and board.failed is None:
            _show_current_attempt(run, capture_root, board.board.attempt, warn)


def _show_current_attempt(run: str, capture_root: Path, written: Optional[int], warn: Callable[[str], None]) -> None:
    """Rebuild the run's events from its current capture when that is not the attempt written live."""
    run_path = capture_root / run
    try:
        target = os.readlink(run_path)
    except OSError:
        return  # not a link to an attempt: nothing else is current
    current = attempt_number(Path(target).name)
    if current is None or written is None or (current == written and not lineage_parts(run_path)):
        return  # (a resumed attempt, current, is shown with the attempts it continues: rebuilt)
    try:
        rebuild_run(run, run_path, tensorboard_sinks(capture_root), Rebuilt())
    except OSError as err:
        warn(f"{run}: tensorboard: {describe_os_error(err, 'the events of its current attempt')}")
    except Exception as err:  # a bug: said, and the run's end is not changed by it
        warn(f"{run}: tensorboard: could not show its current attempt ({type(err).__name__}: {err})")
