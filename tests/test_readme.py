"""The README's commands, as a newcomer types them in a fresh clone, and the docs against the code."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import app

REPO_ROOT = Path(__file__).resolve().parent.parent
README = (REPO_ROOT / "README.md").read_text()
ACTIVATE = "source .venv/bin/activate"
COMMAND_WORDS = ("make", "harness", "python", "python3", "source", ".venv/bin/")


def readme_commands() -> list[tuple[int, str]]:
    """(line number, command) for every command line in the README's indented code blocks."""
    commands = []
    for number, line in enumerate(README.splitlines(), 1):
        if line.startswith("    ") and line.strip().startswith(COMMAND_WORDS):
            text = line.split("  #", 1)[0].strip()
            commands += [(number, part.strip()) for part in text.split("&&")]
    return commands


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*):", (REPO_ROOT / "Makefile").read_text(), re.M))


def harness_commands() -> set[str]:
    import typer.main

    return set(typer.main.get_command(app).commands)


def test_every_make_target_the_readme_names_exists():
    named = {shlex.split(command)[1] for _, command in readme_commands() if command.startswith("make ")}

    assert {"test", "image", "data", "run", "sweep", "status", "summarize", "report"} <= named
    assert named - make_targets() == set()


def test_every_harness_command_the_readme_names_exists():
    named = set()
    for _, command in readme_commands():
        words = shlex.split(command)
        if words[0] in ("harness", ".venv/bin/harness") and len(words) > 1 and not words[1].startswith("-"):
            named.add(words[1])
    named |= set(re.findall(r"`harness ([a-z-]+)", README))

    assert {"ls", "run", "summarize", "report", "plan", "status", "logs"} <= named
    assert named - harness_commands() == set()


def test_bare_harness_and_python_come_only_after_the_readme_says_to_activate_the_venv():
    commands = readme_commands()
    activated_at = next((number for number, command in commands if command == ACTIVATE), None)
    bare = [(number, command) for number, command in commands if command.split()[0] in ("harness", "python", "python3")]

    assert activated_at is not None, f"the README never says `{ACTIVATE}`"
    assert [(n, c) for n, c in bare if n < activated_at] == []
    assert activated_at < min(n for n, c in commands if c.startswith("harness "))


@pytest.mark.integration
def test_make_setup_says_how_to_use_the_venv():
    if not (REPO_ROOT / ".venv" / "bin" / "harness").exists():
        pytest.skip("no .venv here: `make setup` creates it")
    # -o: the venv taken as up to date, so no pip install runs in the checkout under the other tests' feet
    setup = ["make", "-s", "-o", ".venv/bin/harness", "setup"]
    done = subprocess.run(setup, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stderr
    assert ACTIVATE in done.stdout and ".venv/bin/harness" in done.stdout


@pytest.mark.integration
def test_the_readme_s_harness_commands_that_start_nothing_run_as_written(tmp_path):
    runnable = [
        command
        for _, command in readme_commands()
        if re.match(r"(\.venv/bin/)?harness (--help|ls|plan --drop-rate|run \S+ --dry-run)", command)
    ]
    assert len(runnable) >= 4, runnable
    for command in runnable:
        argv = [sys.executable, "-m", "harness", *shlex.split(command)[1:]]
        done = subprocess.run(
            argv,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)},
        )
        assert done.returncode == 0, (command, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr


def test_summarize_miles_outside_the_venv_says_what_to_run_in_one_line(tmp_path):
    captures = tmp_path / "capture"
    shutil.copytree(REPO_ROOT / "tests" / "data" / "captures" / "lab", captures)
    # -S: a Python without the venv's packages, as `python summarize_miles.py` is outside the venv
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "summarize_miles.py",
            "--capture-dir",
            str(captures),
            "--out",
            str(tmp_path / "summary.json"),
            "--no-figures",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode != 0
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "make summarize" in done.stderr and ".venv/bin/python summarize_miles.py" in done.stderr


def test_the_data_directory_has_one_name_everywhere():
    texts = {
        path: path.read_text()
        for pattern in (
            "README.md",
            "Makefile",
            "docs/*.md",
            "experiments/*.yaml",
            "harness/**/*.py",
            "scripts/*",
            ".github/workflows/*.yml",
        )
        for path in REPO_ROOT.glob(pattern)
        if path.is_file()
    }

    assert [str(path.relative_to(REPO_ROOT)) for path, text in texts.items() if re.search(r"\bDATA_DIR\b", text)] == []
    for name in ("README.md", "Makefile", "docs/lab-image.md", "experiments/plain.yaml"):
        assert "MILES_LAB_DATA" in texts[REPO_ROOT / name], name


@pytest.mark.integration
def test_the_gpu_tests_the_readme_promises_exist():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-m",
            "gpu",
            "-p",
            "no:cacheprovider",
            "tests/test_gpu.py",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    collected = [line for line in done.stdout.splitlines() if "::" in line]

    assert "`gpu` tests (`tests/test_gpu.py`)" in README
    assert len(collected) >= 2, done.stdout
