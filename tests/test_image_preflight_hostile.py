"""The image preflight against images that answer badly: a forged second answer, 300 MB of output, no answer at
all while SIGTERM comes, and a FIFO where the cache keeps the image's check.

Each image is the registry-free busybox with a `python3` of its own (a shell
script): what the probe's container runs is what the image says it is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.engines import milesimage
from harness.lab.milesnames import FILTER_PATH, FILTER_PATH_PUBLIC
from support.images import content_tagged
from support.lab import IMAGE, Lab
from support.memory import measured

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parent.parent


def answer(paths: dict[str, Any], commit: str) -> str:
    data = {"commit": commit, "miles_version": None, "found": True, "prints_unfiltered_reward": True, "paths": paths}
    return milesimage.PROBE_MARKER + json.dumps(data)


PYTHON3 = {
    # the probe's own answer (the path is missing), then a forged one that leaves every path out
    "forged": "#!/bin/sh\n"
    f"echo '{answer({FILTER_PATH: 'ModuleNotFoundError: no', FILTER_PATH_PUBLIC: None}, 'honest')}'\n"
    f"echo '{answer({}, 'forged')}'\n",
    # 300 MB of lines of 16,000 x, then an answer that would pass
    "flood": "#!/bin/sh\n"
    "yes \"$(printf '%16000s' '' | tr ' ' x)\" | head -c 300000000\n"
    f"echo '{answer({FILTER_PATH: None, FILTER_PATH_PUBLIC: None}, 'flood')}'\n",
    "slow": "#!/bin/sh\nsleep 120\n",
}


def build(root: Path, docker_build: Any, busybox: str, kind: str) -> str:
    context = root / kind
    context.mkdir()
    (context / "python3").write_text(PYTHON3[kind])
    (context / "python3").chmod(0o755)
    (context / "Dockerfile").write_text(f"FROM {busybox}\nCOPY python3 /usr/bin/python3\n")
    return docker_build(context, content_tagged(f"miles-gb10-lab/preflight-{kind}:test", context))


@pytest.fixture(scope="module")
def images(busybox_image: str, docker_build: Any, tmp_path_factory: Any) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hostile-images")
    return {kind: build(root, docker_build, busybox_image, kind) for kind in PYTHON3}


def filter_flags(path: str) -> str:
    return f"--over-sampling-batch-size 48 --dynamic-sampling-filter-path {path}"


def image_id(image: str) -> str:
    return subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True, text=True, check=True
    ).stdout.strip()


def probe_containers(image: str) -> list[str]:
    listed = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={milesimage.PROBE_LABEL}=1", "--filter", f"ancestor={image}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


def test_a_forged_second_answer_is_never_read(docker_lab: Lab, images: dict[str, str], tmp_path: Path) -> None:
    docker_lab.env["HARNESS_PREFLIGHT_DIR"] = str(tmp_path / "checks")
    run = docker_lab.experiment("forged", image=images["forged"], extra=filter_flags(FILTER_PATH))
    result = docker_lab.cli("run", run)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert f"the image {images['forged']} holds Miles honest, which has no {FILTER_PATH}" in result.stderr
    assert not (docker_lab.captures / run).exists()


def test_an_image_that_prints_300_mb_is_refused_in_one_line_and_the_harness_stays_small(
    docker_lab: Lab, images: dict[str, str], tmp_path: Path
) -> None:
    run = docker_lab.experiment("flood", image=images["flood"], extra=filter_flags(FILTER_PATH))
    env = {**os.environ, **docker_lab.env, "HARNESS_PREFLIGHT_DIR": str(tmp_path / "checks")}
    result = measured([sys.executable, "-m", "harness", "run", run, *docker_lab.dirs()], env=env, cwd=str(REPO))
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: run flood not started: the image {images['flood']} printed 3")
    assert "bytes on stdout to the preflight" in line and "xxxx" in line
    assert result.peak_mb < 250, f"peak {result.peak_mb:.0f} MB"
    assert probe_containers(images["flood"]) == []
    assert not (docker_lab.captures / run).exists()


def test_sigterm_ends_a_run_whose_preflight_waits_on_a_silent_image(
    docker_lab: Lab, images: dict[str, str], tmp_path: Path
) -> None:
    run = docker_lab.experiment("slow", image=images["slow"], extra=filter_flags(FILTER_PATH))
    process = docker_lab.spawn("run", run, env={"HARNESS_PREFLIGHT_DIR": str(tmp_path / "checks")})
    deadline = time.monotonic() + 60
    while not probe_containers(images["slow"]) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    assert probe_containers(images["slow"]), "the probe never started"
    process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    try:
        out, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    took = time.monotonic() - started
    assert took < 5, f"{took:.1f} s after SIGTERM:\n{out}"
    assert process.returncode == 130, out
    assert "SIGTERM: no trainer is running: ending now" in out
    assert probe_containers(images["slow"]) == []  # the probe's container removed on the way out
    assert not (docker_lab.captures / run).exists()


def test_a_fifo_where_the_cache_keeps_the_image_check_never_blocks_a_run(docker_lab: Lab, tmp_path: Path) -> None:
    cache = tmp_path / "checks"
    cache.mkdir()
    run = docker_lab.experiment("fifocache")  # the fake trainer: no `miles` package, so not judged, and it runs
    os.mkfifo(cache / (image_id(IMAGE).replace(":", "_") + ".json"))
    process = docker_lab.spawn("run", run, env={"HARNESS_PREFLIGHT_DIR": str(cache)})
    try:
        out, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        try:
            out, _ = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
        raise AssertionError(f"harness run blocked on the FIFO (SIGTERM: exit {process.returncode}):\n{out}") from None
    assert process.returncode == 0, out
    assert docker_lab.status(run)["state"] == "succeeded"
