"""The heat guard's targets in tests: a real process group to freeze, a loop driven by a fake clock, the CLI.

Fixture (registered in conftest.py): `ticker`, a process group of two that
prints a counter every 10 ms (a trainer stand-in), killed after the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from harness.engines.process import ProcessRun
from harness.guard import GuardHooks, GuardLoop
from harness.guard.config import GuardConfig
from support.fakes import FakeClock
from support.timing import eventually, scaled

REPO = Path(__file__).resolve().parents[2]

# A trainer stand-in: a process group of two (a child that sleeps), printing a counter every 10 ms.
TICKER = """
import subprocess, time
child = subprocess.Popen(["sleep", "120"])
i = 0
while True:
    print(i, flush=True)
    i += 1
    time.sleep(0.01)
"""


def group_states(pgid: int) -> list[str]:
    """The /proc state letter of every process in a process group."""
    states = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid:
            states.append(fields[0])
    return states


def frozen(pgid: int) -> bool:
    """Both processes of a ticker's group are stopped."""
    states = group_states(pgid)
    return len(states) == 2 and all(s == "T" for s in states)


def running(pgid: int) -> bool:
    """Both processes of a ticker's group are there, neither stopped."""
    states = group_states(pgid)
    return len(states) == 2 and not any(s == "T" for s in states)


@pytest.fixture
def ticker() -> Iterator[ProcessRun]:
    """A process group of two, printing a counter every 10 ms, that the guard may freeze."""
    process = subprocess.Popen(
        [sys.executable, "-u", "-c", TICKER],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    handle = ProcessRun(process)
    assert eventually(lambda: len(group_states(process.pid)) == 2)
    yield handle
    handle.kill()
    process.wait(scaled(10))
    handle.remove()


def synchronous(
    handle: Any, sensor: Any, tmp_path: Path, clock: FakeClock, notes: Optional[list] = None, **config: Any
) -> GuardLoop:
    """A guard loop that is not started: the test calls `poll()` and sets the clock."""
    settings = {"min_pause_s": 0.0, "record_every_s": 10.0, **config}
    return GuardLoop(
        handle,
        sensor,
        GuardConfig(**settings),
        pauses_path=tmp_path / "pauses.jsonl",
        samples_path=tmp_path / "guard.jsonl",
        clock=clock,
        wall_us=clock.wall_us,
        hooks=GuardHooks(on_note=None if notes is None else notes.append),
    )


def guard_command(*args: str) -> subprocess.Popen:
    """`harness guard ARGS` in a subprocess (it installs its own signal handlers, as a user's would)."""
    return subprocess.Popen(
        [sys.executable, "-m", "harness", "guard", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
