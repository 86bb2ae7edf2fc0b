"""The GitHub workflows: valid against GitHub's workflow schema (offline), and CI runs .ci/run on every change."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO_ROOT / ".github" / "workflows"


def check_jsonschema(*paths: Path) -> subprocess.CompletedProcess:
    """check-jsonschema with the schema it ships for GitHub workflows: no network needed."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.integration
def test_both_workflows_are_valid_github_workflows():
    paths = sorted(WORKFLOWS.glob("*.yml"))

    assert [p.name for p in paths] == ["ci.yml", "gpu-smoke.yml"]
    done = check_jsonschema(*paths)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.integration
def test_the_schema_check_rejects_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("name: broken\non: [push]\njobs:\n  test:\n    steps:\n      - run: make test\n")  # no runs-on

    done = check_jsonschema(broken)

    assert done.returncode == 1
    assert "runs-on" in done.stdout + done.stderr


def test_ci_runs_the_ci_entry_on_ubuntu_latest_for_pushes_and_pull_requests():
    workflow = yaml.safe_load((WORKFLOWS / "ci.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    jobs = list(workflow["jobs"].values())

    assert {"push", "pull_request"} <= set(triggers)
    assert [job["runs-on"] for job in jobs] == ["ubuntu-latest"]
    steps = jobs[0]["steps"]
    assert any(step.get("uses", "").startswith("actions/checkout@") for step in steps)
    assert any(".ci/run" in step.get("run", "") for step in steps)


@pytest.mark.parametrize("name", ["ci.yml", "gpu-smoke.yml"])
def test_every_workflow_has_a_time_limit(name):
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())

    assert all(job.get("timeout-minutes") for job in workflow["jobs"].values())
