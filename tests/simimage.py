"""The sim image for Docker tests, built as `make sim-image` builds it (import the fixture into a test module)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.run.simswap import SIM_IMAGE

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def sim_image(python_image: str) -> str:
    """miles-gb10-lab/sim:latest, from this checkout (scripts/sim-image.sh; cached layers are fine)."""
    built = subprocess.run(["bash", "scripts/sim-image.sh"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    if built.returncode != 0:
        pytest.fail(f"scripts/sim-image.sh failed:\n{built.stdout[-2000:]}{built.stderr[-2000:]}", pytrace=False)
    return SIM_IMAGE
