"""The order the test modules start in: the longest first, so that on workers no long module starts last.

A module's time is what its tests took the last time the whole suite ran (pytest's cache, written by the process
that reports the tests: the controller under pytest-xdist). A module the cache has not timed is taken from
tests/support/module-seconds.json (a whole suite's times, kept in the repository for a fresh clone), else
estimated from its tests: seconds for each that starts processes (marked docker, integration, ray or browser), a
twentieth of one for any other, and a minute more for a module that starts a Ray cluster.
Under xdist every worker must collect the same order, so the controller reads
the times once and hands them to each worker. `make test` passes --no-loadscope-reorder: xdist would otherwise
start the modules with the most tests first, whatever they take (the README's examples, one test, went last).

Registered in conftest.py (`pytest_plugins`); the order only decides when a module starts, never what it runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest

CACHE_KEY = "miles-gb10-lab/module-seconds"
SLOW_MARKS = frozenset({"docker", "integration", "ray", "browser"})
SLOW_TEST_S = 3.0  # a guess for a test that starts processes, until the module has been timed
QUICK_TEST_S = 0.05
RAY_MODULE_S = 60.0  # a guess for a module that starts a Ray cluster (its nodes start once, in tens of seconds)
TIMES = pytest.StashKey[dict[str, float]]()


# A whole suite's module times as recorded in the repository, for a clone whose cache has none yet (CI's): copy
# .pytest_cache/v/miles-gb10-lab/module-seconds here after a whole `make test` when modules come or grow.
RECORDED = Path(__file__).with_name("module-seconds.json")


def _seconds(found: object) -> dict[str, float]:
    if not isinstance(found, dict):
        return {}
    return {m: float(s) for m, s in found.items() if isinstance(m, str) and isinstance(s, (int, float))}


def recorded_times(path: Path) -> dict[str, float]:
    """The module times kept in the repository; none when the file is missing or not a JSON object of numbers."""
    try:
        return _seconds(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _cache(config: pytest.Config) -> Optional[Any]:
    return getattr(config, "cache", None)  # None under -p no:cacheprovider: nothing read, nothing written


class ModuleClock:
    """The controller's (or a lone process's) record of the seconds each module's tests took, kept in the cache."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.spent: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        module = module_of(report.nodeid)
        self.spent[module] = self.spent.get(module, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        cache = _cache(self.config)
        if cache is not None and self.spent:
            cache.set(CACHE_KEY, {**self.config.stash[TIMES], **{m: round(s, 2) for m, s in self.spent.items()}})


def pytest_configure(config: pytest.Config) -> None:
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None:  # an xdist worker: the controller's times, and the controller keeps the record
        config.stash[TIMES] = dict(worker_input.get(CACHE_KEY, {}))
        return
    cache = _cache(config)
    found = cache.get(CACHE_KEY, {}) if cache is not None else {}
    config.stash[TIMES] = {**recorded_times(RECORDED), **_seconds(found)}
    if whole_suite(config):  # a part (make test-fast, -k, a file) would record the part of a module it ran
        config.pluginmanager.register(ModuleClock(config), "module-clock")


def whole_suite(config: pytest.Config) -> bool:
    """Whether the session runs every test: its paths from `testpaths`, no -m, -k or --last-failed."""
    chosen = config.getoption("markexpr", "") or config.getoption("keyword", "") or config.getoption("lf", False)
    return config.args_source == pytest.Config.ArgsSource.TESTPATHS and not chosen


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """The xdist controller, as it starts a worker: the times it read, so every worker sorts alike."""
    node.workerinput[CACHE_KEY] = node.config.stash[TIMES]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    timed = config.stash.get(TIMES, {})
    guessed: dict[str, float] = {}
    for item in items:
        slow = SLOW_MARKS & {mark.name for mark in item.iter_markers()}
        module = module_of(item.nodeid)
        start = RAY_MODULE_S if "ray" in slow and module not in guessed else 0.0
        guessed[module] = guessed.get(module, 0.0) + start + (SLOW_TEST_S if slow else QUICK_TEST_S)
    longest_first = sorted(guessed, key=lambda module: -timed.get(module, guessed[module]))
    rank = {module: place for place, module in enumerate(longest_first)}
    items.sort(key=lambda item: rank[module_of(item.nodeid)])  # stable: a module's own tests keep their order
