"""A fresh clone of this checkout, and `make` in it, as a new user's first commands run.

Fixture (registered in conftest.py): `clone`, a fresh clone under the test's tmp_path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.timing import scaled

REPO_ROOT = Path(__file__).resolve().parents[2]
DEAD_DOCKER = "unix:///nonexistent/docker.sock"  # a DOCKER_HOST where no engine answers


def fresh_clone(destination: Path) -> Path:
    """The checkout's files as a fresh clone has them (tracked and new, never ignored ones such as .venv)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        timeout=scaled(60),
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: a fresh clone cannot be made from it")
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = REPO_ROOT / name
        if source.is_file():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A fresh clone of this checkout."""
    return fresh_clone(tmp_path / "clone")


def make(clone: Path, *args: str, docker_host: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`make ARGS` in the clone with this venv (its `harness` taken as up to date: no pip install)."""
    venv = Path(sys.prefix)
    harness = venv / "bin" / "harness"
    if not harness.exists():
        pytest.skip(f"the tests do not run from a venv with harness installed ({sys.prefix}): `make setup`")
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("HARNESS_CAPTURE_DIR", "HARNESS_EXPERIMENT", "MAKEFLAGS", "MAKELEVEL")
    }
    env.update(
        DOCKER_HOST=docker_host, HARNESS_LOCK_DIR=str(clone / ".locks"), HARNESS_PROCESS_DIR=str(clone / ".processes")
    )
    # `-o` is not passed down to a sub-make (`make demo` runs `$(MAKE) setup`): the clone's pyproject.toml is made
    # older than this venv's harness, so no make ever reinstalls the venv from the clone (it would point this
    # venv's `harness` at a temporary directory for every later test).
    os.utime(clone / "pyproject.toml", (0, 0))
    return subprocess.run(
        ["make", "--no-print-directory", f"VENV={venv}", "-o", str(harness), *args],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=scaled(timeout),
        env=env,
    )
