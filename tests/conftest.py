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
