"""A reader that closes the pipe early (`| head -1`) ends every command quietly: no traceback, no error line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parent.parent
# Far more than a pipe holds (64 KiB), so the command is still writing when the reader has gone.
MANY = 3000


def step_lines(count: int) -> str:
    return "".join(
        f"[2026-10-02 09:14:{i % 60:02d}.512 rollout_manager] metrics.py:88 - perf {i}: "
        f"{{'perf/rollout_time': 58.21, 'rollout/raw_reward': 0.5}}\n"
        f"[2026-10-02 09:14:{i % 60:02d}.900 actor] train_metric_utils.py:120 - perf {i}: {{'perf/step_time': 82.0}}\n"
        for i in range(count)
    )


@pytest.fixture(scope="module")
def pipe_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Captures (one with a long log), experiments and a long Miles log, each too big for a pipe."""
    root = tmp_path_factory.mktemp("pipes")
    for index in range(MANY // 3):
        run = root / "capture" / f"run-{index:04d}-with-a-longer-name"
        run.mkdir(parents=True)
        (run / "status.json").write_text(
            json.dumps(
                {
                    "run": run.name,
                    "run_id": f"{run.name}-0",
                    "state": "succeeded",
                    "exit_code": 0,
                    "started_at": "2026-11-30T07:00:00Z",
                    "ended_at": "2026-11-30T08:00:00Z",
                    "steps_expected": 12,
                    "steps_complete": 12,
                    "error": None,
                }
            )
        )
    (root / "capture" / "run-0000-with-a-longer-name" / "container.log").write_text(
        "".join(f"2026-11-30T07:00:00.{i:09d}Z line {i} of the trainer\n" for i in range(MANY * 10))
    )
    (root / "experiments").mkdir()
    for index in range(MANY // 10):
        (root / "experiments" / f"exp-{index:04d}.yaml").write_text(
            f"name: exp-{index:04d}\ndescription: experiment number {index} of many, to fill a pipe.\n"
        )
    (root / "miles.log").write_text(step_lines(MANY))
    return root


COMMANDS = {
    "logs": ["logs", "run-0000-with-a-longer-name", "--capture-dir", "capture"],
    "parse-log": ["parse-log", "miles.log"],
    "parse-log --json": ["parse-log", "miles.log", "--json"],
    "status": ["status", "--capture-dir", "capture"],
    "ls": ["ls", "--experiments-dir", "experiments"],
}


@pytest.mark.parametrize("argv", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_reader_that_leaves_early_ends_the_command_quietly(pipe_root, argv):
    harness = [sys.executable, "-m", "harness", *argv]
    done = subprocess.run(
        ["bash", "-c", '"$@" | head -1 >/dev/null; echo "exit=${PIPESTATUS[0]}" >&2', "pipe", *harness],
        cwd=pipe_root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "100"},
    )

    assert done.stderr == "exit=0\n"
