"""The lab's three entry points exactly as users type them: `make run EXP=...`, `harness sweep --seeds 1 2 3`,
and the smoke run, on the simulator (SIM=1) from a fresh clone; the CI workflows that run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.app import DEFAULT_CAPTURE_DIR, SIM_CAPTURE_DIR, capture_root
from harness.cli.runs import DEFAULT_EXPERIMENT, spread_seeds
from harness.run.simswap import DEFAULT_TIME_SCALE
from harness.sim.image import sim_digest, sim_image_tag
from support.clones import DEAD_DOCKER, make
from support.machine import docker_host

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO_ROOT / ".github" / "workflows"


# --- `--seeds` takes every number after it ---------------------------------------------------------


@pytest.mark.parametrize(
    "args, spread",
    [
        (["--seeds", "1", "2", "3"], ["--seeds", "1", "--seeds", "2", "--seeds", "3"]),
        (["--seeds", "1", "2", "3", "plain-48"], ["--seeds", "1", "--seeds", "2", "--seeds", "3", "plain-48"]),
        (["plain-48", "--seeds", "1", "2"], ["plain-48", "--seeds", "1", "--seeds", "2"]),
        (["--seeds=1", "2", "--dry-run"], ["--seeds=1", "--seeds", "2", "--dry-run"]),
        (["--seeds", "1", "--set", "steps=2", "3"], ["--seeds", "1", "--set", "steps=2", "3"]),
        (["--seeds", "x", "2"], ["--seeds", "x", "--seeds", "2"]),  # click refuses x, naming --seeds
        (["seeds"], ["seeds"]),
        (["--", "--seeds", "1", "2"], ["--", "--seeds", "1", "2"]),
    ],
)
def test_seeds_spread_over_the_numbers_that_follow(args, spread):
    assert spread_seeds(args) == spread


def sweep_plan(*args: str, env: dict[str, str] | None = None, tmp_path: Path) -> tuple[list[str], str]:
    """The runs `harness sweep ARGS --dry-run --json` lists, and what it said on stderr."""
    done = CliRunner().invoke(
        app,
        ["sweep", *args, "--dry-run", "--json", "--capture-dir", str(tmp_path)],
        env={"HARNESS_EXPERIMENT": "", "DOCKER_HOST": "unix:///nonexistent.sock", **(env or {})},
    )
    # No Docker answers here: the plan is shown, and the sweep would not start, as `run --dry-run` says of each run
    assert done.exit_code == 3, done.output
    assert "pre-flight problems, above" in done.stderr.splitlines()[-1], done.stderr
    return [run["run"] for run in json.loads(done.stdout)["runs"]], done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--seeds", "1", "2", "3", "plain-48"],
        ["plain-48", "--seeds", "1", "2", "3"],
        ["--seeds", "1", "2", "--seeds", "3", "plain-48"],
        ["seeds"],
    ],
    ids=["seeds-first", "seeds-last", "seeds-twice", "sweep-file"],
)
def test_sweep_with_an_experiment_in_each_position(args, tmp_path):
    runs, said = sweep_plan(*args, tmp_path=tmp_path)

    assert runs == ["plain-48", "plain-48-s2", "plain-48-s3"]
    assert "the lab's default" not in said


def test_sweep_seeds_1_2_3_as_typed_sweeps_the_lab_s_default_and_says_so_first(tmp_path):
    runs, said = sweep_plan("--seeds", "1", "2", "3", tmp_path=tmp_path)

    assert DEFAULT_EXPERIMENT == "e2b-dapo-filter"
    assert runs == ["e2b-dapo-filter", "e2b-dapo-filter-s2", "e2b-dapo-filter-s3"]
    assert said.splitlines()[0] == (
        "experiment e2b-dapo-filter, the lab's default (HARNESS_EXPERIMENT or an argument names another)"
    )


def test_harness_experiment_names_the_default(tmp_path):
    runs, said = sweep_plan("--seeds", "1", "2", env={"HARNESS_EXPERIMENT": "plain"}, tmp_path=tmp_path)

    assert runs == ["plain", "plain-s2"]
    assert "experiment plain, as HARNESS_EXPERIMENT says" in said


@pytest.mark.integration
def test_sweep_as_typed_through_the_installed_command(tmp_path):
    harness = Path(sys.executable).with_name("harness")
    if not harness.exists():
        pytest.skip(f"no harness command beside {sys.executable}: `make setup` installs it")
    env = {
        **os.environ,
        "HARNESS_EXPERIMENT": "",
        "HARNESS_CAPTURE_DIR": str(tmp_path),
        "COLUMNS": "300",
        "DOCKER_HOST": "unix:///nonexistent.sock",
    }
    done = subprocess.run(
        [str(harness), "sweep", "--seeds", "1", "2", "3", "--dry-run"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )

    assert done.returncode == 3, done.stderr  # no Docker answers: the plan is shown, the sweep would not start
    assert "unknown experiment" not in done.stderr
    for run in ("e2b-dapo-filter", "e2b-dapo-filter-s2", "e2b-dapo-filter-s3"):
        assert run in done.stdout


def test_a_word_after_the_seeds_that_is_no_experiment_is_one_line(tmp_path):
    done = CliRunner().invoke(
        app, ["sweep", "--seeds", "1", "2", "nothing-such", "--dry-run", "--capture-dir", str(tmp_path)]
    )

    assert done.exit_code == 2
    assert done.output.strip().splitlines()[-1].startswith("error: unknown experiment 'nothing-such'")


def test_run_without_an_experiment_takes_the_same_default(tmp_path):
    done = CliRunner().invoke(
        app,
        ["run", "--dry-run", "--json", "--capture-dir", str(tmp_path)],
        env={"HARNESS_EXPERIMENT": "", "DOCKER_HOST": "unix:///nonexistent.sock"},
    )

    assert done.exit_code == 3, done.output  # no Docker answers here: the plan is shown, the run would not start
    assert json.loads(done.stdout)["run"] == "e2b-dapo-filter"
    assert "experiment e2b-dapo-filter, the lab's default" in done.stderr


@pytest.mark.parametrize(
    "command, forms",
    [
        (
            "run",
            ["make run EXP=e2b-dapo-filter", "make run EXP=e2b-dapo-filter SIM=1", "make smoke SIM=1", "make smoke "],
        ),
        (
            "sweep",
            [
                "harness sweep --seeds 1 2 3 ",
                "harness sweep plain-48 --seeds 1 2 3",
                "harness sweep --seeds 1 2 3 plain-48",
                "harness sweep seeds ",
                'make sweep SEEDS="1 2 3"',
                "make sweep SIM=1",
            ],
        ),
    ],
)
def test_help_shows_the_entry_points_as_typed(command, forms):
    done = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})

    assert done.exit_code == 0
    for form in forms:
        assert form.rstrip() in done.output, form


def test_captures_go_under_capture_sim_for_the_simulator_unless_a_directory_is_given(tmp_path):
    assert capture_root(None, sim=False) == DEFAULT_CAPTURE_DIR == Path("capture/gpu")
    assert capture_root(None, sim=True) == SIM_CAPTURE_DIR == Path("capture/sim")
    assert capture_root(tmp_path, sim=True) == tmp_path


# --- make, from a fresh clone, on the simulator ---------------------------------------------------


def capture_state(capture: Path) -> tuple[str, int, float, str]:
    status = json.loads((capture / "status.json").read_text())
    manifest = json.loads((capture / "manifest.json").read_text())
    complete = sum(1 for line in (capture / "metrics.jsonl").read_text().splitlines() if json.loads(line)["complete"])
    return status["state"], complete, manifest["time_scale"], manifest["experiment"]["engine"]


@pytest.mark.integration
@pytest.mark.parametrize("engine", [pytest.param("docker", marks=pytest.mark.docker), "process"])
def test_make_smoke_sim_from_a_fresh_clone(clone, engine, request):
    if engine == "docker":
        request.getfixturevalue("python_image")
    done = make(clone, "smoke", "SIM=1", docker_host=docker_host() if engine == "docker" else DEAD_DOCKER)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "check-capture: capture/smoke/sim/smoke: succeeded, 2 complete steps" in done.stdout
    assert capture_state(clone / "capture" / "smoke" / "sim" / "smoke") == ("succeeded", 2, DEFAULT_TIME_SCALE, engine)
    assert not (clone / "capture" / "gpu").exists() and not (clone / "capture" / "sim").exists()  # the lab's roots
    if engine == "process":
        assert "sim-image: no Docker engine answers" in done.stdout
        assert "simulated runs use the process engine instead" in done.stdout
        assert "simulator: the process engine" in done.stderr
    else:
        image = sim_image_tag(sim_digest(clone))  # the clone's simulator is this checkout's: one image
        assert f"sim-image: {image} is built (also tagged miles-gb10-lab/sim:latest)" in done.stdout
        assert f"simulator: the sim image {image} on Docker" in done.stderr


@pytest.mark.integration
@pytest.mark.parametrize("engine", [pytest.param("docker", marks=pytest.mark.docker), "process"])
def test_make_run_the_filter_experiment_sim_from_a_fresh_clone(clone, engine, request):
    if engine == "docker":
        request.getfixturevalue("python_image")
    done = make(
        clone,
        "run",
        "EXP=e2b-dapo-filter",
        "SIM=1",
        "SIM_TIME_SCALE=0.001",
        docker_host=docker_host() if engine == "docker" else DEAD_DOCKER,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert capture_state(clone / "capture" / "sim" / "e2b-dapo-filter") == ("succeeded", 12, 0.001, engine)
    assert "e2b-dapo-filter: succeeded, 12/12 steps complete, exit code 0" in done.stdout


@pytest.mark.integration
def test_make_sweep_without_exp_sweeps_the_default_and_status_summarize_report_agree(clone):
    done = make(clone, "sweep", "SEEDS=1 2", "SIM=1", "SIM_TIME_SCALE=0.001", docker_host=DEAD_DOCKER)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "experiment e2b-dapo-filter, the lab's default" in done.stderr
    captures = clone / "capture" / "sim"
    for run in ("e2b-dapo-filter", "e2b-dapo-filter-s2"):
        assert capture_state(captures / run)[:2] == ("succeeded", 12)

    status = make(clone, "status", "SIM=1", docker_host=DEAD_DOCKER)
    assert status.returncode == 0, status.stderr
    assert "captures in capture/sim" in status.stdout and "e2b-dapo-filter-s2" in status.stdout

    report = make(clone, "report", "SIM=1", docker_host=DEAD_DOCKER)
    assert report.returncode == 0, report.stdout + report.stderr
    summary = json.loads((captures / "summary" / "miles-gb10-lab.json").read_text())
    assert sorted(summary["runs"]) == ["e2b-dapo-filter", "e2b-dapo-filter-s2"]
    assert summary["runs"]["e2b-dapo-filter"]["time_scale"] == 0.001
    assert (captures / "summary" / "report.md").is_file()
    assert not (clone / "capture" / "gpu").exists()

    harness = [str(Path(sys.prefix) / "bin" / "harness")]
    logs = subprocess.run(
        [*harness, "logs", "e2b-dapo-filter-s2", "--sim"], cwd=clone, capture_output=True, text=True, timeout=60
    )
    assert logs.returncode == 0 and "Job 'raysubmit_" in logs.stdout, logs.stderr
    recover = subprocess.run(
        [*harness, "recover", "--sim"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DOCKER_HOST": DEAD_DOCKER, "HARNESS_PROCESS_DIR": str(clone / ".p")},
    )
    assert recover.returncode == 0 and "nothing to recover" in recover.stdout, recover.stderr


def test_make_sweep_without_exp_runs_harness_sweep_seeds_as_typed():
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "sweep", "SEEDS=1 2 3"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "EXP": ""},
    )

    assert done.returncode == 0, done.stderr
    assert [line.split()[1:] for line in done.stdout.splitlines() if "harness" in line] == [
        ["sweep", "--seeds", "1", "2", "3"]
    ], done.stdout


# --- CI runs the smoke job's steps on every push -------------------------------------------------


def workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def test_hosted_ci_runs_make_smoke_sim_after_the_tests():
    steps = list(workflow("ci.yml")["jobs"].values())[0]["steps"]
    runs = [step.get("run", "") for step in steps]

    tests = next(i for i, run in enumerate(runs) if ".ci/run" in run)
    smoke = next(i for i, run in enumerate(runs) if "make smoke SIM=1" in run)
    assert tests < smoke
    # Was: `make smoke SIM=1` passed with no Docker engine, on the process engine, proving nothing of the image.
    assert "SIM_ENGINE=docker" in runs[smoke]


def test_the_gpu_workflow_still_runs_make_smoke_on_the_gpu_runner_and_keeps_its_capture():
    job = list(workflow("gpu-smoke.yml")["jobs"].values())[0]
    steps = job["steps"]

    assert "gpu" in job["runs-on"] and "self-hosted" in job["runs-on"]
    assert any(step.get("run", "").strip() == "make smoke" for step in steps)
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["with"]["path"].rstrip("/") == "capture/smoke/gpu/smoke" and upload.get("if") == "always()"
    assert any("harness recover --capture-dir capture/smoke/gpu" in step.get("run", "") for step in steps)


def test_the_hosted_workflow_keeps_the_simulated_smoke_capture_from_its_own_root():
    steps = list(workflow("ci.yml")["jobs"].values())[0]["steps"]
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload-artifact@"))

    assert upload["with"]["path"].rstrip("/") == "capture/smoke/sim/smoke"


@pytest.mark.integration
def test_make_smoke_that_must_prove_the_image_fails_where_it_would_fall_back_to_a_process(clone):
    done = make(clone, "smoke", "SIM=1", "SIM_ENGINE=docker", docker_host=DEAD_DOCKER)

    assert done.returncode != 0, done.stdout + done.stderr
    assert not (clone / "capture" / "smoke" / "sim" / "smoke").exists()  # nothing ran on a process instead
