"""`harness guard ...`: guard any container or process (`--container`, `--pid`); `probe`: what the sensors support."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from typing_extensions import Annotated

from harness.cli.app import (
    CaptureDirOrSim,
    JsonOption,
    SimCapturesOption,
    app,
    capture_root,
    command,
    fail,
    sim_hint_when_not_found,
    stdout,
    warn,
)
from harness.errors import ExitCode, HarnessError

guard_app = typer.Typer(
    name="guard",
    help="The heat guard's tools: guard any container or process (--container, --pid), or probe the sensors.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(guard_app, name="guard")

# Option name for each guard key a message may name.
OPTION_FOR = {
    "sensor": "--sensor",
    "pause_at_c": "--pause-at",
    "resume_at_c": "--resume-at",
    "poll_s": "--poll-s",
    "min_pause_s": "--min-pause-s",
    "max_pause_s": "--max-pause-s",
    "on_max_pause": "--on-max-pause",
    "on_pause_failure": "--on-pause-failure",
}


@guard_app.callback(invoke_without_command=True)
def guard_target(
    ctx: typer.Context,
    container: Annotated[
        Optional[str], typer.Option("--container", help="Guard this Docker container (id or name).")
    ] = None,
    pid: Annotated[
        Optional[int],
        typer.Option(
            "--pid", min=1, help="Guard this process's group (only the process, if it shares this shell's group)."
        ),
    ] = None,
    record: Annotated[
        Optional[Path],
        typer.Option("--record", help="Directory for pauses.jsonl and guard.jsonl (made if absent; appended to)."),
    ] = None,
    sensor: Annotated[Optional[str], typer.Option("--sensor", help="auto, nvml, sysfs, sim or file:PATH.")] = None,
    pause_at: Annotated[Optional[float], typer.Option("--pause-at", help="Pause at this temperature in C.")] = None,
    resume_at: Annotated[
        Optional[float], typer.Option("--resume-at", help="Resume at or below this temperature in C.")
    ] = None,
    poll_s: Annotated[Optional[float], typer.Option("--poll-s", help="Seconds between readings.")] = None,
    min_pause_s: Annotated[Optional[float], typer.Option("--min-pause-s", help="Shortest pause in s.")] = None,
    max_pause_s: Annotated[Optional[float], typer.Option("--max-pause-s", help="Longest pause in s.")] = None,
    on_max_pause: Annotated[Optional[str], typer.Option("--on-max-pause", help="resume, or stop the target.")] = None,
    on_pause_failure: Annotated[
        Optional[str],
        typer.Option("--on-pause-failure", help="When the engine cannot freeze it: stop the target, or continue."),
    ] = None,
    grace_s: Annotated[
        float,
        typer.Option("--grace-s", min=0, help="When the guard stops the target: seconds between SIGTERM and SIGKILL."),
    ] = 60.0,
) -> None:
    """Guard any container or process: freeze it while the GPU is too hot, thaw it once cool, record the windows.

    `harness guard --container ID --record DIR` (or `--pid PID`) guards until
    the target exits or Ctrl-C, and always thaws it on the way out. Options
    left out take the defaults of an experiment's guard block (docs/guard.md).
    """
    if ctx.invoked_subcommand is not None:
        return
    settings = {
        "sensor": sensor,
        "pause_at_c": pause_at,
        "resume_at_c": resume_at,
        "poll_s": poll_s,
        "min_pause_s": min_pause_s,
        "max_pause_s": max_pause_s,
        "on_max_pause": on_max_pause,
        "on_pause_failure": on_pause_failure,
    }
    try:
        code = guard_command(container, pid, record, {k: v for k, v in settings.items() if v is not None}, grace_s)
    except HarnessError as err:
        fail(err.message, err.exit_code)
    raise typer.Exit(int(code))


def guard_command(
    container: Optional[str], pid: Optional[int], record: Optional[Path], settings: dict[str, Any], grace_s: float
) -> ExitCode:
    """Attach, open the sensor, guard until the end (harness.guard.attach); Ctrl-C and SIGTERM only end the
    guarding. The exit code is 1 when the guard had to stop the target."""
    import signal
    import threading

    from harness.cli.progress import describe_guard
    from harness.guard.attach import GuardTargetHooks, attach_target, check_request, guard_target, how_it_ended

    record = check_request(container, pid, record)
    config = _guard_config(settings)
    handle, what = attach_target(container, pid)
    console = stdout()
    stopped = threading.Event()
    previous = {sig: signal.signal(sig, lambda signum, frame: stopped.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        end = guard_target(
            handle,
            what,
            config,
            record,
            grace_s=grace_s,
            stopped=stopped,
            hooks=GuardTargetHooks(
                on_guarding=lambda message: console.print(message, markup=False),
                on_warning=warn,
                on_reading=_printer(console, what),
            ),
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    how, code = how_it_ended(end)
    console.print(f"{what}: {how}; {describe_guard(end.reading)}", markup=False)
    return code


def _guard_config(settings: dict[str, Any]) -> Any:
    """A GuardConfig from the options; a bad value is one line naming the option."""
    from pydantic import ValidationError

    from harness.guard.config import GuardConfig

    try:
        return GuardConfig(**settings)
    except ValidationError as err:
        first = err.errors()[0]
        where = ", ".join(OPTION_FOR.get(str(part), str(part)) for part in first.get("loc", ()))
        message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        for key, option in OPTION_FOR.items():
            message = message.replace(key, option)
        raise HarnessError(f"{where + ': ' if where else ''}{message}") from None


def _printer(console: Any, what: str) -> Any:
    """A line per pause and resume."""
    from harness.cli.progress import guard_change
    from harness.times import now_rfc3339

    last: list[Any] = [None]

    def show(reading: Any) -> None:
        change = guard_change(last[0], reading)
        last[0] = reading
        if change:
            console.print(f"{now_rfc3339()[11:19]} {what}: {change}", markup=False)

    return show


STATUS_STYLE = {"OK": "green", "NOT_SUPPORTED": "yellow"}


@command("probe", on=guard_app)
def probe_command(
    thermal_root: Annotated[
        Optional[Path],
        typer.Option(
            "--thermal-root",
            help="Where the kernel's thermal zones are [default: $HARNESS_THERMAL_ROOT, else /sys/class/thermal].",
        ),
    ] = None,
    json_: JsonOption = False,
) -> None:
    """Show what this machine's sensors support: each NVML query, the thresholds, the thermal zones and their
    trip points (and where the guard would pause for each, at the default zone_margin_c).

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
    from rich.table import Table
    from rich.text import Text

    from harness.cli.messages import outside

    console = stdout()
    if found.nvml is None:
        why = (found.nvml_error or "?").removeprefix("NVML: ")
        console.print(Text.assemble("NVML: ", ("unavailable", "red"), outside(f": {why}")))
    else:
        console.print(
            f"NVML: driver {found.nvml.driver_version or '?'}, NVML {found.nvml.nvml_version or '?'}, "
            f"{len(found.nvml.devices)} GPU(s)"
        )
        for device in found.nvml.devices:
            table = Table(
                title=outside(f"GPU {device.index}: {device.name or '?'} {device.uuid or ''}"),
                title_justify="left",
                box=None,
                pad_edge=False,
            )
            for header in ("query", "status", "value"):
                table.add_column(header, no_wrap=True)
            for query, result in device.queries.items():
                style = STATUS_STYLE.get(result.status, "red")
                table.add_row(outside(query), outside(result.status, style), outside(_value(query, result.value)))
            console.print(table)
        console.print("memory info: not queried (NOT_SUPPORTED on GB10; the guard never needs it)")
    if found.zones:
        table = Table(
            title=outside(f"thermal zones under {found.thermal_root}"),
            title_justify="left",
            box=None,
            pad_edge=False,
        )
        for header in ("zone", "type", "temperature"):
            table.add_column(header, no_wrap=True)
        for header in ("trip points", "guard pauses at"):
            table.add_column(header, overflow="fold")
        for zone in found.zones:
            reading = outside(f"{zone.temp_c:.1f} C") if zone.temp_c is not None else outside(zone.error or "?", "red")
            limit = found.zone_limit(zone)
            table.add_row(outside(zone.zone), outside(zone.type), reading, _trips(zone), outside(str(limit["basis"])))
        console.print(table)
        console.print(
            "(a zone pauses zone_margin_c below its lowest hot or critical point; without one, at pause_at_c)"
        )
        from harness.guard.sensors import skipped_note

        skipped = skipped_note(found.zones)
        if skipped:
            console.print(outside(skipped, "yellow"))
    else:
        console.print(f"thermal zones: none under {found.thermal_root}")
    readable = found.readable_by()
    if readable:
        console.print(Text.assemble("sensor auto reads: ", (" and ".join(readable), "bold")))


def _trips(zone: Any) -> Any:
    """`passive 95.0 C, critical 105.0 C` (`-` for none; `?` for a point whose value is not believable)."""
    from harness.cli.messages import outside

    shown = [f"{trip.type} {trip.temp_c:.1f} C" if trip.temp_c is not None else f"{trip.type} ?" for trip in zone.trips]
    return outside(", ".join(shown) or "-")


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


@command("plot", on=guard_app)
def plot_command(
    run: Annotated[
        str,
        typer.Argument(
            help="A run under the capture root, or a directory holding guard.jsonl (`harness guard --record DIR`).",
            show_default=False,
        ),
    ],
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out",
            help="SVG to write [default: <capture dir>/summary/guard-<run>.svg; for a directory, DIR/guard.svg].",
        ),
    ] = None,
) -> None:
    """Draw the heat guard's figure of one run from its capture alone: every watched temperature over wall time,
    the pause and resume thresholds and each zone's limits, the pause windows shaded, thermal slowdowns marked."""
    from harness.summary.captures import SUMMARY_DIR_NAME
    from harness.summary.guard_figure import (
        guard_figure_path,
        guard_text,
        has_guard_record,
        read_guard_trace,
        render_guard_figure,
    )
    from harness.summary.publish import writing

    root = capture_root(capture_dir, sim)
    named = root / run
    if "/" not in run and (named / "status.json").is_file():
        directory, name, default_out = named, run, guard_figure_path(root / SUMMARY_DIR_NAME, run)
    elif Path(run).is_dir():
        directory, name = Path(run), Path(run).resolve().name
        default_out = Path(run) / "guard.svg"
    else:
        with sim_hint_when_not_found(root, run):
            raise HarnessError(f"no capture of {run} under {root}, and no directory {run}", ExitCode.NOT_FOUND)
    if not has_guard_record(directory):
        raise HarnessError(
            f"{directory} has neither guard.jsonl nor pauses.jsonl: the heat guard recorded nothing there "
            "(an unguarded run, or one that never started)",
            ExitCode.NOT_FOUND,
        )
    path = out if out is not None else default_out
    writing(path, lambda: render_guard_figure(directory, name, path, force=True))
    trace = read_guard_trace(directory)
    for note in trace.notes:
        warn(note)
    console = stdout()
    console.print(f"wrote {path}", markup=False)
    console.print(guard_text(name, trace)[0], markup=False, highlight=False)
