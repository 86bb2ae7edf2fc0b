"""A run's capture events -> its board records (deciding only: no file, no thread, no clock).

The events are the capture's own writes, `(kind, file name, payload)` as
`harness.capture.writer` forwards them: live from a running run, or replayed
from a capture's files (`harness.board.replay`). `RunBoard.feed` turns each
into records:

- status.json: a text `run/state` at each change of state (at `started_at`,
  then at `ended_at`), and at the end the hparams session's end;
- manifest.json (the first one): the hyperparameters (`harness.board.hparams`);
- metrics.jsonl: every numeric Miles metric of the step at step = the rollout
  id (non-finite values skipped and counted), and the summary's per-step values
  under `harness/` (`harness.summary.rows`, the summary's own rules, over the
  steps so far);
- pauses.jsonl: a text `guard/pauses` when a window opens and when it closes;
- guard.jsonl: each sample on the guard's own axis (step = the sample's number,
  wall time = its time): every temperature it holds, `guard/paused` 0 or 1 and
  the power.

Live and replayed, a run's events come in the same order per file, and
nothing here depends on how the files interleave beyond what the guard makes
certain (it writes a window's opening before it freezes the run, so before
any step that ends after it): the summary's values of a step wait until every
pause window that began before its rollout ended has closed (or the run
ended), so they see the same windows either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional

from harness.board.derive import run_config, step_values
from harness.board.hparams import hparams_of, session_state
from harness.board.names import GUARD_PREFIX, HARNESS_PREFIX, RUN_PREFIX, TagMapper, clean_tag
from harness.board.records import Record, Scalar, SessionEnd, Text
from harness.lab.milesnames import RAW_REWARD, RAW_REWARD_UNFILTERED
from harness.times import parse_time_us

if TYPE_CHECKING:
    from harness.capture.writer import Event
    from harness.jsontypes import JSONObject, JSONValue
    from harness.summary.run_config import RunConfig

STATE_TAG = RUN_PREFIX + "state"
SKIPPED_TAG = RUN_PREFIX + "skipped"
PAUSES_TAG = GUARD_PREFIX + "pauses"
PAUSED_TAG = GUARD_PREFIX + "paused"
REWARD_SOURCE_TAG = HARNESS_PREFIX + "reward_source"

_REWARD_SOURCES = {
    RAW_REWARD_UNFILTERED: "before the filter: every group the rollout judged",
    RAW_REWARD: "as Miles logged it (without the filter, every group counts)",
}


def wall_seconds(text: object) -> Optional[float]:
    """An RFC 3339 time as seconds since the epoch (None when it is not one)."""
    micros = parse_time_us(text)
    return None if micros is None else micros / 1_000_000


def number(value: object) -> tuple[Optional[float], bool]:
    """(the value as a float, whether it was a number that is not finite); None for what is no number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, False
    try:
        as_float = float(value)
    except OverflowError:  # an integer beyond a double
        return None, True
    if not math.isfinite(as_float):
        return None, True
    return as_float, False


@dataclass
class _Window:
    start_us: int
    end_us: Optional[int]
    reason: str
    line: int
    peak_c: Optional[float]


@dataclass
class _Held:
    """A step whose summary values wait for the pause windows of its rollout to close."""

    row: JSONObject
    previous: Optional[JSONObject]
    rollout_end_us: Optional[int]
    step: int
    wall_time: float


@dataclass
class RunBoard:
    """One run's translator: `feed` each event, in the order written; `finish` when nothing more comes."""

    run: str
    tags: TagMapper = field(default_factory=TagMapper)
    guard_tags: TagMapper = field(default_factory=TagMapper)
    manifest: Optional[JSONObject] = None
    non_finite: dict[str, list[int]] = field(default_factory=dict)  # "key (what)" -> steps
    started_at: Optional[str] = None
    attempt: Optional[int] = None  # the attempt whose events these are (its first status says)
    state: Optional[str] = None
    ended: bool = False
    _states: int = 0
    _samples: int = 0
    _pause_lines: int = 0
    _windows: dict[int, _Window] = field(default_factory=dict)
    _previous_row: Optional[JSONObject] = None
    _last_wall: dict[str, float] = field(default_factory=dict)  # per kind of record, so files may interleave
    _held: list[_Held] = field(default_factory=list)
    _reward_source: Optional[str] = None
    _config: Optional[tuple[Optional[JSONObject], "RunConfig"]] = None  # (for which manifest, the run's config)

    @property
    def seed(self) -> Optional[int]:
        """The run's seed, from its manifest (None until it came, or when it has none)."""
        experiment = (self.manifest or {}).get("experiment")
        seed = experiment.get("seed") if isinstance(experiment, dict) else None
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else None

    @property
    def skipped(self) -> int:
        """How many non-finite values were skipped."""
        return sum(len(steps) for steps in self.non_finite.values())

    def feed(self, event: Event) -> list[Record]:
        """The records of one capture event (none for a log line, args.json or a malformed event)."""
        kind, name, payload = event
        if not isinstance(payload, dict):
            return []
        if kind == "status":
            return self._status(payload)
        if kind == "json" and name == "manifest.json":
            return self._manifest(payload)
        if kind == "jsonl" and name == "metrics.jsonl":
            return self._metrics(payload)
        if kind == "jsonl" and name == "pauses.jsonl":
            return self._pause(payload)
        if kind == "jsonl" and name == "guard.jsonl":
            return self._guard(payload)
        return []

    def finish(self) -> list[Record]:
        """What still waits when nothing more comes (a run whose harness stopped writing)."""
        return self._release(everything=True)

    # --------------------------------------------------------------------------- status and manifest

    def _status(self, status: JSONObject) -> list[Record]:
        state = status.get("state")
        if not isinstance(state, str):
            return []
        if self.started_at is None and isinstance(status.get("started_at"), str):
            self.started_at = str(status["started_at"])
        attempt = status.get("attempt")
        if self.attempt is None and isinstance(attempt, int) and not isinstance(attempt, bool):
            self.attempt = attempt
        if state == self.state:
            return []
        self.state = state
        final = state != "running"
        wall = self._wall("status", wall_seconds(status.get("ended_at") if final else status.get("started_at")))
        records: list[Record] = [Text(STATE_TAG, self._states, wall, describe_status(status))]
        self._states += 1
        if final and not self.ended:
            self.ended = True
            records += self._release(everything=True)
            if self.non_finite:
                records.append(Text(SKIPPED_TAG, 0, wall, self.skipped_text()))
            records.append(SessionEnd(wall, session_state(state)))
        return records

    def _manifest(self, manifest: JSONObject) -> list[Record]:
        if self.manifest is not None:
            return []  # written again with the handle's facts: the configuration is the same
        self.manifest = manifest
        wall = self._wall("manifest", wall_seconds(manifest.get("created_at")))
        return [hparams_of(self.run, manifest, wall)]

    def skipped_text(self) -> str:
        """One line: how many non-finite values were skipped, and where."""
        parts = []
        for what, steps in self.non_finite.items():
            shown = ", ".join(str(step) for step in steps[:10]) + (
                f" and {len(steps) - 10} more" if len(steps) > 10 else ""
            )
            parts.append(f"{what} at step {shown}")
        return f"{self.skipped} non-finite value(s) skipped: " + "; ".join(parts)

    # --------------------------------------------------------------------------- steps

    def _metrics(self, row: JSONObject) -> list[Record]:
        step = row.get("step")
        metrics = row.get("metrics")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0 or not isinstance(metrics, dict):
            return []
        wall = self._wall("metrics", wall_seconds(row.get("t_step_end")) or wall_seconds(row.get("t_rollout_end")))
        marked = row.get("non_finite")
        marked_keys = marked if isinstance(marked, dict) else {}
        records: list[Record] = []
        for key, value in metrics.items():
            as_float, not_finite = number(value)
            if as_float is not None:
                records.append(Scalar(self.tags.tag(key), step, wall, as_float))
            elif not_finite or key in marked_keys:
                what = marked_keys.get(key, "not finite")
                self.non_finite.setdefault(f"{key} ({what})", []).append(step)
        previous, self._previous_row = self._previous_row, row
        self._held.append(_Held(row, previous, parse_time_us(row.get("t_rollout_end")), step, wall))
        return records + self._release()

    def _release(self, *, everything: bool = False) -> list[Record]:
        """The summary's values of the held steps whose pause windows are all known (all of them: `everything`)."""
        records: list[Record] = []
        while self._held:
            held = self._held[0]
            if not everything and not self._windows_closed_before(held.rollout_end_us):
                break
            self._held.pop(0)
            records += self._derived(held)
        return records

    def _windows_closed_before(self, rollout_end_us: Optional[int]) -> bool:
        if rollout_end_us is None:
            return True
        return all(w.end_us is not None for w in self._windows.values() if w.start_us < rollout_end_us)

    def _derived(self, held: _Held) -> list[Record]:
        if self._config is None or self._config[0] is not self.manifest:  # resolved once per manifest, not per step
            self._config = (self.manifest, run_config(self.run, self.manifest))
        values, reward_key = step_values(
            self.run, self.started_at, self.manifest, held, self._windows_before(held), self._config[1]
        )
        records: list[Record] = [
            Scalar(HARNESS_PREFIX + name, held.step, held.wall_time, value) for name, value in values.items()
        ]
        if reward_key is not None and reward_key != self._reward_source:
            self._reward_source = reward_key
            why = _REWARD_SOURCES.get(reward_key, "")
            records.append(Text(REWARD_SOURCE_TAG, held.step, held.wall_time, f"{reward_key}: {why}".rstrip(": ")))
        return records

    def _windows_before(self, held: _Held) -> list[_Window]:
        if held.rollout_end_us is None:
            return []
        return [w for w in self._windows.values() if w.start_us < held.rollout_end_us]

    # --------------------------------------------------------------------------- the guard

    def _pause(self, row: JSONObject) -> list[Record]:
        start = parse_time_us(row.get("start"))
        if start is None:
            return []
        end = parse_time_us(row.get("end"))
        reason = row.get("reason")
        reason_text = reason if isinstance(reason, str) else ""
        peak, _ = number(row.get("peak_c"))
        self._pause_lines += 1
        self._windows[start] = _Window(start, end, reason_text, self._pause_lines, peak)
        failed, then = row.get("failed"), row.get("on_pause_failure")
        if end is None:
            text = f"paused: {reason_text}" if reason_text else "paused"
            record = Text(PAUSES_TAG, self._pause_lines - 1, self._wall("pauses", start / 1_000_000), text)
        elif isinstance(failed, str):  # the engine could not freeze it: no pause, and not a resume either
            at = f" at {peak:.1f} C" if peak is not None else ""
            text = f"pause failed{at}: {failed}" + (
                f" (guard.on_pause_failure: {then})" if isinstance(then, str) else ""
            )
            record = Text(PAUSES_TAG, self._pause_lines - 1, self._wall("pauses", end / 1_000_000), text)
        else:
            text = f"resumed after {(end - start) / 1_000_000:.1f} wall s"
            if peak is not None:
                text += f" (peak {peak:.1f} C)"
            record = Text(PAUSES_TAG, self._pause_lines - 1, self._wall("pauses", end / 1_000_000), text)
        return [record, *self._release()]

    def _guard(self, sample: JSONObject) -> list[Record]:
        wall = wall_seconds(sample.get("t"))
        if wall is None:
            return []
        step = self._samples
        self._samples += 1
        records: list[Record] = []
        for key, value in sample.items():
            if key == "paused":
                if isinstance(value, bool):
                    records.append(Scalar(PAUSED_TAG, step, wall, 1.0 if value else 0.0))
            elif isinstance(value, Mapping):  # temperatures by sensor, {name: degrees}
                for name, inner in value.items():
                    self._guard_value(records, f"{key}/{name}", inner, step, wall)
            elif key != "reasons":
                self._guard_value(records, key, value, step, wall)
        return records

    def _guard_value(self, records: list[Record], key: str, value: JSONValue, step: int, wall: float) -> None:
        as_float, _ = number(value)
        if as_float is not None:
            records.append(Scalar(GUARD_PREFIX + self.guard_tags.tag(clean_tag(key)), step, wall, as_float))

    def _wall(self, kind: str, wall: Optional[float]) -> float:
        """A record's wall time: its own, else the last one of its kind, else the run's start, else 0."""
        if wall is None:
            wall = self._last_wall.get(kind, wall_seconds(self.started_at) or 0.0)
        self._last_wall[kind] = wall
        return wall


def describe_status(status: JSONObject) -> str:
    """A state change in one line: `running (attempt 2, process engine)`, `failed: exit code 1: ... (3/12 steps)`."""
    state = str(status.get("state"))
    if state == "running":
        facts = []
        if isinstance(status.get("attempt"), int):
            facts.append(f"attempt {status['attempt']}")
        if isinstance(status.get("engine"), str):
            facts.append(f"{status['engine']} engine")
        return state + (f" ({', '.join(facts)})" if facts else "")
    text = state
    if isinstance(status.get("error"), str) and status["error"]:
        text += f": {status['error']}"
    complete, expected = status.get("steps_complete"), status.get("steps_expected")
    if isinstance(complete, int) and isinstance(expected, int):
        text += f" ({complete}/{expected} steps complete"
        if isinstance(status.get("exit_code"), int):
            text += f", exit code {status['exit_code']}"
        text += ")"
    return text
