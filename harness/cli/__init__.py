"""The `harness` command line: thin typer commands over the core modules.

Each submodule registers its commands on the one app, in the order `--help`
lists them; none imports Docker, pandas, matplotlib or NVML at module level,
so `harness --help` stays fast.
"""

from harness.cli import captures, demo, experiments, guard, logs, runs, sim, summary  # noqa: F401,I001  (registers commands)
from harness.cli.app import app, main

__all__ = ["app", "main"]
