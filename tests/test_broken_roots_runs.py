"""The commands that run trainers (`run`, `sweep`, `demo`) over a capture root of broken files: no exit 70, no hang.

The rest of the commands, the root and how each is called: tests/test_broken_roots.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.brokencalls import RUNNING, call_over_a_broken_root
from support.everycommand import command_paths

pytestmark = pytest.mark.integration


def test_the_running_commands_are_commands_of_the_app() -> None:
    assert RUNNING <= set(command_paths())


@pytest.mark.parametrize("path", sorted(RUNNING), ids=lambda path: "-".join(path))
def test_no_running_command_exits_70_or_hangs_over_a_root_of_broken_files(
    path: tuple[str, ...],
    broken_root_template: Path,
    tmp_path: Path,
) -> None:
    call_over_a_broken_root(path, broken_root_template, tmp_path)
