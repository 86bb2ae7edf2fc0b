"""`harness run --dry-run` is a preflight a script can use: it exits as the run would be refused, and shows the
container name the run would ask Docker for (the README's `mgl-<run id>-<capture tag>-a<N>`).

Was: exit 0 after three pre-flight problems (no image, no NVIDIA runtime, no
data), and a container name without the attempt's `-a<N>`.
"""

from __future__ import annotations

import json
import re
import shutil
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
