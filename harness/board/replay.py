"""A capture's files replayed as the events that wrote them: the board rebuilt from captures alone.

`harness export --format tensorboard` reads each run's current capture and
feeds its files to the same translator the live board uses, as the same
events, in the order they were written:

- status.json `running` first (the final status with its end taken away: the
  run's start), then the manifest;
- the lines of metrics.jsonl, pauses.jsonl and guard.jsonl, each file in its
  own order, merged by their times (a step's end, a window's start or end, a
  sample's time);
- args.json, then the final status.

The translator does not depend on how the three files interleave (see
harness.board.translate), so a rebuilt run carries the same records as the
run written live.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional

from harness.board.live import SinkFactory, tensorboard_sinks
from harness.board.names import board_run_name
from harness.board.records import Record
from harness.board.translate import RunBoard
from harness.times import parse_time_us

if TYPE_CHECKING:
    from harness.capture.writer import Event
    from harness.jsontypes import JSONObject

_LINE_FILES = ("metrics.jsonl", "pauses.jsonl", "guard.jsonl")


def capture_events(run_dir: Path, notes: list[str]) -> Iterator[Event]:
    """The events that wrote the capture in `run_dir`, in order (see the module doc); odd lines become notes."""
    run_dir = Path(run_dir)
    status = _json_object(run_dir / "status.json", notes)
    if status is not None:
        started: JSONObject = {**status, "state": "running", "ended_at": None, "exit_code": None, "error": None}
        yield ("status", "status.json", started)
    manifest = _json_object(run_dir / "manifest.json", notes)
    if manifest is not None:
        yield ("json", "manifest.json", manifest)
    streams = [_timed_lines(run_dir / name, rank, notes) for rank, name in enumerate(_LINE_FILES)]
    for _, _, _, name, row in heapq.merge(*streams):
        yield ("jsonl", name, row)
    args = _json_object(run_dir / "args.json", notes)
    if args is not None:
        yield ("json", "args.json", args)
    if status is not None and status.get("state") != "running":
        yield ("status", "status.json", status)


def _timed_lines(path: Path, rank: int, notes: list[str]) -> Iterator[tuple[int, int, int, str, JSONObject]]:
    """(time, file rank, line number, file name, line) for each line, the time of a timeless line the one before.

    The merge compares (time, rank, line number) only: two files never share a rank, so it keeps each file's
    order and never compares the lines themselves.
    """
    from harness.capture.bounded import iter_jsonl
    from harness.capture.columns import loads_line

    last = 0
    for number, row in iter_jsonl(path, notes, loads=loads_line):
        time_us = _line_time(path.name, row)
        last = time_us if time_us is not None else last
        yield (last, rank, number, path.name, row)


def _line_time(name: str, row: JSONObject) -> Optional[int]:
    if name == "metrics.jsonl":
        return parse_time_us(row.get("t_step_end")) or parse_time_us(row.get("t_rollout_end"))
    if name == "pauses.jsonl":
        return parse_time_us(row.get("end")) or parse_time_us(row.get("start"))
    return parse_time_us(row.get("t"))


def _json_object(path: Path, notes: list[str]) -> Optional[JSONObject]:
    from harness.capture.bounded import MAX_JSON_BYTES, Unreadable, loads_json, read_bounded

    try:
        value = loads_json(read_bounded(path, MAX_JSON_BYTES))
    except FileNotFoundError:
        return None
    except (Unreadable, ValueError) as err:
        notes.append(f"{path.name}: {err}")
        return None
    return value if isinstance(value, dict) else None


def replay_records(run: str, run_dir: Path, notes: Optional[list[str]] = None) -> tuple[RunBoard, list[Record]]:
    """The translator after the whole capture, and every record of the run."""
    board = RunBoard(run)
    records: list[Record] = []
    for event in capture_events(run_dir, notes if notes is not None else []):
        records += board.feed(event)
    records += board.finish()
    return board, records


@dataclass
class Rebuilt:
    """What `rebuild` wrote: per run, its TensorBoard run and how many records; what was skipped and why."""

    runs: dict[str, str] = field(default_factory=dict)  # capture run -> TensorBoard run
    records: int = 0
    skipped_values: dict[str, str] = field(default_factory=dict)  # run -> the non-finite values skipped
    notes: list[str] = field(default_factory=list)


def rebuild_run(run: str, run_dir: Path, sinks: SinkFactory, rebuilt: Rebuilt) -> None:
    """Replay one capture into its sinks (OSError when they cannot be written)."""
    notes: list[str] = []
    board, records = replay_records(run, run_dir, notes)
    rebuilt.notes += [f"{run}: {note}" for note in notes]
    if board.manifest is None:
        rebuilt.notes.append(f"{run}: no readable manifest.json: not on the board")
        return
    name = board_run_name(run, board.seed)
    made = sinks(name)
    try:
        for sink in made:
            sink.write(records)
    finally:
        for sink in made:
            sink.close()
    rebuilt.runs[run] = name
    rebuilt.records += len(records)
    if board.skipped:
        rebuilt.skipped_values[run] = board.skipped_text()


def rebuild(capture_root: Path, sinks: Optional[SinkFactory] = None) -> Rebuilt:
    """Every run's board under `capture_root`, from its current capture (OSError when the disk refuses)."""
    from harness.capture.reader import find_runs

    capture_root = Path(capture_root)
    make = sinks or tensorboard_sinks(capture_root)
    rebuilt = Rebuilt()
    runs, _ = find_runs(capture_root)
    for run_dir in runs:
        rebuild_run(run_dir.name, run_dir, make, rebuilt)
    return rebuilt
