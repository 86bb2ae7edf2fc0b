"""The sim image (Dockerfile.sim) and its entry: the lab image's protocol, the simulator in place of Ray and Miles."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from harness.lab import milesargv
from harness.lab.milesnames import FILTER_PATH
from harness.mileslog import parse_lines
from harness.sim.entry import main as entry_main
from support.timing import scaled

REPO_ROOT = Path(__file__).resolve().parent.parent
FILTER_ARGS = f"--dynamic-sampling-filter-path {FILTER_PATH} --over-sampling-batch-size 48"
BASE_WORDS = milesargv.read_base_args()


def run_entry(env: dict[str, str], *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = entry_main(list(argv), {"HARNESS_SIM_TIME_SCALE": "0", **env})
    return code, out.getvalue(), err.getvalue()


def launch_argv(log: str) -> list[str]:
    """The trainer's argv as the simulator's launch line shows it (Ray's `Running entrypoint` line)."""
    return parse_lines(log.splitlines()).launch


# --- the entry, in-process (fast) ---------------------------------------------------------------


def test_without_miles_args_the_simulator_runs_the_base_run_then_the_extra_words():
    code, out, err = run_entry({"MILES_EXTRA_ARGS": FILTER_ARGS})

    assert code == 0, err
    assert launch_argv(out) == ["python3", "train.py", *BASE_WORDS, *FILTER_ARGS.split()]
    parsed = parse_lines(out.splitlines())
    assert [step.step for step in parsed.steps if step.complete] == list(range(12))
    assert parsed.args is None  # the base run's FSDP backend prints no argument dump, as Miles's does
    assert parsed.filter_setting() == (True, "launch line") and parsed.launch is not None
    assert parsed.launch[parsed.launch.index("--dynamic-sampling-filter-path") + 1] == FILTER_PATH


def test_miles_args_replace_the_base_run_and_entry_arguments_come_last():
    words = milesargv.apply_overrides(BASE_WORDS, {"num-rollout": 2})
    code, out, err = run_entry(
        {"MILES_ARGS": shlex.join(words), "MILES_EXTRA_ARGS": "--over-sampling-batch-size 48"}, "--rollout-seed", "7"
    )

    assert code == 0, err
    assert launch_argv(out) == [
        "python3",
        "train.py",
        *words,
        "--over-sampling-batch-size",
        "48",
        "--rollout-seed",
        "7",
    ]
    assert len([step for step in parse_lines(out.splitlines()).steps if step.complete]) == 2


def test_shell_syntax_in_the_extra_args_stays_literal_words():
    code, out, err = run_entry({"MILES_EXTRA_ARGS": """--note "a b" '$(touch /tmp/pwned)' --num-rollout 1"""})

    assert code == 0, err
    assert launch_argv(out)[-5:] == ["--note", "a b", "$(touch /tmp/pwned)", "--num-rollout", "1"]


def test_an_unbalanced_quote_is_one_line_and_exit_2():
    code, out, err = run_entry({"MILES_EXTRA_ARGS": "--x 'unclosed"})

    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and "MILES_EXTRA_ARGS" in err


def test_miles_refusal_of_o_below_b_is_the_container_s_failure():
    code, out, _ = run_entry({"MILES_EXTRA_ARGS": "--over-sampling-batch-size 16"})

    assert code == 1
    parsed = parse_lines(out.splitlines())
    assert parsed.failure is not None and "over_sampling_batch_size 16" in parsed.failure["line"]


# --- the image (Docker) ---------------------------------------------------------------------------


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.docker
def test_the_image_runs_the_filter_run_end_to_end_with_no_gpu_no_data_and_no_network(sim_image):
    done = docker(
        "run",
        "--rm",
        "--network=none",
        "--env",
        "HARNESS_SIM_TIME_SCALE=0",
        "--env",
        f"MILES_EXTRA_ARGS={FILTER_ARGS}",
        sim_image,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    parsed = parse_lines(done.stdout.splitlines())
    assert parsed.problems == [] and parsed.failure is None
    assert [step.step for step in parsed.steps if step.complete] == list(range(12))
    assert parsed.launch == ["python3", "train.py", *BASE_WORDS, *FILTER_ARGS.split()]
    assert all(step.derived["dropped_groups"] > 0 for step in parsed.steps)
    config = json.loads(docker("image", "inspect", sim_image).stdout)[0]["Config"]
    assert config["Labels"]["org.miles-gb10-lab.sim"] == "1"
    assert config["Entrypoint"] == ["python3", "-m", "harness.sim.entry"]


def logs_once_they_show(container: str, text: str, timeout_s: float = 60) -> str:
    """The container's stdout, read until it shows `text`."""
    deadline = time.monotonic() + scaled(timeout_s)
    while text not in (out := docker("logs", container).stdout):
        assert time.monotonic() < deadline, out
        time.sleep(0.1)
    return out


@pytest.mark.docker
def test_docker_stop_stops_the_simulator_with_ray_s_lines_and_exit_143(sim_image):
    started = docker("run", "--detach", "--network=none", "--env", "HARNESS_SIM_TIME_SCALE=1", sim_image)
    assert started.returncode == 0, started.stderr
    container = started.stdout.strip()
    try:
        logs_once_they_show(container, "ft event=gather_start rollout_id=0")
        asked = time.monotonic()
        stopped = docker("stop", "--time=30", container)

        assert stopped.returncode == 0 and time.monotonic() - asked < 10  # it acts on SIGTERM: no SIGKILL needed
        assert docker("wait", container).stdout.strip() == "143"
        assert "Job 'raysubmit_" in logs_once_they_show(container, "was stopped")
        assert "SIGTERM: stopped " in docker("logs", container).stderr
    finally:
        docker("rm", "--force", container)
