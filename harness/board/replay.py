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

A run resumed from a checkpoint is replayed as one run (docs/checkpoints.md,
"A stitched run"): each attempt of its lineage's files in turn, its steps
only those it gives the run, and at each resume a marker: `run/resumed` (the
attempt's number, at the rollout it continued from) and a `run/resumes` text
saying from which checkpoint, after how long down. A resumed attempt's live
board starts the same way (`LeadIn`): the lineage it continues, replayed
into its translator right after the run's manifest, then its own events.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional, Sequence

from harness.board.live import SinkFactory, tensorboard_sinks
from harness.board.names import RUN_PREFIX, board_run_name
from harness.board.records import Record, Scalar, Text
from harness.board.translate import RunBoard, wall_seconds
from harness.capture.attempts import Attempt, RunAttempts
from harness.capture.columns import loads_line
from harness.capture.reader import current_attempt, find_runs
from harness.checkpoints.layout import iteration_name
from harness.checkpoints.lineage import read_resume, resume_chain
from harness.fs.bounded import MAX_JSON_BYTES, Unreadable, iter_jsonl, loads_json, read_bounded
from harness.times import parse_time_us

if TYPE_CHECKING:
    from harness.capture.writer import Event
    from harness.jsontypes import JSONObject

_LINE_FILES = ("metrics.jsonl", "pauses.jsonl", "guard.jsonl")
RESUMED_TAG = RUN_PREFIX + "resumed"
RESUMES_TAG = RUN_PREFIX + "resumes"
Part = tuple[Path, int, Optional[int]]  # an attempt's directory, the first rollout it gives, the one it ends before


def capture_events(run_dir: Path, notes: list[str], parts: Sequence[Part] = ()) -> Iterator[Event]:
    """The events that wrote the capture in `run_dir`, in order (see the module doc); odd lines become notes.

    `parts`: a resumed run's attempts (directory, first rollout, rollout it ends before), oldest first."""
    run_dir = Path(run_dir)
    status = _json_object(run_dir / "status.json", notes)
    first = _json_object(parts[0][0] / "status.json", notes) if parts else None
    if status is not None:
        started: JSONObject = {**status, "state": "running", "ended_at": None, "exit_code": None, "error": None}
        if first is not None and "started_at" in first:
            started["started_at"] = first["started_at"]
        yield ("status", "status.json", started)
    manifest = _json_object(run_dir / "manifest.json", notes)
    if manifest is not None:
        yield ("json", "manifest.json", manifest)
    yield from _part_lines(parts or [(run_dir, 0, None)], notes)
    args = _json_object(run_dir / "args.json", notes)
    if args is not None:
        yield ("json", "args.json", args)
    if status is not None and status.get("state") != "running":
        yield ("status", "status.json", status)


def _part_lines(parts: Sequence[Part], notes: list[str]) -> Iterator[Event]:
    """The lines of each part's metrics.jsonl, pauses.jsonl and guard.jsonl, merged by their times, part by part:
    only the steps a part gives the run."""
    for directory, low, high in parts:
        streams = [_timed_lines(directory / name, rank, notes) for rank, name in enumerate(_LINE_FILES)]
        for _, _, _, name, row in heapq.merge(*streams):
            if name == "metrics.jsonl" and not _in_part(row, low, high):
                continue  # a step this attempt ran past the next one's checkpoint: not the run's
            yield ("jsonl", name, row)


def _in_part(row: JSONObject, low: int, high: Optional[int]) -> bool:
    step = row.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return True  # the translator skips it itself
    return step >= low and (high is None or step < high)


def lineage_parts(run_dir: Path) -> list[Part]:
    """A resumed run's attempts as (directory, first rollout, rollout it ends before), oldest first; [] when the
    run never resumed."""
    run_dir = Path(run_dir)
    directory, number = current_attempt(str(run_dir), run_dir.name)
    record, _ = read_resume(directory) if number else (None, None)
    if record is None or not record.counts:
        return []
    attempts = RunAttempts(run_dir)
    head = next((a for a in attempts.all() if a.number == number), None)
    if head is None:
        return []
    return _chain_parts(attempts, head)


def _chain_parts(attempts: RunAttempts, head: Attempt) -> list[Part]:
    """The parts of the chain of attempts `head` continues (itself last), oldest first."""
    links, _ = resume_chain(attempts, head)
    return [
        (link.attempt.directory, link.record.next_rollout_id if link.record is not None else 0, link.until)
        for link in links
    ]


def resume_markers(parts: Sequence[Part], notes: list[str]) -> list[Record]:
    """At each resume: `run/resumed` (the attempt's number at the rollout it continued from) and a text."""
    return _markers([(_json_object(directory / "status.json", notes) or {}, low) for directory, low, _ in parts])


def _markers(attempts: Sequence[tuple[JSONObject, int]]) -> list[Record]:
    """The markers of a lineage given each attempt's status and the first rollout it gives the run."""
    records: list[Record] = []
    previous_end: Optional[float] = None
    for status, low in attempts:
        start = wall_seconds(status.get("started_at"))
        attempt = status.get("attempt")
        if low > 0 and start is not None and isinstance(attempt, int):
            down = f" after {start - previous_end:.0f} s down" if previous_end is not None else ""
            records.append(Scalar(RESUMED_TAG, low, start, float(attempt)))
            records.append(
                Text(
                    RESUMES_TAG,
                    low,
                    start,
                    f"attempt {attempt} resumed at rollout {low} from {iteration_name(low)}{down}",
                )
            )
        previous_end = wall_seconds(status.get("ended_at")) or previous_end
    return records


@dataclass(frozen=True)
class LeadIn:
    """What the live board of a resumed attempt shows before the attempt's own steps, as the rebuild of the stitched
    run shows it: the lineage it continues (`parts`, each up to where the next continued), from the lineage's start,
    and a marker at each resume, its own included."""

    parts: tuple[Part, ...]
    resumed_at: int  # the rollout the attempt continues from

    def first_status(self, status: JSONObject) -> JSONObject:
        """The attempt's first status as the one run's: started when the lineage started."""
        first = _json_object(self.parts[0][0] / "status.json", []) if self.parts else None
        started = first.get("started_at") if first is not None else None
        return {**status, "started_at": started} if isinstance(started, str) else status

    def records(self, board: RunBoard, status: JSONObject) -> list[Record]:
        """The lineage's steps, pauses and guard samples fed to `board` (once it has the run's manifest), then the
        markers up to the attempt's own resume (`status`: its first, as it was written)."""
        notes: list[str] = []  # a torn line of an earlier attempt: that attempt's own reading says it
        records: list[Record] = []
        for event in _part_lines(self.parts, notes):
            records += board.feed(event)
        earlier = [(_json_object(directory / "status.json", notes) or {}, low) for directory, low, _ in self.parts]
        return records + _markers([*earlier, (status, self.resumed_at)])


def lead_in(run_dir: Path, from_attempt: int, resumed_at: int) -> Optional[LeadIn]:
    """The lead-in of an attempt of the run in `run_dir` that resumes attempt `from_attempt` at rollout `resumed_at`
    (None: that attempt is not there)."""
    attempts = RunAttempts(run_dir)
    head = next((attempt for attempt in attempts.all() if attempt.number == from_attempt), None)
    if head is None:
        return None
    parts = _chain_parts(attempts, head)
    directory, low, until = parts[-1]
    parts[-1] = (directory, low, resumed_at if until is None else min(until, resumed_at))
    return LeadIn(tuple(parts), resumed_at)


def _timed_lines(path: Path, rank: int, notes: list[str]) -> Iterator[tuple[int, int, int, str, JSONObject]]:
    """(time, file rank, line number, file name, line) for each line, the time of a timeless line the one before.

    The merge compares (time, rank, line number) only: two files never share a rank, so it keeps each file's
    order and never compares the lines themselves.
    """
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
    try:
        value = loads_json(read_bounded(path, MAX_JSON_BYTES))
    except FileNotFoundError:
        return None
    except (Unreadable, ValueError) as err:
        notes.append(f"{path.name}: {err}")
        return None
    return value if isinstance(value, dict) else None


def replay_records(run: str, run_dir: Path, notes: Optional[list[str]] = None) -> tuple[RunBoard, list[Record]]:
    """The translator after the whole capture (a resumed run's lineage stitched), and every record of the run."""
    board = RunBoard(run)
    notes = notes if notes is not None else []
    parts = lineage_parts(run_dir)
    records: list[Record] = []
    for event in capture_events(run_dir, notes, parts):
        records += board.feed(event)
    records += board.finish()
    return board, records + resume_markers(parts, notes)


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
    capture_root = Path(capture_root)
    make = sinks or tensorboard_sinks(capture_root)
    rebuilt = Rebuilt()
    runs, _ = find_runs(capture_root)
    for run_dir in runs:
        rebuild_run(run_dir.name, run_dir, make, rebuilt)
    return rebuilt
