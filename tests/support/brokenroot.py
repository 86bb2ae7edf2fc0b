"""A capture root holding every kind of broken file a crash, a power loss or a hand can leave, in one run and in
attempts, for the tests that run every command over it (tests/test_broken_roots.py).

`build(root, template)` copies a good attempt (`template`: a directory holding status.json, manifest.json, ...)
into runs of `root` and breaks one thing in each; `copy(root, target)` copies a built root as it is, a quarter of the
time a build takes, for a test of its own over it:

- `cur-<file>-<kind>`: one attempt, the current one, whose `<file>` is broken as `<kind>`;
- `old-<file>-<kind>`: attempt 1 broken so, attempt 2 good and current (the broken one is an older attempt);
- `new-<file>-<kind>`: attempt 1 good and current, attempt 2 broken so (a newer attempt that never became current);
- runs whose attempts themselves are odd: names that are not attempt numbers, 10- and 40-digit numbers, each
  record (current.jsonl, started.jsonl) broken each way, a current attempt deleted by hand, a hundred empty
  attempts, a link to an attempt whose name is not a number.

Kinds: NUL bytes where the rest was being written (`nul`), cut short (`torn`), a directory, a FIFO, a sparse file
of 2 GiB and more (`huge`), JSON nested far deeper than any reader recurses (`deep`), and for status.json an
object that lacks fields (`lacking`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable

ATTEMPTS = ".attempts"
FILES = ("status.json", "manifest.json", "metrics.jsonl", "container.log", "pauses.jsonl", "guard.jsonl", "args.json")
HUGE_BYTES = (2 << 30) + 4096
DEPTH = 200_000
EMPTY_ATTEMPTS = 100
FOREIGN_NAMES = ("abc", "01", "0", "\u00b2", "-3", "1e3", " 4", "٣")  # ² and Arabic-Indic 3: str.isdigit says yes


def nul(path: Path) -> None:
    data = path.read_bytes() if path.is_file() else b'{"a": 1}\n'
    path.write_bytes(data[: len(data) // 2] + b"\0" * 4096)


def torn(path: Path) -> None:
    data = path.read_bytes() if path.is_file() else b'{"a": 1}\n'
    path.write_bytes(data[: max(1, len(data) // 2)])


def directory(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.mkdir()
    (path / "inside").write_text("not a capture file\n")


def fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def huge(path: Path) -> None:
    if not path.exists():
        path.write_bytes(b'{"a": 1}\n')
    with path.open("r+b") as handle:
        handle.truncate(HUGE_BYTES)  # sparse: its blocks are never written


def deep(path: Path) -> None:
    line = b"[" * DEPTH + b"]" * DEPTH
    if path.suffix == ".jsonl" or path.suffix == ".log":
        path.write_bytes(b'{"deep": ' + line + b"}\n")
    else:
        path.write_bytes(line)


def lacking(path: Path) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps({key: data[key] for key in ("run", "run_id", "state") if key in data}))


KINDS: dict[str, Callable[[Path], None]] = {
    "nul": nul,
    "torn": torn,
    "directory": directory,
    "fifo": fifo,
    "huge": huge,
    "deep": deep,
}


def kinds_of(name: str) -> dict[str, Callable[[Path], None]]:
    return {**KINDS, "lacking": lacking} if name == "status.json" else KINDS


def copy_attempt(template: Path, target: Path, run: str) -> None:
    """A good attempt of `run` at `target`: the template's files, named for `run`."""
    shutil.copytree(template, target, ignore=shutil.ignore_patterns(".reserve", "*.torn"))
    for name in ("status.json", "manifest.json"):
        path = target / name
        data = json.loads(path.read_text())
        data["run"] = run
        path.write_text(json.dumps(data))


def make_run(root: Path, run: str, template: Path, numbers: list[int], current: int) -> Path:
    """A run with good attempts `numbers`, `current` the one its link names; its attempts directory."""
    attempts = root / ATTEMPTS / run
    attempts.mkdir(parents=True)
    for number in numbers:
        copy_attempt(template, attempts / str(number), run)
        data = json.loads((attempts / str(number) / "status.json").read_text())
        data["attempt"] = number
        (attempts / str(number) / "status.json").write_text(json.dumps(data))
    (root / run).symlink_to(f"{ATTEMPTS}/{run}/{current}")
    with (attempts / "current.jsonl").open("w") as record:
        for number in sorted({*numbers, current}):
            record.write(json.dumps({"attempt": number, "at": "2026-12-01T10:00:00Z", "by": "test", "why": "t"}) + "\n")
    return attempts


def build(root: Path, template: Path, *, empty_attempts: int = EMPTY_ATTEMPTS) -> dict[str, list[str]]:
    """Fill `root` (made here) with the broken runs; what was made: run names by group, and the broken
    container.logs' paths (`logs`)."""
    root.mkdir(parents=True, exist_ok=True)
    made: dict[str, list[str]] = {"runs": [], "logs": []}
    for name in FILES:
        stem = name.split(".")[0]
        for kind, breaker in kinds_of(name).items():
            cur = f"cur-{stem}-{kind}"
            breaker(make_run(root, cur, template, [1], 1) / "1" / name)
            old = f"old-{stem}-{kind}"
            breaker(make_run(root, old, template, [1, 2], 2) / "1" / name)
            new = f"new-{stem}-{kind}"
            breaker(make_run(root, new, template, [1, 2], 1) / "2" / name)
            made["runs"] += [cur, old, new]
            if name == "container.log":
                made["logs"].append(str(root / ATTEMPTS / cur / "1" / name))

    attempts = make_run(root, "foreign-names", template, [1, 2], 2)
    for odd in FOREIGN_NAMES:
        copy_attempt(template, attempts / odd, "foreign-names")
    (attempts / "7").write_text("a file where an attempt goes\n")
    (attempts / "8").symlink_to("1")
    os.mkfifo(attempts / "9")
    made["runs"].append("foreign-names")

    for odd in ("\u00b2", "abc", "01"):
        run = f"link-to-{odd.encode().hex()}"
        attempts = make_run(root, run, template, [1], 1)
        copy_attempt(template, attempts / odd, run)
        (root / run).unlink()
        (root / run).symlink_to(f"{ATTEMPTS}/{run}/{odd}")
        made["runs"].append(run)

    attempts = make_run(root, "ten-digits", template, [999_999_999, 1_000_000_000], 1_000_000_000)
    made["runs"].append("ten-digits")
    attempts = make_run(root, "long-number", template, [int("9" * 40)], int("9" * 40))
    made["runs"].append("long-number")

    for kind, breaker in KINDS.items():
        for record in ("current", "started"):
            run = f"{record}-record-{kind}"
            breaker(make_run(root, run, template, [1, 2], 2) / f"{record}.jsonl")
            made["runs"].append(run)

    attempts = make_run(root, "current-gone", template, [1, 2], 2)
    shutil.rmtree(attempts / "2")
    made["runs"].append("current-gone")

    attempts = make_run(root, "many-empty", template, [1], 1)
    for number in range(2, empty_attempts + 2):
        (attempts / str(number)).mkdir()
    made["runs"].append("many-empty")

    run = "attempts-a-file"
    (root / ATTEMPTS / run).write_text("not a directory\n")
    (root / run).symlink_to(f"{ATTEMPTS}/{run}/1")
    made["runs"].append(run)

    legacy = root / "legacy-nul-status"
    copy_attempt(template, legacy, legacy.name)
    nul(legacy / "status.json")
    made["runs"].append(legacy.name)
    return made


def copy(root: Path, target: Path) -> None:
    """`root` as built, at `target`: FIFOs as FIFOs (never opened), links as links, the huge files as sparse.
    cp(1): shutil.copytree opens each file it copies, and refuses a FIFO."""
    subprocess.run(["cp", "-a", "--sparse=always", str(root), str(target)], check=True, capture_output=True)
