"""`harness stop --checkpoint RUN` and what `harness recover` says of runs that can resume (docs/checkpoints.md).

`stop --checkpoint`: Miles saves at a rollout's save point when its
save-trigger sentinel exists (and removes it); the harness passes the sentinel
to every checkpointed run. So: make the sentinel, wait until the run's harness
has verified a checkpoint saved after it (checkpoints.jsonl), then stop the
run as `harness stop` does. A checkpoint that is not complete stops nothing.

`resumable`: each run of a capture root whose lineage has ended without
succeeding and whose checkpoint directory holds a complete checkpoint, with
the command that resumes it.
"""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional

from harness.capture import Capture, RunAttempts, RunState, RunStatus
from harness.capture.reader import find_runs
from harness.checkpoints.choose import NoCheckpoint, ResumeChoice, choose_checkpoint
from harness.checkpoints.keeper import LEDGER_NAME
from harness.checkpoints.layout import SENTINEL_NAME
from harness.checkpoints.lineage import lineage_head
from harness.errors import ExitCode, HarnessError
from harness.fs.bounded import iter_jsonl
from harness.fs.files import write_text_atomic
from harness.run.capture_ops import live_capture, request_stop

POLL_S = 0.5


def request_checkpoint_then_stop(
    capture: Capture, reason: str, *, timeout_s: float, note: Callable[[str], None], warn: Callable[[str], None]
) -> tuple[str, RunStatus]:
    """Ask the running trainer for a checkpoint now, wait for the harness to verify it, then stop the run: (the
    checkpoint's name, the final status). One-line HarnessError when there is no checkpoint to wait for."""
    capture = live_capture(capture)
    status = capture.read_status()
    if status is None or status.state != RunState.RUNNING:
        said = status.state if status is not None else "without a status"
        raise HarnessError(
            f"run {capture.run} is not running (it is {said}): no checkpoint to ask for", ExitCode.NOT_FOUND
        )
    directory = _checkpoint_directory(capture)
    ledger = os.path.join(capture.directory, LEDGER_NAME)
    seen = sum(1 for _ in iter_jsonl(Path(ledger), []))
    write_text_atomic(os.path.join(directory, SENTINEL_NAME), "asked by harness stop --checkpoint\n", root=directory)
    note(f"asked the trainer of {capture.run} for a checkpoint at its next rollout's end")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = [row for _, row in iter_jsonl(Path(ledger), [])][seen:]
        verified = next((row for row in rows if row.get("event") == "verified"), None)
        if verified is not None:
            name = os.path.basename(str(verified.get("directory")))
            if verified.get("complete") is not True:
                raise HarnessError(
                    f"run {capture.run}: the checkpoint it saved, {name}, is not complete ({verified.get('why')}); "
                    "not stopped"
                )
            note(f"{capture.run}: checkpoint {name} verified complete: stopping it")
            return name, request_stop(capture, reason, timeout_s=timeout_s, note=note, warn=warn)
        current = capture.status_read().status
        if current is not None and current.is_final:
            raise HarnessError(f"run {capture.run} ended ({current.state}) before it saved a checkpoint")
        time.sleep(POLL_S)
    raise HarnessError(
        f"run {capture.run}: no checkpoint verified within {timeout_s:g} s (Miles saves at a rollout's end; the "
        "request stays and it saves when it gets there); not stopped",
        ExitCode.RUN_FAILED,
    )


def _checkpoint_directory(capture: Capture) -> str:
    block = (capture.read_manifest() or {}).get("checkpoint")
    directory = block.get("directory") if isinstance(block, dict) else None
    if not isinstance(directory, str):
        raise HarnessError(
            f"run {capture.run} saves no checkpoints (its experiment has no `checkpoint` block): `harness stop` "
            "stops it without one"
        )
    return directory


@dataclass(frozen=True)
class Resumable:
    """A run that can resume: its newest complete checkpoint and the command that continues it."""

    run: str
    choice: ResumeChoice
    command: str


def resumable_runs(
    capture_root: Path, default_root: Callable[[bool], Path], ray_address: Optional[str] = None
) -> list[Resumable]:
    """Each run under `capture_root` whose lineage ended without succeeding with a complete checkpoint behind it
    (`ray_address`: the cluster the commands of runs Ray placed name)."""
    found: list[Resumable] = []
    runs, _ = find_runs(capture_root)
    for run_path in runs:
        head = lineage_head(RunAttempts(run_path))
        status = head.status_read().status if head is not None else None
        if head is None or status is None or status.state in (RunState.SUCCEEDED, RunState.RUNNING):
            continue
        manifest = Capture(head.directory, run_path.name).read_manifest() or {}
        block = manifest.get("checkpoint")
        if not isinstance(block, dict) or not isinstance(block.get("directory"), str):
            continue
        choice = choose_checkpoint(
            str(block["directory"]), data_state=bool(block.get("data_state")), root=str(block.get("root"))
        )
        if isinstance(choice, NoCheckpoint):
            continue
        command = resume_command(run_path.name, manifest, capture_root, default_root, ray_address)
        found.append(Resumable(run_path.name, choice, command))
    return found


def resume_command(
    run: str,
    manifest: Mapping[str, object],
    capture_root: Path,
    default_root: Callable[[bool], Path],
    ray_address: Optional[str] = None,
) -> str:
    """`harness run EXP --resume`, with the seed, run name, simulator and capture root the run was made with
    (`default_root(simulated)`: the root the command takes without --capture-dir), and `--ray` for a run Ray placed
    (the automatic resume is a local harness's: under Ray the driver resumes; `ray_address` as it may be shown, else
    `auto`)."""
    experiment = manifest.get("experiment")
    facts = experiment if isinstance(experiment, dict) else {}
    name, seed = str(facts.get("name") or run), facts.get("seed")
    words = ["harness", "run", name, "--resume"]
    own = name if seed in (None, 1) else f"{name}-s{seed}"
    if isinstance(seed, int) and seed != 1:
        words += ["--seed", str(seed)]
    if run != own:
        words += ["--name", run.removesuffix(f"-s{seed}") if seed not in (None, 1) else run]
    time_scale = manifest.get("time_scale")
    simulated = isinstance(time_scale, (int, float)) and time_scale != 1
    if simulated:
        words += ["--sim", "--time-scale", f"{time_scale:g}"]
    if Path(capture_root).resolve() != default_root(simulated).resolve():
        words += ["--capture-dir", str(capture_root)]
    if isinstance(manifest.get("ray"), dict):
        words += ["--ray", ray_address or "auto"]
    return shlex.join(words)
