"""Shared test set-up: `docker` tests need an engine that answers, `gpu` tests a GPU."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=None)
def docker_engine_answers() -> bool:
    """True when `docker info` reaches a daemon within a few seconds."""
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


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
    for item in items:
        if "docker" in item.keywords and not docker_engine_answers():
            item.add_marker(pytest.mark.skip(reason="no Docker engine answers"))
        if "gpu" in item.keywords and not gpu_present():
            item.add_marker(pytest.mark.skip(reason="no GPU on this machine"))


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


def regenerate_golden() -> bool:
    """REGEN_GOLDEN=1 rewrites golden files (and the tests that did so fail, on purpose)."""
    return os.environ.get("REGEN_GOLDEN") == "1"


OFFLINE_IMAGES_SCRIPT = REPO_ROOT / "scripts" / "offline-images.sh"


@pytest.fixture(scope="session")
def offline_images() -> list[str]:
    """The registry-free base images (busybox, python): built once where a tag is missing.

    CI builds them before the tests; on a fresh machine this takes a debootstrap
    (about a minute) and needs root.
    """
    built = subprocess.run(["bash", str(OFFLINE_IMAGES_SCRIPT)], capture_output=True, text=True, timeout=1200)
    if built.returncode != 0:
        pytest.fail(f"scripts/offline-images.sh failed:\n{built.stderr[-3000:]}", pytrace=False)
    tags = subprocess.run(["bash", str(OFFLINE_IMAGES_SCRIPT), "--print-tags"], capture_output=True, text=True)
    return tags.stdout.split()


@pytest.fixture(scope="session")
def docker_build():
    """Build an image with the docker CLI (cached layers are fine); fails the test with the log tail."""

    def build(context: Path, tag: str, build_args: dict[str, str] | None = None) -> str:
        argv = ["docker", "build", "--quiet", "--tag", tag]
        for name, value in (build_args or {}).items():
            argv += ["--build-arg", f"{name}={value}"]
        done = subprocess.run([*argv, str(context)], capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.fail(f"docker build of {tag} failed:\n{(done.stdout + done.stderr)[-3000:]}", pytrace=False)
        return tag

    return build
