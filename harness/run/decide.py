"""Whether to start a run given its existing capture, and why: cached (default), retry, force (pure).

`run` decides in `retry` mode (`--force`: force), a sweep in the mode given.
The decision is made under the capture's lock, so the capture cannot change
between deciding and acting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal, Mapping, Optional, Sequence

from harness.capture import RERUN_ON_RETRY, RunState, RunStatus
from harness.errors import ExitCode, HarnessError
from harness.sim.config import TIME_SCALE_ENV

if TYPE_CHECKING:
    from harness.engines.base import Problem

Mode = Literal["cached", "retry", "force"]

# What a refusal shows of a changed configuration: a few keys, short values, so it stays one line.
MAX_CHANGES_SHOWN = 6
MAX_VALUE_SHOWN = 40
# Keys of the experiment that say nothing about the run's numbers.
_NOT_COMPARED = ("description", "extends", "export")  # export: where the records are shown, not what they are
_ABSENT = object()


@dataclass(frozen=True)
class Decision:
    """Run it or skip it, and the reason shown to the user. Running it makes a new attempt; none is ever lost."""

    run: str
    action: Literal["run", "skip"]
    reason: str
    refused: bool = False  # a skip that fails the command: the run asked for cannot be had as it was asked
    # The reason speaks of the earlier attempt only ("it was failed (...)"), so it stays true once the run has run.
    about_earlier: bool = False

    def not_started(self) -> str:
        """One line for a refusal: which run, and why (the reason says what to do)."""
        return f"run {self.run} not started: {self.reason}"


def decide(
    run: str,
    run_id: str,
    status: Optional[RunStatus],
    mode: Mode,
    broken: Optional[str] = None,
    changes: Sequence[str] = (),
) -> Decision:
    """Whether `run` should start given its existing capture (if any) and the rerun mode.

    `status` is the run's current attempt's (harness.capture.attempts). A
    capture that never started (`not_started`) counts as no capture: it is run
    again in every mode. A capture that succeeded with another configuration
    (another run id; `changes` names what differs) is refused unless `force`:
    reusing it would report numbers of a run that was not asked for. Running
    makes a new attempt; the earlier ones are kept (`harness history`).
    """
    if broken is not None:
        if mode == "force":
            return Decision(
                run,
                "run",
                f"--force reruns a capture whose status is broken ({broken}); the old attempt is kept",
            )
        return Decision(run, "skip", f"its status is broken ({broken}); --force reruns it (the old attempt is kept)")
    if status is None:
        return Decision(run, "run", "no capture yet")
    if status.state == RunState.NOT_STARTED:
        return Decision(
            run, "run", f"its last attempt never started ({status.error or 'no reason recorded'})", about_earlier=True
        )
    if status.state == RunState.RUNNING:
        return Decision(
            run,
            "skip",
            f"its capture says running (harness pid {status.harness_pid} on "
            f"{status.harness_host}); if that harness is gone, `harness recover` settles it",
        )
    changed = (
        "" if status.run_id == run_id else f" with another configuration ({_changed(status.run_id, run_id, changes)})"
    )
    if mode == "force":
        return Decision(
            run,
            "run",
            f"--force reruns the {status.state} capture{changed}; the old attempt is kept and stays current until "
            "the new one succeeds",
        )
    if status.state == RunState.SUCCEEDED:
        if changed:
            return Decision(
                run,
                "skip",
                f"its capture succeeded at {status.ended_at}{changed}; --force "
                "(make: FORCE=1) reruns it, keeping the old attempt, or --name NAME runs this configuration under "
                "a run name of its own",
                refused=True,
            )
        return Decision(run, "skip", f"succeeded at {status.ended_at}; --force reruns it")
    if status.state in RERUN_ON_RETRY:
        if mode == "retry":
            return Decision(
                run,
                "run",
                f"--retry reruns it: it was {status.state} ({status.error or 'no reason recorded'})",
                about_earlier=True,
            )
        return Decision(run, "skip", f"was {status.state} ({status.error or 'no reason recorded'}); --retry reruns it")
    return Decision(run, "skip", f"unknown state {status.state!r} in its status.json")


def _changed(old_run_id: str, run_id: str, changes: Sequence[str]) -> str:
    what = ", ".join(changes[:MAX_CHANGES_SHOWN]) + (
        f" and {len(changes) - MAX_CHANGES_SHOWN} more" if len(changes) > MAX_CHANGES_SHOWN else ""
    )
    return f"{what}; run id {old_run_id}, now {run_id}" if what else f"run id {old_run_id}, now {run_id}"


def configuration_changes(
    manifest: Optional[Mapping[str, object]],
    experiment: Mapping[str, object],
    trainer_argv: Sequence[str],
    image: str,
    time_scale: float,
    change: Callable[[str, object, object], str] = lambda key, old, new: _change(key, old, new),
) -> list[str]:
    """What differs between an old capture's manifest and a launch now, as `key old -> new` (pure).

    Compared: the time scale (its environment variable is the same fact, said
    once), every experiment key (dotted, secrets as *** on both sides), the
    trainer argv where no `miles` key explains it, and the image. `change`
    words one difference (the key, the old value, the new one).
    """
    if not manifest:
        return ["its manifest.json is missing or unreadable"]
    old_experiment = manifest.get("experiment") if isinstance(manifest.get("experiment"), dict) else {}
    old_flat, new_flat = _flatten(old_experiment), _flatten(experiment)
    changes = []
    if manifest.get("time_scale", 1.0) != time_scale:  # first: the guard's times follow it
        changes.append(change("time scale", manifest.get("time_scale", _ABSENT), time_scale))
    for key in sorted(old_flat.keys() | new_flat.keys()):
        if key.split(".")[0] in _NOT_COMPARED or key == f"container.env.{TIME_SCALE_ENV}":
            continue
        if old_flat.get(key, _ABSENT) != new_flat.get(key, _ABSENT):
            changes.append(change(key, old_flat.get(key, _ABSENT), new_flat.get(key, _ABSENT)))
    old_argv = manifest.get("trainer_argv")
    if (old_argv if isinstance(old_argv, list) else []) != list(trainer_argv) and not any(
        change.startswith("miles.") for change in changes
    ):
        changes.append("trainer argv")
    if manifest.get("image") != image and not any(change.startswith("image ") for change in changes):
        changes.append(change("image", manifest.get("image", _ABSENT), image))
    return changes


def manifest_changes(
    old: Optional[Mapping[str, object]],
    new: Optional[Mapping[str, object]],
    current: str = "the current attempt",
    *,
    form: Optional[str] = None,
) -> list[str]:
    """What differs between an attempt's manifest (`old`) and the current attempt's (`new`), each difference as
    `key <its value> here, <the current's> in <current>`, or as `form` puts the two values (`{} -> {}`: one attempt
    to the next) (pure; the same rules as a new launch)."""
    form = form or f"{{}} here, {{}} in {current}"
    if not new:
        return ["the current attempt's manifest.json is missing or unreadable"]
    experiment = new.get("experiment") if isinstance(new.get("experiment"), Mapping) else {}
    argv = new.get("trainer_argv")
    time_scale = new.get("time_scale", 1.0)
    return configuration_changes(
        old,
        experiment if isinstance(experiment, Mapping) else {},
        [str(word) for word in argv] if isinstance(argv, list) else [],
        str(new.get("image", "")),
        float(time_scale) if isinstance(time_scale, (int, float)) and not isinstance(time_scale, bool) else 1.0,
        lambda key, here, there: _change(key, here, there, form),
    )


def _flatten(value: object, prefix: str = "") -> dict[str, object]:
    if isinstance(value, Mapping) and value:
        flat: dict[str, object] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def _change(key: str, old: object, new: object, form: str = "{} -> {}") -> str:
    """`key old -> new` (or as `form` puts the two values); a value too long to show leaves the key alone."""
    shown = [
        (
            "absent"
            if value is _ABSENT
            else "unset"
            if value is None
            else f"{value:g}"
            if isinstance(value, float)
            else str(value)
        )
        for value in (old, new)
    ]
    if any(len(value) > MAX_VALUE_SHOWN for value in shown):
        return key
    return f"{key} {form.format(*shown)}"


def refuse_before_starting(decisions: Sequence[Decision]) -> None:
    """Refuse (exit 2) naming the first run refused: a succeeded capture of another configuration, as `run` does."""
    refused = [decision for decision in decisions if decision.refused]
    if refused:
        more = f" (and {len(refused) - 1} more: --dry-run lists them)" if len(refused) > 1 else ""
        raise HarnessError(refused[0].not_started() + more)


def dry_run_refusal(rows: Sequence[tuple[Decision, Sequence["Problem"]]]) -> Optional[HarnessError]:
    """How a dry run of these runs (each with its pre-flight problems) ends, as the command would (pure): None when
    it would start them or has them already; else the first refused run (exit 2: `run`, `sweep` and `decide` refuse
    before they start anything), else the first run that would start with pre-flight problems, with their exit code.
    """
    refused = [decision for decision, _ in rows if decision.refused]
    if refused:
        more = f" (and {len(refused) - 1} more, listed above)" if len(refused) > 1 else ""
        return HarnessError(f"run {refused[0].run} would not start: {refused[0].reason}{more}")
    for decision, problems in rows:
        if decision.action == "run" and problems:
            count = f"{len(problems)} pre-flight problem{'s' if len(problems) != 1 else ''}"
            return HarnessError(f"run {decision.run} would not start: {count}, above", problems[0].exit_code)
    return None


def exit_code_for_state(state: str) -> Optional[ExitCode]:
    """The exit code `harness run` gives a run that ended in `state` (None: it has not ended, or never started, and
    its trainer never ran); `status` shows it, so the shell and the table agree."""
    if state == RunState.SUCCEEDED:
        return ExitCode.OK
    if state == RunState.INTERRUPTED:
        return ExitCode.INTERRUPTED
    if state in (RunState.FAILED, RunState.NO_METRICS, RunState.STOPPED):
        return ExitCode.RUN_FAILED
    return None
