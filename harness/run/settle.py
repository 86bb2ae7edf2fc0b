"""Settle runs whose harness is gone, through the engines, touching only what each capture owns.

A capture owns an engine object (a container, a process run) when the object
carries the capture's directory and current run id, and is the one the
capture recorded (when it recorded one). Recover acts on a capture only when
no harness holds its lock, and then:

- `running` (its harness died): thaw the object, stop it (unless
  `--leave-running`), save the lines the capture lacks, re-read its steps and
  record the truth: how the trainer ended, or `interrupted` if recover
  stopped it, or `not_started` if it never started;
- final but `capture_complete: false` (the disk filled up, the engine went
  away): save the rest and record how the trainer ended, keeping the state
  and the reason the harness recorded;
- in both: a pause window the heat guard left open (its harness died, or
  its engine went away, while the run was frozen) is closed at the time
  recover found it, once the run is thawed: the closing line is appended
  with the same start (the last line per start is the truth), and a note
  says so;
- a pause window left open although the run is not frozen (its closing
  line could not be written: a full disk) is closed at the time the run is
  known to have run again: its first log line after the window's start, else
  the run's end. A final capture with such a window gets only that line
  (action `close`); its status is not rewritten;
- final: never rewritten. An exited container its harness did not get to
  remove is removed (unless kept with `--keep`);
- a status.json a power loss tore (NUL bytes, empty, cut short, or lacking
  fields): rebuilt from the fields it still has and the evidence on disk (the
  manifest, the log, the saved steps), the original kept beside it
  (`status.json.torn`). One that still says a final state keeps it (action
  `rebuild`); one that says running, or nothing, is settled as above;
- an attempt recover settles as `succeeded` becomes its run's current
  attempt, as its harness would have made it (unless a newer attempt that
  succeeded is current); so does one that succeeded but whose harness died
  before it could make it current (action `current`: its record never names
  it, so a `restore` is never undone).

Everything else (another run id, a capture that is final, no capture at all)
is left alone and said so. Deciding (`plan_recovery`) is pure; `carry_out`
acts on the engine, then makes one call into the capture for its files
(harness.capture.repair).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from harness.capture.attempts import RunAttempts, all_attempts
from harness.capture.layout import Capture, this_host, utc_now
from harness.capture.lock import CaptureLock, holder, in_use
from harness.capture.reader import StatusRead, attempt_number, read_status, run_path_of
from harness.capture.records import RunState, RunStatus
from harness.capture.repair import (
    NEVER_CURRENT,
    Action,
    Repair,
    Repaired,
    TrainerEnd,
    harness_gone,
    has_open_window,
    never_made_current,
    odd_files,
    read_status_for_recover,
    repair_capture,
)
from harness.engines import CREATED, EXITED, GONE, PAUSED, Description, Engine, EngineUnavailable, RunHandle
from harness.engines.logstream import LogPosition
from harness.engines.spec import LABEL_CAPTURE_DIR, LABEL_RUN, LABEL_RUN_ID
from harness.errors import ExitCode, HarnessError
from harness.run.context import DEFAULT_GRACE_S
from harness.run.labels import LABEL_ATTEMPT, LABEL_KEEP
from harness.secrets import KnownSecrets, secret_values_of


@dataclass(frozen=True)
class EngineObject:
    """Something an engine runs (or ran) under the harness's labels."""

    engine: str
    handle: RunHandle
    description: Description

    @property
    def id(self) -> str:
        return self.description.id

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.description.labels)

    @property
    def run(self) -> str:
        return self.labels.get(LABEL_RUN, "?")

    @property
    def run_id(self) -> str:
        return self.labels.get(LABEL_RUN_ID, "?")

    @property
    def capture_dir(self) -> Optional[Path]:
        """The run's capture path its labels name (`<root>/<run>`)."""
        directory = self.labels.get(LABEL_CAPTURE_DIR)
        return Path(os.path.abspath(directory)) if directory else None

    @property
    def attempt_dir(self) -> Optional[Path]:
        """The directory of the attempt it belongs to (the run's own directory for a run from before attempts)."""
        run_path = self.capture_dir
        attempt = attempt_number(self.labels.get(LABEL_ATTEMPT, ""))
        if run_path is None or attempt is None:
            return run_path
        return RunAttempts(run_path).directory / str(attempt)

    @property
    def kept(self) -> bool:
        return self.labels.get(LABEL_KEEP) == "1"

    @property
    def kind(self) -> str:
        """What the engine runs: a container, or a process."""
        return "container" if self.engine == "docker" else "process"

    @property
    def name(self) -> str:
        kind = "container" if self.engine == "docker" else "process run"
        return f"{kind} {self.description.name or self.id[:12]}"


@dataclass(frozen=True)
class Plan:
    """What recover does to one capture, and why; `strangers` are objects it leaves alone, with the reason."""

    capture_dir: Path
    action: Action
    reason: str
    status: Optional[RunStatus] = None
    owned: Optional[EngineObject] = None
    strangers: tuple[tuple[EngineObject, str], ...] = ()

    @property
    def run_path(self) -> Path:
        """The run's capture path (`<root>/<run>`), whose lock guards all its attempts."""
        return run_path_of(self.capture_dir)

    @property
    def run(self) -> str:
        return self.run_path.name

    @property
    def attempt(self) -> Optional[int]:
        """The attempt's number (None for a run's own directory, from before attempts)."""
        return attempt_number(self.capture_dir.name) if self.run_path != self.capture_dir else None

    @property
    def label(self) -> str:
        """`RUN`, or `RUN attempt N` for an attempt that is not the run's current one: how recover names what it
        looked at."""
        current = RunAttempts(self.run_path).current()
        if self.attempt is None or (current is not None and current.number == self.attempt):
            return self.run
        return f"{self.run} attempt {self.attempt}"

    def describe(self) -> str:
        """One line for `run`'s warning about leftovers."""
        what = f" ({self.owned.name}, {self.owned.description.state})" if self.owned else ""
        return f"run {self.label}{what}: {self.reason}"


def engine_objects(engines: Sequence[Engine], notes: list[str]) -> list[EngineObject]:
    """Everything the engines hold under the harness's run label; an engine out of reach is a note."""
    found = []
    for engine in engines:
        try:
            for handle in engine.list({LABEL_RUN: None}):
                try:
                    found.append(EngineObject(engine.name, handle, handle.describe()))
                except EngineUnavailable:
                    raise
                except HarnessError as err:
                    if err.exit_code != ExitCode.NOT_FOUND:
                        raise
                    # Removed between the listing and the look (another harness finished with it): not ours to do.
        except EngineUnavailable as err:
            notes.append(f"{engine.name} engine: {err.message}")
    return found


def plan_recovery(
    found: StatusRead,
    holder_now: Optional[str],
    objects: Sequence[EngineObject],
    *,
    here: str,
    other_hosts: bool = False,
    open_window: bool = False,
) -> Optional[Plan]:
    """What to do with one capture (pure); None when there is nothing to do or say.

    `holder_now`: who holds the capture's lock (None: nobody, its harness is gone).
    `open_window`: its pauses.jsonl has a window still open.
    """
    directory = found.directory
    if holder_now is not None:
        if not objects and not (found.status and found.status.state == RunState.RUNNING):
            return None
        return Plan(directory, "leave", f"in use by a live harness ({holder_now})")
    if found.broken is not None:
        return Plan(
            directory,
            "leave",
            f"its status is broken ({found.broken}); nothing is changed",
            strangers=tuple((o, "its capture's status is broken") for o in objects),
        )
    status = found.status
    if status is None:
        if not objects:
            return None
        return Plan(
            directory,
            "leave",
            "no capture names it (no status.json); remove it by hand if it is not needed",
            strangers=tuple((o, f"no capture at {directory}") for o in objects),
        )
    owned, strangers = _owned(status, objects)
    plan = Plan(directory, "leave", "", status, owned, strangers)
    if found.torn and status.is_final:
        return replace(
            plan,
            action="rebuild",
            reason=f"its status.json is torn ({found.broken}) but still says {status.state}: recover rebuilds the "
            "rest from its files",
        )
    if status.state == RunState.RUNNING:
        if status.harness_host not in (None, here) and not other_hosts:
            return replace(
                plan,
                owned=None,
                reason=f"its harness ran on {status.harness_host}, whose lock cannot be "
                "seen from here (--all settles it)",
            )
        gone = harness_gone(status)
        said = "recover rebuilds its status from its files" if found.torn else "its capture still says running"
        return replace(plan, action="settle", reason=f"{gone}; {said}")
    if not status.capture_complete:
        if owned is None:
            return replace(plan, reason="its capture is incomplete, but the engine no longer has its container")
        return replace(plan, action="complete", reason=f"its capture is incomplete ({status.error})")
    frozen = owned is not None and owned.description.state == PAUSED
    if open_window and not frozen and status.harness_host in (None, here):
        return replace(
            plan, action="close", reason=f"{status.state}, with a pause window left open although the run is not frozen"
        )
    if owned is not None and owned.description.state in (EXITED, GONE) and not owned.kept:
        return replace(
            plan, action="remove", reason=f"{status.state}; its harness recorded the end but did not remove it"
        )
    if not strangers and owned is None:
        return None
    return replace(plan, reason=f"its capture is final ({status.state}): never rewritten")


def _owned(
    status: RunStatus, objects: Sequence[EngineObject]
) -> tuple[Optional[EngineObject], tuple[tuple[EngineObject, str], ...]]:
    owned, strangers = None, []
    for obj in objects:
        if obj.run_id != status.run_id:
            strangers.append((obj, f"it belongs to run id {obj.run_id}; the capture holds {status.run_id}"))
        elif status.container is not None and obj.id != status.container:
            strangers.append((obj, f"the capture records {status.container[:12]}, not this one"))
        elif owned is not None:
            strangers.append((obj, f"{owned.name} is the one the capture owns"))
        else:
            owned = obj
    return owned, tuple(strangers)


def plan_all(
    capture_root: Optional[Path],
    engines: Sequence[Engine],
    notes: list[str],
    *,
    other_hosts: bool = False,
    outside: Optional[list[EngineObject]] = None,
) -> list[Plan]:
    """A plan per capture that is running without its harness, incomplete, or named by an engine object.

    With `outside` (a list to fill), only the engine objects whose capture-dir
    label points into `capture_root` are planned; the others go into `outside`.
    """
    objects = engine_objects(engines, notes)
    root = Path(os.path.abspath(capture_root)) if capture_root is not None else None
    by_dir: dict[Path, list[EngineObject]] = {}
    for obj in objects:
        if obj.capture_dir is None or obj.attempt_dir is None:
            continue
        if outside is not None and root is not None and not obj.capture_dir.is_relative_to(root):
            outside.append(obj)
            continue
        by_dir.setdefault(obj.attempt_dir, []).append(obj)
    directories = set(by_dir)
    if root is not None:
        directories.update(Path(os.path.abspath(attempt.directory)) for attempt in all_attempts(root))
    plans = []
    for directory in sorted(directories):
        found = read_status_for_recover(directory)
        window = has_open_window(directory)
        if (
            not by_dir.get(directory)
            and found.status is not None
            and found.status.state.is_final
            and found.status.capture_complete
            and not window
            and not found.torn
        ):
            if never_made_current(directory, found.status):
                plans.append(Plan(directory, "current", NEVER_CURRENT, found.status))
            continue
        run_path = run_path_of(directory)
        holder_now = holder(run_path) if in_use(run_path) else None
        plan = plan_recovery(
            found, holder_now, by_dir.get(directory, []), here=this_host(), other_hosts=other_hosts, open_window=window
        )
        if plan is not None:
            plans.append(plan)
    return plans


# --------------------------------------------------------------------------- acting


@dataclass
class Result:
    """What recover did to one capture."""

    plan: Plan
    status: Optional[RunStatus]
    lines_saved: int = 0
    container: str = "-"  # stopped, left running, removed, kept, gone
    windows_closed: int = 0  # pause windows the heat guard left open
    closed_at: Optional[str] = None  # when they were closed (the time the run was known to run again)
    closed_when: str = ""  # what that time is
    skipped: Optional[str] = None  # why nothing was done after all (its harness came back)
    notes: list[str] = field(default_factory=list)
    torn_kept_as: Optional[str] = None  # where a torn status.json was kept, beside the rebuilt one
    made_current: Optional[str] = None  # an attempt it settled as succeeded became current: why, or why not


def carry_out(
    plan: Plan, *, leave_running: bool = False, keep: bool = False, grace_s: float = DEFAULT_GRACE_S
) -> Result:
    """Act on a plan under the capture's lock (taken here; a harness that holds it wins)."""
    if plan.action == "leave":
        return Result(plan, plan.status, skipped=plan.reason)
    odd = odd_files(plan.capture_dir) if plan.action != "current" else None
    if odd:
        return Result(plan, plan.status, skipped=odd)
    lock = CaptureLock(plan.run_path, {"pid": os.getpid(), "host": this_host(), "recover": True, "since": utc_now()})
    if not lock.try_acquire():
        return Result(plan, plan.status, skipped=f"in use by a live harness ({holder(plan.run_path)})")
    try:
        if plan.action == "current":  # made current as its harness would have made it, if it still is to be
            found = read_status(plan.capture_dir)
            return _repaired(plan, repair_capture(Repair(plan.capture_dir, plan.run, "current", found.status)))
        found = read_status_for_recover(plan.capture_dir)  # again, under the lock: it may have changed since
        fresh = plan_recovery(
            found,
            None,
            [plan.owned] if plan.owned else [],
            here=this_host(),
            other_hosts=True,
            open_window=has_open_window(plan.capture_dir),
        )
        if fresh is None or fresh.action != plan.action:
            return Result(plan, found.status, skipped="its capture changed meanwhile; run recover again")
        settled = Settle(replace(plan, status=found.status), found.torn, leave_running, keep, grace_s)
        return _act(settled, by="harness recover")
    finally:
        lock.release()


@dataclass(frozen=True)
class Settle:
    """A plan to carry out under the capture's lock, with how: `torn`, its status.json was torn (kept aside);
    `leave_running`, `keep`, `grace_s` as `harness recover` takes them."""

    plan: Plan
    torn: bool = False
    leave_running: bool = False
    keep: bool = False
    grace_s: float = DEFAULT_GRACE_S


def _act(settle: Settle, *, by: str) -> Result:
    """The engine's part first (thaw, stop, the lines it holds), then one repair of the capture's files, then the
    object removed once the capture holds everything."""
    plan = settle.plan
    obj = plan.owned
    trainer: Optional[TrainerEnd] = None
    container = "-"
    if plan.action == "settle" and obj is None:
        container = "none"
    elif plan.action in ("settle", "complete") and obj is not None:
        trainer, container = _end_trainer(obj, settle)
    job = Repair(plan.capture_dir, plan.run, plan.action, plan.status, settle.torn, trainer, by)
    result = _repaired(plan, repair_capture(job))
    if obj is None:
        result.container = container
    elif plan.action == "remove" or (
        plan.action == "close" and obj.description.state in (EXITED, GONE) and not obj.kept
    ):
        result.container = _remove(obj.handle, settle.keep)
    elif trainer is not None and not trainer.never_started:
        result.container = _remove(obj.handle, settle.keep or obj.kept) if trainer.exited else "left running"
    else:
        result.container = container
    return result


def _end_trainer(obj: EngineObject, settle: Settle) -> tuple[TrainerEnd, str]:
    """Thaw the trainer recover found, stop it (unless left running), and say how it ended; a container that never
    started is removed (nothing in it to keep)."""
    handle = obj.handle
    state = handle.describe().state
    if state == CREATED and settle.plan.action == "settle":
        return TrainerEnd(obj.id, never_started=True), _remove(handle, False)
    thawed_at = None
    if state == PAUSED:
        handle.resume()
        thawed_at = utc_now()  # once it runs again: that ends the freeze
    capture = Capture(settle.plan.capture_dir, settle.plan.run)
    known = known_secrets_of(handle, capture)  # before the stop: a process's environment goes with it
    stopped = state not in (EXITED, GONE, CREATED) and not settle.leave_running
    if stopped:
        handle.stop(settle.grace_s)
    after = handle.describe()
    end = TrainerEnd(
        obj.id,
        thawed_at=thawed_at,
        stopped=stopped,
        exited=after.state in (EXITED, GONE),
        exit_code=after.exit_code,
        finished_at=after.finished_at,
        more_lines=lines_after(handle, known),
    )
    return end, "-"


def lines_after(handle: RunHandle, known: KnownSecrets) -> Callable[[list[str]], Iterator[str]]:
    """The engine's lines after a capture's last ones (given container.log's tail), masked as the log pump masks."""

    def more(tail: list[str]) -> Iterator[str]:
        position = LogPosition.after(tail)
        position.stored = known.mask  # its lines were stored masked
        return (known.mask(line) for line in handle.logs(position, follow=False))

    return more


def _repaired(plan: Plan, repaired: Repaired) -> Result:
    return Result(
        plan,
        repaired.status,
        lines_saved=repaired.lines_saved,
        windows_closed=repaired.windows_closed,
        closed_at=repaired.closed_at,
        closed_when=repaired.closed_when,
        skipped=repaired.skipped,
        torn_kept_as=repaired.torn_kept_as,
        made_current=repaired.made_current,
    )


def _remove(handle: RunHandle, keep: bool) -> str:
    if keep:
        return "kept"
    handle.remove()
    return "removed"


def known_secrets_of(handle: RunHandle, capture: Capture) -> KnownSecrets:
    """The secrets the trainer of `handle` was given, as far as its engine still holds them (a Docker container's
    environment; a live process's), with the names the capture's manifest lists as secret: masked in the lines
    the harness saves or shows from the engine, as the log pump masked the rest."""
    given = getattr(handle, "given_values", lambda: None)()
    if given is None:
        return KnownSecrets([])
    manifest = capture.read_manifest() or {}
    experiment = manifest.get("experiment")
    container = experiment.get("container") if isinstance(experiment, dict) else None
    listed = container.get("secret_env") if isinstance(container, dict) else None
    env, words = given
    names = [str(name) for name in listed] if isinstance(listed, list) else []
    return KnownSecrets(secret_values_of(env, words, names))


def settle_for_run(run_path: Path, engine: Engine, *, grace_s: float = DEFAULT_GRACE_S) -> Optional[str]:
    """For `run`, which holds the run's capture lock: settle each attempt a dead harness left `running`, if nothing
    of it still runs.

    Returns why it cannot (something of it still runs: `harness recover` decides), or None.
    """
    notes: list[str] = []
    objects: Optional[list[EngineObject]] = None
    for attempt in RunAttempts(run_path).all():
        found = read_status_for_recover(attempt.directory)
        if found.status is None or found.status.state != RunState.RUNNING:
            if not found.torn and never_made_current(attempt.directory, found.status):
                repair_capture(Repair(attempt.directory, run_path.name, "current", found.status, by="harness run"))
            continue
        if objects is None:
            objects = engine_objects([engine], notes)
        directory = Path(os.path.abspath(attempt.directory))
        plan = plan_recovery(found, None, [o for o in objects if o.attempt_dir == directory], here=this_host())
        why_not = _why_not_settle(plan, attempt.number, notes)
        if why_not is not None:
            return why_not
        if plan is not None and plan.action == "settle":
            _act(Settle(plan, found.torn, grace_s=grace_s), by="harness run")
    return None


def _why_not_settle(plan: Optional[Plan], attempt: int, notes: list[str]) -> Optional[str]:
    """Why `harness run` leaves an attempt that says running to `harness recover` (None: it settles it, or there is
    nothing to settle)."""
    if plan is None:
        return None
    if plan.action != "settle":
        return plan.reason
    odd = odd_files(plan.capture_dir)
    if odd is not None:
        return f"attempt {attempt}: {odd}"
    if plan.owned is not None and plan.owned.description.alive:
        return (
            f"its capture says running, its harness is gone, and its {plan.owned.name} is still "
            f"{plan.owned.description.state}; `harness recover` stops it and saves its log "
            "(`--leave-running` keeps it running)"
        )
    if notes:
        return f"its capture says running and its engine cannot be asked ({'; '.join(notes)})"
    return None
