"""`sweep --parallel N`: runs that take no GPU go N at a time; GPU runs stay one per GPU."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.experiments.store import ExperimentStore
from harness.run.lifecycle import takes_no_gpu
from harness.run.plan import plan_runs

REPO = Path(__file__).resolve().parent.parent


def sweep(tmp_path: Path, root: str, *args: str) -> float:
    started = time.monotonic()
    done = CliRunner().invoke(
        app,
        [
            "sweep",
            "plain",
            *args,
            "--sim",
            "--sim-engine",
            "process",
            "--time-scale",
            "0.005",
            "--set",
            "steps=4",
            "--capture-dir",
            str(tmp_path / root),
            "--experiments-dir",
            str(REPO / "experiments"),
        ],
        env={"HARNESS_PROCESS_DIR": str(tmp_path / "processes")},
    )
    took = time.monotonic() - started
    assert done.exit_code == 0, done.output
    return took


@pytest.mark.integration
def test_three_seeds_on_the_simulator_take_at_most_about_the_time_of_one(tmp_path: Path) -> None:
    one = sweep(tmp_path, "one", "--seeds", "1")
    three = sweep(tmp_path, "three", "--seeds", "1", "2", "3", "--parallel", "3")

    assert three <= 1.6 * one, (three, one)
    for run in ("plain", "plain-s2", "plain-s3"):
        assert (tmp_path / "three" / run / "status.json").is_file()


def test_only_runs_that_take_no_gpu_go_side_by_side(tmp_path: Path) -> None:
    store = ExperimentStore(REPO / "experiments")
    real = plan_runs(store, "plain", [1, 2], [], tmp_path, {})
    no_gpu = plan_runs(store, "plain", [1], ["container.gpus=none"], tmp_path, {})

    assert not any(takes_no_gpu(plan) for plan in real)  # they hold the GPU's lock: one at a time
    assert all(takes_no_gpu(plan) for plan in no_gpu)
