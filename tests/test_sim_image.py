"""The sim image (Dockerfile.sim) and its entry: the lab image's protocol, the simulator in place of Ray and Miles;
the image says which simulator it holds (a digest of what Dockerfile.sim copies), and runs take only this checkout's."""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.lab import milesargv
from harness.lab.milesnames import FILTER_PATH
from harness.mileslog import parse_lines
from harness.run.simswap import OTHER_SIMULATOR, SIM_IMAGE, choose_target
from harness.sim.entry import main as entry_main
from harness.sim.image import SIM_DIGEST_LABEL, copied_files, copied_sources, sim_digest, sim_image_tag
from support.clones import own_file
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
    assert sim_image == sim_image_tag(sim_digest()) and config["Labels"][SIM_DIGEST_LABEL] == sim_digest()


def logs_once_they_show(container: str, text: str, timeout_s: float = 60) -> str:
    """The container's stdout, read until it shows `text`."""
    deadline = time.monotonic() + scaled(timeout_s)
    while text not in (out := docker("logs", container).stdout):
        assert time.monotonic() < deadline, out
        time.sleep(0.1)
    return out


@pytest.mark.docker
def test_docker_stop_stops_the_simulator_with_ray_s_lines_and_exit_143(sim_image):
    # 0.05: its 45 s start-up takes 2 s (at 1 the test took 45 s), a rollout still seconds: stopped mid-rollout
    started = docker("run", "--detach", "--network=none", "--env", "HARNESS_SIM_TIME_SCALE=0.05", sim_image)
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


# --- what the image holds, and which image a run takes ----------------------------------------------------------

SIM_TREE = ("Dockerfile.sim", ".dockerignore", "harness/__init__.py", "harness/lab", "harness/sim", "harness/run")


def sim_tree(destination: Path) -> Path:
    """A copy of what the sim image is built from (and one package it does not hold), with no bytecode."""
    for name in SIM_TREE:
        source, target = REPO_ROOT / name, destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    return destination


def test_the_digest_is_of_what_dockerfile_sim_copies_and_dockerfile_sim_itself(tmp_path: Path) -> None:
    assert copied_sources((REPO_ROOT / "Dockerfile.sim").read_text()) == [
        "harness/__init__.py",
        "harness/lab/",
        "harness/sim/",
    ]
    tree = sim_tree(tmp_path / "tree")
    files = copied_files(tree)
    assert files[0] == "Dockerfile.sim" and "harness/sim/entry.py" in files and "harness/lab/base-run.args" in files
    assert not any(name.startswith("harness/run/") for name in files)
    first = sim_digest(tree)
    assert len(first) == 12 and sim_digest(tree) == first

    (tree / "harness" / "run" / "simswap.py").write_text("# not in the image\n")
    (tree / "harness" / "sim" / "__pycache__").mkdir()
    (tree / "harness" / "sim" / "__pycache__" / "entry.cpython-311.pyc").write_bytes(b"bytecode: .dockerignore'd")
    assert sim_digest(tree) == first  # nothing the image holds changed
    seen = {first}
    for change in ("harness/sim/trainer.py", "harness/lab/base-run.args", "harness/__init__.py", "Dockerfile.sim"):
        with open(tree / change, "a") as text:
            text.write("\n# changed\n")
        seen.add(sim_digest(tree))
    (tree / "harness" / "sim" / "checkpoint.py").write_text("")  # a new module of the simulator
    seen.add(sim_digest(tree))
    assert len(seen) == 6  # each change is another simulator


@pytest.mark.integration
def test_the_script_tags_the_image_by_the_digest_the_harness_computes() -> None:
    printed = subprocess.run(
        ["bash", "scripts/sim-image.sh", "--print-tag"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )

    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.strip() == sim_image_tag(sim_digest())


def sha256_of_files(root: Path, names: list[str]) -> dict[str, str]:
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in names}


IN_IMAGE_FILES = """
import hashlib, os, sys
root = "/opt/miles-gb10-lab"
for top, dirs, files in os.walk(root):
    for name in files:
        path = os.path.join(top, name)
        print(os.path.relpath(path, root), hashlib.sha256(open(path, "rb").read()).hexdigest())
"""


@pytest.mark.docker
def test_the_image_holds_exactly_the_files_its_digest_is_of(sim_image) -> None:
    listed = docker("run", "--rm", "--network=none", "--entrypoint", "python3", sim_image, "-c", IN_IMAGE_FILES)

    assert listed.returncode == 0, listed.stderr
    in_image = dict(line.split(" ") for line in listed.stdout.splitlines())
    held = [name for name in copied_files(REPO_ROOT) if name != "Dockerfile.sim"]
    assert in_image == sha256_of_files(REPO_ROOT, held)


@pytest.mark.docker
@pytest.mark.integration
def test_two_checkouts_with_two_simulators_on_one_engine_each_run_their_own(sim_image, clone) -> None:
    ours = choose_target("auto", 0.01, sys.executable)
    assert ours.engine == "docker" and ours.image == sim_image
    changed = own_file(clone / "harness" / "sim" / "__init__.py")  # another simulator (the clone's own copy)
    changed.write_text(changed.read_text() + f"# {uuid.uuid4().hex}\n")
    theirs = sim_image_tag(sim_digest(clone))
    assert theirs != sim_image

    fell_back = choose_target("auto", 0.01, sys.executable, root=clone)  # built here: ours, not theirs
    assert fell_back.engine == "process" and fell_back.reason == OTHER_SIMULATOR
    with pytest.raises(HarnessError, match=f"^--sim-engine docker: {OTHER_SIMULATOR}$"):
        choose_target("docker", 0.01, sys.executable, root=clone)
    try:
        built = subprocess.run(
            ["bash", "scripts/sim-image.sh"], cwd=clone, capture_output=True, text=True, timeout=scaled(900)
        )
        assert built.returncode == 0, built.stdout + built.stderr
        assert built.stdout.strip().splitlines()[-1] == f"sim-image: {theirs} is built (also tagged {SIM_IMAGE})"

        assert choose_target("auto", 0.01, sys.executable, root=clone).image == theirs
        again = choose_target("auto", 0.01, sys.executable)  # latest is theirs now: ours is still ours
        assert again.engine == "docker" and again.image == sim_image
        labels = json.loads(docker("image", "inspect", theirs).stdout)[0]["Config"]["Labels"]
        assert labels[SIM_DIGEST_LABEL] == sim_digest(clone)
    finally:  # latest back to this checkout's, and the clone's image gone
        subprocess.run(["bash", "scripts/sim-image.sh"], cwd=REPO_ROOT, capture_output=True, timeout=scaled(900))
        docker("image", "rm", theirs)
