"""Export and report (issue 22, item 11): names that spreadsheet programs read as formulas are prefixed with `'`
(OWASP's CSV-injection guidance), numbers stay numbers; names in report.md are escaped for Markdown and HTML."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.summary.export import csv_cell, export_steps
from harness.summary.report import markdown_text, render_report
from harness.summary.summarize import summarize

HOSTILE = ['=HYPERLINK("http://x","y")', "@SUM(1+1)", "+1+1", "-2+3", "\tx", "\rx"]


def write_run(root: Path, name: str, experiment: str) -> None:
    run = root / name
    run.mkdir(parents=True)
    (run / "status.json").write_text(json.dumps({"run": name, "run_id": "x-0", "state": "succeeded", "exit_code": 0}))
    (run / "manifest.json").write_text(
        json.dumps({"run": name, "run_id": "x-0", "time_scale": 1, "experiment": {"name": experiment, "seed": 1}})
    )
    line = {"step": 0, "complete": True, "metrics": {"rollout/raw_reward": -0.0, "perf/step_time": 9.0}}
    (run / "metrics.jsonl").write_text(json.dumps(line) + "\n")


@pytest.mark.parametrize("name", ["=HYPERLINK(x)", "@SUM(1+1)", "+cmd", "-cmd"])
def test_a_run_named_as_a_formula_is_a_text_cell_in_the_csv(tmp_path, name):
    write_run(tmp_path, name, experiment=name)
    out = tmp_path / "steps.csv"
    export_steps(summarize(tmp_path), out, "csv")
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert rows[0]["run"] == "'" + name and rows[0]["experiment"] == "'" + name
    assert rows[0]["reward"] == "-0.0" and rows[0]["step"] == "0"  # numbers stay numbers


@given(st.text())
def test_no_text_cell_starts_as_a_formula(text):
    cell = csv_cell(text)
    assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r")
    assert cell == text or cell == "'" + text


@pytest.mark.parametrize("value", [-1.5, -3, 0, 2.5])
def test_a_number_is_never_prefixed(value):
    assert csv_cell(value) == value


def test_a_run_named_as_html_is_escaped_in_the_report(tmp_path):
    name = "<img src=x onerror=alert(1)>"
    write_run(tmp_path, name, experiment="e")
    report = render_report(summarize(tmp_path))
    assert "<img" not in report and "&lt;img src=x onerror=alert(1)&gt;" in report


@given(st.text())
def test_markdown_text_holds_no_markup(text):
    shown = markdown_text(text)
    assert "<" not in shown and ">" not in shown and "\n" not in shown and "\r" not in shown
    for mark in "*_`[]|~#":
        assert shown.count(mark) == shown.count("\\" + mark)
