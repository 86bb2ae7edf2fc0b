"""How runs are shown: a launch spec (`--dry-run`), a sweep's plan and results, a run's end."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

import typer

from harness.cli.app import DEFAULT_CAPTURE_DIR, SIM_CAPTURE_DIR, print_messages, stdout, warn
from harness.lab.milesnames import RAW_REWARD_UNFILTERED

if TYPE_CHECKING:
    from harness.capture import RunStatus
    from harness.engines.base import Problem
    from harness.engines.spec import LaunchSpec
    from harness.jsontypes import JSONObject
    from harness.run.decide import Decision
    from harness.run.lifecycle import SweepResult
    from harness.run.plan import Planned
    from harness.run.run_page import RunPage


def preflight_report(spec: "LaunchSpec") -> tuple[list["Problem"], Optional["JSONObject"]]:
    """(what would stop the run from starting, what the image preflight found in the image's Miles), as `run`
    checks them: nothing is changed, and nothing started but the preflight's own short probe container."""
    from harness.engines import engine_named

    engine = engine_named(spec.engine)
    return list(engine.preflight(spec)), engine.image_facts(spec)


def dry_run_rows(runs: Sequence[tuple["Decision", "LaunchSpec"]]) -> list[tuple["Decision", Sequence["Problem"]]]:
    """Each run with the problems `run --dry-run`'s pre-flight finds, for the runs that would start (none is checked
    where one would be refused: the command refuses before any pre-flight); each problem is warned once."""
    from harness.run.plan import next_attempt_spec

    if any(decision.refused for decision, _ in runs):
        return [(decision, ()) for decision, _ in runs]
    said: set[str] = set()
    rows: list[tuple[Decision, Sequence[Problem]]] = []
    for decision, spec in runs:
        problems = preflight_report(next_attempt_spec(spec))[0] if decision.action == "run" else []
        for problem in problems:
            if problem.message not in said:
                said.add(problem.message)
                warn(f"pre-flight: {problem.message}")
        rows.append((decision, problems))
    return rows


def print_sweep(console: Any, results: Sequence["SweepResult"]) -> None:
    """The sweep's final table: each run, what was done with it, its state and why."""
    from rich.text import Text

    from harness.cli.tables import Column, print_table

    rows = []
    for result in results:
        status = result.status
        steps = f"{status.steps_complete}/{status.steps_expected}" if status else "-"
        cells = (
            result.decision.run,
            result.decision.action,
            status.state if status else "-",
            steps,
            sweep_reason(result),
        )
        rows.append(tuple(Text(cell) for cell in cells))  # Text: a reason quoting a log line is never markup
    columns = [Column("run"), Column("action"), Column("state"), Column("steps", "right"), Column("reason", wrap=True)]
    print_table(console, columns, rows, title="sweep")


def print_across_seeds(console: Any, plans: Sequence["Planned"], capture_dir: Path) -> None:
    """A sweep of two or more seeds of an experiment with a baseline ends with its across-seed verdicts, or a line
    that points to what gives them (docs/summary.md, "Across seeds")."""
    from harness.summary.publish import summarize_captures_in
    from harness.summary.seeds import across_seeds_after_sweep

    compare = plans[0].experiment.compare if plans else None
    if compare is None or len({plan.spec.seed for plan in plans}) < 2:
        return
    where = {DEFAULT_CAPTURE_DIR: "", SIM_CAPTURE_DIR: " --sim"}.get(Path(capture_dir), f" --capture-dir {capture_dir}")
    summarize = f"harness summarize{where}"
    try:
        document = summarize_captures_in(capture_dir).document
    except Exception as err:  # the runs are done and their exit code stands: a summary that fails costs this line
        lines = [f"across seeds: the captures could not be summarized ({type(err).__name__}: {err}); `{summarize}`"]
    else:
        lines = across_seeds_after_sweep(document, [plan.spec.run for plan in plans], compare.baseline, summarize)
    print_messages(console, [(line, 0) for line in lines])


def sweep_reason(result: "SweepResult") -> str:
    """Why a run of a sweep ended as it did: for one that ran, how it ended (never the reason it was started,
    which was true only before it ran); for one that was skipped, why."""
    status = result.status
    if result.decision.action != "run":
        return result.decision.reason
    if status is None:
        return "not started"
    if status.state == "succeeded":
        ran = f"ran as attempt {status.attempt}" if status.attempt else "ran"
        # A reason about the earlier attempt ("it was failed (...)") is still true, and says why it ran.
        return f"{ran}; {result.decision.reason}" if result.decision.about_earlier else ran
    return status.error or f"exit code {status.exit_code}"


def print_sweep_plan(plans: Sequence["Planned"], decisions: Sequence["Decision"], mode: str, *, as_json: bool) -> None:
    """What a sweep would do, run by run: run id, capture, run, skip or refuse and why. Starts nothing."""
    import json

    from rich.text import Text

    from harness.cli.tables import Column, print_table

    rows = []
    for plan, decision in zip(plans, decisions):
        spec = plan.spec
        action = "refuse" if decision.refused else decision.action
        rows.append(
            {
                "run": spec.run,
                "run_id": spec.run_id,
                "seed": spec.seed,
                "capture_dir": spec.capture_dir,
                "action": action,
                "reason": decision.reason,
            }
        )
    if as_json:
        experiment = plans[0].spec.experiment if plans else None
        typer.echo(
            json.dumps(
                {"experiment": experiment, "mode": mode, "dry_run": True, "runs": rows}, indent=2, allow_nan=False
            )
        )
        return
    columns = [
        Column("run"),
        Column("run id", drop=2),
        Column("capture", drop=1),
        Column("action"),
        Column("reason", wrap=True),
    ]
    cells = [tuple(Text(row[key]) for key in ("run", "run_id", "capture_dir", "action", "reason")) for row in rows]
    print_table(stdout(), columns, cells, title=f"sweep plan ({mode} mode, dry run: nothing started)")


def report_status(status: "RunStatus", capture_dir: Optional[Path] = None) -> None:
    """One line: the run's final state; a warning that says why, and where to look, if it did not succeed."""
    if status.state == "succeeded":
        stdout().print(
            f"{status.run}: succeeded, {status.steps_complete}/{status.steps_expected} steps complete, "
            f"exit code {status.exit_code}",
            markup=False,
        )
    else:
        where = root_option(capture_dir)
        attempt = f" --attempt {status.attempt}" if status.attempt else ""  # the current attempt may be another
        warn(
            f"run {status.run} {status.state} with {status.steps_complete}/{status.steps_expected} steps complete "
            f"({status.error or f'exit code {status.exit_code}'}); `harness logs {status.run}{attempt}{where}` "
            "shows its log"
        )


def root_option(capture_dir: Optional[Path]) -> str:
    """The option a command needs to look in `capture_dir`: "", ` --sim` or ` --capture-dir DIR`."""
    if capture_dir is None or Path(capture_dir) == DEFAULT_CAPTURE_DIR:
        return ""
    return " --sim" if Path(capture_dir) == SIM_CAPTURE_DIR else f" --capture-dir {capture_dir}"


def print_run_page(page: "RunPage", capture_dir: Path) -> None:
    """`harness status RUN`: the run's state and reason, notes, heat guard, attempts and their changes, log tail."""
    from rich.text import Text

    from harness.cli.app import print_messages
    from harness.cli.tables import Column, print_table
    from harness.run.run_page import summary_line

    console = stdout()
    said: list[tuple[str, int]] = []
    current, newest = page.current, page.newest
    if current is not None:
        said.append((f"{page.run}: attempt {current.number} of {page.attempts} is current", len(page.run) + 1))
        said.append((f"  {summary_line(current)}", 0))
    else:
        said.append((f"{page.run}: no attempt is current ({page.attempts} attempts)", len(page.run) + 1))
    if newest is not None:
        said.append((f"  attempt {newest.number} (newer): {summary_line(newest)}", 0))
    shown = current or newest
    notes = shown.status.notes if shown is not None and shown.status is not None else []
    if shown is not None and notes:
        said.append((f"notes (attempt {shown.number})", 0))
        said += [(f"  {note}", 0) for note in notes]
    if shown is not None:
        said.append((f"heat guard (attempt {shown.number}): {page.guard.text()}", 10))
    print_messages(console, said, paragraph=True)
    columns = [
        Column("attempt", "right"),
        Column("state", wrap=True),
        Column("steps", "right"),
        Column("started", drop=2),
        Column("duration", "right", drop=1),
        Column("differs from the current", wrap=True, drop=3),
    ]
    cells = [
        tuple(
            Text(cell)
            for cell in (f"{r.attempt}{' *' if r.current else ''}", r.state, r.steps, r.started, r.duration, r.differs)
        )
        for r in page.rows
    ]
    print_table(console, columns, cells, title="attempts (* current)")
    if page.changes:
        print_messages(
            console,
            [("changes between attempts", 0)]
            + [
                (f"  attempt {after} from attempt {before}: {', '.join(changed) or 'nothing'}", 0)
                for after, before, changed in page.changes
            ],
            paragraph=True,
        )
    if page.log_attempt is not None:
        heading = f"log of attempt {page.log_attempt}" + (
            f" (its last {len(page.log_tail)} lines)" if page.log_tail else ": empty, or no container.log"
        )
        console.print(Text(heading, style="bold"), soft_wrap=True)
        for line in page.log_tail:  # the trainer's own lines, as `harness logs` prints them: never refitted
            console.print(Text(f"  {line}"), soft_wrap=True)
        numbers = [row.attempt for row in page.rows]
        which = " or ".join(numbers) if len(numbers) <= 2 else f"{numbers[0]} to {numbers[-1]}"
        print_messages(
            console,
            [
                (
                    f"`harness logs {page.run} --attempt N{root_option(capture_dir)}` prints the whole log of "
                    f"attempt N (N: {which})",
                    0,
                )
            ],
            paragraph=True,
        )


def print_spec(spec: "LaunchSpec", *, as_json: bool, miles: Optional["JSONObject"] = None) -> None:
    """Print a launch spec: one JSON document, or a readable listing (values exactly as written, secrets as ***);
    `miles`: the image preflight's facts, shown too (the manifest's `miles`)."""
    import json
    import shlex

    from rich.text import Text

    from harness.cli.messages import message_lines, output_width
    from harness.engines.spec import docker_run_command
    from harness.lab.milesargv import parse_flags

    if as_json:
        document = spec.to_dict()
        if miles is not None:
            document["miles"] = miles
        typer.echo(json.dumps(document, indent=2, allow_nan=False))
        return
    spec = spec.shown()  # every value by the secret rule: env secrets, URL passwords, a secret flag's values
    console = stdout()

    def out(*parts: Union[str, tuple[str, str]]) -> None:
        # Text, never markup: an image or a path with [brackets] or :colons: is shown as written.
        console.print(Text.assemble(*parts), soft_wrap=True)

    out(("run", "bold"), f"             {spec.run}   (dry run: nothing started)")
    out("run id          ", spec.run_id)
    out("engine          ", spec.engine + (f": {shlex.join(spec.command)}" if spec.command else ""))
    out("image           ", spec.image)
    if miles is not None:
        for line in message_lines(
            "miles           ", miles_text(miles), output_width(console.is_terminal, console.width)
        ):
            out(line)
    out("container       ", spec.container_name)
    out("capture         ", spec.capture_dir)
    out("steps expected  ", str(spec.steps_expected))
    out("time limit      ", f"{spec.max_minutes:g} min" if spec.max_minutes else "none")
    if spec.device_requests:
        for request in spec.device_requests:
            which = "all GPUs" if request.count == -1 else f"GPUs {','.join(request.device_ids or ())}"
            caps = ",".join(c for group in request.capabilities for c in group)
            out("gpu request     ", f"{which} (driver {request.driver}, capabilities {caps})")
    else:
        out("gpu request     ", "none")
    ulimits = " ".join(f"{k}={v}" for k, v in spec.ulimits.items())
    out(
        "shm size        ",
        f"{spec.shm_size}   ipc {spec.ipc_mode}   init {'yes' if spec.init else 'no'}   ulimits {ulimits}",
    )
    for mount in spec.mounts:
        out("mount           ", f"{mount.source} -> {mount.target}{' (read-only)' if mount.read_only else ''}")
    for name, value in spec.labels.items():
        out("label           ", f"{name}={value}")
    out(("environment", "bold"))
    width = output_width(console.is_terminal, console.width)
    for name, value in spec.display_env().items():
        for line in _wrapped_words(f"{name}={value}", width, first="  ", more="      "):
            out(line)
    out(("trainer argv", "bold"), " (as the image's entry runs it)")
    argv_groups = [flag.words for flag in parse_flags(list(spec.trainer_argv))]
    for line in shell_lines(argv_groups, width, first="  ", more="    "):
        out(line)
    out(("by hand", "bold"))
    for line in shell_lines(_command_groups(docker_run_command(spec)), width, first="  ", more="    "):
        out(line)


def miles_text(miles: "JSONObject") -> str:
    """The image preflight's facts: the Miles, whether it prints the unfiltered reward, then each path's state."""
    if not miles.get("checked"):
        return f"not checked ({miles.get('reason') or 'no preflight'})"
    if not miles.get("miles_found"):
        return "no `miles` package in the image: not a Miles image, nothing checked"
    name = f"commit {miles['commit']}" if miles.get("commit") else f"version {miles.get('version') or 'unknown'}"
    unfiltered = {True: "prints", False: "does not print", None: "unknown whether it prints"}[
        miles.get("prints_unfiltered_reward") if isinstance(miles.get("prints_unfiltered_reward"), bool) else None
    ]
    paths = miles.get("paths")
    loads = "; ".join(f"{path}: {state}" for path, state in paths.items()) if isinstance(paths, dict) and paths else ""
    cached = " (cached)" if miles.get("cached") else ""
    return f"Miles {name}{cached}, {unfiltered} {RAW_REWARD_UNFILTERED}" + (f": {loads}" if loads else "")


def shell_lines(groups: Sequence[Sequence[str]], width: int, *, first: str, more: str) -> list[str]:
    """A command as shell lines to copy: one line where it fits `width`, else continued with ` \\`, a group (a
    flag and its values) per line, its words apart where the group is wider than `width`; a word is never broken."""
    import shlex

    whole = shlex.join(word for group in groups for word in group)
    if len(first) + len(whole) <= width:
        return [first + whole]
    pieces: list[str] = []
    for group in groups:
        joined = shlex.join(group)
        if len(more) + len(joined) + 2 <= width or len(group) == 1:
            pieces.append(joined)
        else:
            pieces.extend(shlex.quote(word) for word in group)
    return [
        (first if i == 0 else more) + piece + (" \\" if i < len(pieces) - 1 else "") for i, piece in enumerate(pieces)
    ]


def _command_groups(argv: Sequence[str]) -> list[list[str]]:
    """`docker run ...` as groups: the program and its command, then each option with its value, then the image."""
    groups: list[list[str]] = [list(argv[:2])]
    words = list(argv[2:])
    while words:
        word = words.pop(0)
        if word.startswith("-") and words and not words[0].startswith("-") and len(words) > 1:
            groups.append([word, words.pop(0)])
        else:
            groups.append([word])
    return groups


def _wrapped_words(text: str, width: int, *, first: str, more: str) -> list[str]:
    """Text to read (an environment value), wrapped at spaces; a word is never broken."""
    import textwrap

    return textwrap.wrap(
        text, width=width, initial_indent=first, subsequent_indent=more, break_long_words=False, break_on_hyphens=False
    ) or [first]
