"""Runs and sweeps against captures they already have: the same run is reused, another configuration is refused
naming what changed (run and sweep alike), the demo and `run --sim` make the same run, and the sweep plan fits."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from support.messages import messages

REPO_ROOT = Path(__file__).resolve().parent.parent
DEAD_DOCKER = "unix:///nonexistent/docker.sock"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {
        "DOCKER_HOST": DEAD_DOCKER,
        "HARNESS_LOCK_DIR": str(tmp_path / "locks"),
        "HARNESS_PROCESS_DIR": str(tmp_path / "processes"),
        "HARNESS_EXPERIMENT": "",
        "COLUMNS": "80",
    }


def harness(env: dict[str, str], *args: str):
    return CliRunner().invoke(app, list(args), env=env)


def sim_run(env, captures: Path, *args: str, command: str = "run", experiment: str = "plain"):
    return harness(
        env,
        command,
        experiment,
        "--sim",
        "--sim-engine",
        "process",
        "--set",
        "steps=1",
        "--capture-dir",
        str(captures),
        *args,
    )


def error_lines(output: str) -> list[str]:
    """The error messages in the output, each whole (the renderer fits them to 80 columns here)."""
    return [message for message in messages(output) if message.startswith("error:")]


@pytest.mark.integration
def test_run_sim_reuses_its_own_capture_and_refuses_another_time_scale_naming_it(env, tmp_path):
    captures = tmp_path / "capture"
    first = sim_run(env, captures, "--time-scale", "0.002")
    assert first.exit_code == 0, first.output
    manifest = json.loads((captures / "plain" / "manifest.json").read_text())
    assert manifest["experiment"]["guard"]["sensor"] == "sim"  # guarded, like the demo's runs

    again = sim_run(env, captures, "--time-scale", "0.001")

    assert again.exit_code == 2
    (line,) = error_lines(again.output)
    assert line.startswith("error: run plain not started: its capture succeeded at ")
    assert "with another configuration (time scale 0.002 -> 0.001, guard.max_pause_s 0.6 -> 0.3, " in line
    assert "; run id plain-" in line
    assert line.endswith(
        "--force (make: FORCE=1) reruns it, keeping the old attempt, or --name NAME runs this configuration "
        "under a run name of its own"
    )
    assert "running" not in again.output
    forced = sim_run(env, captures, "--time-scale", "0.001", "--force")
    assert forced.exit_code == 0, forced.output


@pytest.mark.integration
def test_a_cached_sweep_refuses_a_changed_succeeded_run_like_run_and_starts_nothing(env, tmp_path):
    captures = tmp_path / "capture"
    first = sim_run(env, captures, "--seeds", "1", "--time-scale", "0.002", command="sweep", experiment="plain-48")
    assert first.exit_code == 0, first.output

    changed = sim_run(
        env,
        captures,
        "--seeds",
        "1",
        "2",
        "--time-scale",
        "0.002",
        "--set",
        "steps=2",
        command="sweep",
        experiment="plain-48",
    )

    assert changed.exit_code == 2, changed.output
    (line,) = error_lines(changed.output)
    assert line.startswith("error: run plain-48 not started: its capture succeeded at ") and "steps 1 -> 2" in line
    assert not (captures / "plain-48-s2").exists()  # refused before anything started
    for flag in ("--retry", "--dry-run"):  # the dry run exits as the sweep would
        again = sim_run(
            env,
            captures,
            "--seeds",
            "1",
            "--time-scale",
            "0.002",
            "--set",
            "steps=2",
            flag,
            command="sweep",
            experiment="plain-48",
        )
        assert again.exit_code == 2, (flag, again.output)
    forced = sim_run(
        env,
        captures,
        "--seeds",
        "1",
        "--time-scale",
        "0.002",
        "--set",
        "steps=2",
        "--force",
        command="sweep",
        experiment="plain-48",
    )
    assert forced.exit_code == 0, forced.output
    assert json.loads((captures / "plain-48" / "status.json").read_text())["steps_complete"] == 2


def test_a_sweep_says_nothing_about_running_before_a_pre_flight_refusal(env, tmp_path):
    done = harness(env, "sweep", "plain-48", "--seeds", "1", "--capture-dir", str(tmp_path / "capture"))

    assert done.exit_code != 0
    assert "running" not in done.output and "no capture yet" not in done.output
    (line,) = error_lines(done.output)
    assert line.startswith("error: run plain-48 not started: ")


def test_the_sweep_plan_piped_is_one_whole_line_per_run(env, tmp_path):
    done = harness(
        env,
        "sweep",
        "plain-48",
        "--seeds",
        "1",
        "2",
        "--dry-run",
        "--capture-dir",
        str(tmp_path / "a-rather-long-capture-directory-name-that-would-wrap"),
    )

    assert done.exit_code == 3, done.output  # no Docker answers here: the plan is shown, the sweep would not start
    lines = done.stdout.splitlines()
    assert lines[0] == "sweep plan (cached mode, dry run: nothing started)"
    # 80 columns piped: a whole line per run, the long capture column left out, and said so.
    assert lines[1].split() == ["run", "run", "id", "action", "reason"]
    rows = [line.split() for line in lines[2:4]]
    assert [row[0] for row in rows] == ["plain-48", "plain-48-s2"]
    assert all(row[1].startswith(row[0] + "-") and row[2] == "run" for row in rows)
    assert all(" ".join(row[3:]) == "no capture yet" for row in rows)
    assert lines[4] == "(left out to fit 80 columns: capture)"


def test_simulated_captures_never_go_to_the_lab_s_real_root_nor_real_ones_to_the_sim_root(env, tmp_path):
    for args in (
        ["run", "plain", "--sim", "--capture-dir", "capture/gpu"],
        ["demo", "--capture-dir", "capture/gpu"],
        ["sweep", "plain", "--sim", "--capture-dir", "./capture/gpu"],
        ["run", "plain", "--capture-dir", "capture/sim"],
    ):
        done = harness(env, *args, "--dry-run") if args[0] != "demo" else harness(env, *args)

        assert done.exit_code == 2, (args, done.output)
        (line,) = messages(done.output)
        assert "one summary would mix" in line, line


def make_n(*args: str) -> list[list[str]]:
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "EXP": "", "SIM": "", "FORCE": "", "ARGS": ""},
    )
    assert done.returncode == 0, done.stderr
    return [
        line.split()[1:]
        for line in done.stdout.splitlines()
        if line.split()[:1] and line.split()[0].endswith("harness")
    ]


def test_make_run_and_sweep_take_force_and_args():
    assert make_n("run", "EXP=plain", "FORCE=1", "ARGS=--set steps=2 --max-minutes 3") == [
        ["run", "plain", "--force", "--set", "steps=2", "--max-minutes", "3"]
    ]
    assert make_n("sweep", "EXP=plain-48", "SEEDS=1 2", "SIM=1", "FORCE=1", "ARGS=--fail-fast") == [
        ["sweep", "plain-48", "--seeds", "1", "2", "--parallel", "2", "--sim", "--force", "--fail-fast"]
    ]
    assert make_n("run", "EXP=plain") == [["run", "plain"]]
    assert make_n("demo", "FORCE=1")[-1] == ["demo", "--force"]


@pytest.mark.parametrize("sim, root", [("", "capture/smoke/gpu"), ("1", "capture/smoke/sim")])
def test_make_smoke_captures_under_its_own_root(sim, root):
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "smoke", f"SIM={sim}", "LAB_IMAGE=x"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"--capture-dir {root}" in done.stdout and f"check-capture.py {root}/smoke " in done.stdout


@pytest.mark.integration
def test_a_run_that_did_not_succeed_says_so_in_one_message_with_where_its_log_is(env, tmp_path):
    captures = tmp_path / "capture"
    done = sim_run(env, captures, "--time-scale", "0.05", "--max-minutes", "0.01")

    assert done.exit_code == 1, done.output
    (line,) = [message for message in messages(done.output) if message.startswith("warning: run plain")]
    assert line.startswith("warning: run plain stopped with 0/1 steps complete (time limit")
    assert line.endswith(f"`harness logs plain --attempt 1 --capture-dir {captures}` shows its log")
