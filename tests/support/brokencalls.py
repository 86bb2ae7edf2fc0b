"""Calling every command of the harness over a capture root of broken files (tests/test_broken_roots.py and
tests/test_broken_roots_runs.py): the good run the root is made from, and one command's calls, each in a process
of its own (tests/support/everycommand.py), with the checks every call must pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import brokenroot
from support.everycommand import SERVER_PATHS, SLOW_PATHS, filled, invocations
from support.timing import scaled

REPO = Path(__file__).resolve().parent.parent.parent
DRIVER = REPO / "tests" / "support" / "everycommand.py"
# The commands that run trainers take most of the time: tests/test_broken_roots_runs.py calls them, so the two
# modules run on two workers at once.
RUNNING = {("run",), ("sweep",), ("demo",)}
TIMEOUT_S = 30  # one call of a command that runs no trainer
SERVER_S = 8  # TensorBoard is up well within this
# The runs a slow command (a real run) is given: a broken status each way, a broken manifest, odd attempts.
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


def lab_env(root: Path) -> dict[str, str]:
    return {
        "HARNESS_LOCK_DIR": str(root / "locks"),
        "HARNESS_PROCESS_DIR": str(root / "processes"),
        "XDG_STATE_HOME": str(root / "state"),
        "HARNESS_ENGINES": "process",
        "COLUMNS": "1000",
    }


def call_over_a_broken_root(path: tuple[str, ...], template: Path, tmp_path: Path) -> None:
    """Every invocation of the command `path` over a root of broken files, in a process of its own: no exit 70, no
    traceback, no hang."""
    root = tmp_path / "capture"
    made = brokenroot.build(root, template)
    calls = [filled(argv, root, REPO / "experiments") for argv in invocations(path, made["runs"], PICKED)]
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
    assert len(records) == len(calls), driver.stdout[-3000:] + driver.stderr[-3000:]
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
    if server:
        (record,) = records
        assert record["served"] or record["exit_code"] not in (0, None), record
