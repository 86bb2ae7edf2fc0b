"""The core's Reporter for the terminal: a live panel of the run going now, or one plain line per event elsewhere."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from harness.mileslog import keys

if TYPE_CHECKING:  # annotations only: `harness parse-log` and `--help` need not import the launch planner
    from harness.capture import RunStatus
    from harness.engines.spec import LaunchSpec
    from harness.guard import GuardReading
    from harness.mileslog.records import StepRecord
    from harness.run.decide import Decision


def step_summary(record: Any, filter_on: Optional[bool] = False, batch: Optional[int] = None) -> dict[str, Any]:
    """The few numbers a person watches per step, from a step record (the reward by `keys.reward_reading`:
    printed, or derived given B where Miles does not print it)."""
    metrics, derived = record.metrics, record.derived or {}
    reading = keys.reward_reading(metrics, filter_on, batch)
    return {
        "step": record.step,
        "complete": record.complete,
        "rollout_s": keys.finite_number(metrics.get(keys.ROLLOUT_TIME)),
        "dropped": derived.get("dropped_groups") or 0,
        "dropped_right": derived.get("dropped_all_right") or 0,
        "dropped_wrong": derived.get("dropped_all_wrong") or 0,
        "zero_std_right": derived.get("zero_std_all_right"),
        "zero_std_wrong": derived.get("zero_std_all_wrong"),
        "reward": reading.value,
        "reward_source": reading.source,
    }


def _num(value: Any, fmt: str) -> str:
    return "-" if not isinstance(value, (int, float)) else format(value, fmt)


def describe_step(summary: dict[str, Any]) -> str:
    """`rollout 88.7 s (incl. pauses) | dropped 20 (right 18, wrong 2) | reward 0.672` (or zero-variance groups
    without the filter). The rollout time is the trainer's own, so a heat pause inside the rollout is in it."""
    parts = [f"rollout {_num(summary['rollout_s'], '.1f')} s (incl. pauses)"]
    if summary["dropped"]:
        parts.append(
            f"dropped {summary['dropped']} (right {summary['dropped_right']}, wrong {summary['dropped_wrong']})"
        )
    elif summary["zero_std_right"] is not None:
        parts.append(f"zero-variance {summary['zero_std_right']} right, {summary['zero_std_wrong']} wrong")
    derived = " (derived)" if summary.get("reward_source") == keys.DERIVED else ""
    parts.append(f"reward {_num(summary['reward'], '.3f')}{derived}")
    return " | ".join(parts)


def describe_guard(reading: "GuardReading", now_us: Optional[int] = None) -> str:
    """`72.0 C`, or `PAUSED since 12:03:04 (temperature 86.0 C >= pause_at_c 85 C), 81.5 C`; then `2 pauses, 62 wall s paused`."""
    from harness.times import parse_time_us

    temp = "- C" if reading.temp_c is None else f"{reading.temp_c:.1f} C"
    paused_s = reading.paused_s
    if reading.paused:
        since = reading.paused_since or ""
        start_us = parse_time_us(since)
        if start_us is not None:
            paused_s += max(0, (now_us if now_us is not None else time.time_ns() // 1000) - start_us) / 1e6
        text = f"PAUSED since {since[11:19] or '?'} ({reading.reason or '?'}), {temp}"
    else:
        text = temp
    if reading.pauses:
        text += f"; {reading.pauses} pause{'s' if reading.pauses != 1 else ''}, {paused_s:.0f} wall s paused"
    return text


def guard_change(previous: Optional["GuardReading"], reading: "GuardReading") -> Optional[str]:
    """`PAUSED by the heat guard: <why>` or `resumed by the heat guard: <now>` when that changed, else None."""
    was_paused = previous is not None and previous.paused
    if reading.paused and (not was_paused or previous.paused_since != reading.paused_since):
        return f"PAUSED by the heat guard: {reading.reason}"
    if was_paused and not reading.paused:
        return f"resumed by the heat guard: {describe_guard(reading)}"
    return None


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


@dataclass
class _RunView:
    """What a reporter shows of one run."""

    spec: "LaunchSpec"
    filter_on: Optional[bool]
    batch: Optional[int] = None  # B, for a reward derived where Miles does not print it
    t0: float = field(default_factory=time.monotonic)
    reading: Optional["GuardReading"] = None  # the heat guard's, while the run is guarded
    last: Optional[dict[str, Any]] = None
    steps_complete: int = 0


class PlainReporter:
    """The core's Reporter as plain lines (for logs, CI, pipes): one per completed step, pause and note.

    `say_skips`: a sweep names each run it skips; `run` says nothing of its
    decision (a skip is its error).
    """

    def __init__(self, stream: Any = None, *, say_skips: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.say_skips = say_skips
        self.runs: dict[str, _RunView] = {}
        self.current: Optional[_RunView] = None  # the run started last
        self._lock = threading.Lock()

    def _say(self, text: str) -> None:
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _start(self, spec: "LaunchSpec") -> _RunView:
        argv = spec.trainer_argv
        view = _RunView(spec, keys.filter_setting(None, argv)[0], keys.rollout_batch_size(None, argv))
        self.runs[spec.run] = self.current = view
        return view

    def note(self, message: str) -> None:
        self._say(message)

    def warning(self, message: str) -> None:
        from harness.cli.app import warn

        warn(message)

    def decided(self, decision: "Decision") -> None:
        if self.say_skips and decision.action == "skip":
            self.note(f"{decision.run} skipped: {decision.reason}")

    def started(self, spec: "LaunchSpec") -> None:
        self._start(spec)
        self._say(f"{spec.run}: started ({spec.engine}, run id {spec.run_id}, {spec.steps_expected} steps expected)")

    def step(self, run: str, record: "StepRecord", steps_complete: int) -> None:
        view = self.runs.get(run)
        summary = step_summary(record, view.filter_on if view else False, view.batch if view else None)
        expected = view.spec.steps_expected if view else "?"
        label = f"step {record.step}" + ("" if record.complete else " INCOMPLETE")
        elapsed = _elapsed(time.monotonic() - view.t0) if view else "-"
        guard = f" | {describe_guard(view.reading)}" if view and view.reading is not None else ""
        self._say(
            f"{run}: {label} ({steps_complete}/{expected} complete) | {describe_step(summary)} | "
            f"{elapsed} elapsed{guard}"
        )

    def guard(self, run: str, reading: "GuardReading") -> None:
        """A line when the heat guard pauses or resumes the run; the temperature rides on the step lines."""
        view = self.runs.get(run)
        previous = view.reading if view else None
        if view:
            view.reading = reading
        change = guard_change(previous, reading)
        if change:
            self._say(f"{run}: {change}")

    def finished(self, status: "RunStatus") -> None:
        pass


class RichReporter(PlainReporter):
    """A live panel of the run going now: run, step k/N, last rollout time, dropped or zero-variance groups,
    reward, heat guard, elapsed."""

    def __init__(self, console: Any, *, say_skips: bool = False) -> None:
        super().__init__(say_skips=say_skips)
        self.console = console
        self.live: Any = None

    @property
    def last(self) -> Optional[dict[str, Any]]:
        """The last step of the run going now, as the panel shows it."""
        return self.current.last if self.current else None

    def _render(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        table = Table.grid(padding=(0, 2))
        view = self.current
        spec = view.spec if view else None
        expected = spec.steps_expected if spec else 0
        table.add_row("[bold]run[/bold]", Text(f"{spec.run if spec else '-'}  ({spec.run_id if spec else ''})"))
        table.add_row("[bold]steps[/bold]", f"{view.steps_complete if view else 0}/{expected} complete")
        last = view.last if view else None
        table.add_row("[bold]last step[/bold]", describe_step(last) if last else "waiting for the first step")
        if view is not None and view.reading is not None:
            style = "bold red" if view.reading.paused else "green"
            table.add_row("[bold]heat guard[/bold]", Text(describe_guard(view.reading), style=style))
        table.add_row("[bold]elapsed[/bold]", _elapsed(time.monotonic() - view.t0) if view else "-")
        return table

    def note(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False)

    def started(self, spec: "LaunchSpec") -> None:
        from rich.live import Live

        self._start(spec)
        if self.live is None:
            self.live = Live(self._render(), console=self.console, refresh_per_second=1, get_renderable=self._render)
            self.live.start()

    def step(self, run: str, record: "StepRecord", steps_complete: int) -> None:
        view = self.runs.get(run)
        if view is not None:
            view.last, view.steps_complete = step_summary(record, view.filter_on, view.batch), steps_complete

    def guard(self, run: str, reading: "GuardReading") -> None:
        view = self.runs.get(run)
        if view is not None:
            view.reading = reading  # the panel shows it at its next refresh

    def finished(self, status: "RunStatus") -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def reporter_for(console: Any, *, say_skips: bool = False) -> PlainReporter:
    """Rich on a terminal, plain lines otherwise."""
    return RichReporter(console, say_skips=say_skips) if console.is_terminal else PlainReporter(say_skips=say_skips)
