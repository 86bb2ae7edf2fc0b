#!/usr/bin/env python3
"""Captures -> capture/gpu/summary/miles-gb10-lab.json (schema miles-gb10-lab/1) and its figures.

A thin script over the same core as `harness summarize` (harness.summary);
run it from the repository root with the venv's Python (`make setup` makes
it): `.venv/bin/python summarize_miles.py [--capture-dir DIR] [--out FILE]`,
or `make summarize`. The rules it applies are in docs/summary.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--capture-dir",
        type=Path,
        default=Path(os.environ.get("HARNESS_CAPTURE_DIR", "capture/gpu")),
        help="directory with one capture per run (default: $HARNESS_CAPTURE_DIR or capture/gpu)",
    )
    parser.add_argument("--out", type=Path, default=None, help="summary JSON (default: <capture dir>/summary/miles-gb10-lab.json)")
    parser.add_argument("--no-figures", action="store_true", help="write the JSON only")
    args = parser.parse_args(argv)

    try:
        from harness.errors import HarnessError
        from harness.summary.publish import summarize_to_files

        try:
            published = summarize_to_files(args.capture_dir, args.out, figures=not args.no_figures)
        except HarnessError as err:
            print(f"error: {err.message}", file=sys.stderr)
            return int(err.exit_code)
        except KeyboardInterrupt:
            print("error: interrupted", file=sys.stderr)
            return 130
        except ModuleNotFoundError:
            raise  # said below: a Python without the harness's packages
        except Exception as err:  # a bug: still one line, unless asked for more (as the harness commands do)
            if os.environ.get("HARNESS_DEBUG"):
                raise
            print(f"error: internal error: {type(err).__name__}: {err} (HARNESS_DEBUG=1 shows the traceback)",
                  file=sys.stderr)
            return 70
    except ModuleNotFoundError as err:  # a Python without the harness's packages: say where they are
        print(f"error: this Python lacks {err.name} (outside the venv?): run `make summarize`, "
              "or `make setup` once and then `.venv/bin/python summarize_miles.py`", file=sys.stderr)
        return 1
    for warning in published.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    document = published.document
    print(f"{len(document.runs)} runs, {len(document.comparisons)} comparisons")
    print(f"wrote {published.summary_path}")
    for path in published.figures:
        print(f"wrote {path}")
    if published.figures_unchanged:
        print(f"{len(published.figures_unchanged)} figures unchanged (their inputs are the same)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
