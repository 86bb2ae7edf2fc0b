"""scripts/check-capture.py, the check `make smoke` and the GPU tests run on a capture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def capture(root: Path, state: str, complete: int, steps_complete: int | None = None) -> Path:
    run = root / "smoke"
    run.mkdir()
    (run / "status.json").write_text(json.dumps({
        "run": "smoke", "state": state, "error": None if state == "succeeded" else "exit code 1",
        "steps_expected": 2, "steps_complete": complete if steps_complete is None else steps_complete}))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": i, "complete": i < complete}) + "\n"
                                               for i in range(2)))
    return run


def check(run: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "check-capture.py"), str(run), *args],
                          capture_output=True, text=True, timeout=60)


def test_a_succeeded_capture_with_its_steps_passes(tmp_path):
    done = check(capture(tmp_path, "succeeded", 2), "--state", "succeeded", "--complete-steps", "2")

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"check-capture: {tmp_path / 'smoke'}: succeeded, 2 complete steps\n"


@pytest.mark.parametrize("state, complete, steps_complete, problem", [
    ("failed", 2, None, "state is failed (exit code 1), expected succeeded"),
    ("succeeded", 1, None, "1 complete steps in metrics.jsonl, expected 2"),
    ("succeeded", 2, 1, "status.json says 1 complete steps, metrics.jsonl 2"),
])
def test_what_differs_fails_with_one_line_each(tmp_path, state, complete, steps_complete, problem):
    done = check(capture(tmp_path, state, complete, steps_complete), "--complete-steps", "2")

    assert done.returncode == 1
    assert f"check-capture: {tmp_path / 'smoke'}: {problem}\n" in done.stderr


def test_no_capture_is_one_line(tmp_path):
    done = check(tmp_path / "absent")

    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and "status.json" in done.stderr
