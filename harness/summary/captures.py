"""Read one capture directory (DESIGN section 4) without ever raising on its contents.

Everything a summary needs comes back in a `RunCapture`; anything missing,
unreadable or odd becomes a note (a plain sentence naming the file and line)
instead of a traceback or a silent guess. Rules:

- A directory of the capture root is a run when it holds `status.json`.
  `summary/` and hidden directories are never runs; other directories
  without `status.json` are listed as skipped, with the reason.
- `status.json` present but unreadable: the run is still read, with state
  `unknown` and a note (its steps are data; losing them would hide them).
- JSONL files are read line by line: a bad line is a note naming the file
  and the line number; the other lines are kept.
- `metrics.jsonl`: one record per rollout id; when a step appears twice, the
  last line wins (with a note). Records are sorted by step.
- `pauses.jsonl`: a window is logged when it opens (end null) and again when
  it closes (same start): the last line per start is the truth.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.capture import STATES  # noqa: F401  (re-exported for the summarizer)
from harness.times import parse_time_us, parse_times_us

SUMMARY_DIR_NAME = "summary"


@dataclass
class Pause:
    """One pause window as logged; times in microseconds since the epoch, end None while open."""

    start_us: int
    end_us: Optional[int]
    reason: str
    line: int


@dataclass
class MetricsRow:
    """One line of metrics.jsonl: a rollout id and its merged Miles keys."""

    step: int
    complete: bool
    t_rollout_end_us: Optional[int]
    t_step_end_us: Optional[int]
    metrics: dict[str, Any]
    line: int


@dataclass
class RunCapture:
    """What one run directory holds, read tolerantly; `notes` says what was odd."""

    name: str
    status: Optional[dict[str, Any]]  # None: missing or unreadable (state "unknown")
    manifest: Optional[dict[str, Any]]
    args: Optional[dict[str, Any]]  # None: no args.json
    records: list[MetricsRow]
    pauses: list[Pause]
    notes: list[str] = field(default_factory=list)

    @property
    def experiment(self) -> dict[str, Any]:
        """The resolved experiment from the manifest ({} when unknown)."""
        experiment = (self.manifest or {}).get("experiment")
        return experiment if isinstance(experiment, dict) else {}


@dataclass
class Skipped:
    """A directory of the capture root that is not a run, and why."""

    directory: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"directory": self.directory, "reason": self.reason}


def find_runs(capture_dir: Path) -> tuple[list[Path], list[Skipped]]:
    """Run directories (those with status.json) sorted by name, and the directories skipped."""
    runs: list[Path] = []
    skipped: list[Skipped] = []
    if not capture_dir.is_dir():
        return runs, skipped
    for path in sorted(capture_dir.iterdir()):
        if not path.is_dir() or path.name.startswith(".") or path.name == SUMMARY_DIR_NAME:
            continue
        if (path / "status.json").is_file():
            runs.append(path)
        else:
            skipped.append(Skipped(path.name, "no status.json, so not a run"))
    return runs, skipped


def read_capture(run_dir: Path) -> RunCapture:
    """Read one run directory; never raises for bad contents (see the module rules)."""
    notes: list[str] = []
    status = _read_json(run_dir / "status.json", notes, required=True)
    if status is not None and not isinstance(status, dict):
        notes.append("status.json is not a JSON object: state unknown")
        status = None
    elif status is None:
        notes.append("state unknown: status.json could not be read")
    manifest = _read_json(run_dir / "manifest.json", notes, required=True)
    if manifest is not None and not isinstance(manifest, dict):
        notes.append("manifest.json is not a JSON object: ignored")
        manifest = None
    args = _read_json(run_dir / "args.json", notes, required=False)
    if args is not None and not isinstance(args, dict):
        notes.append("args.json is not a JSON object: ignored")
        args = None
    records = _read_metrics(run_dir / "metrics.jsonl", notes)
    pauses = _read_pauses(run_dir / "pauses.jsonl", notes)
    return RunCapture(run_dir.name, status, manifest, args, records, pauses, notes)


def _read_json(path: Path, notes: list[str], *, required: bool) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            notes.append(f"{path.name} missing")
        return None
    except (OSError, UnicodeDecodeError) as err:
        notes.append(f"{path.name} unreadable: {err}")
        return None
    try:
        return json.loads(text)
    except ValueError as err:
        notes.append(f"{path.name} is not valid JSON ({err}): ignored")
        return None


def _jsonl(path: Path, notes: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each good line; a note for each bad one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as err:
        notes.append(f"{path.name} unreadable: {err}")
        return []
    lines = data.split(b"\n")
    out: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as err:
            cut = number == len(lines) and not data.endswith(b"\n")
            why = "cut short (the writer stopped mid-line)" if cut else f"not JSON ({err})"
            notes.append(f"{path.name} line {number}: {why}: skipped")
            continue
        if not isinstance(obj, dict):
            notes.append(f"{path.name} line {number}: not a JSON object: skipped")
            continue
        out.append((number, obj))
    return out


def _read_metrics(path: Path, notes: list[str]) -> list[MetricsRow]:
    by_step: dict[int, MetricsRow] = {}
    non_finite: dict[str, list[int]] = {}  # "key (nan)" -> steps: the parser wrote null where the log said nan/inf
    lines = _jsonl(path, notes)
    times = iter(parse_times_us([obj.get(key) for _, obj in lines for key in ("t_rollout_end", "t_step_end")]))
    for number, obj in lines:
        rollout_end_us, step_end_us = next(times), next(times)
        step = obj.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            notes.append(f"{path.name} line {number}: no integer step: skipped")
            continue
        metrics = obj.get("metrics")
        if not isinstance(metrics, dict):
            notes.append(f"{path.name} line {number}: step {step} has no metrics object: read as empty")
            metrics = {}
        t_rollout_end = _time(obj, "t_rollout_end", rollout_end_us, path.name, number, notes)
        t_step_end = _time(obj, "t_step_end", step_end_us, path.name, number, notes)
        complete = obj.get("complete")
        if not isinstance(complete, bool):
            notes.append(f"{path.name} line {number}: step {step} has no boolean 'complete': read as incomplete")
            complete = False
        said = obj.get("non_finite")
        if isinstance(said, dict):
            for key, what in said.items():
                non_finite.setdefault(f"{key} ({what})", []).append(step)
        if step in by_step:
            notes.append(f"{path.name}: step {step} on lines {by_step[step].line} and {number}: the last is used")
        by_step[step] = MetricsRow(step, complete, t_rollout_end, t_step_end, metrics, number)
    for what, steps in non_finite.items():
        shown = ", ".join(str(s) for s in steps[:10]) + (f" and {len(steps) - 10} more" if len(steps) > 10 else "")
        notes.append(f"{path.name}: {what} in the log at step {shown}: read as null")
    return [by_step[step] for step in sorted(by_step)]


def _time(obj: dict[str, Any], key: str, micros: Optional[int], file: str, number: int,
          notes: list[str]) -> Optional[int]:
    """`micros` (the value of `key` read by `parse_times_us`), with a note when the value is not a time."""
    value = obj.get(key)
    if value is None:
        return None
    if micros is None:
        notes.append(f"{file} line {number}: {key} {value!r} is not an RFC 3339 time: ignored")
    return micros


def _read_pauses(path: Path, notes: list[str]) -> list[Pause]:
    by_start: dict[int, Pause] = {}
    for number, obj in _jsonl(path, notes):
        start = parse_time_us(obj.get("start"))
        if start is None:
            notes.append(f"{path.name} line {number}: start {obj.get('start')!r} is not an RFC 3339 time: skipped")
            continue
        end_raw = obj.get("end")
        end = parse_time_us(end_raw) if end_raw is not None else None
        if end_raw is not None and end is None:
            notes.append(f"{path.name} line {number}: end {end_raw!r} is not an RFC 3339 time: read as still open")
        reason = obj.get("reason")
        by_start[start] = Pause(start, end, reason if isinstance(reason, str) else "", number)
    return [by_start[start] for start in sorted(by_start)]
