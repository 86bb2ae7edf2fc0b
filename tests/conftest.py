"""Shared test set-up: markers, skips, a state directory of the session's own, the fixtures of tests/support.

Markers (pyproject.toml), each the one reason a test is not in the fast tier:
`docker` tests need an engine that answers, `gpu` tests a GPU, `ray` tests
start a local Ray cluster, and `integration` tests start real processes
without those (process-engine runs, harness or trainer subprocesses, make,
fresh clones) and take seconds. `make test-fast` runs everything else.
A test that uses a fixture which needs one of them must carry that marker:
collection stops with the list of those that do not.

What cannot run here is skipped with one reason that names the command which
enables it; the base images the Docker tests build on are made from what the
machine has (scripts/offline-images.sh), so the Docker tests run wherever an
engine answers. The summary line counts the Docker tests that ran.

Hermetic: the session gets its own XDG_STATE_HOME (so the process engine's
runs and a Ray node's captures) and GPU lock directory, and no HARNESS_*
setting of the shell that started it, so nothing of the user's, of another
suite running at the same time, or of an earlier suite that was killed is
seen. HARNESS_TEST_SLOWDOWN stretches every wait of tests/support and the
per-test timeout alike. Property tests search as hard as each asks, a tenth of
it with `--hypothesis-profile=fast` (tests/support/properties.py).
"""

from __future__ import annotations

import atexit
import gc
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest
from hypothesis import settings

import support.properties  # noqa: F401  (registers the Hypothesis profiles)
from support.machine import docker_unavailable, gpu_present
from support.timing import SLOWDOWN_ENV, slowdown

settings.load_profile("full")  # `--hypothesis-profile=fast` (make test-fast) replaces it

# Each full collection walks the whole heap, which matplotlib, scipy, Hypothesis and the captures the tests build
# make large: at Python's default thresholds they took about 7% of the fast tier's CPU time. Young garbage is
# collected as often as by default; full collections run a tenth as often.
_young, _middle, _ = gc.get_threshold()
gc.set_threshold(_young, _middle, 100)


def _no_collections_at_exit() -> None:
    """Python's teardown, which frees every module and object, with no cycle collection between: with the heaps the
    tests leave (matplotlib, scipy, pandas, Hypothesis) the collections made each process's exit take about 2 s,
    and `make test-fast` waits for both workers to exit."""
    gc.disable()
    gc.freeze()


atexit.register(_no_collections_at_exit)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish() -> None:
    """One full collection when the tests are done, then what survives it frozen: pytest's own collections after
    this (for unraisable exceptions, two of them) then walk only what is new, not every module and object the
    tests loaded, which took about a second in each worker. Whatever this collection frees still reports its
    unraisable exceptions, as pytest's would have; a cycle that becomes garbage only after it (pytest's own objects,
    while it reports and unconfigures) is not collected again."""
    gc.collect()
    gc.freeze()


pytest_plugins = [
    "support.images",
    "support.lab",
    "support.guard",
    "support.clones",
    "support.experiment_files",
    "support.commands",
    "support.resume_lab",
    "support.brokencalls",
    "support.order",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
RAN_WITH_DOCKER = "ran with Docker"  # the summary line's count: "... 27 ran with Docker in 60.0s"

# What a fixture needs: a test that uses it carries these markers, so `-m "not ..."` never starts it.
FIXTURE_MARKERS = {
    "docker_lab": {"docker"},
    "fake_trainer": {"docker"},
    "python_image": {"docker"},
    "busybox_image": {"docker"},
    "docker_build": {"docker"},
    "sim_image": {"docker"},
    "process_lab": {"integration"},
    "fake_gpu": {"integration"},  # a C library built with gcc, each query in a Python of its own
    "ticker": {"integration"},
    "clone": {"integration"},
    "ray_cluster": {"ray"},
    "resume_ray_cluster": {"ray"},
    "process_resume_lab": {"integration"},
    "broken_root_template": {"integration"},
    "broken_root": {"integration"},
    "summarized_root": {"integration"},
}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """HARNESS_TEST_SLOWDOWN stretches the per-test timeout (pytest-timeout's) too."""
    try:
        factor = slowdown()
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None
    if factor == 1.0 or not config.pluginmanager.hasplugin("timeout"):
        return
    timeout = config.getoption("timeout", None) or os.environ.get("PYTEST_TIMEOUT") or config.getini("timeout")
    if timeout:
        config.option.timeout = float(timeout) * factor


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unmarked = []
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        for fixture in getattr(item, "fixturenames", ()):
            missing = FIXTURE_MARKERS.get(fixture, set()) - marks
            if missing:
                unmarked.append(f"{item.nodeid} uses {fixture} but is not marked {', '.join(sorted(missing))}")
    if unmarked:
        raise pytest.UsageError("tests without the markers their fixtures need:\n  " + "\n  ".join(unmarked))
    docker_tests = [item for item in items if "docker" in item.keywords]
    if docker_tests and docker_unavailable():
        skip = pytest.mark.skip(reason=docker_unavailable())
        for item in docker_tests:
            item.add_marker(skip)
    for item in items:
        if "gpu" in item.keywords and not gpu_present():
            item.add_marker(pytest.mark.skip(reason="no GPU on this machine (nvidia-smi lists none)"))


@pytest.fixture(scope="session", autouse=True)
def session_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A state directory and GPU lock directory of the session's own; the shell's HARNESS_* settings dropped."""
    root = tmp_path_factory.mktemp("session-state")
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("HARNESS_") and name != SLOWDOWN_ENV:
                patch.delenv(name)
        patch.setenv("XDG_STATE_HOME", str(root / "state"))
        patch.setenv("HARNESS_LOCK_DIR", str(root / "locks"))
        # Messages are read whole here; the tests of how they fit a width (test_cli_widths) set their own.
        patch.setenv("COLUMNS", os.environ.get("HARNESS_TEST_COLUMNS", "1000"))
        yield root


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # noqa: ANN001
    """One line on the Docker tests, and their count in the final summary line."""
    stats = terminalreporter.stats
    reports = [
        r
        for key in ("passed", "failed", "skipped", "error")
        for r in stats.get(key, [])
        if "docker" in getattr(r, "keywords", ())
    ]  # a CollectReport (a file that failed to import) has none
    tests = {r.nodeid for r in reports}
    ran = [r for r in reports if r.when == "call" and not r.skipped]
    if not tests:
        return
    if ran:
        # Not the reports themselves: --durations lists every report under any key, each Docker test's twice then.
        stats[RAN_WITH_DOCKER] = [SimpleNamespace(nodeid=r.nodeid) for r in ran]
        line = f"docker: {len(ran)} of {len(tests)} docker tests ran on {os.environ.get('DOCKER_HOST') or 'the default engine'}"
    else:
        line = f"docker: none of {len(tests)} docker tests ran: {docker_unavailable() or 'all were skipped'}"
    terminalreporter.write_line(line)


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT
