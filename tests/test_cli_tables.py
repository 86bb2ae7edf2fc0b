"""Tables fit their terminal: names, states and numbers stay whole at 80 columns; piped, they are plain lines.

The terminal cases run the real command in a real pseudo-terminal of 80
columns; the piped ones read its stdout through a pipe.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.capture import RunState, RunStatus
from harness.run.decide import Decision, decide
from support.terminal import ANSI, BOX, in_terminal, piped

REPO_ROOT = Path(__file__).resolve().parent.parent
LAB = REPO_ROOT / "tests" / "data" / "captures" / "lab"

RUNS = {  # run -> (state, steps, exit code)
    "e2b-dapo-filter-s3": ("succeeded", "12/12", "0"),
    "plain-48-with-a-long-name-s2": ("no_metrics", "11/12", "0"),
    "e6a-base": ("interrupted", "3/12", "-"),
    "plain": ("failed", "0/12", "1"),
}


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
    # A single word longer than the width (a path under a long temporary directory) is kept whole, on its own line.
    too_wide = [line for line in out.splitlines() if len(line) > columns and len(line.split()) > 1]
    assert too_wide == [], out
    assert "\u2026" not in out, out  # nothing cut with an ellipsis


@pytest.mark.integration
def test_status_at_80_columns_keeps_run_state_and_numbers_whole(table_captures):
    out = in_terminal(["status", "--capture-dir", str(table_captures)])

    assert_fits(out)
    for run, (state, steps, _) in RUNS.items():  # run, state, steps and duration stay; the rest go first
        row = next(line for line in out.splitlines() if re.search(rf"\b{re.escape(run)}\b", line))
        assert re.search(rf"\s{state}\s+{steps}\s.*\s42:05(\s|$)", row), (run, out)
    left_out = next(line for line in out.splitlines() if line.startswith("(left out to fit 80 columns: "))
    assert "duration" not in left_out and "steps" not in left_out, out


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
        assert len([line for line in out.splitlines() if line.startswith(f"{name} ")]) == 1, out
    assert_fits(out, 100)  # piped: 100 columns, a long description going on over indented lines
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("smoke "))
    rest = [line for line in lines[first + 1 :]]
    row = " ".join(
        [
            lines[first],
            *[
                line.strip()
                for line in rest[: next((i for i, line in enumerate(rest) if not line.startswith(" ")), len(rest))]
            ],
        ]
    )
    assert (
        "e2b-dapo-filter" in lines[first]
        and "48 for 4" in lines[first]
        and "The GPU smoke test" in " ".join(row.split())
    )


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


def status_of(state: str, error: str) -> RunStatus:
    return RunStatus("r", "r-1", RunState(state), 1, "2026-11-30T07:00:00Z", "2026-11-30T07:01:00Z", 12, 0, error)


def sweep_results() -> list:
    def result(run: str, action: str, state: str | None, reason: str) -> SimpleNamespace:
        status = (
            SimpleNamespace(
                state=state, steps_complete=12, steps_expected=12, attempt=1, exit_code=0, error="exited 0 early"
            )
            if state
            else None
        )
        return SimpleNamespace(decision=Decision(run, action, reason), status=status)

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


def test_a_run_of_the_sweep_that_ran_says_how_it_ended_never_why_it_was_started():
    """Was: `interrupted 2/12 no capture yet` and `succeeded 12/12 no capture yet` in the sweep's final table."""
    from harness.cli.render import sweep_reason

    skipped, ran, never = sweep_results()

    assert sweep_reason(ran) == "exited 0 early"  # no_metrics: its own error, not "no capture yet"
    assert sweep_reason(skipped) == "succeeded at 2026-11-30 07:00 (run id plain-48-s1-4e5f); --force reruns it"
    assert sweep_reason(never) == "not started"
    done = SimpleNamespace(state="succeeded", attempt=3, error=None, exit_code=0)
    succeeded = SimpleNamespace(decision=Decision("r", "run", "no capture yet"), status=done)
    assert sweep_reason(succeeded) == "ran as attempt 3"
    # a reason about the earlier attempt stays true after the run, and says why it ran
    retried = decide("r", "r-1", status_of("failed", "out of memory"), mode="retry")
    assert sweep_reason(SimpleNamespace(decision=retried, status=done)) == (
        "ran as attempt 3; --retry reruns it: it was failed (out of memory)"
    )
    never = decide("r", "r-1", status_of("not_started", "no image"), mode="cached")
    assert sweep_reason(SimpleNamespace(decision=never, status=done)) == (
        "ran as attempt 3; its last attempt never started (no image)"
    )


@pytest.mark.parametrize("terminal", [True, False], ids=["terminal", "piped"])
def test_cells_are_shown_as_written_and_styled_only_by_text(terminal):
    from io import StringIO

    from rich.console import Console
    from rich.text import Text

    from harness.cli.tables import Column, print_table

    buffer = StringIO()
    console = Console(file=buffer, width=80, force_terminal=terminal, color_system="standard" if terminal else None)
    print_table(
        console,
        [Column("run"), Column("state")],
        [(Text("run-[bold]x"), Text("failed", style="red")), ("[red]plain", "succeeded")],
    )
    raw = buffer.getvalue()
    out = ANSI.sub("", raw)

    assert re.search(r"run-\[bold\]x\s+failed", out), out
    assert re.search(r"\[red\]plain\s+succeeded", out), out  # a string is never markup
    assert ("\x1b[31mfailed" in raw) == terminal  # style is a Text's


_ASCII_WORD = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
_ASCII_TEXT = st.lists(_ASCII_WORD, max_size=6).map(" ".join)


@given(
    rows=st.lists(st.tuples(_ASCII_WORD, _ASCII_TEXT, _ASCII_WORD), min_size=1, max_size=6),
    width=st.integers(min_value=20, max_value=90),
)
def test_a_printable_ascii_table_is_laid_out_as_the_cell_counting_path_lays_it_out(rows, width):
    """Printable ASCII is measured by its length (the fast path); it must give exactly the widths and lines that
    counting each cell's terminal columns (rich's `cell_len`, never the fast path) gives."""
    from io import StringIO

    from rich.cells import cell_len
    from rich.console import Console

    from harness.cli.tables import Column, _fit, _measure, _print_plain

    columns = [Column("run"), Column("notes", wrap=True), Column("value", "right")]
    assert _measure([c.header for c in columns], rows) is len

    def laid_out(measure):
        buffer = StringIO()
        widths = _fit(columns, rows, width, measure)
        console = Console(file=buffer, width=200, force_terminal=False, color_system=None)
        _print_plain(console, columns, rows, None, widths, measure)
        return widths, buffer.getvalue()

    assert laid_out(len) == laid_out(cell_len)  # rich's count of terminal columns, the slow path all through


def test_a_table_with_a_wide_character_is_measured_by_its_cells():
    from harness.cli.tables import _cells, _measure

    assert _measure(["run"], [["plain", "\u6771\u4eac"]]) is _cells  # two characters, four columns
    assert _measure(["run"], [["plain", "tab\there"]]) is _cells
