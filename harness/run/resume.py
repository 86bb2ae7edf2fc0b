"""What a checkpointed attempt does before its trainer starts, decided under the capture's lock (docs/checkpoints.md).

- `--resume`: continue the run's lineage from its newest complete checkpoint.
  Refused in one line when there is nothing to continue (no attempt, one that
  succeeded, another configuration, no complete checkpoint: `--force` starts
  anew), or nothing left to run (the checkpoint's next rollout at or past the
  run's last).
- A fresh start: its checkpoint directory must hold no other run's
  checkpoints; one that holds a complete checkpoint of this run is refused
  (`--resume` continues it) unless `--force`, which moves them aside, whole.
- Either way, the disk rule (harness.checkpoints.disk) before anything starts.

Deciding reads the capture and the checkpoint directory (stat and small
reads) and changes nothing; harness.run.attempt_checkpoints does what was
decided, once the attempt is made.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Optional

from harness.capture.attempts import RunAttempts
from harness.capture.reader import ATTEMPTS_DIR
from harness.capture.records import RunState, RunStatus
from harness.checkpoints.choose import NoCheckpoint, choose_checkpoint
from harness.checkpoints.disk import SizeEstimate, estimate_size, free_bytes, room_problem
from harness.checkpoints.layout import CheckpointSpec
from harness.checkpoints.lineage import lineage_head, lineage_of, read_resume
from harness.checkpoints.owner import marker_problem
from harness.checkpoints.start import CheckpointStart, ResumeFrom
from harness.checkpoints.verify import iterations_on_disk, verify_checkpoint
from harness.engines.spec import ENV_TRAINER_ARGS, LaunchSpec
from harness.errors import ExitCode, HarnessError
from harness.fs.paths import outside_root
from harness.lab.milesargv import flag_values
from harness.lab.milesnames import HF_CHECKPOINT_FLAG, NUM_ROLLOUT_FLAG
from harness.run.decide import Mode
from harness.run.plan import Planned
from harness.times import now_rfc3339

FORCE_HINT = "--force starts anew (make: FORCE=1)"
MODEL_FLAG = HF_CHECKPOINT_FLAG


def plan_checkpoint_start(plan: Planned, *, resume: bool, mode: Mode) -> Planned:
    """`plan` with what its attempt does about checkpoints decided (and its spec loading for a resume); a refusal is
    a one-line HarnessError. A run without a `checkpoint` block: `--resume` is refused, else `plan` as it is."""
    spec = plan.spec
    if spec.checkpoint is None:
        if resume:
            raise HarnessError(
                f"run {spec.run}: its experiment has no `checkpoint` block, so it saves none and cannot resume; "
                f"add one (docs/checkpoints.md), or run it without --resume"
            )
        return plan
    ckpt = spec.checkpoint
    leaves = outside_root(ckpt.root, ckpt.directory)
    if leaves is not None:
        raise HarnessError(f"run {spec.run} not started: its checkpoint directory {ckpt.directory} {leaves}")
    if resume:
        start = _resume_start(plan, ckpt)
        spec = resumed_spec(spec, ckpt)
    else:
        start = _fresh_start(plan, ckpt, mode)
    start = replace(start, estimate=_check_room(plan, ckpt, start))
    return replace(plan, spec=spec, checkpoints=start)


def resumed_spec(spec: LaunchSpec, ckpt: CheckpointSpec) -> LaunchSpec:
    """The spec of a resumed attempt: `--load` of the run's checkpoint directory after its save flags (pure)."""
    load = ckpt.load_flags()
    argv = list(spec.trainer_argv)
    end = argv.index(ckpt.save_flags()[-1]) + 1  # after the sentinel's path: the last of the save flags
    env = dict(spec.env)
    env[ENV_TRAINER_ARGS] = shlex.join([*shlex.split(env[ENV_TRAINER_ARGS]), *load])
    return replace(spec, trainer_argv=(*argv[:end], *load, *argv[end:]), env=env)


def _resume_start(plan: Planned, ckpt: CheckpointSpec) -> CheckpointStart:
    spec = plan.spec
    attempts = RunAttempts(Path(spec.capture_dir))
    head = lineage_head(attempts)
    if head is None:
        raise HarnessError(f"run {spec.run}: no attempt to resume (it never ran); run it without --resume")
    status = head.status_read().status
    assert status is not None  # lineage_head takes only attempts with a status
    if status.state == RunState.SUCCEEDED:
        raise HarnessError(
            f"run {spec.run}: attempt {head.number} succeeded at {status.ended_at}; nothing to resume ({FORCE_HINT})"
        )
    if status.state == RunState.RUNNING:
        raise HarnessError(
            f"run {spec.run}: attempt {head.number} says running; if its harness is gone, `harness recover` settles "
            "it first",
            ExitCode.BUSY,
        )
    if status.run_id != spec.run_id:
        raise HarnessError(
            f"run {spec.run}: attempt {head.number} ran another configuration (run id {status.run_id}, now "
            f"{spec.run_id}): its checkpoints are not this run's; {FORCE_HINT}"
        )
    if os.path.isdir(ckpt.directory):
        foreign = marker_problem(ckpt.directory, spec.run, spec.run_id)
        if foreign is not None:
            raise HarnessError(f"run {spec.run}: not resumed from {ckpt.directory}: {foreign}")
    choice = choose_checkpoint(ckpt.directory, data_state=ckpt.data_state, root=ckpt.root)
    if isinstance(choice, NoCheckpoint):
        raise HarnessError(f"run {spec.run}: no complete checkpoint to resume from: {choice.why}; {FORCE_HINT}")
    if choice.next_rollout_id >= spec.steps_expected:
        raise HarnessError(
            f"run {spec.run}: nothing left to run: {choice.check.name}'s next rollout {choice.next_rollout_id} is at "
            f"or past {NUM_ROLLOUT_FLAG} {spec.steps_expected} (the steps key), so the trainer would run no rollout"
        )
    notes = [
        f"{spec.run}: resuming attempt {head.number} ({status.state}, {status.steps_complete}/{status.steps_expected} "
        f"steps) from {choice.check.name}: rollout {choice.next_rollout_id} onward"
    ]
    if choice.passed_over:
        notes.append(f"{spec.run}: passed over, not complete: {choice.passed_over_text()}")
    return CheckpointStart(ckpt, ResumeFrom(head.number, lineage_of(head), choice), notes=tuple(notes))


def _fresh_start(plan: Planned, ckpt: CheckpointSpec, mode: Mode) -> CheckpointStart:
    spec = plan.spec
    on_disk = iterations_on_disk(ckpt.directory)
    if not on_disk:
        return CheckpointStart(ckpt)
    foreign = marker_problem(ckpt.directory, spec.run, spec.run_id)
    if foreign is not None:
        raise HarnessError(f"run {spec.run} not started: its checkpoint directory {ckpt.directory}: {foreign}")
    complete = next(
        (
            check
            for n in on_disk
            if (check := verify_checkpoint(ckpt.directory, n, data_state=ckpt.data_state)).complete
        ),
        None,
    )
    aside = f"{ckpt.directory}.set-aside-{now_rfc3339()[:19].replace(':', '')}"
    if complete is not None and mode != "force":
        raise HarnessError(
            f"run {spec.run} not started: its checkpoint directory holds {complete.name}, complete (rollout "
            f"{complete.rollout_id}); --resume continues from it (make: ARGS=--resume), or --force starts anew and "
            "moves its checkpoints aside"
        )
    why = "--force starts anew" if complete is not None else "none of them is complete"
    note = f"{spec.run}: the earlier checkpoints ({why}) are moved aside, whole, to {aside}; delete it when unneeded"
    return CheckpointStart(ckpt, move_aside_to=aside, notes=(note,))


def _check_room(plan: Planned, ckpt: CheckpointSpec, start: CheckpointStart) -> Optional[SizeEstimate]:
    """The disk rule: one line with the numbers when the root has no room for keep + 1 checkpoints."""
    measured: list[int] = []
    held = 0
    if start.resume is not None:  # the lineage's checkpoints: measured, and freed by `keep` as new ones come
        for iteration in iterations_on_disk(ckpt.directory):
            check = verify_checkpoint(ckpt.directory, iteration, data_state=ckpt.data_state)
            held += check.bytes
            if check.complete:
                measured.append(check.bytes)
    model = _model_path(plan.spec)
    estimate = estimate_size(
        measured, simulated=plan.sim is not None, model_dir=_host_path(plan.spec, model), model_name=model
    )
    problem = room_problem(
        free=free_bytes(_existing(ckpt.directory)),
        held=held,
        keep=ckpt.keep,
        estimate=estimate,
        root=ckpt.root,
        run=plan.spec.run,
    )
    if problem is not None:
        raise HarnessError(problem, ExitCode.BAD_INPUT)
    return estimate


def _model_path(spec: LaunchSpec) -> Optional[str]:
    values = flag_values(list(spec.trainer_argv)).get(MODEL_FLAG)
    return values[-1] if values else None


def _host_path(spec: LaunchSpec, path: Optional[str]) -> Optional[str]:
    """A path the trainer sees, on the host: through the mount it lies under (a process run's are the host's)."""
    if path is None or spec.engine != "docker":
        return path
    for mount in sorted(spec.mounts, key=lambda m: len(m.target), reverse=True):
        target = mount.target.rstrip("/")
        if path == target or path.startswith(target + "/"):
            return mount.source + path[len(target) :]
    return None


def _existing(path: str) -> str:
    """`path`, or its nearest parent that exists (the file system whose free space counts)."""
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def auto_resume_problem(status: RunStatus, spec: LaunchSpec, stopped: bool) -> Optional[str]:
    """Why an attempt that ended as `status` is not resumed by itself (None: it is, if a checkpoint is behind it)."""
    if status.state == RunState.SUCCEEDED:
        return "it succeeded"
    if stopped:
        return "it was stopped on purpose"
    if status.state not in (RunState.FAILED, RunState.INTERRUPTED):
        return f"it ended {status.state}"
    attempt = Path(spec.capture_dir).parent / ATTEMPTS_DIR / spec.run / str(status.attempt)
    record, _ = read_resume(str(attempt))
    if record is not None and record.verified is False:
        return "its trainer did not resume (a new attempt would fail the same way)"
    return None
