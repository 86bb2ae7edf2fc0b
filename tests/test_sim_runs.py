"""`harness run/sweep --sim`: the same experiment on the simulator, through the same engines, captures and summary."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.engines.dockerapi import DockerApiError
from harness.errors import HarnessError
from harness.experiments.store import ExperimentStore
from harness.run.plan import plan_launch, plan_runs
from harness.run.simswap import (
    DEFAULT_TIME_SCALE,
    MIN_POLL_S,
    OTHER_SIMULATOR,
    SIM_IMAGE,
    SIM_START_BELOW_C,
    SimTarget,
    check_time_scale,
    choose_target,
    simulated,
)
from harness.sim.image import SIM_DIGEST_LABEL, sim_digest, sim_image_tag

REPO_ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO_ROOT / "experiments"
STORE = ExperimentStore(EXPERIMENTS)


def target(engine: str = "docker", time_scale: float = 0.01) -> SimTarget:
    return SimTarget(engine, time_scale, "/opt/py/bin/python3", "a test")  # type: ignore[arg-type]


THIS_DIGEST = sim_digest()  # of this checkout's simulator
THIS_IMAGE = sim_image_tag(THIS_DIGEST)
OTHER_DIGEST = "0123456789ab"  # an older checkout's, or another one's on the same engine


class FakeApi:
    """DockerApi's question about an image, answered from the images an engine holds (tag -> the simulator digest
    its label says, None for no label), or not at all."""

    host = "unix:///fake.sock"

    def __init__(self, images: dict[str, str | None], answers: bool = True) -> None:
        self.images, self.answers = images, answers

    def image_inspect(self, image: str) -> dict | None:
        if not self.answers:
            raise DockerApiError("the Docker engine at unix:///fake.sock does not answer: refused")
        if image not in self.images:
            return None
        digest = self.images[image]
        return {"Id": "sha256:" + image, "Config": {"Labels": {} if digest is None else {SIM_DIGEST_LABEL: digest}}}


# --- the swap (pure) ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["docker", "process"], ids=["image", "process"])  # not the `docker` keyword
def test_the_swap_drops_the_gpu_the_mounts_and_the_ulimits_and_keeps_the_rest(engine):
    real = STORE.load("e2b-dapo-filter").experiment

    sim = simulated(real, target(engine, 0.02))

    assert sim.container.gpus == "none" and sim.container.volumes == [] and sim.container.ulimits == {}
    assert sim.container.env == {**real.container.env, "HARNESS_SIM_TIME_SCALE": "0.02"}
    assert sim.image == SIM_IMAGE
    assert sim.engine == engine
    assert sim.command == (None if engine == "docker" else ["/opt/py/bin/python3", "-m", "harness.sim.entry"])
    kept = ("name", "seed", "steps", "miles", "compare", "limits", "description")
    assert {key: getattr(sim, key) for key in kept} == {key: getattr(real, key) for key in kept}
    assert (sim.guard.pause_at_c, sim.guard.resume_at_c) == (real.guard.pause_at_c, real.guard.resume_at_c)
    assert (sim.container.shm_size, sim.container.ipc, sim.container.init) == (
        real.container.shm_size,
        real.container.ipc,
        real.container.init,
    )


def test_the_simulated_spec_asks_for_no_gpu_mounts_nothing_and_has_its_own_run_id():
    real = STORE.load("plain").experiment
    plan = dict(base_args=STORE.base_args, capture_root="capture/sim", project_root="/lab", environ={})

    real_spec = plan_launch(real, **plan)
    sim_spec = plan_launch(simulated(real, target()), **plan)

    assert real_spec.device_requests and real_spec.mounts
    assert sim_spec.device_requests == () and sim_spec.mounts == ()
    assert sim_spec.trainer_argv == real_spec.trainer_argv
    assert sim_spec.run == real_spec.run and sim_spec.run_id != real_spec.run_id
    assert sim_spec.capture_dir == "/lab/capture/sim/plain"


def test_a_sim_run_is_guarded_on_simulated_heat_in_the_simulator_s_time():
    real = STORE.load("plain").experiment
    assert real.guard.sensor == "auto"  # off on a machine with no GPU: the run would be unguarded

    guard = simulated(real, target(time_scale=0.02)).guard

    assert guard.sensor == "sim"
    assert guard.min_pause_s == pytest.approx(real.guard.min_pause_s * 0.02)
    assert guard.max_pause_s == pytest.approx(real.guard.max_pause_s * 0.02)
    assert guard.record_every_s == pytest.approx(real.guard.record_every_s * 0.02)
    assert guard.poll_s == pytest.approx(max(real.guard.poll_s * 0.02, MIN_POLL_S))
    assert guard.sim.heat_tau_s == pytest.approx(real.guard.sim.heat_tau_s * 0.02)
    assert guard.sim.cool_tau_s == pytest.approx(real.guard.sim.cool_tau_s * 0.02)
    assert (guard.sim.hot_c, guard.on_max_pause) == (real.guard.sim.hot_c, real.guard.on_max_pause)


def test_every_sim_run_starts_from_the_same_cooled_start_unless_its_experiment_names_its_own():
    # `sweep --sim` once started at the simulated host's warm 60 C while the demo's runs started below 55 C, and
    # the summary pooled them as seeds of one condition: every run on the simulator now starts alike.
    real = STORE.load("plain").experiment
    assert real.guard.start_below_c is None

    assert simulated(real, target()).guard.start_below_c == SIM_START_BELOW_C == 55.0
    own = real.model_copy(update={"guard": real.guard.model_copy(update={"start_below_c": 50.0})})
    assert simulated(own, target()).guard.start_below_c == 50.0
    sweep = plan_runs(STORE, "plain-48", (1, 2), [], Path("capture/sim"), {}, sim=target())
    assert [plan.experiment.guard.start_below_c for plan in sweep] == [SIM_START_BELOW_C] * 2


def test_a_time_scale_is_written_exactly_as_the_manifest_records_it():
    scale = 0.0123456789012

    sim = simulated(STORE.load("plain").experiment, target(time_scale=scale))

    assert float(sim.container.env["HARNESS_SIM_TIME_SCALE"]) == scale


TIME_SCALE_RANGE_SAID = "must be from 0.0001 to 100 wall seconds per simulated second"


@pytest.mark.parametrize("bad", [0.0, -0.01, math.inf, math.nan, 1e-320, 1e-300, 9e-5, 100.5, 1e308])
def test_a_run_needs_a_time_scale_in_a_sane_range(bad):
    with pytest.raises(HarnessError, match="^" + re.escape(f"--time-scale {bad:g}: {TIME_SCALE_RANGE_SAID}")):
        check_time_scale(bad)


@pytest.mark.parametrize("good", [1e-4, 0.001, DEFAULT_TIME_SCALE, 1.0, 100.0])
def test_a_time_scale_in_the_range_is_taken_as_given(good):
    assert check_time_scale(good) == good


def test_plans_on_the_simulator_carry_its_time_scale():
    plans = plan_runs(STORE, "plain-48", [1, 2], [], Path("capture/sim"), {}, sim=target(time_scale=0.05))

    assert [plan.time_scale for plan in plans] == [0.05, 0.05]
    assert [plan.spec.run for plan in plans] == ["plain-48", "plain-48-s2"]
    assert all(plan.experiment.container.gpus == "none" for plan in plans)
    assert plan_runs(STORE, "plain", [], [], Path("capture/gpu"), {})[0].time_scale == 1.0


# --- which engine -------------------------------------------------------------------------------


def test_auto_takes_the_sim_image_built_from_this_checkout_by_its_digest():
    chosen = choose_target("auto", 0.01, "/py", FakeApi({THIS_IMAGE: THIS_DIGEST, SIM_IMAGE: OTHER_DIGEST}))

    assert chosen.engine == "docker" and "unix:///fake.sock" in chosen.reason
    assert chosen.image == THIS_IMAGE == f"miles-gb10-lab/sim:{THIS_DIGEST}"  # what runs, and what the manifest says
    assert f"the sim image {THIS_IMAGE} on Docker" in chosen.describe()


@pytest.mark.parametrize(
    "images",
    [
        {SIM_IMAGE: OTHER_DIGEST},  # latest, built from an older simulator (before a `git pull`)
        {SIM_IMAGE: None},  # latest, from before images said what they hold
        {THIS_IMAGE: OTHER_DIGEST},  # this digest's tag put on another image by hand
    ],
    ids=["older", "unlabelled", "mistagged"],
)
def test_auto_never_runs_a_sim_image_of_another_simulator_and_says_why(images):
    # Was: any miles-gb10-lab/sim:latest was run, so runs silently ran another simulator than the checkout's.
    chosen = choose_target("auto", 0.01, "/py", FakeApi(images))

    assert chosen.engine == "process" and chosen.image == SIM_IMAGE
    assert chosen.reason == OTHER_SIMULATOR
    assert OTHER_SIMULATOR == (
        "the sim image on the engine holds another simulator than this checkout's; `make sim-image` builds this one"
    )
    assert f"({OTHER_SIMULATOR})" in chosen.describe()


def test_auto_takes_the_process_engine_without_the_image_and_says_how_to_build_it():
    chosen = choose_target("auto", 0.01, "/py", FakeApi({}))

    assert chosen.engine == "process"
    assert "make sim-image" in chosen.reason and SIM_IMAGE in chosen.reason
    assert "the process engine (/py -m harness.sim.entry)" in chosen.describe()


def test_auto_takes_the_process_engine_where_no_docker_answers():
    chosen = choose_target("auto", 0.01, "/py", FakeApi({}, answers=False))

    assert chosen.engine == "process" and "does not answer" in chosen.reason


@pytest.mark.parametrize(
    "images,said",
    [
        ({SIM_IMAGE: OTHER_DIGEST}, f"--sim-engine docker: {OTHER_SIMULATOR}"),
        ({}, f"--sim-engine docker: {SIM_IMAGE} is not on the Docker engine at unix:///fake.sock; "),
    ],
    ids=["another simulator", "none"],
)
def test_the_docker_engine_asked_for_refuses_an_image_of_another_simulator_in_one_line(images, said):
    with pytest.raises(HarnessError) as refused:
        choose_target("docker", 0.01, "/py", FakeApi(images))

    assert refused.value.message.startswith(said) and "make sim-image" in refused.value.message
    assert "\n" not in refused.value.message and refused.value.exit_code == 3


def test_the_docker_engine_asked_for_runs_this_checkout_s_image():
    chosen = choose_target("docker", 0.01, "/py", FakeApi({THIS_IMAGE: THIS_DIGEST}))

    assert chosen.engine == "docker" and chosen.image == THIS_IMAGE


def test_the_docker_engine_asked_for_where_none_answers_is_left_to_the_preflight():
    chosen = choose_target("docker", 0.01, "/py", FakeApi({}, answers=False))

    assert chosen.engine == "docker" and chosen.image == THIS_IMAGE  # the run's preflight says the engine is not there


def test_the_process_engine_asked_for_is_taken_without_asking_docker():
    chosen = choose_target("process", 0.01, "/py", FakeApi({}, answers=False))

    assert chosen.engine == "process"


# --- the CLI -------------------------------------------------------------------------------------


def cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(app, list(args), env={"DOCKER_HOST": "unix:///nonexistent.sock", **(env or {})})


def test_run_sim_dry_run_says_what_runs_the_simulator_and_checks_no_data(tmp_path):
    done = cli(
        "run",
        "e2b-dapo-filter",
        "--sim",
        "--dry-run",
        "--capture-dir",
        str(tmp_path),
        env={"MILES_LAB_DATA": str(tmp_path / "no-data-here")},
    )

    assert done.exit_code == 0, done.output
    assert "simulator: the process engine" in done.output
    assert f"time scale {DEFAULT_TIME_SCALE:g}" in done.output and "no GPU, no GPU lock, no data mount" in done.output
    assert "gpu request     none" in done.output
    assert "pre-flight" not in done.output
    assert "harness.sim.entry" in done.output


def test_run_sim_dry_run_json_is_the_simulated_spec(tmp_path):
    done = CliRunner().invoke(
        app,
        ["run", "plain", "--sim", "--sim-engine", "docker", "--time-scale", "0.5", "--dry-run", "--json"],
        env={"DOCKER_HOST": "unix:///nonexistent.sock"},
    )

    assert done.exit_code == 3, done.stderr  # the Docker engine it asks for does not answer: the run would not start
    spec = json.loads(done.stdout)
    assert spec["image"] == THIS_IMAGE and spec["engine"] == "docker"
    assert spec["device_requests"] == [] and spec["mounts"] == [] and spec["ulimits"] == {}
    assert spec["env"]["HARNESS_SIM_TIME_SCALE"] == "0.5"
    assert spec["capture_dir"].endswith("capture/sim/plain")
    assert "simulator: the sim image" in done.stderr


@pytest.mark.parametrize("args", [["--time-scale", "0.1"], ["--sim-engine", "process"]])
def test_sim_options_without_sim_are_one_line_errors(args):
    done = cli("run", "plain", "--dry-run", *args)

    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        "error: --time-scale and --sim-engine are for runs on the simulator: add --sim"
    ]


@pytest.mark.parametrize(
    "command,scale",
    [
        ("run", "0"),
        ("run", "1e-300"),
        ("sweep", "1e-320"),
        ("sweep", "1e308"),
        ("demo", "1e-320"),
        ("demo", "inf"),
    ],
)
def test_a_time_scale_out_of_range_is_refused_in_one_line_by_every_command(tmp_path, command, scale):
    sim = [] if command == "demo" else ["plain", "--sim", "--dry-run"]
    done = cli(
        command,
        *sim,
        "--time-scale",
        scale,
        "--capture-dir",
        str(tmp_path),
        env={"HARNESS_LOCK_DIR": str(tmp_path / "locks")},
    )

    assert done.exit_code == 2
    assert done.output.strip().splitlines() == [
        f"error: --time-scale {float(scale):g}: {TIME_SCALE_RANGE_SAID} "
        "(a run's pause windows are converted with it); `harness sim "
        "--time-scale 0` prints a log as fast as it can"
    ]
    assert not list(tmp_path.glob("*/status.json"))


def test_an_unknown_sim_engine_is_refused_in_one_line():
    done = cli("run", "plain", "--sim", "--sim-engine", "kubernetes", "--dry-run")

    assert done.exit_code == 2
    assert "--sim-engine 'kubernetes'" in done.output and "auto, docker, process" in done.output


# --- runs end to end ----------------------------------------------------------------------------


def run_on_the_simulator(engine: str, tmp_path: Path, *extra: str):
    captures = tmp_path / "capture"
    done = CliRunner().invoke(
        app,
        [
            "run",
            "e2b-dapo-filter",
            "--sim",
            "--sim-engine",
            engine,
            "--time-scale",
            "0.001",
            "--capture-dir",
            str(captures),
            *extra,
        ],
        env={"HARNESS_LOCK_DIR": str(tmp_path / "locks"), "HARNESS_PROCESS_DIR": str(tmp_path / "processes")},
    )
    return done, captures / "e2b-dapo-filter"


def check_simulated_capture(capture: Path, engine: str) -> dict:
    status = json.loads((capture / "status.json").read_text())
    manifest = json.loads((capture / "manifest.json").read_text())
    rows = [json.loads(line) for line in (capture / "metrics.jsonl").read_text().splitlines()]
    assert status["state"] == "succeeded" and status["exit_code"] == 0
    assert status["steps_complete"] == 12 and [row["step"] for row in rows if row["complete"]] == list(range(12))
    assert manifest["time_scale"] == 0.001
    assert manifest["experiment"]["engine"] == engine
    assert manifest["experiment"]["container"]["gpus"] == "none"
    assert manifest["launch_spec"]["device_requests"] == [] and manifest["launch_spec"]["mounts"] == []
    assert all(
        "rollout/dynamic_filter/drop_zero_std_1" in row["metrics"]
        or "rollout/dynamic_filter/drop_zero_std_0" in row["metrics"]
        for row in rows
    )
    return manifest


@pytest.mark.integration
def test_a_process_engine_sim_run_succeeds_with_every_step(tmp_path):
    done, capture = run_on_the_simulator("process", tmp_path)

    assert done.exit_code == 0, done.output
    manifest = check_simulated_capture(capture, "process")
    assert manifest["experiment"]["command"] == [sys.executable, "-m", "harness.sim.entry"]
    assert "e2b-dapo-filter: succeeded, 12/12 steps complete" in done.output


@pytest.mark.docker
def test_a_sim_container_runs_end_to_end_through_the_docker_engine(tmp_path, sim_image):
    done, capture = run_on_the_simulator("docker", tmp_path)

    assert done.exit_code == 0, done.output
    manifest = check_simulated_capture(capture, "docker")
    assert manifest["image"] == sim_image and manifest["handle"]["image_labels"]["org.miles-gb10-lab.sim"] == "1"
    log = (capture / "container.log").read_text()
    assert "harness sim: the simulated Miles trainer; time scale 0.001" in log


@pytest.mark.integration
def test_a_run_whose_batch_can_never_fill_fails_at_once_naming_why(tmp_path):
    done, capture = run_on_the_simulator("process", tmp_path, "--set", "miles.args.n-samples-per-prompt=1")

    assert done.exit_code == 1, done.output
    status = json.loads((capture / "status.json").read_text())
    assert status["state"] == "failed" and status["steps_complete"] == 0
    assert status["error"].startswith("exit code 1: ValueError: --n-samples-per-prompt 1 with the zero-variance filter")


@pytest.mark.integration
def test_a_sim_run_of_public_miles_with_the_write_up_filter_path_fails_named_as_such(tmp_path):
    """The failure reading on any machine: the simulator stands in for the public Miles of August 2026, which dies
    importing the write-up's filter path at the first rollout; the run's error names the path the image lacks."""
    done = cli(
        "run",
        "e2b-dapo-filter",
        "--sim",
        "--sim-engine",
        "process",
        "--time-scale",
        "0.0001",
        "--set",
        "container.env.HARNESS_SIM_MILES=public-2026-08",
        "--capture-dir",
        str(tmp_path),
    )
    assert done.exit_code == 1, done.output
    status = json.loads((tmp_path / "e2b-dapo-filter" / "status.json").read_text())
    assert status["state"] == "failed" and status["steps_complete"] == 0
    assert status["error"] == (
        "exit code 1: the image's Miles has no "
        "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter "
        "(ModuleNotFoundError: No module named 'miles.rollout.filter_hub.common_filters')"
    )
    manifest = json.loads((tmp_path / "e2b-dapo-filter" / "manifest.json").read_text())
    assert manifest["miles"] == {"checked": False, "reason": "the process engine runs no image"}
