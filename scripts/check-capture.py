#!/usr/bin/env python3
"""Check a capture's status: its state and how many complete steps it recorded (for `make smoke` and CI).

Usage: check-capture.py CAPTURE_DIR [--state succeeded] [--complete-steps N]

Reads the capture with the harness's own reader, so a broken capture is one
line naming the file and the reason, never a traceback.
"""

import argparse
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("--state", default="succeeded")
    parser.add_argument("--complete-steps", type=int, default=None)
    args = parser.parse_args()
    try:
        from harness.capture import read_capture, read_status
    except ImportError as err:
        print(f"check-capture: the harness is not importable ({err}); run it with .venv/bin/python", file=sys.stderr)
        return 2

    found = read_status(args.capture)
    if found.status is None:
        why = found.broken or f"no status.json in {args.capture}"
        print(f"check-capture: {args.capture}: {why}", file=sys.stderr)
        return 1
    status = found.status
    capture = read_capture(args.capture)
    complete = sum(1 for row in capture.records if row.complete)
    problems = [note for note in capture.notes if note.startswith("metrics.jsonl") and note.endswith("skipped")]
    if status.state != args.state:
        problems.append(f"state is {status.state} ({status.error}), expected {args.state}")
    if args.complete_steps is not None and complete != args.complete_steps:
        problems.append(f"{complete} complete steps in metrics.jsonl, expected {args.complete_steps}")
    if status.steps_complete != complete:
        problems.append(f"status.json says {status.steps_complete} complete steps, metrics.jsonl {complete}")
    for problem in problems:
        print(f"check-capture: {args.capture}: {problem}", file=sys.stderr)
    if not problems:
        print(f"check-capture: {args.capture}: {status.state}, {complete} complete steps")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
