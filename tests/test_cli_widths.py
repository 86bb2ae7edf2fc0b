"""Every command's output fits: at 80 and 120 columns in a terminal, and piped (100 columns).

No line is wider than the width, except one whose excess is a single long
word (a path, a quoted value, a command to copy). Was: error lines of about
500 characters, verdicts of 328, dry-run lines up to 1,348, `status`
dropping its duration at 80 columns, the demo's table wrapping each run over
3 to 5 rows.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.terminal import PIPED_WIDTH, REPO_ROOT, in_terminal, piped, too_wide

pytestmark = pytest.mark.integration

LAB = REPO_ROOT / "tests" / "data" / "captures" / "lab"
LOG = REPO_ROOT / "tests" / "data" / "logs" / "container-log-docker-timestamps.log"


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A copy of the lab's captures (summarized), and a capture root with a simulated run of two attempts."""
    base = tmp_path_factory.mktemp("widths")
    lab = base / "lab"
    shutil.copytree(LAB, lab)
    sim = base / "sim"
    env = {"HARNESS_PROCESS_DIR": str(base / "processes"), "HARNESS_LOCK_DIR": str(base / "locks")}
    for extra in ([], ["--force"]):
        piped(
            [
                "run",
                "plain",
                "--sim",
                "--sim-engine",
                "process",
                "--time-scale",
                "0.002",
                "--set",
                "steps=2",
                "--capture-dir",
                str(sim),
                *extra,
            ],
            env=env,
        )
    piped(["summarize", "--capture-dir", str(lab), "--no-figures"])
    return {"lab": lab, "sim": sim, "base": base}


def commands(roots: dict[str, Path]) -> list[tuple[list[str], int]]:
    lab, sim = str(roots["lab"]), str(roots["sim"])
    return [
        (["--help"], 0),
        (["--version"], 0),
        (["ls"], 0),
        (["show", "e2b-dapo-filter"], 0),
        (["run", "e2b-dapo-filter", "--dry-run"], 3),  # no Docker here: the run would not start
        (["run", "--help"], 0),
        (["sweep", "--seeds", "1", "2", "3", "--dry-run"], 3),  # as `run --dry-run` of each of its runs
        (["sweep", "--help"], 0),
        (["status", "--capture-dir", lab], 0),
        (["status", "--capture-dir", sim], 0),
        (["history", "plain", "--capture-dir", sim], 0),
        # `logs RUN` prints the trainer's own lines as received: never refitted, so not here.
        (["recover", "--capture-dir", sim], 0),
        (["parse-log", str(LOG)], 0),
        (["summarize", "--capture-dir", lab, "--no-figures"], 0),
        (["report", "--capture-dir", lab], 0),
        (["plan", "--drop-rate", "0.5", "--rollout-batch-size", "32"], 0),
        (["plan", "seeds", "--effect", "0.02", "--sd", "0.015"], 0),
        (["plan", "seeds", "--effect", "0.02", "--from-runs", "nosuchcondition", "--capture-dir", lab], 2),
        (["guard", "probe"], 1),  # no temperature to read here: says why in one line
        (["guard", "plot", "plain", "--capture-dir", sim, "--out", str(roots["base"] / "guard.svg")], 0),
        (["run", "nosuchexperiment"], 2),
        (["logs", "nosuchrun", "--capture-dir", sim], 5),
        (["run", "e2b-dapo-filter", "--set", "steps=12", "--no-wait", "--capture-dir", str(roots["base"] / "g")], 3),
    ]


@pytest.mark.parametrize("columns", [80, 120])
def test_every_command_fits_its_terminal(roots: dict[str, Path], columns: int) -> None:
    env = {"DOCKER_HOST": "unix:///nonexistent.sock", "HARNESS_PROCESS_DIR": str(roots["base"] / "processes")}
    for argv, code in commands(roots):
        output = in_terminal(argv, columns, env=env, code=code)
        assert output.strip(), argv
        assert too_wide(output, columns) == [], (argv, too_wide(output, columns))


def test_every_command_fits_100_columns_piped(roots: dict[str, Path]) -> None:
    env = {"DOCKER_HOST": "unix:///nonexistent.sock", "HARNESS_PROCESS_DIR": str(roots["base"] / "processes")}
    for argv, code in commands(roots):
        output = piped(argv, env=env, code=code, stderr=True)
        assert output.strip(), argv
        assert too_wide(output, PIPED_WIDTH) == [], (argv, too_wide(output, PIPED_WIDTH))


def test_a_run_and_a_sweep_on_the_simulator_fit_piped_with_a_line_per_step(roots: dict[str, Path]) -> None:
    env = {"HARNESS_PROCESS_DIR": str(roots["base"] / "processes"), "HARNESS_LOCK_DIR": str(roots["base"] / "locks")}
    root = str(roots["base"] / "steps")
    sim = ["--sim", "--sim-engine", "process", "--time-scale", "0.002", "--set", "steps=3", "--capture-dir", root]
    ran = piped(["run", "e2b-dapo-filter", *sim], env=env, stderr=True)
    swept = piped(["sweep", "plain", "--seeds", "1", "2", "--parallel", "2", *sim], env=env, stderr=True)

    for output in (ran, swept):
        assert too_wide(output, PIPED_WIDTH) == [], too_wide(output, PIPED_WIDTH)
        assert "PAUSED by the heat guard" not in output  # a line per pause only with -v
    steps = [line for line in ran.splitlines() if line.startswith("e2b-dapo-filter: step ")]
    assert len(steps) == 3 and all("trainer s" in line for line in steps)
    status = json.loads((roots["base"] / "steps" / "plain-s2" / "status.json").read_text())
    assert status["state"] == "succeeded"
