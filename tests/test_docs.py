"""The docs as a reader meets them: the architecture drawing as the script draws it, every bench in the
bench table, and no sentence too long to read in one go."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from support.prose import long_sentences

REPO_ROOT = Path(__file__).resolve().parent.parent
DRAWING = REPO_ROOT / "docs" / "architecture.svg"
ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
BENCH_README = REPO_ROOT / "bench" / "README.md"
MOST_WORDS = 40  # in one sentence of prose
PAGES = [REPO_ROOT / "README.md", BENCH_README, *sorted((REPO_ROOT / "docs").glob("*.md"))]


def drawn_names(svg: str) -> list[str]:
    """The names in the drawing's boxes, top to bottom and left to right (a box's name is its bold text)."""
    return re.findall(r'font-size="14" text-anchor="middle" font-weight="bold">([^<]+)</text>', svg)


def test_the_checked_in_architecture_drawing_is_what_the_script_draws_now() -> None:
    script = REPO_ROOT / "scripts" / "draw-architecture.py"
    done = subprocess.run([sys.executable, str(script), "--stdout"], capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stdout == DRAWING.read_text(), "redraw it: .venv/bin/python scripts/draw-architecture.py"


def test_every_package_of_the_harness_is_in_the_drawing() -> None:
    packages = {path.parent.name for path in (REPO_ROOT / "harness").glob("*/*.py")}
    drawn = set(drawn_names(DRAWING.read_text()))

    assert len(packages) >= 10
    assert packages - drawn == set()


def test_architecture_md_opens_with_the_drawing_and_lists_the_packages_in_its_order() -> None:
    page = ARCHITECTURE.read_text()
    first = [line for line in page.splitlines() if line.strip()][1]
    listed = re.findall(r"^\| `([a-z]+)/` \|", page, re.M)
    drawn_packages = [name for name in drawn_names(DRAWING.read_text()) if not name.endswith(".py")]

    assert re.fullmatch(r"!\[[^\]]+\]\(architecture\.svg\)", first), first
    assert listed == drawn_packages


def test_every_bench_is_in_the_bench_table() -> None:
    table = BENCH_README.read_text().split("\n## ", 1)[0]  # the first table: later sections name benches too
    rows = re.findall(r"^\| `(\w+\.py)` \|", table, re.M)
    benches = sorted(path.name for path in (REPO_ROOT / "bench").glob("*.py"))

    assert sorted(rows) == benches


def test_no_sentence_in_the_docs_is_over_40_words() -> None:
    long = {
        str(page.relative_to(REPO_ROOT)): found
        for page in PAGES
        if (found := long_sentences(page.read_text(), MOST_WORDS))
    }
    assert long == {}


def test_the_sentence_rule_finds_a_long_sentence_and_only_outside_code_and_tables() -> None:
    long = "The harness " + "reads the log and " * 10 + "stops."  # 43 words
    page = f"# Title\n\nA short one. {long} Another short one.\n\n    {long}\n\n| {long} |\n"

    assert long_sentences(page, MOST_WORDS) == [long]
    short = "A run, e.g. `plain`, stops. " * 8  # eight sentences of five words: an e.g. ends none of them
    assert long_sentences(short, MOST_WORDS) == []
    assert len(long_sentences(short, 4)) == 8
