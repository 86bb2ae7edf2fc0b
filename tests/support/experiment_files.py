"""Experiment files a test writes, the CLI run on them in process, and the one error line a bad file must give.

Fixture (registered in conftest.py): `exp_dir`, an experiments directory that holds `parent` (PARENT).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Optional

import pytest
from typer.testing import CliRunner

from harness.cli import app
from support.messages import messages

PARENT = "name: parent\nsteps: 4\nmiles:\n  args: {rollout-batch-size: 32}\n"
LONGEST_ERROR = 400  # characters in the one error line a bad file gives


def write(directory: Path, name: str, text: str) -> Path:
    """`directory/NAME.yaml` holding `text` (dedented)."""
    path = directory / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


NO_DOCKER = "unix:///nonexistent.sock"  # no engine answers: a dry run's pre-flight finds none, on every machine


def cli(directory: Path, *args: str, env: Optional[dict] = None) -> Any:
    """`harness ARGS --experiments-dir DIRECTORY`, in process, with no Docker engine answering."""
    return CliRunner().invoke(
        app,
        [*args, "--experiments-dir", str(directory)],
        env={"COLUMNS": "200", "DOCKER_HOST": NO_DOCKER, **(env or {})},
    )


def planned(result: Any) -> str:
    """A dry run of an experiment the harness accepts, with no Docker engine answering: its plan printed, and exit 3,
    as the run would be refused there (a refused experiment is exit 2); the plan returned."""
    assert result.exit_code == 3, (result.exit_code, result.output[-2000:])
    assert "dry run: nothing started" in result.stdout and "does not answer" in result.stderr
    return str(result.stdout)


def one_error_line(result: Any) -> str:
    """Exit 2, no traceback, exactly one short `error:` message on stderr (however it was fitted to the width),
    returned whole."""
    assert result.exit_code == 2, (result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output and "internal error" not in result.output
    said = messages(result.stderr)
    assert len(said) == 1, result.stderr[-2000:]
    assert said[0].startswith("error: ")
    assert len(said[0]) <= LONGEST_ERROR, said[0][:500]
    return said[0]


@pytest.fixture
def exp_dir(tmp_path: Path) -> Path:
    """An experiments directory holding `parent`."""
    directory = tmp_path / "experiments"
    directory.mkdir()
    write(directory, "parent", PARENT)
    return directory
