"""Shared test set-up: `docker` tests need an engine that answers, `gpu` tests a GPU.

What cannot run here is skipped with one reason that names the command which
enables it; the base images the Docker tests build on are made from what the
machine has (scripts/offline-images.sh), so the Docker tests run wherever an
engine answers. The summary line counts the Docker tests that ran.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
OFFLINE_IMAGES_SCRIPT = REPO_ROOT / "scripts" / "offline-images.sh"
OFFLINE_IMAGES_UNAVAILABLE = 69  # the script's exit code for "cannot be built on this machine"
RAN_WITH_DOCKER = "ran with Docker"  # the summary line's count: "... 27 ran with Docker in 60.0s"


DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"


@functools.lru_cache(maxsize=None)
def docker_unavailable() -> Optional[str]:
    """Why Docker tests cannot run here, naming the command that enables them; None when an engine answers."""
    return docker_problem(os.environ.get("DOCKER_HOST") or None)


def docker_problem(host: Optional[str]) -> Optional[str]:
    """Why no Docker engine answers at `host` (None: the default one), naming the address tried and the fix."""
    if not shutil.which("docker"):
        return "no docker command: install Docker with `sudo apt-get install docker.io`"
    env = {name: value for name, value in os.environ.items() if name != "DOCKER_HOST"}
    if host:
        env["DOCKER_HOST"] = host
    where = f"DOCKER_HOST={host}" if host else f"the default address, {DEFAULT_DOCKER_HOST}"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=20, env=env)
    except subprocess.TimeoutExpired:
        return f"`docker info` did not answer within 20 s at {where}: check the engine with `docker info`"
    if info.returncode == 0:
        return None
    if "permission denied" in info.stderr.lower():
        return f"this user may not use the Docker engine at {where}: `sudo usermod -aG docker $USER`, then log in again"
    if host:
        socket = host.removeprefix("unix://") if host.startswith("unix://") else None
        missing = " (no such socket)" if socket is not None and not os.path.exists(socket) else ""
        return (
            f"no Docker engine answers at {where}{missing}: start that engine, or unset DOCKER_HOST for the default one"
        )
    return f"no Docker engine answers at {where}: start one with `sudo systemctl start docker` (or `sudo .ci/run`)"


@functools.lru_cache(maxsize=None)
def gpu_present() -> bool:
    """True when nvidia-smi lists at least one GPU."""
    if not shutil.which("nvidia-smi"):
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    docker_tests = [item for item in items if "docker" in item.keywords]
    if docker_tests and docker_unavailable():
        skip = pytest.mark.skip(reason=docker_unavailable())
        for item in docker_tests:
            item.add_marker(skip)
    for item in items:
        if "gpu" in item.keywords and not gpu_present():
            item.add_marker(pytest.mark.skip(reason="no GPU on this machine (nvidia-smi lists none)"))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # noqa: ANN001
    """One line on the Docker tests, and their count in the final summary line."""
    stats = terminalreporter.stats
    reports = [
        r
        for key in ("passed", "failed", "skipped", "error")
        for r in stats.get(key, [])
        if "docker" in getattr(r, "keywords", ())
    ]  # a CollectReport (a file that failed to import) has none
    tests = {r.nodeid for r in reports}
    ran = [r for r in reports if r.when == "call" and not r.skipped]
    if not tests:
        return
    if ran:
        stats[RAN_WITH_DOCKER] = ran
        line = f"docker: {len(ran)} of {len(tests)} docker tests ran on {os.environ.get('DOCKER_HOST') or 'the default engine'}"
    else:
        line = f"docker: none of {len(tests)} docker tests ran: {docker_unavailable() or 'all were skipped'}"
    terminalreporter.write_line(line)


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


def regenerate_golden() -> bool:
    """REGEN_GOLDEN=1 rewrites golden files (and the tests that did so fail, on purpose)."""
    return os.environ.get("REGEN_GOLDEN") == "1"


def path_without(root: Path, *commands: str) -> str:
    """A PATH like this one in which `commands` do not exist: each directory shadowed by links to the rest."""
    shadows = []
    for index, directory in enumerate(os.environ["PATH"].split(os.pathsep)):
        if not os.path.isdir(directory):
            continue
        shadow = root / f"path{index}"
        shadow.mkdir(parents=True)
        for entry in os.scandir(directory):
            if entry.name not in commands:
                (shadow / entry.name).symlink_to(entry.path)
        shadows.append(str(shadow))
    return os.pathsep.join(shadows)


def offline_image(kind: str) -> str:
    """The tag of a registry-free base image, built if missing; a skip naming the command if it cannot be."""
    script = ["bash", str(OFFLINE_IMAGES_SCRIPT), "--only", kind]
    built = subprocess.run(script, capture_output=True, text=True, timeout=1200)
    if built.returncode == OFFLINE_IMAGES_UNAVAILABLE:
        pytest.skip(built.stderr.strip().splitlines()[-1].removeprefix("offline-images: "))
    if built.returncode != 0:
        raise RuntimeError(f"scripts/offline-images.sh --only {kind} failed:\n{built.stderr[-3000:]}")
    return subprocess.run([*script, "--print-tags"], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="session")
def python_image() -> str:
    """miles-gb10-lab/python:3.11-bookworm: the base of the tests' trainer and Miles stand-in images."""
    return offline_image("python")


@pytest.fixture(scope="session")
def busybox_image() -> str:
    """miles-gb10-lab/busybox:stable."""
    return offline_image("busybox")


@pytest.fixture(scope="session")
def docker_build():
    """Build an image with the docker CLI (cached layers are fine); fails the test with the log tail."""

    def build(context: Path, tag: str, build_args: dict[str, str] | None = None) -> str:
        argv = ["docker", "build", "--quiet", "--force-rm", "--tag", tag]
        for name, value in (build_args or {}).items():
            argv += ["--build-arg", f"{name}={value}"]
        done = subprocess.run([*argv, str(context)], capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.fail(f"docker build of {tag} failed:\n{(done.stdout + done.stderr)[-3000:]}", pytrace=False)
        return tag

    return build
