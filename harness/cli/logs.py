"""`harness parse-log`: read a Miles log and show its steps, argument dump and failure."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Optional

import typer

from harness.cli.app import JsonOption, command, stdout
from harness.lab.milesnames import RAW_REWARD, RAW_REWARD_UNFILTERED, ROLLOUT_TIME


@command("parse-log")
def parse_log(
    source: Annotated[
        str,
        typer.Argument(metavar="FILE|-", help="A Miles log, a capture's container.log, or - for stdin."),
    ],
    json_: JsonOption = False,
) -> None:
    """Read a Miles log: one record per training step, the argument dump, the failure if any."""
    from harness.mileslog import parse_file

    parsed = parse_file(sys.stdin.buffer if source == "-" else source)
    if json_:
        typer.echo(_json_text(parsed.to_json()))
        return
    render_parsed_log(parsed)


def _json_text(doc: Any) -> str:
    """The document as JSON: by orjson, ten times faster on a long log's steps; by the standard writer where orjson
    refuses (an integer beyond 64 bits). Both write strict JSON: the document holds no non-finite number."""
    import orjson

    try:
        return orjson.dumps(doc).decode()
    except TypeError:
        import json

        return json.dumps(doc, allow_nan=False)


def render_parsed_log(parsed: Any) -> None:
    """A table of the steps, then the failure and the problems, on stdout."""
    from rich.text import Text

    from harness.cli.messages import message_lines, output_width
    from harness.mileslog import keys

    console = stdout()
    filter_on, source = parsed.filter_setting()
    table, derived_steps = _steps_table(parsed, filter_on)
    console.print(table)
    if filter_on is None:
        console.print(
            f"reward: {keys.reward_key(filter_on)} (no argument dump or launch line: read as without the filter)"
        )
    else:
        state = "filter on" if filter_on else "no filter"
        console.print(f"reward: {keys.reward_key(filter_on)} ({state}, from the {source})")
    width = output_width(console.is_terminal, console.width)

    def say(prefix: str, text: str) -> None:
        for line in message_lines(prefix, text, width):
            console.print(Text(line))

    if derived_steps:
        say(
            "",
            f"reward derived in {derived_steps} step(s): this Miles does not print {RAW_REWARD_UNFILTERED}, "
            f"so it is {RAW_REWARD} x B plus each dropped group's reward, over B plus the dropped groups",
        )
    if parsed.noise:
        say("noise lines: ", ", ".join(f"{kind} {count}" for kind, count in sorted(parsed.noise.items())))

    if parsed.launch is not None:
        from harness.cli.render import shell_lines
        from harness.lab.milesargv import parse_flags

        launch = list(parsed.launch)
        program = launch[: next((i for i, word in enumerate(launch) if word.startswith("-")), len(launch))]
        groups = [program, *(flag.words for flag in parse_flags(launch[len(program) :]))]
        for line in shell_lines(groups, width, first="launch: ", more="    "):
            console.print(Text(line))
    if parsed.args is not None:
        console.print(f"argument dump: {len(parsed.args)} arguments")
    if parsed.failure is not None:
        failure = parsed.failure
        say(f"failure ({failure['kind']}) at line {failure['line_number']}: ", failure["line"])
        if "reason" in failure:
            say("  ", failure["reason"])
    if parsed.problems:
        console.print(Text(f"{len(parsed.problems)} problem(s):", style="yellow"))
        for problem in parsed.problems[:10]:
            say(f"  line {problem['line']}: ", problem["reason"])
        if len(parsed.problems) > 10:
            console.print(f"  ... {len(parsed.problems) - 10} more (--json lists them all)")


def _steps_table(parsed: Any, filter_on: Optional[bool]) -> tuple[Any, int]:
    """The steps as a rich table, and how many of them had their reward derived."""
    from rich.table import Table
    from rich.text import Text

    from harness.mileslog import keys

    table = Table(
        title=f"{len(parsed.steps)} steps in {parsed.lines} lines", title_justify="left", box=None, pad_edge=False
    )
    batch = parsed.rollout_batch_size()
    derived_steps = 0
    for header in (
        "step",
        "complete",
        "rollout\ns",
        "dropped\nright",
        "dropped\nwrong",
        "0-std\nright",
        "0-std\nwrong",
        "reward",
        "step\ns",
    ):
        table.add_column(header, justify="left" if header == "complete" else "right", no_wrap=True)
    for record in parsed.steps:
        metrics, derived = record.metrics, record.derived
        drops = keys.drops_known(filter_on, metrics)  # as the summary: "-" (null) without the filter, never 0
        reading = keys.reward_reading(metrics, filter_on, batch)
        derived_steps += reading.source == keys.DERIVED
        table.add_row(
            str(record.step),
            Text("yes") if record.complete else Text("no", style="yellow"),
            _number(metrics.get(ROLLOUT_TIME), "{:.1f}"),
            _number(derived["dropped_all_right"] if drops else None, "{}"),
            _number(derived["dropped_all_wrong"] if drops else None, "{}"),
            _number(derived["zero_std_all_right"], "{}"),
            _number(derived["zero_std_all_wrong"], "{}"),
            _number(reading.value, "{:.3f}") + (" (derived)" if reading.source == keys.DERIVED else ""),
            _number(keys.step_time(metrics)[0], "{:.1f}"),
        )
    return table, derived_steps


def _number(value: Any, form: str) -> Any:
    """A table cell (a rich Text, never markup): '-' for a missing value, the format for a number, else the text
    itself, shown as written (harness.cli.messages)."""
    from harness.cli.messages import outside

    if value is None:
        return outside("-")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return outside(str(value))
    return outside(form.format(value))
