"""The commands that run trainers (`run`, `sweep`, `demo`) over a capture root of broken files: no exit 70, no hang.

The rest of the commands, the root and how each is called: tests/test_broken_roots.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_broken_roots import RUNNING, call_over_a_broken_root, template  # noqa: F401 (the module's fixture)

from support.everycommand import command_paths

pytestmark = pytest.mark.integration


def test_the_running_commands_are_commands_of_the_app() -> None:
    assert RUNNING <= set(command_paths())


@pytest.mark.parametrize("path", sorted(RUNNING), ids=lambda path: "-".join(path))
def test_no_running_command_exits_70_or_hangs_over_a_root_of_broken_files(
    path: tuple[str, ...],
    template: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    call_over_a_broken_root(path, template, tmp_path)
