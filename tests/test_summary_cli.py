"""`harness summarize`, `harness report` and `summarize_miles.py`: the same core, the files where promised."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.summary.seeds import across_seeds_lines
from harness.summary.serialize import load_summary
from support.messages import messages
from support.terminal import too_wide

DATA = Path(__file__).resolve().parent / "data" / "captures"
REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


def copy_case(tmp_path: Path, case: str) -> Path:
    target = tmp_path / case
    shutil.copytree(DATA / case, target)
    return target


def stable(document: dict) -> dict:
    return {k: v for k, v in document.items() if k not in ("generated_at", "harness_version")}


def test_summarize_writes_the_json_and_the_figures_by_default(tmp_path):
    captures = copy_case(tmp_path, "lab")
    result = runner.invoke(app, ["summarize", "--capture-dir", str(captures)])
    assert result.exit_code == 0, result.output
    summary = captures / "summary"
    assert json.loads((summary / "miles-gb10-lab.json").read_text())["schema"] == "miles-gb10-lab/1"
    assert (summary / "rollout-time-e2b-dapo-filter.svg").is_file()
    assert (summary / "reward-e2b-dapo-filter.svg").is_file()
    assert "not evidence of learning" in result.output


def test_summarize_honours_the_environment_and_out(tmp_path, monkeypatch):
    captures = copy_case(tmp_path, "edge")
    out = tmp_path / "elsewhere" / "s.json"
    monkeypatch.setenv("HARNESS_CAPTURE_DIR", str(captures))
    result = runner.invoke(app, ["summarize", "--out", str(out), "--no-figures", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert listed["summary"] == str(out) and listed["figures"] == []
    assert out.is_file()
    assert "skipped no-status" in result.output  # a warning line
    assert "garbled: status.json unreadable" in result.output


def test_missing_capture_dir_is_one_error_line(tmp_path):
    result = runner.invoke(app, ["summarize", "--capture-dir", str(tmp_path / "nope")])
    assert result.exit_code == 5
    assert "no capture directory" in result.output and "Traceback" not in result.output


def test_report_needs_a_summary_and_then_writes_report_md(tmp_path):
    captures = copy_case(tmp_path, "lab")
    result = runner.invoke(app, ["report", "--capture-dir", str(captures)])  # the case holds a stale summary
    assert result.exit_code == 2 and "is not a miles-gb10-lab/1 summary" in result.output
    (captures / "summary" / "miles-gb10-lab.json").unlink()
    result = runner.invoke(app, ["report", "--capture-dir", str(captures)])
    assert result.exit_code == 5 and "run `harness summarize` first" in result.output
    assert runner.invoke(app, ["summarize", "--capture-dir", str(captures), "--no-figures"]).exit_code == 0
    result = runner.invoke(app, ["report", "--capture-dir", str(captures)])
    assert result.exit_code == 0, result.output
    report = (captures / "summary" / "report.md").read_text()
    assert "## e2b-dapo-filter against plain" in report
    assert (captures / "summary" / "reward-e2b-dapo-filter.svg").is_file()


@pytest.mark.integration
def test_the_script_and_the_command_write_the_same_document(tmp_path):
    captures = copy_case(tmp_path, "lab")
    script_out = tmp_path / "script.json"
    done = subprocess.run(
        [
            sys.executable,
            "summarize_miles.py",
            "--capture-dir",
            str(captures),
            "--out",
            str(script_out),
            "--no-figures",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    cli_out = tmp_path / "cli.json"
    assert (
        runner.invoke(
            app, ["summarize", "--capture-dir", str(captures), "--out", str(cli_out), "--no-figures"]
        ).exit_code
        == 0
    )
    assert stable(json.loads(script_out.read_text())) == stable(json.loads(cli_out.read_text()))


@pytest.mark.integration
def test_commands_have_help_and_load_no_heavy_module():
    for name in ("summarize", "report", "export", "plan"):
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0 and "Usage" in result.output
    probe = (
        "import sys, harness.cli.summary, harness.cli; "
        "heavy = [m for m in ('pandas', 'matplotlib', 'numpy', 'pyarrow') if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.integration
def test_a_summary_that_cannot_be_written_is_one_error_line(tmp_path):
    captures = copy_case(tmp_path, "lab")
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    result = runner.invoke(app, ["summarize", "--capture-dir", str(captures), "--out", str(blocked / "s.json")])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert result.output.startswith("error: ") and f"writing {blocked / 's.json'}\n" in result.output
    done = subprocess.run(
        [sys.executable, "summarize_miles.py", "--capture-dir", str(captures), "--out", str(blocked / "s.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and done.stderr.count("\n") == 1 and f"writing {blocked / 's.json'}" in done.stderr
    result = runner.invoke(
        app, ["export", "--capture-dir", str(captures), "--format", "csv", "--out", str(blocked / "t.csv")]
    )
    assert result.exit_code != 0 and f"writing {blocked / 't.csv'}" in result.output


def test_summarize_says_the_across_seed_verdicts_once_and_marks_a_simulated_capture(tmp_path):
    """The finding: after a three-seed sweep the summary gave three separate verdicts and nothing across seeds."""
    from support.seedcaptures import write_three_conditions

    captures = write_three_conditions(tmp_path / "sim", simulated=True, time_scale=0.01)
    argv = ["summarize", "--capture-dir", str(captures), "--no-figures", "--effect", "0.03"]
    result = runner.invoke(app, argv, env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()

    assert lines[0] == "SIMULATED: every run ran on the simulated trainer, not on a GB10"
    assert too_wide(result.stdout, 100) == []  # was: each verdict cropped at the 100th column
    said = messages(result.stdout)
    across = [message for message in said if message.startswith("across seeds, ")]
    assert [line.split(":")[0] for line in across] == [
        "across seeds, e2b-dapo-filter against plain",
        "across seeds, e2b-dapo-filter against plain + plain-48 (pooled)",
    ]
    assert "Across 4 seeds of e2b-dapo-filter and 3 of plain" in across[0] and "bootstrap interval" in across[0]
    document = load_summary(captures / "summary" / "miles-gb10-lab.json")
    assert across == across_seeds_lines(document.comparisons)  # each whole: wrapped, never cropped
    for comparison in document.comparisons:
        assert f"{comparison.run} against {comparison.baseline}: {comparison.reward.verdict}" in said
    document = json.loads((captures / "summary" / "miles-gb10-lab.json").read_text())
    assert document["simulated"] is True and document["conditions"]["plain"]["simulated"] is True
    assert all(run["simulated"] for run in document["runs"].values())
    assert document["comparisons"][0]["across_seeds"][0]["effect"] == 0.03
    listed = runner.invoke(app, ["summarize", "--capture-dir", str(captures), "--no-figures", "--json"])
    assert json.loads(listed.stdout)["conditions"] == ["e2b-dapo-filter", "plain", "plain-48"]


def test_summarize_refuses_an_effect_that_is_not_a_difference(tmp_path):
    captures = copy_case(tmp_path, "lab")
    out = tmp_path / "s.json"
    result = runner.invoke(app, ["summarize", "--capture-dir", str(captures), "--effect", "-0.1", "--out", str(out)])
    assert result.exit_code != 0 and result.output == "error: --effect must be a difference above 0, not -0.1\n"
    assert not out.exists()


def test_report_reads_a_summary_written_before_conditions_existed(tmp_path):
    """Old documents (no conditions, no across-seed blocks, no simulated flags) are still read by `harness report`."""
    # The lab's summary as the harness wrote it before conditions: kept as it was, never regenerated.
    old = REPO / "tests" / "data" / "old-summaries" / "summary-lab-before-conditions.json"
    assert "conditions" not in json.loads(old.read_text())
    path = tmp_path / "summary" / "miles-gb10-lab.json"
    path.parent.mkdir()
    shutil.copyfile(old, path)
    result = runner.invoke(app, ["report", "--summary", str(path)])
    assert result.exit_code == 0, result.output
    report = (path.parent / "report.md").read_text()
    assert "## e2b-dapo-filter against plain" in report and "## Across seeds" not in report
