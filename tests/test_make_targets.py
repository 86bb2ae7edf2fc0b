"""`make data` and `make image` where what they need is missing: one line saying what to do, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[1]


def make(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """`make ARGS` with this venv (its `harness` taken as up to date: no pip install of the harness)."""
    venv = Path(sys.prefix)
    harness = venv / "bin" / "harness"
    if not harness.exists():
        pytest.skip(f"the tests do not run from a venv with harness installed ({sys.prefix}): `make setup`")
    clean = {name: value for name, value in os.environ.items() if name not in ("MAKEFLAGS", "MAKELEVEL", "MILES_BASE")}
    return subprocess.run(
        ["make", "--no-print-directory", f"VENV={venv}", "-o", str(harness), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**clean, **env},
    )


def offline(tmp_path: Path) -> dict[str, str]:
    """No hub (offline mode, an empty cache) and no package index: what a machine without internet sees."""
    return {
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "PIP_NO_INDEX": "1",
        "MILES_LAB_DATA": str(tmp_path / "data"),
    }


def test_make_data_offline_says_in_one_line_that_it_needs_internet_or_a_prepared_directory(tmp_path: Path) -> None:
    done = make("data", env=offline(tmp_path))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("make: ***"), done.stderr  # ours, then make's own
    assert lines[0].startswith("make data: ") and "needs internet" in lines[0] and "MILES_LAB_DATA" in lines[0]
    assert "Traceback" not in done.stderr + done.stdout


def test_make_data_with_a_prepared_directory_needs_no_internet(tmp_path: Path) -> None:
    env = offline(tmp_path)
    data = Path(env["MILES_LAB_DATA"])
    (data / "models" / "Qwen3-0.6B").mkdir(parents=True)
    (data / "models" / "Qwen3-0.6B" / "config.json").write_text("{}")
    (data / "gsm8k").mkdir()
    (data / "gsm8k" / "train.parquet").write_bytes(b"PAR1")
    done = make("data", env=env)
    assert done.returncode == 0, done.stderr
    assert f"data ready in {data}/" in done.stdout


@pytest.mark.docker
def test_make_image_without_miles_base_says_what_it_is_and_gives_an_example() -> None:
    default = next(
        line.split("=", 1)[1]
        for line in (REPO_ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith("ARG MILES_BASE=")
    )
    if subprocess.run(["docker", "image", "inspect", default], capture_output=True).returncode == 0:
        pytest.skip(f"the default base {default} is on this engine: make image would build")
    done = make("image", env={})
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("make: ***"), done.stderr
    assert lines[0].startswith("make image: set MILES_BASE, the Miles image built for your GPU")
    assert "e.g. make image MILES_BASE=" in lines[0]
    assert "docker build" not in done.stdout  # checked before Docker was asked to build anything
