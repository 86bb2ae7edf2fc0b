"""A stand-in for Miles's train.py: prints one JSON line with what it was given.

`--standin-sleep S` sleeps S seconds first (for signal tests); `--standin-exit N`
exits with N (for failure tests). Every other argument is only reported.
"""

import json
import os
import sys
import time

WATCHED_ENV = ("PYTHONUNBUFFERED", "RAY_DEDUP_LOGS", "RAY_memory_monitor_refresh_ms", "MILES_DIR")


def option(name: str, default: str) -> str:
    args = sys.argv[1:]
    return args[args.index(name) + 1] if name in args[:-1] else default


print(
    "STANDIN-TRAIN "
    + json.dumps(
        {
            "argv": sys.argv,
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "pwned": os.path.exists("/tmp/pwned"),
            "env": {key: os.environ.get(key) for key in WATCHED_ENV},
        }
    ),
    flush=True,
)
time.sleep(float(option("--standin-sleep", "0")))
sys.exit(int(option("--standin-exit", "0")))
