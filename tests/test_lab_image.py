"""The lab image, built on a stand-in Miles base: the entry hands train.py its flags intact.

The stand-in (tests/images/miles-standin) has a fake `ray` that runs the job the
way Ray does (joined with shlex.join, run by a shell) and a fake train.py that
prints its argv as JSON, so these tests see exactly what Miles would get.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from harness.lab import milesargv
from support.images import STANDIN_IMAGE, content_tagged, lab_image_tag
from support.timing import scaled

pytestmark = pytest.mark.docker

REPO_ROOT = Path(__file__).resolve().parent.parent
STANDIN_TAG = STANDIN_IMAGE
LAB_TAG = lab_image_tag("miles-gb10-lab/lab:test", STANDIN_TAG)
FILTER_ARGS = (
    "--dynamic-sampling-filter-path "
    "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter "
    "--over-sampling-batch-size 48"
)
BASE_WORDS = milesargv.read_base_args()
BASE_FLAGS = milesargv.flag_values(BASE_WORDS)
MODEL = BASE_FLAGS["--hf-checkpoint"][0]
DATASET = BASE_FLAGS["--prompt-data"][0]


@dataclass
class Finished:
    code: int
    stdout: str
    stderr: str
    container: str

    def train(self) -> dict:
        """What the stand-in train.py printed."""
        lines = [line for line in self.stdout.splitlines() if line.startswith("STANDIN-TRAIN ")]
        assert len(lines) == 1, self.stdout + self.stderr
        return json.loads(lines[0].removeprefix("STANDIN-TRAIN "))


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def lab_image(python_image: str, docker_build) -> str:
    docker_build(REPO_ROOT / "tests" / "images" / "miles-standin", STANDIN_TAG)
    return docker_build(REPO_ROOT, LAB_TAG, {"MILES_BASE": STANDIN_TAG, "MILES_COMMIT": ""})


def in_data(root: Path, container_path: str) -> Path:
    return root / PurePosixPath(container_path).relative_to("/data")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory with the base run's model (a directory) and data set (a file)."""
    root = tmp_path / "data"
    model = in_data(root, MODEL)
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    in_data(root, DATASET).parent.mkdir(parents=True, exist_ok=True)
    in_data(root, DATASET).write_bytes(b"")
    return root


@pytest.fixture
def containers():
    """Create containers (never auto-removed, so they can be inspected); remove them at teardown."""
    made: list[str] = []

    def create(image: str, data: Path, env: dict[str, str], *args: str) -> str:
        flags = [f"--env={key}={value}" for key, value in env.items()]
        out = docker("create", "--network=none", f"--volume={data}:/data:ro", *flags, image, *args)
        assert out.returncode == 0, out.stderr
        made.append(out.stdout.strip())
        return made[-1]

    yield create
    for container in made:
        docker("rm", "--force", container)


@pytest.fixture
def run_lab(lab_image: str, containers):
    def run(data: Path, env: dict[str, str], *args: str) -> Finished:
        container = containers(lab_image, data, env, *args)
        out = docker("start", "--attach", container)
        return Finished(out.returncode, out.stdout, out.stderr, container)

    return run


def test_the_write_up_filter_flags_reach_train_py_intact_and_in_order(run_lab, data_dir):
    done = run_lab(data_dir, {"MILES_EXTRA_ARGS": FILTER_ARGS})

    assert done.code == 0, done.stdout + done.stderr
    words = [*BASE_WORDS, *FILTER_ARGS.split()]
    assert done.train()["argv"] == ["train.py", *words]
    assert f": {shlex.join(['python3', 'train.py', *words])}" in done.stdout
    assert any(line.startswith("Running entrypoint for job raysubmit_") for line in done.stdout.splitlines())
    assert done.train()["cwd"] == "/root/miles"
    assert done.train()["env"] == {
        "PYTHONUNBUFFERED": "1",
        "RAY_DEDUP_LOGS": "0",
        "RAY_memory_monitor_refresh_ms": "0",
        "MILES_DIR": "/root/miles",
    }
    assert (
        "[ray stand-in] ray start --head --node-ip-address 127.0.0.1 --num-gpus 1 --disable-usage-stats" in done.stdout
    )


def test_quoting_cases_arrive_as_literal_words_and_nothing_is_executed(run_lab, data_dir):
    done = run_lab(data_dir, {"MILES_EXTRA_ARGS": """--x "a b" '$(touch /tmp/pwned)' ; rm -rf /"""})

    assert done.code == 0, done.stdout + done.stderr
    assert done.train()["argv"][-7:] == ["--x", "a b", "$(touch /tmp/pwned)", ";", "rm", "-rf", "/"]
    assert done.train()["pwned"] is False
    assert docker("cp", f"{done.container}:/tmp/pwned", "-").returncode != 0
    kept = docker("cp", f"{done.container}:/root/miles/train.py", "-")
    assert kept.returncode == 0 and "STANDIN-TRAIN" in kept.stdout


def test_miles_args_replace_the_base_run(run_lab, data_dir):
    words = milesargv.apply_overrides(BASE_WORDS, {"num-rollout": 2, "actor-num-gpus-per-node": 2})
    done = run_lab(data_dir, {"MILES_ARGS": shlex.join(words), "MILES_EXTRA_ARGS": "--over-sampling-batch-size 48"})

    assert done.code == 0, done.stdout + done.stderr
    assert done.train()["argv"] == ["train.py", *words, "--over-sampling-batch-size", "48"]
    assert "--num-gpus 2 " in done.stdout


@pytest.mark.parametrize(
    "missing, flag, what", [(MODEL, "--hf-checkpoint", "model"), (DATASET, "--prompt-data", "data set")]
)
def test_missing_data_is_one_line_naming_it_and_make_data(run_lab, data_dir, missing, flag, what):
    target = in_data(data_dir, missing)
    subprocess.run(["rm", "-r", str(target)], check=True)

    done = run_lab(data_dir, {"MILES_EXTRA_ARGS": FILTER_ARGS})

    assert done.code == 66
    assert done.stderr.splitlines() == [
        f"miles-gb10-lab: {what} not found at {missing} ({flag}); fetch it on the GB10 host with 'make data'"
    ]
    assert "ray start" not in done.stdout


def test_an_empty_data_directory_names_the_model(run_lab, tmp_path):
    done = run_lab(tmp_path, {})

    assert done.code != 0
    assert len(done.stderr.splitlines()) == 1
    assert MODEL in done.stderr and "make data" in done.stderr


def test_an_unbalanced_quote_is_one_line_and_exit_2(run_lab, data_dir):
    done = run_lab(data_dir, {"MILES_EXTRA_ARGS": "--x 'unclosed"})

    assert done.code == 2
    assert len(done.stderr.splitlines()) == 1 and "MILES_EXTRA_ARGS" in done.stderr
    assert "ray start" not in done.stdout


def test_a_failing_trainer_fails_the_container(run_lab, data_dir):
    done = run_lab(data_dir, {"MILES_EXTRA_ARGS": "--standin-exit 3"})

    assert done.code == 1  # `ray job submit` exits 1 when the job failed
    assert "Job 'raysubmit_" in done.stdout and "failed" in done.stdout


def test_docker_stop_stops_the_job_and_ray_and_exits_143(lab_image, containers, data_dir):
    container = containers(lab_image, data_dir, {"MILES_EXTRA_ARGS": "--standin-sleep 60"})
    assert docker("start", container).returncode == 0
    deadline = time.monotonic() + scaled(60)
    while "STANDIN-TRAIN" not in docker("logs", container).stdout:
        assert time.monotonic() < deadline, docker("logs", container).stdout
        time.sleep(0.2)

    started = time.monotonic()
    docker("stop", "--time=30", container)

    assert time.monotonic() - started < 20
    assert docker("wait", container).stdout.strip() == "143"
    logs = docker("logs", container)
    assert "[ray stand-in] ray job stop --address=http://127.0.0.1:8265 raysubmit_" in logs.stdout
    assert "[ray stand-in] ray stop --force" in logs.stdout
    assert "SIGTERM: stopping job raysubmit_" in logs.stderr


def test_the_image_records_its_miles_and_sets_the_ray_environment(lab_image):
    out = docker("image", "inspect", lab_image)
    config = json.loads(out.stdout)[0]["Config"]

    assert config["Labels"]["org.miles-gb10-lab.miles-commit"] == "base"
    assert config["Labels"]["org.miles-gb10-lab.miles-base"] == STANDIN_TAG
    assert {"PYTHONUNBUFFERED=1", "RAY_DEDUP_LOGS=0", "RAY_memory_monitor_refresh_ms=0"} <= set(config["Env"])
    assert config["Entrypoint"] == ["python3", "/opt/miles-gb10-lab/entry.py"]
    assert not config["Cmd"]


def test_a_miles_commit_is_checked_out_not_ignored(lab_image):
    # The stand-in's Miles is no git checkout, so asking for a commit must stop the build, clearly.
    argv = [
        "docker",
        "build",
        "--force-rm",
        "--build-arg",
        f"MILES_BASE={STANDIN_TAG}",
        "--build-arg",
        "MILES_COMMIT=08752a12",
        "--tag",
        "miles-gb10-lab/lab:test-commit",
        str(REPO_ROOT),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)

    assert done.returncode != 0
    assert (
        "/root/miles is not a git checkout: build with MILES_COMMIT= to keep the base's Miles"
        in done.stdout + done.stderr
    )


FAKE_GIT = """#!/bin/sh
# A stand-in git for a base whose Miles is a checkout at the write-up's commit: only what the build asks.
if [ "$1" = "-C" ]; then cd "$2" || exit 128; shift 2; fi
[ -d .git ] || exit 128
case "$*" in
    "rev-parse --verify --quiet HEAD") echo 08752a12d39c2f0c7e6d2a8f6bd3c1f4a2b9e0c1 ;;
    "rev-parse --short=8 HEAD") echo 08752a12 ;;
    *) echo "stand-in git: $*" >&2; exit 1 ;;
esac
"""


def test_the_image_records_the_commit_of_a_base_whose_miles_is_a_checkout(lab_image, docker_build, tmp_path):
    # `make image MILES_COMMIT=` keeps the base's Miles; when that is a git checkout its commit is written where
    # the image preflight reads it (harness/engines/milesimage.py, COMMIT_FILE).
    from harness.engines.milesimage import COMMIT_FILE

    context = tmp_path / "checkout-base"
    context.mkdir()
    (context / "git").write_text(FAKE_GIT)
    (context / "Dockerfile").write_text(
        f"FROM {STANDIN_TAG}\nCOPY git /usr/local/bin/git\nRUN chmod 0755 /usr/local/bin/git && mkdir /root/miles/.git\n"
    )
    base = docker_build(context, content_tagged("miles-gb10-lab/miles-standin-checkout:test", context))
    image = docker_build(
        REPO_ROOT, lab_image_tag("miles-gb10-lab/lab:test-checkout", base), {"MILES_BASE": base, "MILES_COMMIT": ""}
    )

    recorded = docker("run", "--rm", "--network=none", "--entrypoint", "cat", image, COMMIT_FILE)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == "08752a12\n"
    plain = docker("run", "--rm", "--network=none", "--entrypoint", "cat", lab_image, COMMIT_FILE)
    assert plain.returncode != 0  # the plain stand-in's Miles is no checkout: no commit to record
