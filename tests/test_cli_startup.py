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


@pytest.mark.parametrize(
    "entry",
    [
        "from harness.cli import main; main()",
        "import runpy, sys; sys.argv[0] = 'summarize_miles.py'; runpy.run_path('summarize_miles.py', run_name='__main__')",
    ],
)
def test_the_commands_end_with_what_they_hold_frozen(entry: str) -> None:
    """As a command ends, what the process holds is frozen, so that Python's last collection at exit does not walk
    it (after a summary of 10,000 runs it took a third of a second)."""
    probe = f"import atexit, gc\natexit.register(lambda: print('FROZEN', gc.get_freeze_count() > 0))\n{entry}"
    done = subprocess.run(
        [sys.executable, "-c", probe, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "FROZEN True" in done.stdout, done.stdout[-400:]
