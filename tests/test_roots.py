"""Reads and writes only inside the harness's roots: the capture root and the experiments directory.

A link that stays inside a root is followed (a run's link to its current
attempt, an experiment file linked to another in the directory); one that
leads out is refused, or skipped with one line, and nothing is read or
written through it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.capture import RunAttempts, find_capture, find_runs, read_capture
from harness.capture.files import write_json_atomic
from harness.cli import app
from harness.errors import HarnessError
from support.experiment_files import cli, one_error_line, write

DATA = Path(__file__).resolve().parent / "data" / "captures"
runner = CliRunner()


def _run_capture(directory: Path, run: str) -> None:
    directory.mkdir(parents=True)
    write_json_atomic(directory / "status.json", {"run": run, "run_id": f"{run}-1", "state": "succeeded"})
    write_json_atomic(directory / "manifest.json", {"run": run, "experiment": {"name": run, "steps": 1}})


@pytest.fixture
def root_and_outside(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "captures", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    return root, outside


def _everything_under(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


# --- writing a capture ----------------------------------------------------------------------------


def test_a_run_link_leaving_the_root_is_refused_and_nothing_is_written_there(root_and_outside):
    root, outside = root_and_outside
    (root / "r").symlink_to(outside)
    with pytest.raises(HarnessError, match="not to one of its attempts") as raised:
        RunAttempts(root / "r").new()
    assert "\n" not in raised.value.message
    assert _everything_under(outside) == []
    assert os.readlink(root / "r") == str(outside)  # the link is left as it was, for its owner to look at


def test_an_attempts_directory_leading_out_of_the_root_is_refused(root_and_outside):
    root, outside = root_and_outside
    (root / ".attempts").symlink_to(outside)
    with pytest.raises(HarnessError, match="leads out of"):
        RunAttempts(root / "r").new()
    assert _everything_under(outside) == []


def test_one_run_s_attempts_leading_out_of_the_root_are_refused(root_and_outside):
    root, outside = root_and_outside
    (root / ".attempts").mkdir()
    (root / ".attempts" / "r").symlink_to(outside)
    with pytest.raises(HarnessError, match="leads out of"):
        RunAttempts(root / "r").new()
    assert _everything_under(outside) == []


def test_the_capture_s_own_writes_stay_in_the_root(root_and_outside):
    from harness.capture import Capture
    from harness.fs.files import RefusedPath

    root, outside = root_and_outside
    attempt = RunAttempts(root / "r").new()
    capture = Capture(attempt.directory, "r")
    (attempt.directory / "metrics.jsonl").symlink_to(outside / "metrics.jsonl")
    from harness.capture.writer import CaptureWriter

    with pytest.raises(RefusedPath):
        CaptureWriter(capture).jsonl(capture.metrics_path, {"step": 0})
    assert _everything_under(outside) == []


def test_a_link_to_an_attempt_is_inside_the_root_and_followed(root_and_outside):
    root, _ = root_and_outside
    runs = RunAttempts(root / "r")
    attempt = runs.new()
    _run_capture(attempt.directory / "x", "r")  # any content: the attempt directory itself is the capture
    write_json_atomic(attempt.directory / "status.json", {"run": "r", "run_id": "r-1", "state": "succeeded"})
    runs.make_current(attempt, by="test", why="test")
    found, skipped = find_runs(root)
    assert [p.name for p in found] == ["r"] and skipped == []
    assert find_capture(root, "r").directory == root / "r"


# --- reading captures ------------------------------------------------------------------------------


def test_a_run_directory_linked_out_of_the_root_is_skipped_with_its_reason(root_and_outside):
    root, outside = root_and_outside
    _run_capture(outside / "r", "r")
    (root / "r").symlink_to(outside / "r")
    _run_capture(root / "ok", "ok")
    runs, skipped = find_runs(root)
    assert [p.name for p in runs] == ["ok"]
    assert [s.directory for s in skipped] == ["r"] and "not read" in skipped[0].reason


def test_an_attempt_link_whose_attempts_lead_out_of_the_root_is_skipped(root_and_outside):
    root, outside = root_and_outside
    _run_capture(outside / "r" / "1", "r")
    (root / ".attempts").symlink_to(outside)
    (root / "r").symlink_to(Path(".attempts") / "r" / "1")
    runs, skipped = find_runs(root)
    assert runs == [] and [s.directory for s in skipped] == ["r"]
    assert "leads out of the capture root" in skipped[0].reason
    with pytest.raises(HarnessError, match="leads out of"):
        find_capture(root, "r")


def test_summarize_skips_a_linked_run_with_one_line(tmp_path):
    captures = tmp_path / "lab"
    shutil.copytree(DATA / "lab", captures)
    outside = tmp_path / "outside"
    shutil.copytree(DATA / "lab" / "plain", outside / "plain-copy")
    (captures / "intruder").symlink_to(outside / "plain-copy")
    result = runner.invoke(app, ["summarize", "--capture-dir", str(captures), "--no-figures", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert "intruder" not in listed["runs"]
    assert [s["directory"] for s in listed["skipped"] if s["directory"] == "intruder"] == ["intruder"]
    assert [line for line in result.stderr.splitlines() if "intruder" in line]  # said, in one line


def test_a_capture_file_that_is_a_link_is_not_read(root_and_outside):
    root, outside = root_and_outside
    _run_capture(root / "r", "r")
    secret = outside / "secret.json"
    secret.write_text(json.dumps({"run": "r", "run_id": "r-1", "state": "succeeded", "steps_expected": 99}))
    (root / "r" / "status.json").unlink()
    (root / "r" / "status.json").symlink_to(secret)
    capture = read_capture(root / "r")
    assert capture.status is None
    assert any("link" in note for note in capture.notes)


# --- experiment files ------------------------------------------------------------------------------

EXPERIMENT = "name: {name}\nsteps: 1\nengine: process\ncommand: [python3]\n"


def test_an_experiment_file_linked_out_of_the_directory_is_refused(tmp_path):
    experiments, outside = tmp_path / "experiments", tmp_path / "outside"
    experiments.mkdir()
    outside.mkdir()
    write(outside, "leak", EXPERIMENT.format(name="leak"))
    (experiments / "leak.yaml").symlink_to(outside / "leak.yaml")
    result = cli(experiments, "show", "leak")
    assert result.exit_code == 2
    assert "leads out of" in one_error_line(result)


def test_extends_through_a_link_out_of_the_directory_is_refused(tmp_path):
    experiments, outside = tmp_path / "experiments", tmp_path / "outside"
    experiments.mkdir()
    outside.mkdir()
    write(outside, "parent", EXPERIMENT.format(name="parent") + "description: from outside\n")
    (experiments / "parent.yaml").symlink_to(outside / "parent.yaml")
    write(experiments, "child", "name: child\nextends: parent\n")
    result = cli(experiments, "show", "child")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert "extends" in line and "leads out of" in line
    assert "from outside" not in result.output


def test_a_link_inside_the_experiments_directory_is_followed(tmp_path):
    experiments = tmp_path / "experiments"
    (experiments / "shared").mkdir(parents=True)
    write(experiments / "shared", "base", EXPERIMENT.format(name="base"))
    (experiments / "base.yaml").symlink_to(Path("shared") / "base.yaml")
    result = cli(experiments, "show", "base")
    assert result.exit_code == 0, result.output


def test_ls_lists_a_linked_file_as_broken_and_the_others(tmp_path):
    experiments, outside = tmp_path / "experiments", tmp_path / "outside"
    experiments.mkdir()
    outside.mkdir()
    write(outside, "leak", EXPERIMENT.format(name="leak"))
    (experiments / "leak.yaml").symlink_to(outside / "leak.yaml")
    write(experiments, "fine", EXPERIMENT.format(name="fine"))
    result = cli(experiments, "ls")
    assert result.exit_code == 0, result.output
    assert "fine" in result.output and "leak" in result.output and "broken" in result.output


# --- the path rule, over generated trees ----------------------------------------------------------

COMPONENTS = st.sampled_from(["a", "b", "..", ".", "in", "out", "up"])


@given(parts=st.lists(COMPONENTS, max_size=8))
def test_the_path_rule_agrees_with_a_walk_of_the_tree(tmp_path_factory, parts):
    base = tmp_path_factory.mktemp("rule")
    root, elsewhere = base / "root", base / "elsewhere"
    for directory in (root / "a" / "b", elsewhere / "a" / "b"):
        directory.mkdir(parents=True)
    (root / "in").symlink_to(root / "a")  # a link that stays inside
    (root / "a" / "out").symlink_to(elsewhere)  # a link that leaves
    (root / "a" / "up").symlink_to(Path(".."))  # a relative link back to the root

    real = {str(root / "in"): root / "a", str(root / "a" / "out"): elsewhere, str(root / "a" / "up"): root}

    def walk(components: list[str]) -> Path:
        """Resolve by hand: each component in turn, a known link replaced by where it leads."""
        here = root
        for part in components:
            if part == ".":
                continue
            if part == "..":
                here = here.parent
                continue
            here = here / part
            if str(here) in real:
                here = real[str(here)]
        return here

    from harness.fs.paths import outside_root

    resolved = walk(parts)
    inside = resolved == root or root in resolved.parents
    assert (outside_root(root, root.joinpath(*parts)) is None) == inside
