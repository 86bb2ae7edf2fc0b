"""Calling every command of the harness over a capture root of broken files (tests/test_broken_roots.py and
tests/test_broken_roots_runs.py): the good run the root is made from, the root (built once a module, copied for each
test), and one command's calls, each in a process of its own (tests/support/everycommand.py), with the checks every
call must pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support import brokenroot
from support.everycommand import SERVER_PATHS, SLOW_PATHS, filled, invocations
from support.timing import scaled

REPO = Path(__file__).resolve().parent.parent.parent
DRIVER = REPO / "tests" / "support" / "everycommand.py"
# The commands that run trainers take most of the time: tests/test_broken_roots_runs.py calls them, so the two
# modules run on two workers at once.
RUNNING = {("run",), ("sweep",)}
SUMMARIZE = ("summarize",)
# Called over the root `harness summarize` has summarized (`summarized_root`): `report` reports on that summary, and
# `demo` adds its runs to the root and summarizes it again. Both draw only the figures not already up to date there:
# the summary's figures of the broken runs (a guard figure a run, most of a summary's seconds) are drawn once.
AFTER_SUMMARY = {("report",), ("demo",)}
TIMEOUT_S = 30  # one call of a command that runs no trainer
SERVER_S = 30  # TensorBoard answers on its port well within this; the driver stops it soon after (SERVED_FOR_S)
# The picked runs a slow command (a real run) is given: a broken status each way, a broken manifest, odd attempts.
PICKED = [
    "cur-status-nul",
    "cur-status-torn",
    "cur-status-fifo",
    "cur-status-lacking",
    "new-status-fifo",
    "cur-manifest-fifo",
    "cur-manifest-huge",
    "foreign-names",
    "link-to-c2b2",
    "ten-digits",
    "long-number",
    "current-record-nul",
    "current-record-fifo",
    "started-record-huge",
    "current-gone",
    "many-empty",
    "attempts-a-file",
    "legacy-nul-status",
]


@dataclass(frozen=True)
class BrokenRoot:
    """A capture root of broken files, and its runs by group (`brokenroot.build`'s `made`)."""

    capture: Path
    made: dict[str, list[str]]


@dataclass(frozen=True)
class Calls:
    """One command's calls over a copy of a broken root: the copy, each call's record, and the driver's output."""

    root: BrokenRoot
    calls: list[list[str]]
    records: list[dict[str, Any]]
    server: bool
    said: str


@pytest.fixture(scope="module")
def broken_root_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A succeeded 2-step run of `plain` on the simulator: the good attempt every broken run is copied from."""
    root = tmp_path_factory.mktemp("template")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "plain", "--sim", "--sim-engine", "process", "--time-scale", "0.002"]
        + ["--set", "steps=2", "--capture-dir", str(root / "capture"), "--experiments-dir", str(REPO / "experiments")],
        capture_output=True,
        text=True,
        env={**os.environ, **lab_env(root)},
        timeout=300,
        cwd=root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return (root / "capture" / "plain").resolve()


@pytest.fixture(scope="module")
def broken_root(broken_root_template: Path, tmp_path_factory: pytest.TempPathFactory) -> BrokenRoot:
    """The root of broken files, built once a module: each test calls its command over a copy of its own."""
    capture = tmp_path_factory.mktemp("broken-root") / "capture"
    return BrokenRoot(capture, brokenroot.build(capture, broken_root_template))


@pytest.fixture(scope="module")
def summarized_root(broken_root: BrokenRoot, tmp_path_factory: pytest.TempPathFactory) -> Calls:
    """`harness summarize` over a copy of the broken root, once a module: the test of `summarize` checks its calls,
    and the commands of AFTER_SUMMARY are called over copies of the root it summarized."""
    return call_over_a_broken_root(SUMMARIZE, broken_root, tmp_path_factory.mktemp("summarized"))


def lab_env(root: Path) -> dict[str, str]:
    return {
        "HARNESS_LOCK_DIR": str(root / "locks"),
        "HARNESS_PROCESS_DIR": str(root / "processes"),
        "XDG_STATE_HOME": str(root / "state"),
        "HARNESS_ENGINES": "process",
        "COLUMNS": "1000",
    }


def call_over_a_broken_root(path: tuple[str, ...], source: BrokenRoot, tmp_path: Path) -> Calls:
    """Every invocation of the command `path` over a copy of `source` in `tmp_path`, in a process of its own."""
    root = BrokenRoot(tmp_path / "capture", source.made)
    brokenroot.copy(source.capture, root.capture)
    made = root.made
    calls = [filled(argv, root.capture, REPO / "experiments") for argv in invocations(path, made["runs"], PICKED)]
    server = path in SERVER_PATHS
    timeout_s = scaled(SERVER_S if server else SLOW_PATHS.get(path, TIMEOUT_S))
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"invocations": calls, "timeout_s": timeout_s, "server": server, "env": lab_env(tmp_path)})
    )
    results = tmp_path / "results.jsonl"
    driver = subprocess.run(
        [sys.executable, str(DRIVER), str(plan), str(results)],
        cwd=tmp_path,
        env={**os.environ, **lab_env(tmp_path)},
        capture_output=True,
        text=True,
        timeout=len(calls) * (timeout_s + 5) + 60,
    )
    records = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    return Calls(root, calls, records, server, driver.stdout[-3000:] + driver.stderr[-3000:])


def no_exit_70_no_hang(calls: Calls) -> None:
    """Each call ended by itself (a server: served until stopped, or refused), with no exit 70 and no traceback."""
    records = calls.records
    assert len(records) == len(calls.calls), calls.said
    bad = [
        f"{' '.join(record['argv'])}: "
        + ("hung" if record["hung"] else f"exit {record['exit_code']} {record['exception'] or ''}")
        + f"\n{record['output'][-600:]}"
        for record in records
        if record["hung"]
        or record["exit_code"] == 70
        or record["exception"]
        or "Traceback" in record["output"]
        or "internal error" in record["output"]
    ]
    assert not bad, f"{len(bad)} of {len(records)} calls:\n" + "\n".join(bad[:15])
    if calls.server:
        (record,) = records
        assert record["served"] or record["exit_code"] not in (0, None), record
