"""Live progress of a run: a rich panel on a terminal, one plain line per step elsewhere."""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Optional

from harness.mileslog import keys

if TYPE_CHECKING:  # annotations only: `harness parse-log` and `--help` need not import the launch planner
    from harness.capture import RunStatus
    from harness.launch import LaunchSpec


def step_summary(record: Any, filter_on: Optional[bool] = False) -> dict[str, Any]:
    """The few numbers a person watches per step, from a step record (the reward by `keys.step_reward`)."""
    metrics, derived = record.metrics, record.derived or {}
    return {
        "step": record.step,
        "complete": record.complete,
        "rollout_s": keys.finite_number(metrics.get(keys.ROLLOUT_TIME)),
        "dropped": derived.get("dropped_groups") or 0,
        "dropped_right": derived.get("dropped_all_right") or 0,
        "dropped_wrong": derived.get("dropped_all_wrong") or 0,
        "zero_std_right": derived.get("zero_std_all_right"),
        "zero_std_wrong": derived.get("zero_std_all_wrong"),
        "reward": keys.step_reward(metrics, filter_on),
    }


def _num(value: Any, fmt: str) -> str:
    return "-" if not isinstance(value, (int, float)) else format(value, fmt)


def describe_step(summary: dict[str, Any]) -> str:
    """`rollout 88.7 s | dropped 20 (right 18, wrong 2) | reward 0.672` (or zero-variance groups without the filter)."""
    parts = [f"rollout {_num(summary['rollout_s'], '.1f')} s"]
    if summary["dropped"]:
        parts.append(f"dropped {summary['dropped']} (right {summary['dropped_right']}, wrong {summary['dropped_wrong']})")
    elif summary["zero_std_right"] is not None:
        parts.append(f"zero-variance {summary['zero_std_right']} right, {summary['zero_std_wrong']} wrong")
    parts.append(f"reward {_num(summary['reward'], '.3f')}")
    return " | ".join(parts)


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class PlainProgress:
    """One line per completed step (for logs, CI, pipes)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stdout
        self.spec: Optional[LaunchSpec] = None
        self.filter_on: Optional[bool] = False
        self.t0 = time.monotonic()
        self._lock = threading.Lock()

    def _say(self, text: str) -> None:
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _start(self, spec: LaunchSpec) -> None:
        self.spec, self.t0 = spec, time.monotonic()
        self.filter_on, _ = keys.filter_setting(None, spec.trainer_argv)

    def started(self, spec: LaunchSpec) -> None:
        self._start(spec)
        self._say(f"{spec.run}: started ({spec.engine}, run id {spec.run_id}, {spec.steps_expected} steps expected)")

    def step(self, record: Any, steps_complete: int) -> None:
        summary = step_summary(record, self.filter_on)
        run = self.spec.run if self.spec else "run"
        expected = self.spec.steps_expected if self.spec else "?"
        label = f"step {record.step}" + ("" if record.complete else " INCOMPLETE")
        self._say(f"{run}: {label} ({steps_complete}/{expected} complete) | {describe_step(summary)} | "
                  f"{_elapsed(time.monotonic() - self.t0)} elapsed")

    def note(self, message: str) -> None:
        self._say(message)

    def finished(self, status: RunStatus) -> None:
        pass


class RichProgress(PlainProgress):
    """A live panel: run, step k/N, last rollout time, dropped or zero-variance groups, reward, elapsed."""

    def __init__(self, console: Any) -> None:
        super().__init__()
        self.console = console
        self.last: Optional[dict[str, Any]] = None
        self.steps_complete = 0
        self.live: Any = None

    def _render(self) -> Any:
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        spec = self.spec
        expected = spec.steps_expected if spec else 0
        table.add_row("[bold]run[/bold]", f"{spec.run if spec else '-'}  ({spec.run_id if spec else ''})")
        table.add_row("[bold]steps[/bold]", f"{self.steps_complete}/{expected} complete")
        table.add_row("[bold]last step[/bold]", describe_step(self.last) if self.last else "waiting for the first step")
        table.add_row("[bold]elapsed[/bold]", _elapsed(time.monotonic() - self.t0))
        return table

    def started(self, spec: LaunchSpec) -> None:
        from rich.live import Live

        self._start(spec)
        self.live = Live(self._render(), console=self.console, refresh_per_second=1, get_renderable=self._render)
        self.live.start()

    def step(self, record: Any, steps_complete: int) -> None:
        self.last, self.steps_complete = step_summary(record, self.filter_on), steps_complete

    def note(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False)

    def finished(self, status: RunStatus) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def progress_for(console: Any) -> PlainProgress:
    """Rich on a terminal, plain lines otherwise."""
    return RichProgress(console) if console.is_terminal else PlainProgress()
