"""The core's Reporter for the terminal: a live panel of the run going now, or one plain line per event elsewhere."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from harness.lab.milesnames import ROLLOUT_TIME
from harness.mileslog import keys
from harness.run.timeleft import TimeLeft, format_left
from harness.times import clock_text

if TYPE_CHECKING:  # annotations only: `harness parse-log` and `--help` need not import the launch planner
    from harness.capture import RunStatus
    from harness.engines.spec import LaunchSpec
    from harness.guard import GuardReading
    from harness.guard.start import CoolingReading
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
        "rollout_s": keys.finite_number(metrics.get(ROLLOUT_TIME)),
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


@dataclass(frozen=True)
class Part:
    """One part of a step line, from its whole form to its shortest ("" : the part left out)."""

    forms: tuple[str, ...]


def step_parts(summary: dict[str, Any]) -> list[Part]:
    """The step's own numbers: rollout time, dropped (or zero-variance) groups, reward; each with its short form."""
    rollout = _num(summary["rollout_s"], ".1f")
    parts = [Part((f"rollout {rollout} trainer s", f"rollout {rollout} s"))]
    if summary["dropped"]:
        right, wrong, total = summary["dropped_right"], summary["dropped_wrong"], summary["dropped"]
        split = (f"dropped {total} (right {right}, wrong {wrong})", f"dropped {right} right, {wrong} wrong")
        parts.append(Part((*split, f"dropped {total}")))
    elif summary["zero_std_right"] is not None:
        right, wrong = summary["zero_std_right"], summary["zero_std_wrong"]
        total = right + wrong if isinstance(right, int) and isinstance(wrong, int) else "-"
        split = (f"zero-variance {right} right, {wrong} wrong",) * 2
        parts.append(Part((*split, f"zero-variance {total}")))
    derived = " (derived)" if summary.get("reward_source") == keys.DERIVED else ""
    parts.append(Part((f"reward {_num(summary['reward'], '.3f')}{derived}",)))
    return parts


def describe_step(summary: dict[str, Any]) -> str:
    """`rollout 88.7 trainer s | dropped 20 (right 18, wrong 2) | reward 0.672` (or zero-variance groups
    without the filter). Trainer s are the trainer's own clock, which runs on while the heat guard holds it;
    the guard's holds are wall s (`pauses_text`)."""
    return " | ".join(part.forms[0] for part in step_parts(summary))


def fit_parts(parts: Sequence[Part], giving_way: Sequence[int], width: int) -> str:
    """The parts joined by ` | ` on one line: while it is wider than `width`, the part next in `giving_way` (an index,
    repeated to go further) takes its next shorter form. A line that cannot fit is still one line."""
    chosen = [0] * len(parts)

    def line() -> str:
        return " | ".join(form for part, n in zip(parts, chosen) if (form := part.forms[n]))

    for index in giving_way:
        if len(line()) <= width:
            break
        chosen[index] = min(chosen[index] + 1, len(parts[index].forms) - 1)
    return line()


def describe_guard(reading: "GuardReading", now_us: Optional[int] = None) -> str:
    """`72.0 C`, or `PAUSED since 12:03:04 (GPU 86.0 C >= pause_at_c 85 C), 81.5 C`; then `2 pauses, 62 wall s paused`."""
    from harness.times import parse_time_us

    if len(reading.temps) > 1:  # the GPU and the zones: each by name (the hottest alone could be any of them)
        temp = ", ".join(f"{label} {celsius:.1f} C" for label, celsius in reading.temps)
    else:
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
    if reading.pause_failures:
        from harness.capture.records import PauseTally

        text += f"; {PauseTally(reading.pauses, reading.pause_failures).failed_text()}"
    return text


def guard_change(previous: Optional["GuardReading"], reading: "GuardReading") -> Optional[str]:
    """`PAUSED by the heat guard: <why>` or `resumed by the heat guard: <now>` when that changed, else None."""
    was_paused = previous is not None and previous.paused
    if reading.paused and (not was_paused or previous.paused_since != reading.paused_since):
        return f"PAUSED by the heat guard: {reading.reason}"
    if was_paused and not reading.paused:
        return f"resumed by the heat guard: {describe_guard(reading)}"
    return None


COOLING_LINE_EVERY_S = 10.0  # piped: a line per this much waiting to cool, besides its first and last


def pauses_text(pauses: int, paused_s: float) -> str:
    """`2 pauses, 31 wall s` ("" with none)."""
    return f"{pauses} pause{'s' if pauses != 1 else ''}, {paused_s:.0f} wall s" if pauses else ""


def paused_total_s(reading: Optional["GuardReading"], now_us: int) -> float:
    """Wall seconds the guard has held the run so far, the hold under way included."""
    from harness.times import parse_time_us

    if reading is None:
        return 0.0
    held = reading.paused_s
    if reading.paused:
        start_us = parse_time_us(reading.paused_since or "")
        if start_us is not None:
            held += max(0, now_us - start_us) / 1e6
    return held


def heat_text(reading: Optional["GuardReading"], now_us: int) -> str:
    """The guard now: `72.0 C`, or `paused 0:42, at 84.1 C` while it holds the run; `-` unguarded."""
    from harness.times import parse_time_us

    if reading is None:
        return "-"
    temp = "- C" if reading.temp_c is None else f"{reading.temp_c:.1f} C"
    if not reading.paused:
        return temp
    start_us = parse_time_us(reading.paused_since or "")
    held = clock_text(max(0, now_us - start_us) / 1e6) if start_us is not None else "?"
    return f"paused {held}, at {temp}"


def _now_us() -> int:
    return time.time_ns() // 1000


@dataclass
class RunView:
    """What the reporters show of one run."""

    spec: Optional["LaunchSpec"]
    expected: int
    filter_on: Optional[bool] = False
    state: str = "waiting"
    t0: Optional[float] = None  # monotonic s at its start
    reading: Optional["GuardReading"] = None  # the heat guard's latest, while the run is guarded
    batch: Optional[int] = None  # B, for a reward derived where Miles does not print it
    last: Optional[dict[str, Any]] = None
    steps_complete: int = 0
    clock: Optional[TimeLeft] = None
    cooling: Optional["CoolingReading"] = None  # the cooled start's wait, while the run waits to cool

    def left_s(self, now: float) -> Optional[float]:
        """Seconds this run has to go (None: no estimate yet)."""
        if self.clock is None:
            return None
        return self.clock.left_s(self.expected - self.steps_complete, now, paused_total_s(self.reading, _now_us()))


class PlainReporter:
    """The core's Reporter as plain lines (for logs, CI, pipes): a line per run started, per step, per end.

    `say_skips`: a sweep names each run it skips; `run` says nothing of its
    decision (a skip is its error). `verbose`: a line per pause and resume
    too (else the step lines sum the pauses up). `specs`: the runs to come,
    for the rows and the sweep's estimate.
    """

    def __init__(
        self,
        stream: Any = None,
        *,
        say_skips: bool = False,
        verbose: bool = False,
        specs: Sequence["LaunchSpec"] = (),
        width: Optional[int] = None,
        clock: Callable[[], float] = time.monotonic,
        reused: bool = False,
    ) -> None:
        self.stream = stream or sys.stdout
        self.say_skips = say_skips
        self.reused = reused  # a skipped run whose capture succeeded is `reused` (the demo), not `skipped`
        self.verbose = verbose
        self.width = width
        self.now = clock
        self.runs: dict[str, RunView] = {spec.run: RunView(spec, spec.steps_expected) for spec in specs}
        self.current: Optional[RunView] = None  # the run started last
        self._lock = threading.Lock()
        self._cooling_said: dict[str, float] = {}  # run -> the wait (s) its last cooling line showed

    def _say(self, text: str) -> None:
        from harness.cli.messages import output_width, shown

        width = self.width or output_width(False, 0)
        with self._lock:
            for line in _fitted(shown(text), width):
                self.stream.write(line + "\n")
            self.stream.flush()

    def _view(self, run: str) -> RunView:
        if run not in self.runs:
            self.runs[run] = RunView(None, 0)
        return self.runs[run]

    def _start(self, spec: "LaunchSpec") -> RunView:
        view = self._view(spec.run)
        view.spec, view.expected, view.state = spec, spec.steps_expected, "running"
        view.filter_on = keys.filter_setting(None, spec.trainer_argv)[0]
        view.batch = keys.rollout_batch_size(None, spec.trainer_argv)
        view.t0 = self.now()
        view.clock = TimeLeft(view.t0)
        view.steps_complete, view.last, view.reading = 0, None, None
        self.current = view
        return view

    def note(self, message: str) -> None:
        from harness.secrets import redact_userinfo

        self._say(redact_userinfo(message))  # a note quotes what it is about (a reason, a value): no URL password

    def warning(self, message: str) -> None:
        from harness.cli.app import warn

        warn(message)

    def decided(self, decision: "Decision") -> None:
        if decision.action != "skip":
            return
        view = self._view(decision.run)
        found = _succeeded_steps(view.spec) if self.reused and not decision.refused else None
        view.state = "refused" if decision.refused else "reused" if found is not None else "skipped"
        if found is not None:
            view.steps_complete = found
        if self.say_skips:
            self.note(f"{decision.run} {view.state}: {decision.reason}")

    def started(self, spec: "LaunchSpec") -> None:
        self._start(spec)
        self._say(f"{spec.run}: started ({spec.engine}, run id {spec.run_id}, {spec.steps_expected} steps expected)")

    def step(self, run: str, record: "StepRecord", steps_complete: int) -> None:
        """One line per step, fitted to the width: the clock, then the guard's pauses give way first (the summary
        and `harness status RUN` have them), the step's own numbers last."""
        from harness.cli.messages import output_width, shown

        view = self._record_step(run, record, steps_complete)
        label = f"{run}: step {record.step}" + ("" if record.complete else " INCOMPLETE")
        progress = f"{steps_complete}/{view.expected}"
        parts = [Part((f"{label} ({progress} complete)", f"{label} ({progress})")), *step_parts(view.last or {})]
        if view.reading is not None:
            heat = heat_text(view.reading, _now_us())
            pauses = pauses_text(view.reading.pauses, paused_total_s(view.reading, _now_us()))
            parts.append(Part((", ".join(filter(None, [heat, pauses])), heat, "")))
        now = self.now()
        left = format_left(view.left_s(now))
        elapsed = clock_text(now - view.t0) if view.t0 is not None else "-"
        parts.append(Part((f"{elapsed} elapsed, {left} left", f"{left} left", "")))
        last, heat_at = len(parts) - 1, len(parts) - 2 if view.reading is not None else len(parts) - 1
        # What gives way, in turn: the elapsed time, "complete", the pauses, the time left, the groups' split in
        # fewer words, the temperature (`status`, -v and the capture have it), "trainer", the split.
        order = [last, 0, heat_at, last, 2, heat_at, 1, 2]
        line = fit_parts(parts, order, self.width or output_width(False, 0))
        with self._lock:
            self.stream.write(shown(line) + "\n")
            self.stream.flush()

    def _record_step(self, run: str, record: "StepRecord", steps_complete: int) -> RunView:
        view = self._view(run)
        view.last = step_summary(record, view.filter_on, view.batch)
        if record.complete and view.clock is not None:
            view.clock.step(self.now(), paused_total_s(view.reading, _now_us()))
        view.steps_complete = steps_complete
        return view

    def guard(self, run: str, reading: "GuardReading") -> None:
        """A line per pause and resume with `verbose`; else the step lines say how many and how long."""
        view = self._view(run)
        previous, view.reading = view.reading, reading
        change = guard_change(previous, reading)
        if change and self.verbose:
            self._say(f"{run}: {change}")

    def cooling(self, run: str, reading: "CoolingReading") -> None:
        """The first line of a wait to cool, one every COOLING_LINE_EVERY_S, and how it ended."""
        said = self._cooling_said.get(run)
        if reading.outcome is None and said is not None and reading.waited_s - said < COOLING_LINE_EVERY_S:
            return
        self._cooling_said[run] = reading.waited_s
        if reading.outcome is not None:
            self._cooling_said.pop(run, None)
        from harness.cli.messages import output_width

        text = f"{run}: heat guard: {reading.describe()}"
        if len(text) > (self.width or output_width(False, 0)):  # too wide: the time waited on a line of its own
            head, _, waited = text.rpartition("; ")
            text = f"{head} | {waited}"
        self._say(text)

    def finished(self, status: "RunStatus") -> None:
        self._view(status.run).state = str(status.state)

    def sweep_left_s(self) -> Optional[float]:
        """The sweep's time to go: each run's estimate, and for a run not started its steps at the pooled median."""
        now = self.now()
        medians = [m for view in self.runs.values() if view.clock and (m := view.clock.median_step_s()) is not None]
        pooled = sorted(medians)[len(medians) // 2] if medians else None
        total = 0.0
        for view in self.runs.values():
            if view.state == "running":
                left = view.left_s(now)
                if left is None:
                    return None
                total += left
            elif view.state == "waiting":
                if pooled is None:
                    return None
                total += view.expected * pooled
        return total


def _succeeded_steps(spec: Optional["LaunchSpec"]) -> Optional[int]:
    """The complete steps of the run's capture when it succeeded (None: it did not, or there is none)."""
    from pathlib import Path

    from harness.capture import Capture

    if spec is None:
        return None
    status = Capture(Path(spec.capture_dir)).status_read().status
    return status.steps_complete if status is not None and status.state == "succeeded" else None


def _cooling_text(reading: "CoolingReading") -> str:
    """`57.3 C (CPU (sim)), waited 12 s`: the hottest temperature of a wait to cool, and how long it has waited."""
    hottest = reading.hottest
    temp = f"{hottest[1]:.1f} C ({hottest[0]})" if hottest else "no reading"
    return f"{temp}, waited {reading.waited_s:.0f} s"


def _fitted(text: str, width: int) -> list[str]:
    """A line of ` | `-joined parts, broken between parts where it is wider than `width` (parts kept whole)."""
    parts = text.split(" | ")
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " | " + part
        else:
            lines.append("  " + part)
    return lines


class RichReporter(PlainReporter):
    """A live table on a terminal: a row per run with a bar of complete steps, the time left, the heat guard
    (`paused 0:42` while it holds the run) and the last step; the sweep's time left in the title."""

    def __init__(
        self,
        console: Any,
        *,
        say_skips: bool = False,
        verbose: bool = False,
        specs: Sequence["LaunchSpec"] = (),
        title: str = "",
        clock: Callable[[], float] = time.monotonic,
        reused: bool = False,
    ) -> None:
        super().__init__(say_skips=say_skips, verbose=verbose, specs=specs, clock=clock, reused=reused)
        self.console = console
        self.title = title
        self.live: Any = None

    @property
    def last(self) -> Optional[dict[str, Any]]:
        """The last step of the run going now, as the table shows it."""
        return self.current.last if self.current else None

    def _render(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        from harness.cli.messages import outside

        now, now_us = self.now(), _now_us()
        wide = self.console.width >= 110
        left = self.sweep_left_s() if len(self.runs) > 1 else None
        title = self.title + (f", {format_left(left)} left in all" if left is not None else "")
        table = Table(
            box=None,
            pad_edge=False,
            title=outside(title) if title else None,
            title_justify="left",
            collapse_padding=True,
        )
        for name, justify in (
            ("run", "left"),
            ("state", "left"),
            ("steps", "left"),
            ("left", "right"),
            ("heat guard", "left"),
        ):
            table.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis")  # type: ignore[arg-type]
        if wide:
            table.add_column("last step", no_wrap=True, overflow="ellipsis")
        for run, view in self.runs.items():
            bar = Table.grid(padding=(0, 1))
            bar.add_row(
                ProgressBar(total=max(1, view.expected), completed=view.steps_complete, width=12),
                f"{view.steps_complete}/{view.expected}",
            )
            state = "paused" if view.reading is not None and view.reading.paused else view.state
            heat = heat_text(view.reading, now_us)
            if view.cooling is not None:  # the cooled start's wait: the hottest temperature and the time waited
                state, heat = f"cooling below {view.cooling.below_c:g} C", _cooling_text(view.cooling)
            cells = [
                outside(run),
                outside(state, style="bold red" if state == "paused" else ""),
                bar,
                format_left(view.left_s(now)) if view.state == "running" else "",
                outside(heat),
            ]
            if wide:
                cells.append(outside(describe_step(view.last) if view.last else "-"))
            table.add_row(*cells)
        return table

    def note(self, message: str) -> None:
        from harness.cli.messages import message_lines
        from harness.secrets import redact_userinfo

        for line in message_lines("", redact_userinfo(message), self.console.width):
            self.console.print(line, markup=False, highlight=False)

    def start_live(self) -> None:
        """Show the table (a run's start shows it when nothing has yet)."""
        from rich.live import Live

        if self.live is None:
            self.live = Live(console=self.console, refresh_per_second=2, get_renderable=self._render, transient=False)
            self.live.start()

    def cooling(self, run: str, reading: "CoolingReading") -> None:
        """The run's row says it waits to cool and how warm it is (the table starts with the wait); a line when
        the wait ends (a run it does not start is `not started`, and the table ends when no run is left)."""
        view = self._view(run)
        view.cooling = reading if reading.outcome is None else None
        if reading.outcome is None:
            self.start_live()
            return
        self.console.print(f"{run}: heat guard: {reading.describe()}", markup=False, highlight=False)
        if reading.outcome in ("refused", "interrupted"):
            view.state = "not started"
            self._stop_when_done()

    def stop_live(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def started(self, spec: "LaunchSpec") -> None:
        self._start(spec)
        self.start_live()

    def step(self, run: str, record: "StepRecord", steps_complete: int) -> None:
        self._record_step(run, record, steps_complete)

    def guard(self, run: str, reading: "GuardReading") -> None:
        self._view(run).reading = reading  # the table shows it at its next refresh

    def finished(self, status: "RunStatus") -> None:
        super().finished(status)
        self._stop_when_done()

    def _stop_when_done(self) -> None:
        if all(view.state not in ("running", "waiting") for view in self.runs.values()):
            self.stop_live()


def reporter_for(
    console: Any,
    *,
    say_skips: bool = False,
    verbose: bool = False,
    specs: Sequence["LaunchSpec"] = (),
    title: str = "",
    reused: bool = False,
) -> PlainReporter:
    """Rich on a terminal, plain lines otherwise."""
    if console.is_terminal:
        return RichReporter(console, say_skips=say_skips, verbose=verbose, specs=specs, title=title, reused=reused)
    return PlainReporter(say_skips=say_skips, verbose=verbose, specs=specs, reused=reused)
