"""The registry of `harness` commands (harness.cli.COMMANDS): every command a module of harness.cli defines is listed
with the module that defines it, in the order `harness --help` lists them; one a module defines but the registry
lacks would never load."""

from __future__ import annotations

import importlib
import pkgutil

from typer.testing import CliRunner

import harness.cli
from harness.cli import COMMANDS, app


def defined_commands() -> dict[str, str]:
    """Each command and group the modules of harness.cli register on the app, by name: the module that defines it."""
    for module in pkgutil.iter_modules(harness.cli.__path__):
        importlib.import_module(f"harness.cli.{module.name}")
    found = {info.name: info.callback.__module__ for info in app.registered_commands if info.name and info.callback}
    for group in app.registered_groups:
        typer_app = group.typer_instance
        assert typer_app is not None and group.name
        callbacks = [info.callback for info in typer_app.registered_commands if info.callback]
        found[group.name] = callbacks[0].__module__
    return found


def test_every_command_a_module_defines_is_in_the_registry_with_its_module() -> None:
    defined = defined_commands()

    assert {name: f"harness.cli.{module}" for name, module in COMMANDS.items()} == defined


def test_help_lists_every_command_in_the_registry_s_order_with_its_help() -> None:
    done = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})

    assert done.exit_code == 0, done.output
    section = done.output.split("Commands:\n", 1)[1]
    rows = [line.split(None, 1) for line in section.splitlines() if line.startswith("  ") and line.strip()]
    assert [row[0] for row in rows] == list(COMMANDS)
    helps = dict(rows)
    assert all(helps.values())
    assert helps["parse-log"].startswith("Read a Miles log: one record per training step")
    assert helps["guard"].startswith("The heat guard's tools")  # a group's help, from its module too


def test_a_mistyped_command_is_one_line_that_names_the_nearest() -> None:
    done = CliRunner().invoke(app, ["parse-lg", "x"])

    assert done.exit_code == 2
    assert done.output.strip() == "error: no such command 'parse-lg' (did you mean 'parse-log'?); see `harness --help`"
