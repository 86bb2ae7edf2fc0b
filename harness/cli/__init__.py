"""The `harness` command line: thin typer commands over the core modules.

Each submodule registers its commands on the one app, in the order `--help`
lists them; none imports Docker, pandas, matplotlib or NVML at module level,
so `harness --help` stays fast.
"""

from harness.cli.app import app, main

# Each module registers its commands on the app; `--help` lists them in this order.
# isort: off
from harness.cli import experiments, runs, captures, logs, summary, decide, board, guard, sim, demo  # noqa: F401,E402
# isort: on

__all__ = ["app", "main"]
