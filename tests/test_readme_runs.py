"""The README's examples run as printed: its blocks marked runnable on the simulator, in order, on a fresh clone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.clones import pyproject_older_than_venv

REPO = Path(__file__).resolve().parent.parent
MARK = "<!-- runnable on the simulator -->"


def runnable_blocks(readme: str) -> list[str]:
    """Each indented command block that follows the mark, as the shell lines it holds."""
    blocks = []
    for part in readme.split(MARK)[1:]:
        block = re.match(r"\s*\n((?:    .*\n|\s*\n)+)", part)
        assert block is not None, f"a {MARK} with no indented block after it"
        blocks.append("\n".join(line[4:] for line in block.group(1).splitlines() if line.strip()))
    return blocks


def test_the_readme_marks_blocks_and_each_names_real_commands() -> None:
    blocks = runnable_blocks((REPO / "README.md").read_text())
    assert len(blocks) >= 2
    assert any("NAME=" in block and "--set steps=4" in block for block in blocks)


@pytest.mark.integration
def test_the_readme_blocks_run_as_printed_on_a_fresh_clone(clone: Path, tmp_path: Path) -> None:
    venv = Path(sys.prefix)
    if not (venv / "bin" / "harness").exists():
        pytest.skip(f"the tests do not run from a venv with harness installed ({sys.prefix}): `make setup`")
    (clone / ".venv").symlink_to(venv)  # the README's .venv, as `make setup` would make it
    pyproject_older_than_venv(clone)
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("HARNESS_CAPTURE_DIR", "HARNESS_EXPERIMENT", "MAKEFLAGS", "MAKELEVEL", "VIRTUAL_ENV")
    }
    env.update(HARNESS_LOCK_DIR=str(tmp_path / "locks"), HARNESS_PROCESS_DIR=str(tmp_path / "processes"))
    for number, block in enumerate(runnable_blocks((clone / "README.md").read_text()), start=1):
        done = subprocess.run(
            ["bash", "-e", "-c", block], cwd=clone, capture_output=True, text=True, timeout=600, env=env
        )
        assert done.returncode == 0, (
            f"README block {number} failed:\n{block}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    assert (clone / "capture" / "sim" / "plain-4-steps").is_symlink()  # the variant, beside the demo's runs


def test_the_readme_s_exit_code_table_has_every_exit_code_and_no_other() -> None:
    from harness.errors import ExitCode

    readme = (REPO / "README.md").read_text()
    start = readme.index("### Exit codes")
    section = readme[start : readme.index("\n#", start)]
    listed = {int(match) for match in re.findall(r"^\| (\d+) \|", section, flags=re.M)}
    assert listed == {int(code) for code in ExitCode}
