"""The board of real runs on the simulator (process engine): written live, equal to its rebuild, never in the way.

- events for step k are on disk before step k+1 is recorded (the reporter is
  told of step k+1 right after its line is in metrics.jsonl, on the pump's
  thread: the moment `harness run` prints it);
- the events written live and those `harness export --format tensorboard`
  rebuilds from the capture hold the same scalars, texts and hyperparameters;
- a full disk under the event files: one warning, the run and its capture whole;
- `--wandb`: an offline W&B run, and no API key anywhere under the capture root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.experiments.store import ExperimentStore
from harness.run.context import RecordingReporter, RunContext
from harness.run.lifecycle import run_planned
from harness.run.plan import plan_runs
from harness.run.simswap import SimTarget

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO / "experiments"


@pytest.fixture
def sim_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("HARNESS_PROCESS_DIR", str(tmp_path / "processes"))
    monkeypatch.setenv("HARNESS_ENGINES", "process")
    return tmp_path / "capture"


def run_on_the_simulator(root: Path, reporter: Any, *overrides: str, experiment: str = "e2b-dapo-filter") -> Any:
    target = SimTarget("process", 0.002, sys.executable, "a test")
    store = ExperimentStore(EXPERIMENTS)
    (plan,) = plan_runs(store, experiment, [], ["steps=5", *overrides], root, dict(os.environ), sim=target)
    return run_planned(plan, RunContext(reporter=reporter)).status


def board_steps(directory: Path, tag: str) -> set[int]:
    """The steps of `tag` in the event files under `directory`, read as TensorBoard reads them."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    steps: set[int] = set()
    for path in sorted(directory.rglob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            if any(value.tag == tag for value in event.summary.value):
                steps.add(event.step)
    return steps


class Watching(RecordingReporter):
    """Looks at the board each time a step is recorded."""

    def __init__(self, board: Path) -> None:
        super().__init__()
        self.board = board
        self.on_board_at: dict[int, set[int]] = {}

    def step(self, run: str, record: Any, steps_complete: int) -> None:
        self.on_board_at[record.step] = board_steps(self.board, "perf/rollout_time")
        super().step(run, record, steps_complete)


def everything(directory: Path) -> tuple[list, list, list]:
    from tbparse import SummaryReader

    reader = SummaryReader(str(directory), pivot=False, extra_columns={"wall_time", "dir_name"})
    scalars = sorted(map(tuple, reader.scalars[["dir_name", "tag", "step", "wall_time", "value"]].values.tolist()))
    texts = sorted(map(tuple, reader.text[["dir_name", "tag", "step", "value"]].values.tolist()))
    hparams = sorted(map(tuple, reader.hparams[["dir_name", "tag", "value"]].astype(str).values.tolist()))
    return scalars, texts, hparams


def test_each_step_is_on_the_board_before_the_next_and_the_rebuild_is_the_same(sim_env: Path, tmp_path: Path) -> None:
    board = sim_env / "tensorboard"
    reporter = Watching(board)
    status = run_on_the_simulator(sim_env, reporter)
    assert status.state == "succeeded", status.error
    steps = sorted(reporter.on_board_at)
    assert steps == [0, 1, 2, 3, 4]
    for step in steps[1:]:
        assert step - 1 in reporter.on_board_at[step], f"step {step - 1} was not on the board when {step} came"
    assert not reporter.of("warning")
    assert (board / "e2b-dapo-filter" / "s1").is_dir()

    live = tmp_path / "live"
    shutil.copytree(board, live)
    done = CliRunner().invoke(app, ["export", "--format", "tensorboard", "--capture-dir", str(sim_env)])
    assert done.exit_code == 0, done.output
    live_records, rebuilt_records = everything(live), everything(board)
    scalars, texts, hparams = live_records
    assert len(scalars) > 100 and texts and hparams
    assert {row[1] for row in scalars} >= {
        "harness/rollout_time_adjusted_s",
        "harness/dropped_all_wrong",
        "guard/paused",
    }
    assert live_records == rebuilt_records


def test_a_full_disk_under_the_events_never_stops_the_run(sim_env: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root: run the suite as root (CI does)")
    board = sim_env / "tensorboard"
    board.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(board)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        reporter = RecordingReporter()
        status = run_on_the_simulator(sim_env, reporter)
        assert status.state == "succeeded" and status.capture_complete is not False, status.error
        warnings = [message for _, message, _ in reporter.of("warning")]
        assert len(warnings) == 1, warnings
        assert "tensorboard: no space left on device" in warnings[0]
        assert "harness export --format tensorboard" in warnings[0]
        rows = (sim_env / "e2b-dapo-filter" / "metrics.jsonl").read_text().splitlines()
        assert len(rows) == 5
    finally:
        subprocess.run(["umount", str(board)], check=False)
    done = CliRunner().invoke(app, ["export", "--format", "tensorboard", "--capture-dir", str(sim_env)])
    assert done.exit_code == 0, done.output
    assert board_steps(board, "perf/rollout_time") == {0, 1, 2, 3, 4}


def test_wandb_offline_writes_a_run_and_never_a_key(sim_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb", reason="wandb is not installed: pip install '.[wandb]' (make setup does)")
    secret = "wandb-key-that-must-never-be-written-0123456789"
    monkeypatch.setenv("WANDB_API_KEY", secret)
    reporter = RecordingReporter()
    status = run_on_the_simulator(sim_env, reporter, "export.wandb=offline")
    assert status.state == "succeeded", status.error
    runs = list((sim_env / "wandb" / "e2b-dapo-filter" / "s1").rglob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1 and runs[0].stat().st_size > 0
    found: Optional[Path] = None
    for path in sim_env.rglob("*"):
        if path.is_file() and secret.encode() in path.read_bytes():
            found = path
    assert found is None, f"the key is in {found}"
    assert os.environ["WANDB_API_KEY"] == secret  # the harness's own environment is as it was
    assert not [w for w in reporter.of("warning") if "wandb" in w[1]]
