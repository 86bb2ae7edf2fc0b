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
from support.messages import messages
from support.prose import prose_paragraphs

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
        assert "Traceback" not in done.stdout + done.stderr
        if done.returncode != 0 and "--dry-run" in command and "--sim" not in command:
            # A preflight on a machine that is not the GB10 (no lab image, data or NVIDIA runtime): it exits as
            # the run would be refused, the plan shown, the reason in one last error line.
            last = messages(done.stderr)[-1]
            assert done.returncode in (2, 3) and "dry run: nothing started" in done.stdout, (command, done.stderr)
            assert last.startswith("error: run ") and " would not start: " in last, (command, done.stderr)
            continue
        assert done.returncode == 0, (command, done.stderr)


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

    assert "`gpu` tests (`tests/test_gpu.py`)" in (REPO_ROOT / "docs" / "development.md").read_text()
    assert len(collected) >= 2, done.stdout


# --------------------------------------------------------------------------- the README's shape: the user's path first
# Was: 464 lines, 47 of them over 100 characters, a first sentence of 9 lines, the experiment keys one
# 40-line paragraph, the test suite's internals before "On the GB10", and times no one had measured.

USER_PATH = ["## Quick start", "## On the GB10", "## Experiments", "## Results", "## The command line"]
DEVELOPMENT = REPO_ROOT / "docs" / "development.md"
LONGEST_LINE = 100
LONGEST_PARAGRAPH = 12  # lines of prose between blank lines (a list item is a paragraph of its own)
# A stated time: how long something takes (`about 20 s`, `5 to 6 minutes`, `in a second or two`).
STATED_TIME = re.compile(
    r"\b(?:about|took|takes?|in|within)\s+(?:\d[\d.,]*(?:\s+to\s+\d[\d.,]*)?|a|an|one|two|a few)\s+"
    r"(?:s|sec|seconds?|second or two|min|minutes?|hours?)\b"
)


def headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"#{2} ", line)]


def sentences_with_times(text: str) -> list[str]:
    prose = " ".join(" ".join(p) for p in prose_paragraphs(text))
    return [s for s in re.split(r"(?<=[.;:])\s+", prose) if STATED_TIME.search(s)]


def test_the_readme_puts_the_user_s_path_first_in_order() -> None:
    found = headings(README)
    assert [h for h in found if h in USER_PATH] == USER_PATH
    assert found[: len(USER_PATH)] == USER_PATH  # nothing before them but the title
    assert "## Tests" not in found and "## Layout" not in found  # development matters: docs/development.md


def test_development_matters_live_in_docs_development_md() -> None:
    development = DEVELOPMENT.read_text()
    for moved in ("HARNESS_TEST_SLOWDOWN", "ruff format", "pytest -m", "gpu-smoke.yml", "tests/support"):
        assert moved not in README, moved
    for kept in ("make test-fast", "HARNESS_TEST_SLOWDOWN", "make lint", "gpu-smoke.yml", "## Layout"):
        assert kept in development, kept
    assert "docs/development.md" in README


def test_every_readme_line_fits_100_columns() -> None:
    for text, name in ((README, "README.md"), (DEVELOPMENT.read_text(), "docs/development.md")):
        wide = [(n, len(line)) for n, line in enumerate(text.splitlines(), 1) if len(line) > LONGEST_LINE]
        assert wide == [], (name, wide)


def test_the_first_sentence_and_every_paragraph_are_short() -> None:
    first = prose_paragraphs(README)[0]
    sentence = " ".join(first).split(". ")[0]
    assert len(sentence) <= LONGEST_LINE and first[0].rstrip().endswith("."), first
    long = [p[0] for p in prose_paragraphs(README) if len(p) > LONGEST_PARAGRAPH]
    assert long == []


def test_the_experiment_keys_are_a_list_not_one_paragraph() -> None:
    start = README.index("## Experiments")
    section = README[start : README.index("\n## ", start)]
    items = [p for p in prose_paragraphs(section) if p[0].startswith("- **")]
    assert len(items) >= 8
    assert max(len(p) for p in prose_paragraphs(section)) <= LONGEST_PARAGRAPH


def test_every_time_the_readme_states_was_measured() -> None:
    for text in (README, DEVELOPMENT.read_text()):
        stated = sentences_with_times(text)
        assert stated, "no time stated: the quick start says how long make demo and make test take"
        unmeasured = [s for s in stated if "measured" not in s]
        assert unmeasured == []
    assert re.search(r"`make test` took \d+ minutes \(\d+ s, measured\)", README)  # the suite's own figure
    assert "MEASURED_" not in README + DEVELOPMENT.read_text()  # every placeholder filled in


def test_the_stated_time_rule_catches_an_unmeasured_time() -> None:
    assert sentences_with_times("`make demo` runs the pipeline in about two minutes.") != []
    assert sentences_with_times("A plain run took 25 s. It was measured.") == ["A plain run took 25 s."]
