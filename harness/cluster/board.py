"""Live progress of a sweep over several hosts: one line per run with its host, step and pause state.

The board is fed the events the runs stream to the driver (from several
threads) and says what changed; the CLI renders it (a live table on a
terminal, a plain line per change elsewhere). It decides nothing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional


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

    @property
    def pause_text(self) -> str:
        temp = f"{self.temp_c:.1f} C" if self.temp_c is not None else None
        if self.paused_since is not None:
            return f"PAUSED since {self.paused_since[11:19]}" + (f", {temp}" if temp else "")
        return temp or "-"

    def describe(self) -> str:
        """`plain-48-s2 on spark-2: running, step 3/12, PAUSED since 12:03:04, 88.0 C`."""
        return (f"{self.run} on {self.host}: {self.state}, step {self.steps_complete}/{self.steps_expected}, "
                f"{self.pause_text}")


class Board:
    """The runs of a sweep; `on_change(line, what)` is called (from the caller's thread) when a line changes."""

    def __init__(self, on_change: Callable[[RunLine, str], None] = lambda line, what: None) -> None:
        self._lines: dict[str, RunLine] = {}
        self._lock = threading.Lock()
        self.on_change = on_change

    def add(self, run: str, steps_expected: int) -> None:
        with self._lock:
            self._lines[run] = RunLine(run, steps_expected)

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
            with self._lock:
                count = self._lines[run].steps_complete + 1
            self._update(run, "step", steps_complete=count)
        elif kind == "jsonl" and name == "pauses.jsonl":
            if payload.get("end") is None:
                self._update(run, "paused", paused_since=payload.get("start"), temp_c=payload.get("peak_c"))
            else:
                self._update(run, "resumed", paused_since=None)
        elif kind == "jsonl" and name == "guard.jsonl" and isinstance(payload.get("temp_c"), (int, float)):
            self._update(run, "", temp_c=float(payload["temp_c"]))  # shown with the next change, not a line of its own

    def _update(self, run: str, what: str, **changes: Any) -> None:
        changes = {key: value for key, value in changes.items() if value is not None or key == "paused_since"}
        with self._lock:
            before = self._lines[run]
            after = replace(before, **changes)
            self._lines[run] = after
        if what and (after != before or what == "placed"):
            if what == "state" and after.state == before.state:
                return
            self.on_change(after, what)
