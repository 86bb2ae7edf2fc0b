"""The suite's own rules: tests share through tests/support only, fixtures have one meaning each, waits scale,
and a session sees nothing of the machine's state."""

from __future__ import annotations

import ast
import functools
import os
import time
from pathlib import Path

import pytest

from harness.engines.process import process_root
from harness.fs.paths import lock_dir
from support.timing import SLOWDOWN_ENV, eventually, scaled, slowdown

TESTS = Path(__file__).resolve().parent
SOURCES = sorted([*TESTS.glob("*.py"), *(TESTS / "support").glob("*.py")])


@functools.cache
def nodes_of(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the module, parsed and walked once for the rules that read it."""
    return tuple(ast.walk(ast.parse(path.read_text())))


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in nodes_of(path):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_test_module_imports_another_or_the_conftest() -> None:
    ours = {path.stem for path in TESTS.glob("*.py")}
    found = {f"{path.relative_to(TESTS)} imports {name}" for path in SOURCES for name in imported_modules(path) & ours}
    assert found == set()


def fixtures_defined(path: Path) -> list[str]:
    found = []
    for node in nodes_of(path):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if ast.unparse(target) == "pytest.fixture":
                    found.append(node.name)
    return found


def test_each_fixture_name_is_defined_once() -> None:
    where: dict[str, list[str]] = {}
    for path in SOURCES:
        for name in fixtures_defined(path):
            where.setdefault(name, []).append(str(path.relative_to(TESTS)))
    assert {name: places for name, places in where.items() if len(places) > 1} == {}


def test_fixtures_come_through_the_conftest_never_by_import() -> None:
    fixtures = {name for path in (TESTS / "support").glob("*.py") for name in fixtures_defined(path)}
    imported = set()
    for path in SOURCES:
        for node in nodes_of(path):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("support"):
                imported.update(f"{path.name}: {alias.name}" for alias in node.names if alias.name in fixtures)
    assert imported == set()


def test_every_property_test_that_asks_for_more_examples_is_scaled_by_the_profile() -> None:
    # `max_examples=500` in a test overrides the fast profile: make test-fast would search as hard as make test
    fixed = [
        f"{path.name}:{node.lineno}"
        for path in SOURCES
        if path.name != "properties.py"  # where the two profiles are made
        for node in nodes_of(path)
        if isinstance(node, ast.keyword)
        and node.arg == "max_examples"
        and not (isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "examples")
    ]
    assert fixed == []


def test_there_is_one_eventually() -> None:
    defined = [path.name for path in SOURCES if "def " + "eventually(" in path.read_text()]
    assert defined == ["timing.py"]


def test_waits_are_stretched_by_harness_test_slowdown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SLOWDOWN_ENV, raising=False)
    assert (slowdown(), scaled(10)) == (1.0, 10)
    monkeypatch.setenv(SLOWDOWN_ENV, "2.5")
    assert scaled(10) == 25.0
    started = time.monotonic()
    assert not eventually(lambda: False, timeout_s=0.04)
    assert time.monotonic() - started >= 0.1  # 0.04 s, two and a half times
    for bad in ("fast", "0.5", "nan"):
        monkeypatch.setenv(SLOWDOWN_ENV, bad)
        with pytest.raises(ValueError, match=SLOWDOWN_ENV):
            slowdown()


def test_the_session_has_a_state_directory_and_gpu_locks_of_its_own(session_state: Path) -> None:
    assert Path(os.environ["XDG_STATE_HOME"]).is_relative_to(session_state)
    assert process_root().is_relative_to(session_state) and lock_dir().is_relative_to(session_state)
    assert [name for name in os.environ if name.startswith("HARNESS_") and name != SLOWDOWN_ENV] == ["HARNESS_LOCK_DIR"]


def test_a_command_built_from_a_typer_app_is_reused_until_the_app_gains_a_command() -> None:
    import typer
    from typer.main import get_command

    from support.commands import reusing

    builds = []

    def build(app: typer.Typer):  # noqa: ANN202
        builds.append(app)
        return get_command(app)

    command = reusing(build)
    app = typer.Typer()
    app.command("one")(lambda: None)
    app.command("two")(lambda: None)
    first = command(app)
    assert command(app) is first and len(builds) == 1
    app.command("three")(lambda: None)
    assert sorted(command(app).commands) == ["one", "three", "two"] and len(builds) == 2
    other = typer.Typer()
    other.command("one")(lambda: None)
    assert command(other) is not first and len(builds) == 3


def fixed_image_tags(path: Path) -> list[str]:
    """Each `docker_build(context, TAG)` whose TAG is written out: a tag a suite of another checkout builds too."""
    return [
        f"{path.name}:{node.lineno}"
        for node in nodes_of(path)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) == "docker_build"
        and len(node.args) >= 2
        and isinstance(node.args[1], (ast.Constant, ast.JoinedStr))
    ]


def test_every_image_a_test_builds_is_tagged_with_what_the_build_holds() -> None:
    # Two suites at once on one engine (two checkouts): one `lab:test` each, and each ran the other's image.
    assert [where for path in SOURCES for where in fixed_image_tags(path)] == []
