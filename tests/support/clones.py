"""A fresh clone of this checkout, and `make` in it, as a new user's first commands run.

Fixtures (registered in conftest.py): `clone`, a fresh clone under the test's tmp_path, made of
`checkout_files`, the checkout's files copied once a session.
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


@pytest.fixture(scope="session")
def checkout_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout's files as a fresh clone has them, copied once a session (once a worker): the clones link to them."""
    return fresh_clone(tmp_path_factory.mktemp("checkout") / "files")


@pytest.fixture
def clone(checkout_files: Path, tmp_path: Path) -> Path:
    """A fresh clone of this checkout: the session's copy of its files, hard-linked (0.3 s where copying took 2).

    A file changed in place (written into, its times set) would change in every clone of the session: what the
    tests and the make targets write in a clone are new files, and a file they change is replaced first (`own_file`).
    """
    destination = tmp_path / "clone"
    subprocess.run(["cp", "-al", str(checkout_files), str(destination)], check=True, timeout=scaled(60))
    return destination


def own_file(path: Path) -> Path:
    """`path` replaced by a copy of its own, so changing it in place changes no other clone."""
    copy = path.with_name(path.name + ".own")
    shutil.copy2(path, copy)
    copy.replace(path)
    return path


def pyproject_older_than_venv(clone: Path) -> None:
    """The clone's pyproject.toml made older than this venv's harness, so no make ever reinstalls the venv from the
    clone (it would point this venv's `harness` at a temporary directory for every later test)."""
    os.utime(own_file(clone / "pyproject.toml"), (0, 0))


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
    pyproject_older_than_venv(clone)  # `-o` is not passed down to a sub-make (`make demo` runs `$(MAKE) setup`)
    return subprocess.run(
        ["make", "--no-print-directory", f"VENV={venv}", "-o", str(harness), *args],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=scaled(timeout),
        env=env,
    )
