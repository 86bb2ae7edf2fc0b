"""The `harness` command line: thin typer commands over the core modules.

Each command is defined in one submodule, which registers it on the one app
when it is imported. `COMMANDS` names every command and its module: a
command's module is imported only when that command runs (`harness --help`
imports them all to list them), so a command starts without the others'
imports. None imports Docker, pandas, matplotlib or NVML at module level,
so `harness --help` stays fast.
"""

from harness.cli.app import app, main

# Every command and command group, in the order `harness --help` lists them: name -> its module (harness.cli.<module>).
# A new command is one entry here, beside its @command in the module.
COMMANDS = {
    "ls": "experiments",
    "show": "experiments",
    "run": "runs",
    "sweep": "runs",
    "status": "captures",
    "logs": "captures",
    "stop": "captures",
    "history": "captures",
    "restore": "captures",
    "recover": "captures",
    "parse-log": "logs",
    "summarize": "summary",
    "report": "summary",
    "export": "summary",
    "decide": "decide",
    "board": "board",
    "sim": "sim",
    "demo": "demo",
    "plan": "plan",
    "guard": "guard",
}

__all__ = ["COMMANDS", "app", "main"]
