"""The commands that run trainers (`run`, `sweep`) over a capture root of broken files: no exit 70, no hang.

The rest of the commands (`demo` too: it runs over the root `summarize` drew the figures of), the root and how each
is called: tests/test_broken_roots.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.brokencalls import RUNNING, BrokenRoot, call_over_a_broken_root, no_exit_70_no_hang
from support.everycommand import command_paths

pytestmark = pytest.mark.integration


def test_the_running_commands_are_commands_of_the_app() -> None:
    assert RUNNING <= set(command_paths())


@pytest.mark.parametrize("path", sorted(RUNNING), ids=lambda path: "-".join(path))
def test_no_running_command_exits_70_or_hangs_over_a_root_of_broken_files(
    path: tuple[str, ...],
    broken_root: BrokenRoot,
    tmp_path: Path,
) -> None:
    no_exit_70_no_hang(call_over_a_broken_root(path, broken_root, tmp_path))
