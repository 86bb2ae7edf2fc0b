"""The harness's click command, built from its typer app once a test process instead of on every in-process call.

`typer.testing.CliRunner().invoke(app, ...)` builds the click command tree from
the typer app each time it is called: typer evaluates every command's
annotations again, about 60 ms of the 70 ms an in-process `harness show` takes,
and the suite makes hundreds of such calls. The app is complete once
harness.cli is imported and building it has no effect beyond its result, so
the command built first is the command every later call would build; a
typer app that gains a command or a group since is built again.

Fixture (registered in conftest.py, autouse): `built_commands_reused`.
"""

from __future__ import annotations

from typing import Callable, Iterator

import click
import pytest
import typer
import typer.testing


def reusing(build: Callable[[typer.Typer], click.Command]) -> Callable[[typer.Typer], click.Command]:
    """`build`, each app's command kept and given again while the app has the same commands and groups."""
    built: dict[int, tuple[typer.Typer, int, int, click.Command]] = {}

    def command(app: typer.Typer) -> click.Command:
        kept = built.get(id(app))
        shape = (len(app.registered_commands), len(app.registered_groups))
        if kept is None or kept[0] is not app or kept[1:3] != shape:
            kept = (app, *shape, build(app))
            built[id(app)] = kept
        return kept[3]

    return command


@pytest.fixture(scope="session", autouse=True)
def built_commands_reused() -> Iterator[None]:
    """Every CliRunner of the session reuses the command built from an app (where typer builds it in testing)."""
    build = getattr(typer.testing, "_get_command", None)
    if build is None:  # another typer: each call builds it, only slower
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typer.testing, "_get_command", reusing(build))
        yield
