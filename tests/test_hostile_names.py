"""Names and text shown to people (issue 22, item 10): one rule for every string that came from a file, a
directory name or the trainer: its control characters are escaped and rich markup is never read in it."""

from __future__ import annotations

import io
import json
import signal
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.messages import outside, outside_renderable, shown
from harness.cli.progress import PlainReporter, RichReporter
from harness.cli.tables import Column, print_table
from harness.run.context import StopControl
from harness.run.lifecycle import stop_on_signals
from support.properties import examples

runner = CliRunner()
ESC = "\x1b[2J\x1b[31mred"
MARKUP = "[bold red]x"
CONTROL = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))]


def escaped(text: str) -> str:
    """`text` as a person must see it, written out here rather than taken from the harness: each control character
    as Python writes it in a string literal (`\\x1b`, `\\n`), every other character as it is."""
    return "".join(repr(c)[1:-1] if c in CONTROL else c for c in text)


def rendered(thing: object, *, terminal: bool, width: int = 200) -> str:
    """What a console of the harness writes for `thing`, escape sequences kept."""
    from harness.cli.app import stdout

    console = stdout()
    console.file = io.StringIO()
    console._force_terminal = terminal
    console.width = width
    console.print(thing)
    return console.file.getvalue()


def write_run(root: Path, name: str) -> None:
    run = root / name
    run.mkdir(parents=True)
    (run / "status.json").write_text(json.dumps({"run": name, "run_id": "x-0", "state": "succeeded", "exit_code": 0}))
    (run / "manifest.json").write_text(
        json.dumps({"run": name, "run_id": "x-0", "time_scale": 1, "experiment": {"name": name, "seed": 1}})
    )
    line = {"step": 0, "complete": True, "metrics": {"rollout/raw_reward": 0.5, "perf/step_time": 9.0}}
    (run / "metrics.jsonl").write_text(json.dumps(line) + "\n")


def test_ls_escapes_a_description_with_escape_sequences(tmp_path):
    directory = tmp_path / "experiments"
    directory.mkdir()
    (directory / "e.yaml").write_text('name: e\nsteps: 2\ndescription: "\\e[2J\\e[31mwiped"\n')
    result = runner.invoke(app, ["ls", "--experiments-dir", str(directory)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\\x1b[2J\\x1b[31mwiped" in result.output


@pytest.mark.integration  # a process in a pseudo-terminal
def test_ls_on_a_terminal_escapes_it_too(tmp_path):
    from support.terminal import in_terminal

    directory = tmp_path / "experiments"
    directory.mkdir()
    (directory / "e.yaml").write_text('name: e\nsteps: 2\ndescription: "\\e]0;pwned\\a\\e[31mwiped"\n')
    # in_terminal takes rich's own colours out, not ours: a raw sequence from the file would leave "\x1b]0;" behind
    output = in_terminal(["ls", "--experiments-dir", str(directory)], columns=120)
    assert "\\x1b]0;pwned" in output and "\\x1b[31mwiped" in output


def test_summarize_shows_a_run_named_as_markup_as_written(tmp_path):
    write_run(tmp_path, MARKUP)
    result = runner.invoke(app, ["summarize", "--capture-dir", str(tmp_path), "--no-figures"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert MARKUP in result.stdout


@pytest.mark.parametrize("terminal", [True, False])
def test_a_table_cell_is_never_markup_and_never_a_control_sequence(terminal):
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=120, color_system=None)
    print_table(console, [Column("run"), Column("reason", wrap=True)], [(MARKUP, ESC), (Text(ESC), "[/]")])
    text = out.getvalue()
    assert MARKUP in text and "[/]" in text and "\x1b" not in text and "\\x1b[2J\\x1b[31mred" in text


def test_a_double_ctrl_c_says_so_as_plain_text():
    stream = io.StringIO()
    reporter = PlainReporter()
    reporter.stream = stream
    stop = StopControl()
    with stop_on_signals(stop, reporter.note), stop.acted_on():  # a run's trainer under way
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
    said = stream.getvalue()
    assert "second Ctrl-C: killing now" in said and "[" not in said and stop.kill_requested


def test_the_live_reporter_prints_notes_from_outside_as_written():
    out = io.StringIO()
    reporter = RichReporter(Console(file=out, force_terminal=True, width=100, color_system="standard"))
    reporter.note(f"[bold]run[/bold]: {ESC}")
    assert "[bold]run[/bold]" in out.getvalue() and "\\x1b[2J" in out.getvalue() and "\x1b[2J" not in out.getvalue()


@settings(max_examples=examples(300), deadline=None)
@example("[[[[[" + "\x1f" * 49)  # one word longer than the width: kept whole, never cut at the edge
@given(st.text(alphabet=st.sampled_from([*CONTROL, "[", "]", "/", "b", "o", "l", "d", " ", "\\", "é", "x"])))
def test_any_name_is_shown_as_written_with_its_controls_escaped(name):
    for terminal in (True, False):
        text = rendered(name, terminal=terminal)
        assert not any(c in text for c in CONTROL if c != "\n") and text.endswith("\n")
        assert "".join(text.split()) == "".join(escaped(name).split())  # as written, wrapped at spaces at most
    assert shown(name) == escaped(name)
    assert outside(name).plain == escaped(name) and not outside(name).spans  # never read as markup
    # rich's Text drops a few controls itself (\r, \a...); what it keeps is escaped
    assert outside_renderable(Text(name)).plain == escaped(Text(name).plain)


NAMES = st.lists(st.sampled_from([*CONTROL, "[", "]", "/", "=", "bold", "red", " ", "\\", "é", "x", "-"])).map("".join)


@settings(max_examples=examples(150), deadline=None)
@example([(" \x00", "")], True)  # a name's leading space counts in its column's width
@given(st.lists(st.tuples(NAMES, NAMES), min_size=1, max_size=4), st.booleans())
def test_any_names_in_a_table_are_shown_as_written(rows, terminal):
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=100, color_system=None)
    print_table(console, [Column("run"), Column("reason", wrap=True)], rows)
    text = out.getvalue()
    assert not any(c in text for c in CONTROL if c != "\n")
    flat = "".join(text.split())
    for run, _reason in rows:
        assert "".join(shown(run).split()) in flat  # a run's cell is never wrapped, never markup


@pytest.mark.integration  # a process in a pseudo-terminal
def test_logs_on_a_terminal_escape_the_trainer_s_control_characters_and_piped_keep_them(tmp_path):
    from support.terminal import in_terminal

    write_run(tmp_path, "r")
    (tmp_path / "r" / "container.log").write_text("2026-11-29T12:00:00.000000Z \x1b]0;pwned\x07\x1b[2Jwiped\n")
    output = in_terminal(["logs", "r", "--capture-dir", str(tmp_path)], columns=120)
    assert "\\x1b]0;pwned\\x07\\x1b[2Jwiped" in output
    piped = runner.invoke(app, ["logs", "r", "--capture-dir", str(tmp_path)])
    assert piped.exit_code == 0 and piped.stdout == "\x1b]0;pwned\x07\x1b[2Jwiped\n"  # a copy of the file, as written
