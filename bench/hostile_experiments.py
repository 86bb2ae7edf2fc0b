"""How fast hostile experiment files are refused: a benchmark that prints its figures (not a timed test).

Each file is read the way `harness show` reads it (ExperimentStore.load, in
this process) and the wall time to the one-line error is printed, with the
error's length. The largest files the bounds still accept are timed too, so
the cost of a legitimate worst case is on record.

Goal: every refusal within 1 s on a 2-core machine; every message under 400
characters.

    .venv/bin/python bench/hostile_experiments.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.errors import HarnessError  # noqa: E402
from harness.experiments.store import ExperimentStore  # noqa: E402
from harness.experiments.yamlfile import MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES  # noqa: E402

HEAD = "name: {name}\nsteps: 1\nengine: process\ncommand: [python3]\n"


def alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\ndescription: *a{levels - 1}\n"


def cases() -> dict[str, bytes]:
    pad = MAX_FILE_BYTES - 200
    return {
        "alias bomb 10^9": alias_bomb(9).encode(),
        "alias bomb 10^6": alias_bomb(6).encode(),
        "nesting 50,000 deep (flow)": ("description: " + "[" * 50_000 + "]" * 50_000 + "\n").encode(),
        "nesting 20,000 deep (block)": "".join(f"{' ' * i}k:\n" for i in range(0, 20_000, 1)).encode()[:pad],
        "20 MB file": b"description: " + b"x" * 20_000_000,
        "100,000 values": ("description: [" + ", ".join(["1"] * 100_000) + "]\n").encode()[:pad] + b"]\n",
        "binary": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64,
        "Latin-1": "description: caf\xe9\n".encode("latin-1"),
        f"accepted: one {pad // 1024} KiB description": (f"description: {'x' * pad}\n").encode(),
        f"accepted: {MAX_VALUES - 100} values": (
            "miles:\n  args:\n    x: [" + ", ".join(["1"] * (MAX_VALUES - 100)) + "]\n"
        ).encode(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"bounds: {MAX_FILE_BYTES // 1024} KiB, {MAX_DEPTH} levels, {MAX_VALUES} values once aliases are expanded")
    print(f"{'file':42} {'median ms':>10} {'max ms':>8}  outcome")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for number, (label, content) in enumerate(cases().items()):
            name = f"case{number}"
            head = HEAD.format(name=name).encode() if not label.startswith(("binary", "20 MB")) else b""
            (directory / f"{name}.yaml").write_bytes(head + content)
            times, outcome = [], ""
            for _ in range(args.repeat):
                started = time.perf_counter()
                try:
                    ExperimentStore(directory, []).load(name)
                    outcome = "loaded"
                except HarnessError as err:
                    outcome = f"refused, {len(err.message)} chars: {err.message.split(': ', 1)[1][:70]}"
                times.append((time.perf_counter() - started) * 1000)
            print(f"{label:42} {statistics.median(times):10.1f} {max(times):8.1f}  {outcome}")


if __name__ == "__main__":
    main()
