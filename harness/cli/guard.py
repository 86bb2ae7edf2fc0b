"""`harness guard ...`: the heat guard's commands (`probe`: what this machine's sensors support)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typing_extensions import Annotated

from harness.cli.app import JsonOption, app, command, fail, stdout

guard_app = typer.Typer(
    name="guard",
    help="The heat guard's tools: what this machine's sensors support.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(guard_app, name="guard")

STATUS_STYLE = {"OK": "green", "NOT_SUPPORTED": "yellow"}


@command("probe", on=guard_app)
def probe_command(
    thermal_root: Annotated[
        Path, typer.Option("--thermal-root", help="Where the kernel's thermal zones are.")
    ] = Path("/sys/class/thermal"),
    json_: JsonOption = False,
) -> None:
    """Show what this machine's sensors support: each NVML query, the thresholds, the thermal zones.

    Exits 0 when a temperature can be read, 1 (with the reason) when none can.
    """
    from harness.guard.probe import probe_machine

    found = probe_machine(thermal_root)
    if json_:
        import json

        typer.echo(json.dumps(found.to_dict(), indent=2, allow_nan=False))
    else:
        render_probe(found)
    if not found.readable_by():
        fail(found.why_unreadable(), 1)


def render_probe(found: Any) -> None:
    """NVML's answers per GPU, then the thermal zones, then what `auto` would pick."""
    from rich.markup import escape
    from rich.table import Table

    console = stdout()
    if found.nvml is None:
        why = (found.nvml_error or "?").removeprefix("NVML: ")
        console.print(f"NVML: [red]unavailable[/red]: {escape(why)}")
    else:
        console.print(f"NVML: driver {found.nvml.driver_version or '?'}, NVML {found.nvml.nvml_version or '?'}, "
                      f"{len(found.nvml.devices)} GPU(s)")
        for device in found.nvml.devices:
            table = Table(title=f"GPU {device.index}: {escape(device.name or '?')} {escape(device.uuid or '')}",
                          title_justify="left", box=None, pad_edge=False)
            for header in ("query", "status", "value"):
                table.add_column(header, no_wrap=True)
            for query, result in device.queries.items():
                style = STATUS_STYLE.get(result.status, "red")
                table.add_row(query, f"[{style}]{escape(result.status)}[/{style}]", _value(query, result.value))
            console.print(table)
        console.print("memory info: not queried (NOT_SUPPORTED on GB10; the guard never needs it)")
    if found.zones:
        table = Table(title=f"thermal zones under {escape(str(found.thermal_root))}", title_justify="left",
                      box=None, pad_edge=False)
        for header in ("zone", "type", "temperature"):
            table.add_column(header, no_wrap=True)
        for zone in found.zones:
            reading = f"{zone.temp_c:.1f} C" if zone.temp_c is not None else f"[red]{escape(zone.error or '?')}[/red]"
            table.add_row(zone.zone, escape(zone.type), reading)
        console.print(table)
    else:
        console.print(f"thermal zones: none under {escape(str(found.thermal_root))}")
    readable = found.readable_by()
    if readable:
        console.print(f"sensor auto picks: [bold]{readable[0]}[/bold] (readable: {', '.join(readable)})")


def _value(query: str, value: Any) -> str:
    if value is None:
        return "-"
    if query == "clock_event_reasons":
        from harness.guard.policy import thermal_reasons

        names = thermal_reasons(int(value))
        return f"{int(value):#x}" + (f" ({'+'.join(names)})" if names else "")
    if query == "power_usage":
        return f"{value / 1000:.1f} W"
    return f"{value} C"
