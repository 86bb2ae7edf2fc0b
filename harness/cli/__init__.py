"""The `harness` command line: thin typer commands over the core modules.

Each submodule registers its commands on the one app; none imports Docker,
pandas, matplotlib or NVML at module level, so `harness --help` stays fast.
"""

from harness.cli.app import app, main
from harness.cli import captures, experiments, runs  # noqa: F401  (each registers its commands)
from harness.cli import logs  # noqa: F401
from harness.cli import summary  # noqa: F401

__all__ = ["app", "main"]
