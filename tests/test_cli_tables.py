"""Tables fit their terminal: names, states and numbers stay whole at 80 columns; piped, they are plain lines.

The terminal cases run the real command in a real pseudo-terminal of 80
columns; the piped ones read its stdout through a pipe.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
LAB = REPO_ROOT / "tests" / "data" / "captures" / "lab"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BOX = re.compile("[\u2500-\u257f]")  # box-drawing characters

RUNS = {  # run -> (state, steps, exit code)
    "e2b-dapo-filter-s3": ("succeeded", "12/12", "0"),
    "plain-48-with-a-long-name-s2": ("no_metrics", "11/12", "0"),
    "e6a-base": ("interrupted", "3/12", "-"),
    "plain": ("failed", "0/12", "1"),
}


def harness_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR")}
    return {**env, "PYTHONPATH": str(REPO_ROOT), "TERM": "xterm-256color"}


def in_terminal(argv: list[str], columns: int = 80, cwd: Path = REPO_ROOT) -> str:
    """The command's output in a pseudo-terminal `columns` wide, escape sequences removed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *argv],
        cwd=cwd,
        env=harness_env(),
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the command has ended and closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=60) == 0, b"".join(chunks).decode()
    return ANSI.sub("", b"".join(chunks).decode().replace("\r\n", "\n"))


def piped(argv: list[str], cwd: Path = REPO_ROOT) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "harness", *argv], cwd=cwd, env=harness_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def table_captures(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tables") / "capture"
    for run, (state, steps, exit_code) in RUNS.items():
        (root / run).mkdir(parents=True)
        complete, expected = steps.split("/")
        (root / run / "status.json").write_text(
            json.dumps(
                {
                    "run": run,
                    "run_id": f"{run}-1",
                    "state": state,
                    "exit_code": None if exit_code == "-" else int(exit_code),
                    "started_at": "2026-11-30T07:00:00Z",
                    "ended_at": "2026-11-30T07:42:05Z",
                    "steps_expected": int(expected),
                    "steps_complete": int(complete),
                    "error": None,
                }
            )
        )
    return root


def assert_fits(out: str, columns: int = 80) -> None:
    assert max(len(line) for line in out.splitlines()) <= columns, out
    assert "\u2026" not in out, out  # nothing cut with an ellipsis


@pytest.mark.integration
def test_status_at_80_columns_keeps_run_state_and_numbers_whole(table_captures):
    out = in_terminal(["status", "--capture-dir", str(table_captures)])

    assert_fits(out)
    for run, (state, steps, exit_code) in RUNS.items():
        row = next(line for line in out.splitlines() if re.search(rf"\b{re.escape(run)}\b", line))
        assert re.search(rf"\s{state}\s+{steps}\s.*\s{re.escape(exit_code)}(\s|$)", row), (run, out)


@pytest.mark.integration
def test_status_piped_is_plain_with_one_line_per_run(table_captures):
    out = piped(["status", "--capture-dir", str(table_captures)])

    assert not ANSI.search(out) and not BOX.search(out), out
    for run, (state, steps, exit_code) in RUNS.items():
        rows = [line.split() for line in out.splitlines() if line.split()[:1] == [run]]
        assert len(rows) == 1, out
        assert rows[0][1:4] == [state, steps, "0"] and exit_code in rows[0], rows[0]


@pytest.mark.integration
def test_ls_at_80_columns_keeps_names_and_numbers_whole_and_wraps_the_description():
    out = in_terminal(["ls"])

    assert_fits(out)
    for name, over in (("e2b-dapo-filter", "48 for 32"), ("plain-48", "48 for 32"), ("smoke", "48 for 4")):
        row = next(line for line in out.splitlines() if re.search(rf"^\W*{re.escape(name)}\s", line))
        assert over in row, out


@pytest.mark.integration
def test_ls_piped_is_plain_with_one_line_per_experiment():
    out = piped(["ls"])

    assert not ANSI.search(out) and not BOX.search(out), out
    names = sorted(path.stem for path in (REPO_ROOT / "experiments").glob("*.yaml"))
    for name in names:
        assert len([line for line in out.splitlines() if line.split()[:1] == [name]]) == 1, out
    smoke = next(line for line in out.splitlines() if line.startswith("smoke "))
    assert "e2b-dapo-filter" in smoke and "48 for 4" in smoke and "The GPU smoke test" in smoke


@pytest.fixture(scope="module")
def lab_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("lab") / "capture"
    shutil.copytree(LAB, copy)
    return copy


@pytest.mark.integration
def test_summarize_at_80_columns_keeps_states_and_numbers_whole(lab_copy):
    out = in_terminal(["summarize", "--capture-dir", str(lab_copy), "--no-figures"])

    assert_fits("\n".join(line for line in out.splitlines() if not line.startswith("wrote ")))  # paths stay whole
    row = next(line for line in out.splitlines() if re.search(r"^\W*e2b-dapo-filter\s", line))
    assert re.search(r"\bstopped\b", row) and re.search(r"\b4/4\b", row), out


@pytest.mark.integration
def test_summarize_piped_is_plain_with_one_line_per_run(lab_copy):
    out = piped(["summarize", "--capture-dir", str(lab_copy), "--no-figures"])

    assert not ANSI.search(out) and not BOX.search(out), out
    rows: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.split()[:1] in (["e2b-dapo-filter"], ["plain"]):
            rows.setdefault(line.split()[0], line.split())
    assert rows["e2b-dapo-filter"][1:4] == ["stopped", "on", "4/4"], out
    assert rows["plain"][1:4] == ["succeeded", "off", "4/4"], out


def sweep_results() -> list:
    def result(run: str, action: str, state: str | None, reason: str) -> SimpleNamespace:
        status = SimpleNamespace(state=state, steps_complete=12, steps_expected=12) if state else None
        return SimpleNamespace(decision=SimpleNamespace(run=run, action=action, reason=reason), status=status)

    return [
        result(
            "plain-48-s1",
            "skip",
            "succeeded",
            "succeeded at 2026-11-30 07:00 (run id plain-48-s1-4e5f); --force reruns it",
        ),
        result("plain-48-with-a-long-name-s2", "run", "no_metrics", "no capture yet"),
        result("plain-48-s3", "run", None, "not run: the sweep stopped at the first failure (--fail-fast)"),
    ]


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_the_sweep_table_keeps_run_and_state_whole(terminal):
    from io import StringIO

    from rich.console import Console

    from harness.cli.render import print_sweep as _print_sweep

    buffer = StringIO()
    console = Console(file=buffer, width=80, force_terminal=terminal, color_system="standard" if terminal else None)
    _print_sweep(console, sweep_results())
    out = ANSI.sub("", buffer.getvalue())

    if terminal:
        assert_fits(out)
    else:
        assert not BOX.search(out), out
    for run, state in (
        ("plain-48-s1", "succeeded"),
        ("plain-48-with-a-long-name-s2", "no_metrics"),
        ("plain-48-s3", "-"),
    ):
        rows = [line for line in out.splitlines() if re.search(rf"^\W*{re.escape(run)}\s", line)]
        assert len(rows) == 1 and re.search(rf"\s{re.escape(state)}\s", rows[0]), out
    if not terminal:
        assert any("--force reruns it" in line and "plain-48-s1" in line for line in out.splitlines()), out


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_cells_are_markup_or_text_shown_as_written(terminal):
    from io import StringIO

    from rich.console import Console
    from rich.text import Text

    from harness.cli.tables import Column, print_table

    buffer = StringIO()
    console = Console(file=buffer, width=80, force_terminal=terminal, color_system="standard" if terminal else None)
    print_table(
        console,
        [Column("run"), Column("state")],
        [(Text("run-[bold]x"), "[red]failed[/red]"), (Text("plain"), "succeeded")],
    )
    out = ANSI.sub("", buffer.getvalue())

    assert re.search(r"run-\[bold\]x\s+failed", out), out
    assert re.search(r"plain\s+succeeded", out), out
