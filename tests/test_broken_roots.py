"""Every command over a capture root holding every kind of broken file (issue 35, item 7): no exit 70, no hang.

The commands are found in the typer app (tests/support/everycommand.py), so a command added later is run here
too. The root (tests/support/brokenroot.py) holds, in the current attempt of one run and in older and newer
attempts of others: status.json, manifest.json, metrics.jsonl, container.log, pauses.jsonl, guard.jsonl and
args.json as NUL bytes, cut short, a directory, a FIFO, a sparse file of 2 GiB, JSON nested 200,000 deep (and a
status that lacks fields); attempt directories whose names are not numbers, 10- and 40-digit attempt numbers,
each record (current.jsonl, started.jsonl) broken each way, a current attempt deleted by hand, a hundred empty
attempts. Each command is called in a process of its own, each call under a timeout of its own. Exit 70 is the
harness's own bug: a broken file is one line about its run, never that.

The root is built once for the module and each command is called over a copy of its own. `summarize` is called
once (`summarized_root`), and `report` and `demo` over copies of the root it summarized, so the figures of the
broken runs are drawn once. The commands that run trainers (`run`, `sweep`): tests/test_broken_roots_runs.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.brokencalls import AFTER_SUMMARY, RUNNING, SUMMARIZE, call_over_a_broken_root, no_exit_70_no_hang
from support.everycommand import command_paths, invocations

pytestmark = pytest.mark.integration


def test_every_command_of_the_app_is_called() -> None:
    paths = command_paths()
    for expected in [("status",), ("history",), ("restore",), ("recover",), ("guard", "plot"), ("board",)]:
        assert expected in paths
    for path in paths:  # each has a way to be called: a recipe, or one its parameters give
        assert invocations(path, ["a-run", "cur-guard-nul", "cur-container-nul"], ["a-run", "b-run"]), path


@pytest.mark.parametrize("path", [p for p in command_paths() if p not in RUNNING], ids=lambda path: "-".join(path))
def test_no_command_exits_70_or_hangs_over_a_root_of_broken_files(
    path: tuple[str, ...], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if path == SUMMARIZE:  # called once for the module: its calls are checked here
        no_exit_70_no_hang(request.getfixturevalue("summarized_root"))
        return
    if path in AFTER_SUMMARY:
        source = request.getfixturevalue("summarized_root").root
    else:
        source = request.getfixturevalue("broken_root")
    no_exit_70_no_hang(call_over_a_broken_root(path, source, tmp_path))
