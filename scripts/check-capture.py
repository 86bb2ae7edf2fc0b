#!/usr/bin/env python3
"""Check a capture's status: its state and how many complete steps it recorded (for `make smoke` and CI).

Usage: check-capture.py CAPTURE_DIR [--state succeeded] [--complete-steps N]
"""

import argparse
import json
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("--state", default="succeeded")
    parser.add_argument("--complete-steps", type=int, default=None)
    args = parser.parse_args()
    try:
        status = json.loads((args.capture / "status.json").read_text())
        rows = [json.loads(line) for line in (args.capture / "metrics.jsonl").read_text().splitlines() if line]
    except (OSError, ValueError) as err:
        print(f"check-capture: {args.capture}: {err}", file=sys.stderr)
        return 1
    complete = sum(1 for row in rows if row.get("complete"))
    problems = []
    if status.get("state") != args.state:
        problems.append(f"state is {status.get('state')} ({status.get('error')}), expected {args.state}")
    if args.complete_steps is not None and complete != args.complete_steps:
        problems.append(f"{complete} complete steps in metrics.jsonl, expected {args.complete_steps}")
    if status.get("steps_complete") != complete:
        problems.append(f"status.json says {status.get('steps_complete')} complete steps, metrics.jsonl {complete}")
    for problem in problems:
        print(f"check-capture: {args.capture}: {problem}", file=sys.stderr)
    if not problems:
        print(f"check-capture: {args.capture}: {status['state']}, {complete} complete steps")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
