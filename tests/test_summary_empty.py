"""Nothing to summarize is an error that says where it looked; runs without a compare block are not nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app

DATA = Path(__file__).resolve().parent / "data" / "captures"
REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


def one_line_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in output, output
    return lines[0]


def test_summarize_an_empty_root_fails_naming_it_and_writes_no_json(tmp_path):
    empty = tmp_path / "gpu"
    empty.mkdir()
    result = runner.invoke(app, ["summarize", "--capture-dir", str(empty)])
    assert result.exit_code == 5
    line = one_line_error(result.output)
    assert f"no captures found under {empty}" in line and "--sim" not in line  # a directory chosen: no hint
    assert not (empty / "summary").exists()


def test_summarize_the_empty_real_root_points_at_the_simulator_s_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_CAPTURE_DIR", raising=False)
    (tmp_path / "capture" / "gpu").mkdir(parents=True)
    shutil.copytree(DATA / "lab" / "plain", tmp_path / "capture" / "sim" / "plain")
    line = one_line_error(runner.invoke(app, ["summarize"]).output)
    assert "no captures found under capture/gpu" in line and line.endswith("capture/sim has 1 simulated run: add --sim")


def test_summarize_sim_with_nothing_there_names_capture_sim_without_the_hint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_CAPTURE_DIR", raising=False)
    (tmp_path / "capture" / "sim").mkdir(parents=True)
    result = runner.invoke(app, ["summarize", "--sim"])
    assert result.exit_code == 5
    line = one_line_error(result.output)
    assert "no captures found under capture/sim" in line and "did you mean" not in line


def test_report_of_a_summary_without_runs_fails(tmp_path):
    summary = tmp_path / "summary" / "miles-gb10-lab.json"
    summary.parent.mkdir()
    summary.write_text(
        json.dumps(
            {
                "schema": "miles-gb10-lab/1",
                "generated_at": "2026-11-30T00:00:00Z",
                "harness_version": "0",
                "runs": {},
                "comparisons": [],
            }
        )
    )
    result = runner.invoke(app, ["report", "--capture-dir", str(tmp_path)])
    assert result.exit_code == 5
    assert f"no captures found in {summary}" in one_line_error(result.output)
    assert not (tmp_path / "summary" / "report.md").exists()


def test_runs_without_compare_blocks_summarize_and_report_with_exit_0(tmp_path):
    captures = tmp_path / "gpu"
    captures.mkdir()
    shutil.copytree(DATA / "lab" / "plain", captures / "plain")
    assert runner.invoke(app, ["summarize", "--capture-dir", str(captures), "--no-figures"]).exit_code == 0
    result = runner.invoke(app, ["report", "--capture-dir", str(captures)])
    assert result.exit_code == 0, result.output
    assert "No run has a `compare` block" in (captures / "summary" / "report.md").read_text()


def test_export_with_no_runs_is_one_error_line_naming_the_root(tmp_path):
    empty = tmp_path / "gpu"
    empty.mkdir()
    result = runner.invoke(app, ["export", "--capture-dir", str(empty), "--format", "csv"])
    assert result.exit_code == 5
    assert f"nothing to export: no captures found under {empty}" in one_line_error(result.output)
    assert not (empty / "summary").exists()


def test_export_sim_reads_capture_sim(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_CAPTURE_DIR", raising=False)
    shutil.copytree(DATA / "lab" / "plain", tmp_path / "capture" / "sim" / "plain")
    result = runner.invoke(app, ["export", "--sim", "--format", "csv"])
    assert result.exit_code == 0, result.output
    table = (tmp_path / "capture" / "sim" / "summary" / "steps.csv").read_text().splitlines()
    assert len(table) == 1 + 4 and table[1].startswith("plain,plain,1,False,0,")  # its manifest: a real run
    assert "capture/sim has 1 simulated run: add --sim" in runner.invoke(app, ["export", "--format", "csv"]).output


@pytest.mark.integration
def test_the_script_prints_what_the_command_prints(tmp_path):
    captures = tmp_path / "lab"
    shutil.copytree(DATA / "lab", captures)
    shutil.rmtree(captures / "summary")
    args = ["--capture-dir", str(captures), "--no-figures"]
    script = subprocess.run(
        [sys.executable, "summarize_miles.py", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    command = subprocess.run(
        [sys.executable, "-m", "harness", "summarize", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert script.returncode == command.returncode == 0, script.stderr + command.stderr
    assert script.stdout == command.stdout and script.stderr == command.stderr
    assert (
        "e2b-dapo-filter" in script.stdout and f"wrote {captures / 'summary' / 'miles-gb10-lab.json'}" in script.stdout
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    script = subprocess.run(
        [sys.executable, "summarize_miles.py", "--capture-dir", str(empty)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert script.returncode == 5 and f"no captures found under {empty}" in script.stderr
