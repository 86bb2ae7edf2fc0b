"""The checks CI runs before the tests: ruff and mypy (`make lint`), and every `Any` left in the typed packages says why."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def mypy_config() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def checked_files() -> list[Path]:
    found: list[Path] = []
    for entry in mypy_config()["files"]:
        path = REPO_ROOT / entry
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return found


def test_make_lint_runs_ruff_check_ruff_format_and_mypy():
    done = subprocess.run(["make", "-n", "lint"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    commands = [line.strip() for line in done.stdout.splitlines()]
    for wanted in ("/ruff check .", "/ruff format --check .", "/mypy"):
        assert any(command.endswith(wanted) for command in commands), (wanted, commands)


def test_ci_runs_make_lint_before_the_tests():
    lines = [line.strip() for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()]

    assert "make lint" in lines and "make test" in lines
    assert lines.index("make lint") < lines.index("make test")


def test_mypy_checks_the_packages_whose_data_is_typed_with_a_strict_configuration():
    config = mypy_config()

    for package in ("capture", "mileslog", "summary", "guard", "engines", "experiments", "sim"):
        assert f"harness/{package}" in config["files"]
    assert "harness/stats" in config["files"]
    assert config["strict"] is True
    assert config["disallow_any_explicit"] is True


def unexplained_any(source: str) -> list[int]:
    """Lines that use `Any` with no comment on them or on the line above (an `else:` that says why)."""
    if "Any" not in source:  # no name or attribute can be `Any`: nothing to parse
        return []
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Name) and node.id == "Any") or (
            isinstance(node, ast.Attribute) and node.attr == "Any"
        ):
            above = lines[node.lineno - 2] if node.lineno > 1 else ""
            if "#" not in lines[node.lineno - 1] and "#" not in above:
                found.append(node.lineno)
    return found


def test_every_any_left_in_the_checked_packages_has_its_reason_beside_it():
    unexplained = [
        f"{path.relative_to(REPO_ROOT)}:{line}"
        for path in checked_files()
        for line in unexplained_any(path.read_text())
    ]

    assert not unexplained, "Any without a reason: " + ", ".join(unexplained)


def test_an_any_without_its_reason_is_found_and_one_with_it_is_not():
    assert unexplained_any("from typing import Any\n\n\ndef f(x: Any) -> typing.Any:\n    pass\n") == [4, 4]
    assert unexplained_any("from typing import Any\n\nx: dict[str, Any] = {}  # Any: checked below\n") == []
