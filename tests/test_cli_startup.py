"""`harness --help`, `ls` and `--dry-run` must not import Docker, pandas, matplotlib, NVML, numpy, scipy,
TensorBoard or W&B."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
HEAVY = (
    "docker",
    "pandas",
    "matplotlib",
    "pynvml",
    "numpy",
    "scipy",
    "tensorboardX",
    "tensorboard",
    "wandb",
    "tbparse",
)

PROBE = """
import sys
from harness.cli import app

try:
    app({args!r}, standalone_mode=False)
except SystemExit:
    pass
heavy = [m for m in {heavy!r} if m in sys.modules]
print("HEAVY:" + ",".join(heavy))
"""


@pytest.mark.parametrize(
    "args",
    [["--help"], ["ls"], ["run", "e2b-dapo-filter", "--dry-run"], ["run", "plain", "--dry-run", "--json"]],
    ids=["help", "ls", "dry-run", "dry-run-json"],
)
def test_light_commands_import_nothing_heavy(args: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "HEAVY:", out.stdout[-500:]
