"""`harness sweep --dry-run`: each run it would start, its run id and capture, skipped or not and why."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.capture import Capture, RunStatus
from harness.cli import app
from support.messages import messages

EXPERIMENT = "name: pl\nsteps: 2\nengine: process\ncommand: [python3, trainer.py]\ncontainer: {gpus: none}\n"


@pytest.fixture
def sweep_dirs(tmp_path: Path) -> dict:
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    (experiments / "pl.yaml").write_text(EXPERIMENT)
    (experiments / "pl-seeds.yaml").write_text("sweep: pl\nseeds: [1, 2, 3]\n")
    return {"experiments": experiments, "captures": tmp_path / "capture", "locks": tmp_path / "locks"}


def sweep(sweep_dirs: dict, *args: str):
    return CliRunner().invoke(
        app,
        [
            "sweep",
            *args,
            "--dry-run",
            "--experiments-dir",
            str(sweep_dirs["experiments"]),
            "--capture-dir",
            str(sweep_dirs["captures"]),
        ],
        env={"COLUMNS": "250", "HARNESS_LOCK_DIR": str(sweep_dirs["locks"])},
    )


def plan_json(sweep_dirs: dict, *args: str) -> dict:
    result = sweep(sweep_dirs, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def settle(sweep_dirs: dict, run: str, run_id: str, state: str) -> None:
    Capture(sweep_dirs["captures"] / run).write_status(
        RunStatus(
            run=run,
            run_id=run_id,
            state=state,
            exit_code=0 if state == "succeeded" else 1,
            started_at="2025-01-01T00:00:00Z",
            ended_at="2025-01-01T01:00:00Z",
            steps_expected=2,
            steps_complete=2 if state == "succeeded" else 0,
            error=None if state == "succeeded" else "exit code 1: boom",
        )
    )


def test_dry_run_lists_every_run_with_its_id_and_capture_and_starts_nothing(sweep_dirs: dict) -> None:
    document = plan_json(sweep_dirs, "pl", "--seeds", "1", "2", "3")
    runs = document["runs"]
    assert [r["run"] for r in runs] == ["pl", "pl-s2", "pl-s3"]
    assert [r["seed"] for r in runs] == [1, 2, 3]
    assert all(r["run_id"].startswith(f"{r['run']}-") and len(r["run_id"]) == len(r["run"]) + 9 for r in runs)
    assert [r["capture_dir"] for r in runs] == [str((sweep_dirs["captures"] / r["run"]).resolve()) for r in runs]
    assert [(r["action"], r["reason"]) for r in runs] == [("run", "no capture yet")] * 3
    assert document["mode"] == "cached" and document["dry_run"] is True
    assert not sweep_dirs["captures"].exists() and not sweep_dirs["locks"].exists()


def test_dry_run_of_a_sweep_file_says_which_runs_it_would_skip_and_why(sweep_dirs: dict) -> None:
    ids = {r["run"]: r["run_id"] for r in plan_json(sweep_dirs, "pl-seeds")["runs"]}
    settle(sweep_dirs, "pl", ids["pl"], "succeeded")
    settle(sweep_dirs, "pl-s2", ids["pl-s2"], "failed")
    runs = {r["run"]: r for r in plan_json(sweep_dirs, "pl-seeds")["runs"]}
    assert runs["pl"]["action"] == "skip" and "succeeded" in runs["pl"]["reason"] and "--force" in runs["pl"]["reason"]
    assert runs["pl-s2"]["action"] == "skip" and "--retry reruns it" in runs["pl-s2"]["reason"]
    assert runs["pl-s3"]["action"] == "run"
    retried = {r["run"]: r for r in plan_json(sweep_dirs, "pl-seeds", "--retry")["runs"]}
    assert retried["pl-s2"]["action"] == "run" and retried["pl"]["action"] == "skip"
    forced = plan_json(sweep_dirs, "pl-seeds", "--force")["runs"]
    assert all(r["action"] == "run" for r in forced)
    assert not (sweep_dirs["captures"] / "pl-s3").exists()


def test_dry_run_text_is_a_table_with_the_same_facts(sweep_dirs: dict) -> None:
    result = sweep(sweep_dirs, "pl", "--seeds", "1", "2")
    assert result.exit_code == 0, result.output
    ids = [r["run_id"] for r in plan_json(sweep_dirs, "pl", "--seeds", "1", "2")["runs"]]
    rows = result.stdout.splitlines()[2:]  # piped: the title, the header, then one whole line per run
    assert len(rows) == 2
    for row, run, run_id in zip(rows, ["pl", "pl-s2"], ids):
        cells = re.split(r"\s{2,}", row.strip())
        assert cells[0] == run and cells[1] == run_id and cells[3] == "run" and cells[4] == "no capture yet"
        assert cells[2].endswith(f"/{run}")
    assert "dry run: nothing started" in result.stdout


def test_ls_shows_the_warnings_that_show_prints(sweep_dirs: dict) -> None:
    (sweep_dirs["experiments"] / "old.yaml").write_text(
        "name: old\nextends: pl\nmiles:\n  extra_args: --dynamic-sampling-filter-path "
        "miles.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std\n"
    )
    runner = CliRunner()
    dirs = ["--experiments-dir", str(sweep_dirs["experiments"])]
    shown = runner.invoke(app, ["show", "old", *dirs], env={"COLUMNS": "250"})
    listed = runner.invoke(app, ["ls", *dirs], env={"COLUMNS": "250"})
    assert shown.exit_code == 0 and listed.exit_code == 0, listed.output
    warnings = [line for line in messages(shown.stderr) if line.startswith("warning:")]
    assert len(warnings) == 1 and "deprecated" in warnings[0]
    assert [line for line in messages(listed.stderr) if line.startswith("warning:")] == warnings
    row = next(line for line in listed.stdout.splitlines() if line.startswith("old "))
    assert "warning" in row


def test_json_without_dry_run_is_refused_before_anything_starts(sweep_dirs: dict) -> None:
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            "pl",
            "--seeds",
            "1",
            "--json",
            "--experiments-dir",
            str(sweep_dirs["experiments"]),
            "--capture-dir",
            str(sweep_dirs["captures"]),
        ],
        env={"HARNESS_LOCK_DIR": str(sweep_dirs["locks"])},
    )
    assert result.exit_code == 2 and "--json prints the plan of --dry-run" in result.stderr
    assert not sweep_dirs["captures"].exists()
