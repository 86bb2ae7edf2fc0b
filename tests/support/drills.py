"""Heat guard drills: a sensor reading written in one step, a guard record read back, a run that ticks.

A drill runs the real harness on the fake trainer's `ticks` scenario and flips
the file sensor; the engine says what happened.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.times import parse_time_us
from support.lab import Lab
from support.timing import wait_until

DRILL_POLL_S = 0.1  # the guard's poll in a drill (file_guard)


def write_temp(path: Path, text: str) -> None:
    """Replace the sensor file in one step, as a drill script should (a reader never sees it half written)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def jsonl(path: Path) -> list[dict]:
    """Every line of a JSONL record (pauses.jsonl, guard.jsonl), or [] when there is none."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def file_guard(temp: Path, **more: Any) -> dict:
    """An experiment's guard on the file sensor at `temp`, polled every DRILL_POLL_S."""
    return {"sensor": f"file:{temp}", "poll_s": DRILL_POLL_S, "min_pause_s": 0, "record_every_s": 0.5, **more}


def ticking(lab: Lab, name: str, guard: dict, ticks: int = 150) -> str:
    """A run that prints `tick 0` ... `tick N-1`, one every 20 ms, then one step."""
    return lab.experiment(
        name, scenario="ticks", steps=1, guard=guard, env={"FAKE_TICKS": str(ticks), "FAKE_TICK_S": "0.02"}
    )


def ticks_in_log(lab: Lab, run: str) -> list[tuple[int, int]]:
    """(receive stamp in us, tick number) of every tick line in container.log."""
    found = []
    for line in lab.log(run):
        stamp, _, text = line.partition(" ")
        if text.startswith("tick "):
            found.append((parse_time_us(stamp), int(text.split()[1])))
    return found


def wait_for_ticks(lab: Lab, run: str, count: int = 5) -> Any:
    """The engine's handle on a ticking run, once its first `count` ticks are captured."""
    lab.wait_for(lambda: len(ticks_in_log(lab, run)) >= count and lab.objects(), 60, "the first ticks")
    return lab.objects()[0]


def wait_state(handle: Any, state: str, timeout_s: float = 10) -> None:
    """Wait (scaled) until the engine describes the run as `state`."""
    wait_until(lambda: handle.describe().state == state, timeout_s, f"the run to be {state}")


# The Docker engine's words for a freeze its runtime could not make (what a loaded GB10 answered in `make demo`).
FREEZE_REFUSED = "Cannot pause container {id}: OCI runtime pause failed: unable to freeze: unknown"


class RefusedFreezes:
    """Makes the lowest layer refuse chosen freezes: `docker pause` through the Docker SDK (a 500 with the
    runtime's words), or the SIGSTOP a process group is sent (EPERM). Everything above it is the harness's own."""

    def __init__(self, monkeypatch: Any, refuse: Any) -> None:
        self.refuse = set(refuse)  # which freezes, counted from 1, are refused
        self.asked = 0
        self._patch(monkeypatch)

    def _turn(self) -> bool:
        """Count a freeze asked for; whether it is refused."""
        self.asked += 1
        return self.asked in self.refuse

    def _patch(self, monkeypatch: Any) -> None:
        import os
        import signal

        import docker
        from docker.models.containers import Container

        real_pause, real_killpg, real_kill = Container.pause, os.killpg, os.kill
        drill = self

        def pause(container: Any) -> None:
            if drill._turn():
                raise docker.errors.APIError(
                    "500 Server Error: Internal Server Error",
                    explanation=FREEZE_REFUSED.format(id=container.id),
                )
            real_pause(container)

        def signal_group(real: Any) -> Any:
            def send(target: int, signum: int) -> None:
                if signum == signal.SIGSTOP and drill._turn():
                    raise PermissionError(1, "Operation not permitted")
                real(target, signum)

            return send

        monkeypatch.setattr(Container, "pause", pause)
        monkeypatch.setattr(os, "killpg", signal_group(real_killpg))
        monkeypatch.setattr(os, "kill", signal_group(real_kill))
