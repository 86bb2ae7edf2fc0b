"""Power loss: files that end in NUL bytes, a torn last line, or a status.json that is all NULs.

A GB10 under sustained load has been seen to power off hard, leaving files
whose last blocks were allocated but never written. A real capture (a
simulated run on the process engine) is cut at many points and padded with
NUL bytes; the readers keep every complete line, never parse a torn one,
`status` says what happened, and `recover` decides from the evidence on disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.capture import Capture, find_runs, read_capture, read_status
from harness.fs.bounded import iter_jsonl
from harness.run.capture_ops import capture_rows
from harness.run.settle import carry_out, plan_all
from support.cuts import edge_cuts, inner_cuts
from support.properties import examples

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def real_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A succeeded 4-step run of `plain` on the simulator, as `harness run --sim` captures it."""
    root = tmp_path_factory.mktemp("power-loss")
    env = {
        **os.environ,
        "HARNESS_LOCK_DIR": str(root / "locks"),
        "HARNESS_PROCESS_DIR": str(root / "processes"),
        "XDG_STATE_HOME": str(root / "state"),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "plain",
            "--sim",
            "--sim-engine",
            "process",
            "--time-scale",
            "0.002",
            "--set",
            "steps=4",
            "--capture-dir",
            str(root / "capture"),
            "--experiments-dir",
            str(REPO / "experiments"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return (root / "capture" / "plain").resolve()  # the attempt's own directory


def cut_and_pad(path: Path, keep: int, nuls: int) -> None:
    """What a power loss leaves: the first `keep` bytes, then `nuls` NUL bytes where the rest was being written."""
    data = path.read_bytes()
    path.write_bytes(data[:keep] + b"\0" * nuls)


def copy_of(capture: Path, where: Path) -> Path:
    """The capture as a legacy run directory of its own root (so the cuts never touch the original)."""
    target = where / "capture" / "plain"
    shutil.copytree(capture, target, ignore=shutil.ignore_patterns(".reserve"))
    return target


def complete_lines(data: bytes) -> int:
    return data.count(b"\n")


def keeps_every_complete_step(run: Path, original: bytes, keep: int) -> None:
    """metrics.jsonl cut at `keep` and padded: every complete line read, the torn tail never parsed, only noted."""
    (run / "metrics.jsonl").write_bytes(original)  # each cut of the whole file: none sees another's
    cut_and_pad(run / "metrics.jsonl", keep, 4096)
    notes: list[str] = []
    rows = list(iter_jsonl(run / "metrics.jsonl", notes))
    assert len(rows) == complete_lines(original[:keep]), keep
    assert all("torn" in note and "NUL bytes: a power loss?" in note for note in notes), (keep, notes)
    summary_read = read_capture(run)
    assert len(summary_read.records) == complete_lines(original[:keep]), keep


def test_metrics_cut_at_each_line_s_edges_keeps_every_complete_step_and_never_parses_the_torn_tail(
    real_capture: Path, tmp_path: Path
) -> None:
    original = (real_capture / "metrics.jsonl").read_bytes()
    assert complete_lines(original) == 4
    run = copy_of(real_capture, tmp_path)
    for keep in edge_cuts(original):
        keeps_every_complete_step(run, original, keep)


@settings(max_examples=examples(50), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_metrics_cut_anywhere_keeps_every_complete_step_and_never_parses_the_torn_tail(
    real_capture: Path, tmp_path: Path, data: st.DataObject
) -> None:
    original = (real_capture / "metrics.jsonl").read_bytes()
    run = tmp_path / "capture" / "plain"
    if not run.exists():  # one copy for every example: each writes metrics.jsonl whole before its cut
        copy_of(real_capture, tmp_path)
    keeps_every_complete_step(run, original, data.draw(inner_cuts(original), label="keep"))


def test_a_status_of_nul_bytes_is_torn_and_status_says_so(real_capture: Path, tmp_path: Path) -> None:
    run = copy_of(real_capture, tmp_path)
    size = (run / "status.json").stat().st_size
    (run / "status.json").write_bytes(b"\0" * size)

    found = read_status(run)
    (row,) = capture_rows([Capture(run)])

    assert found.torn and found.status is None
    assert row.state.startswith("torn by a power loss? (status.json is torn (")


@pytest.mark.parametrize("how", ["nuls", "empty", "nul-tail"])
def test_recover_rebuilds_a_torn_status_from_the_files_as_interrupted_never_not_started(
    real_capture: Path, tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_PROCESS_DIR", str(tmp_path / "processes"))
    run = copy_of(real_capture, tmp_path)
    status_path = run / "status.json"
    original = status_path.read_bytes()
    half = len(original) // 2
    torn = {"nuls": b"\0" * len(original), "empty": b"", "nul-tail": original[:half] + b"\0" * half}[how]
    status_path.write_bytes(torn)
    cut_and_pad(run / "metrics.jsonl", len((run / "metrics.jsonl").read_bytes()) - 10, 512)
    cut_and_pad(run / "container.log", len((run / "container.log").read_bytes()) - 5, 2048)
    from harness.engines.process import ProcessEngine

    (plan,) = plan_all(run.parent, [ProcessEngine()], [])
    assert plan.action == "settle" and "a power loss?" in plan.reason

    result = carry_out(plan)

    status = json.loads(status_path.read_text())
    assert status["state"] == "interrupted"
    # The fourth step's line in metrics.jsonl was torn, but the log still holds the step: recover re-reads it.
    assert status["steps_complete"] == 4
    metrics = (run / "metrics.jsonl").read_bytes()
    assert b"\0" not in metrics and [json.loads(line)["step"] for line in metrics.splitlines()] == [0, 1, 2, 3]
    assert "the harness and its engine went away" in status["error"]
    assert (run / "status.json.torn").read_bytes() == torn  # nothing is lost
    assert result.status is not None and result.status.state == "interrupted"
    assert (run / "container.log").read_bytes().endswith(b"\0" * 2048)  # read up to its torn tail, never rewritten
    assert find_runs(run.parent)[0] == [run]
