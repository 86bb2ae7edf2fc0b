"""scripts/check-capture.py, the check `make smoke` and the GPU tests run on a capture."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # each test runs the script in a Python process of its own

REPO_ROOT = Path(__file__).resolve().parent.parent
TINY = REPO_ROOT / "tests" / "data" / "captures" / "edge" / "tiny-plain"  # succeeded, 3 of 3 steps complete


def capture(root: Path, **status: object) -> Path:
    """A copy of the tiny capture, its status.json changed by `status`."""
    run = root / "tiny-plain"
    shutil.copytree(TINY, run)
    document = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**document, **status}))
    return run


def check(run: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "check-capture.py"), str(run), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_succeeded_capture_with_its_steps_passes(tmp_path):
    done = check(capture(tmp_path), "--state", "succeeded", "--complete-steps", "3")

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"check-capture: {tmp_path / 'tiny-plain'}: succeeded, 3 complete steps\n"


@pytest.mark.parametrize(
    "status, expected_steps, problem",
    [
        (
            {"state": "failed", "exit_code": 1, "error": "exit code 1"},
            3,
            "state is failed (exit code 1), expected succeeded",
        ),
        ({}, 4, "3 complete steps in metrics.jsonl, expected 4"),
        ({"steps_complete": 2}, 3, "status.json says 2 complete steps, metrics.jsonl 3"),
    ],
)
def test_what_differs_fails_with_one_line_each(tmp_path, status, expected_steps, problem):
    done = check(capture(tmp_path, **status), "--complete-steps", str(expected_steps))

    assert done.returncode == 1
    assert f"check-capture: {tmp_path / 'tiny-plain'}: {problem}\n" in done.stderr


def test_no_capture_is_one_line(tmp_path):
    done = check(tmp_path / "absent")

    assert done.returncode != 0
    assert len(done.stderr.splitlines()) == 1 and "status.json" in done.stderr
