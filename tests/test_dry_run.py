"""`harness run --dry-run` is a preflight a script can use: it exits as the run would be refused, and shows the
container name the run would ask Docker for (the README's `mgl-<run id>-<capture tag>-a<N>`).

Was: exit 0 after three pre-flight problems (no image, no NVIDIA runtime, no
data), and a container name without the attempt's `-a<N>`.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from support.messages import messages

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO / "experiments"
LAB = REPO / "tests" / "data" / "captures" / "lab"
NO_DOCKER = {"DOCKER_HOST": "unix:///nonexistent.sock", "COLUMNS": "100"}
PROCESS_RUN = """\
name: local
steps: 1
engine: process
command: [{python}, -c, "print('hi')"]
container: {{gpus: none, volumes: []}}
"""


def dry_run(*args: str, env: dict[str, str] | None = None) -> object:
    return CliRunner().invoke(app, ["run", *args, "--dry-run"], env={**NO_DOCKER, **(env or {})})


def test_a_dry_run_that_finds_problems_exits_as_the_run_would_and_still_shows_the_plan(tmp_path: Path) -> None:
    result = dry_run("e2b-dapo-filter", "--experiments-dir", str(EXPERIMENTS), "--capture-dir", str(tmp_path))

    assert result.exit_code == 3, result.output  # Docker does not answer: what `run` exits with
    assert "dry run: nothing started" in result.stdout  # the plan is shown all the same
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: run e2b-dapo-filter would not start: ")
    assert result.stderr.rstrip().splitlines()[-1] == errors[0]  # the last line a script reads
    assert "does not answer" in result.stderr


def test_a_dry_run_as_json_exits_as_the_run_would_too(tmp_path: Path) -> None:
    result = dry_run("plain", "--json", "--experiments-dir", str(EXPERIMENTS), "--capture-dir", str(tmp_path))

    assert result.exit_code == 3
    assert json.loads(result.stdout)["run"] == "plain"


def test_a_dry_run_with_nothing_in_the_way_exits_0(tmp_path: Path) -> None:
    import sys

    experiments = tmp_path / "experiments"
    experiments.mkdir()
    (experiments / "local.yaml").write_text(PROCESS_RUN.format(python=json.dumps(sys.executable)))
    result = dry_run("local", "--experiments-dir", str(experiments), "--capture-dir", str(tmp_path / "c"))

    assert result.exit_code == 0, result.output
    assert "error" not in result.stderr and "pre-flight" not in result.stderr


def test_a_dry_run_of_a_run_its_capture_would_refuse_exits_2(tmp_path: Path) -> None:
    shutil.copytree(LAB / "plain", tmp_path / "plain")  # succeeded, with another configuration than today's
    result = dry_run("plain", "--experiments-dir", str(EXPERIMENTS), "--capture-dir", str(tmp_path))

    assert result.exit_code == 2, result.output
    assert messages(result.stderr)[-1].startswith("error: run plain would not start: its capture succeeded")


def test_the_container_name_shown_is_the_one_the_readme_names_with_its_attempt(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text() + (REPO / "docs" / "captures.md").read_text()
    assert "`mgl-<run id>-<capture tag>-a<N>`" in readme
    result = dry_run("plain", "--json", "--experiments-dir", str(EXPERIMENTS), "--capture-dir", str(tmp_path))
    spec = json.loads(result.stdout)

    assert re.fullmatch(rf"mgl-{re.escape(spec['run_id'])}-[0-9a-f]{{6}}-a1", spec["container_name"])
    shown = dry_run("plain", "--experiments-dir", str(EXPERIMENTS), "--capture-dir", str(tmp_path))
    line = next(line for line in shown.stdout.splitlines() if line.startswith("container "))
    assert line.split()[1] == spec["container_name"]


def test_the_container_name_counts_the_attempts_there_are(tmp_path: Path) -> None:
    shutil.copytree(LAB / "plain", tmp_path / "plain")  # attempt 1 (a capture from before attempts)
    result = dry_run(
        "plain", "--json", "--force", "--experiments-dir", str(EXPERIMENTS), "--capture-dir", str(tmp_path)
    )

    assert json.loads(result.stdout)["container_name"].endswith("-a2")


# --- sweep --dry-run: the worst of its rows, by the run's rule --------------------------------------------------


def sweep(*args: str, dry_run: bool = True) -> object:
    return CliRunner().invoke(app, ["sweep", *args, *(["--dry-run"] if dry_run else [])], env=NO_DOCKER)


def test_a_sweep_dry_run_with_rows_that_would_be_refused_exits_as_the_sweep_would(tmp_path: Path) -> None:
    # Was: exit 0 with `refuse` in two of its rows, where the sweep itself refuses with exit 2.
    for run in ("plain", "plain-s2"):
        shutil.copytree(LAB / "plain", tmp_path / run)  # succeeded, with another configuration than today's
    where = ["--experiments-dir", str(EXPERIMENTS), "--capture-dir", str(tmp_path)]

    shown = sweep("plain", "--seeds", "1", "2", "3", *where)
    as_json = sweep("plain", "--seeds", "1", "2", "3", "--json", *where)
    real = sweep("plain", "--seeds", "1", "2", "3", *where, dry_run=False)

    assert shown.exit_code == as_json.exit_code == real.exit_code == 2, shown.output
    assert "dry run: nothing started" in shown.stdout  # the plan is shown all the same
    actions = {row["run"]: row["action"] for row in json.loads(as_json.stdout)["runs"]}
    assert actions == {"plain": "refuse", "plain-s2": "refuse", "plain-s3": "run"}
    for result in (shown, as_json):
        last = messages(result.stderr)[-1]
        assert last.startswith("error: run plain would not start: its capture succeeded"), result.stderr
        assert last.endswith("(and 1 more, listed above)")
        assert len([line for line in messages(result.stderr) if line.startswith("error: ")]) == 1
    assert not (tmp_path / "plain-s3").exists()


def test_a_sweep_dry_run_whose_rows_would_all_start_or_are_there_already_exits_0(tmp_path: Path) -> None:
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    (experiments / "local.yaml").write_text(PROCESS_RUN.format(python=json.dumps(sys.executable)))
    shutil.copytree(LAB / "plain", tmp_path / "c" / "plain")  # there already: started again by nothing
    where = ["--experiments-dir", str(experiments), "--capture-dir", str(tmp_path / "c")]

    shown = sweep("local", "--seeds", "1", "2", *where)

    assert shown.exit_code == 0, shown.output
    assert "error" not in shown.stderr and "pre-flight" not in shown.stderr


def test_a_sweep_dry_run_whose_runs_would_not_pass_the_pre_flight_exits_as_run_would(tmp_path: Path) -> None:
    # Was: exit 0 where `run --dry-run` of each of its runs exits 3 (Docker does not answer), so a script that
    # used the sweep's dry run as a preflight started a sweep that could not run.
    where = ["--experiments-dir", str(EXPERIMENTS), "--capture-dir", str(tmp_path)]

    shown = sweep("e2b-dapo-filter", "--seeds", "1", "2", "3", *where)
    one = dry_run("e2b-dapo-filter", *where)

    assert shown.exit_code == one.exit_code == 3, shown.output
    assert "dry run: nothing started" in shown.stdout  # the plan is shown all the same
    said = [line for line in messages(shown.stderr) if line.startswith("warning: pre-flight: ")]
    assert said and len(said) == len(set(said)), shown.stderr  # each problem once, not once a run
    assert said == [line for line in messages(one.stderr) if line.startswith("warning: pre-flight: ")]
    assert messages(shown.stderr)[-1].startswith("error: run e2b-dapo-filter would not start: "), shown.stderr
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_dry_run_ends_by_one_rule_for_a_run_and_for_each_row_of_a_sweep() -> None:
    from harness.engines.base import Problem
    from harness.errors import ExitCode
    from harness.run.decide import Decision, dry_run_refusal

    start = Decision("a", "run", "no capture yet")
    there = Decision("b", "skip", "succeeded at noon; --force reruns it")
    refused = Decision("c", "skip", "its capture succeeded with another configuration", refused=True)
    no_engine = Problem("the Docker engine does not answer", ExitCode.ENGINE_UNAVAILABLE)
    no_image = Problem("image x is not on the Docker engine", ExitCode.ENGINE_UNAVAILABLE)

    assert dry_run_refusal([(start, ()), (there, ())]) is None
    assert dry_run_refusal([(there, [no_engine])]) is None  # there already: `run` starts nothing, checks nothing
    problems = dry_run_refusal([(there, ()), (start, [no_engine, no_image])])
    assert problems is not None and problems.exit_code == ExitCode.ENGINE_UNAVAILABLE
    assert problems.message == "run a would not start: 2 pre-flight problems, above"
    first = dry_run_refusal([(start, [no_engine]), (refused, ())])  # a refusal comes first, as the sweep refuses
    assert first is not None and first.exit_code == ExitCode.BAD_INPUT
    assert first.message == "run c would not start: its capture succeeded with another configuration"


def test_a_decide_dry_run_whose_next_runs_would_not_pass_the_pre_flight_exits_as_run_would(tmp_path: Path) -> None:
    # Was: exit 0 where `run --dry-run` of its first seed exits 3 (Docker does not answer).
    where = ["--experiments-dir", str(EXPERIMENTS), "--capture-dir", str(tmp_path)]

    shown = CliRunner().invoke(app, ["decide", "plain", "e2b-dapo-filter", "--dry-run", *where], env=NO_DOCKER)
    one = dry_run("plain", *where)

    assert shown.exit_code == one.exit_code == 3, shown.output
    said = [line for line in messages(shown.stderr) if line.startswith("warning: pre-flight: ")]
    assert said and len(said) == len(set(said)), shown.stderr  # each problem once, not once a run
    assert messages(shown.stderr)[-1].startswith("error: run plain would not start: "), shown.stderr
    assert not list(tmp_path.iterdir())  # no record, no capture
