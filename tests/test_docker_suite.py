"""How the suite treats Docker: what cannot be built is skipped with one reason, and the summary says how many ran.

Each case runs pytest in a subprocess on a tiny project whose conftest is this
suite's own, with a PATH that lacks a command.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.machine import path_without

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parent.parent

TINY_SUITE = """
import pytest


@pytest.mark.docker
def test_an_engine_answers():
    pass

@pytest.mark.docker
def test_on_busybox(busybox_image):
    assert busybox_image

def test_without_docker():
    pass
"""


@pytest.fixture
def tiny_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """The tiny project, using this suite's conftest (fixtures, hooks and markers)."""
    pytester.makeconftest(
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(REPO_ROOT / 'tests')!r})  # tests/support\n"
        f"spec = importlib.util.spec_from_file_location('project_conftest', {str(REPO_ROOT / 'tests' / 'conftest.py')!r})\n"
        "project = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(project)\n"
        "globals().update({k: v for k, v in vars(project).items() if not k.startswith('__')})\n"
    )
    pytester.makeini(
        "[pytest]\naddopts = -ra --strict-markers\nmarkers =\n    docker: d\n    gpu: g\n    ray: r\n    integration: i\n"
    )
    pytester.makepyfile(test_tiny=TINY_SUITE)
    return pytester


@pytest.fixture
def run_tiny(tiny_suite: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run the tiny suite where `without` is not a command, with more environment."""

    def run(without: str, *args: str, **env: str) -> pytest.RunResult:
        monkeypatch.setenv("PATH", path_without(tmp_path / "path", without))
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return tiny_suite.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)

    return run


def test_without_docker_every_docker_test_is_skipped_for_one_reason_that_names_the_command(run_tiny):
    result = run_tiny(without="docker")

    result.assert_outcomes(passed=1, skipped=2)
    skips = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert len({line.split(": ", 1)[1] for line in skips}) == 1, skips
    assert "apt-get install docker.io" in skips[0]
    assert any(line.startswith("docker: none of 2 docker tests ran: ") for line in result.outlines), result.outlines


@pytest.mark.docker
def test_a_base_image_that_cannot_be_built_skips_its_tests_and_the_summary_counts_those_that_ran(run_tiny):
    absent = f"miles-gb10-lab/busybox:absent-{os.getpid()}"

    # As `make test` runs the suite: on workers, the summary made by the process that ran none of the tests
    result = run_tiny("busybox", "-n", "2", "--durations=0", "--durations-min=0", OFFLINE_BUSYBOX_TAG=absent)

    result.assert_outcomes(passed=2, skipped=1)  # never an error
    assert any(
        line.startswith("SKIPPED") and line.endswith("apt-get install busybox-static") for line in result.outlines
    ), result.outlines
    assert "1 ran with Docker" in result.outlines[-1]
    assert any(line.startswith("docker: 1 of 2 docker tests ran") for line in result.outlines), result.outlines
    timed = [line for line in result.outlines if line.endswith(" call     test_tiny.py::test_an_engine_answers")]
    assert len(timed) == 1, result.outlines  # the Docker tests' count leaves each test's time listed once
