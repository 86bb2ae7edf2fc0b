#!/usr/bin/env python3
"""Captures -> capture/gpu/summary/miles-gb10-lab.json (schema miles-gb10-lab/1) and its figures.

This script is `harness summarize`: it runs that command with the same
options (`--capture-dir DIR`, `--sim`, `--out FILE`, `--no-figures`, `--effect D`,
`--json`) and prints exactly what it prints. Run it from the repository
root with the venv's Python (`make setup` makes it):
`.venv/bin/python summarize_miles.py [OPTIONS]`, or `make summarize`. The
rules it applies are in docs/summary.md.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    try:
        from harness.cli.app import app, spare_the_last_collection
    except ModuleNotFoundError as err:  # a Python without the harness's packages: say where they are
        print(
            f"error: this Python lacks {err.name} (outside the venv?): run `make summarize`, "
            "or `make setup` once and then `.venv/bin/python summarize_miles.py`",
            file=sys.stderr,
        )
        return 1
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app(["summarize", *args], prog_name="summarize_miles.py")
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            pass
        spare_the_last_collection()  # as `harness` ends: no last walk of all it holds
    return 0


if __name__ == "__main__":
    sys.exit(main())
