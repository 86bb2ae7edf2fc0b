"""Live progress of a sweep over several hosts: one line per run with its host, step, last step's numbers, pause state.

The board is fed the events the runs stream to the driver (from several
threads) and says what changed; the CLI renders it (a live table on a
terminal, a plain line per change elsewhere). It decides nothing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from harness.lab.milesnames import ROLLOUT_TIME
from harness.mileslog import keys

CLEARABLE = ("paused_since", "rollout_s", "reward")  # None is news for these: no open window, a step without the key


@dataclass(frozen=True)
class RunLine:
    """One run as the board shows it."""

    run: str
    steps_expected: int
    host: str = "-"
    state: str = "queued"
    steps_complete: int = 0
    paused_since: Optional[str] = None  # RFC 3339 start of the open pause window
    temp_c: Optional[float] = None
    filter_on: Optional[bool] = False  # which reward key is the step's (harness.mileslog.keys.step_reward)
    batch: Optional[int] = None  # B, for the reward derived where Miles does not print it
    rollout_s: Optional[float] = None  # the last complete step's rollout time: the trainer's, pauses included
    reward: Optional[float] = None  # the last complete step's reward

    @property
    def pause_text(self) -> str:
        temp = f"{self.temp_c:.1f} C" if self.temp_c is not None else None
        if self.paused_since is not None:
            return f"PAUSED since {self.paused_since[11:19]}" + (f", {temp}" if temp else "")
        return temp or "-"

    @property
    def rollout_text(self) -> str:
        return "-" if self.rollout_s is None else f"{self.rollout_s:.1f}"

    @property
    def reward_text(self) -> str:
        return "-" if self.reward is None else f"{self.reward:.3f}"

    def describe(self) -> str:
        """`plain-48-s2 on spark-2: running, step 3/12, rollout 88.7 trainer s, reward 0.672, 88.0 C`."""
        numbers = f", rollout {self.rollout_text} trainer s, reward {self.reward_text}" if self.steps_complete else ""
        return (
            f"{self.run} on {self.host}: {self.state}, step {self.steps_complete}/{self.steps_expected}"
            f"{numbers}, {self.pause_text}"
        )


class Board:
    """The runs of a sweep; `on_change(line, what)` is called (from the caller's thread) when a line changes."""

    def __init__(self, on_change: Callable[[RunLine, str], None] = lambda line, what: None) -> None:
        self._lines: dict[str, RunLine] = {}
        self._lock = threading.Lock()
        self.on_change = on_change

    def add(
        self, run: str, steps_expected: int, filter_on: Optional[bool] = False, batch: Optional[int] = None
    ) -> None:
        with self._lock:
            self._lines[run] = RunLine(run, steps_expected, filter_on=filter_on, batch=batch)

    def lines(self) -> list[RunLine]:
        with self._lock:
            return list(self._lines.values())

    def line(self, run: str) -> RunLine:
        with self._lock:
            return self._lines[run]

    def placed(self, run: str, hostname: str) -> None:
        self._update(run, "placed", host=hostname, state="starting")

    def settled(self, run: str, state: str) -> None:
        self._update(run, state, state=state)

    def event(self, run: str, event: Any) -> None:
        """A capture write the run streamed: its state, a completed step, a pause window, a guard sample."""
        kind, name, payload = event
        if kind == "status":
            self._update(run, "state", state=str(payload.get("state")), steps_expected=payload.get("steps_expected"))
        elif kind == "jsonl" and name == "metrics.jsonl" and payload.get("complete"):
            metrics = payload.get("metrics") if isinstance(payload.get("metrics"), dict) else {}
            with self._lock:
                line = self._lines[run]
            self._update(
                run,
                "step",
                steps_complete=line.steps_complete + 1,
                rollout_s=keys.finite_number(metrics.get(ROLLOUT_TIME)),
                reward=keys.step_reward(metrics, line.filter_on, line.batch),
            )
        elif kind == "jsonl" and name == "pauses.jsonl":
            if payload.get("end") is None:
                self._update(run, "paused", paused_since=payload.get("start"), temp_c=payload.get("peak_c"))
            else:
                self._update(run, "resumed", paused_since=None)
        elif kind == "jsonl" and name == "guard.jsonl" and isinstance(payload.get("temp_c"), (int, float)):
            self._update(run, "", temp_c=float(payload["temp_c"]))  # shown with the next change, not a line of its own

    def _update(self, run: str, what: str, **changes: Any) -> None:
        changes = {key: value for key, value in changes.items() if value is not None or key in CLEARABLE}
        with self._lock:
            before = self._lines[run]
            after = replace(before, **changes)
            self._lines[run] = after
        if what and (after != before or what == "placed"):
            if what == "state" and after.state == before.state:
                return
            self.on_change(after, what)
