"""Checkpoints as Miles's FSDP backend leaves them (the contract's layout), written by tests: whole, or cut at any
moment of a save, the way a power loss leaves one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

from harness.checkpoints.layout import TRACKER_NAME, data_state_name, iteration_name

# The moments of a save, in Miles's order: what has been written when the power goes.
SAVE_STAGES = ("model", "optimizer", "lr_scheduler", "rng", "data_state", "meta", "tracker")


def write_checkpoint(
    directory: Path,
    iteration: int,
    *,
    upto: str = "tracker",
    shard_bytes: int = 64,
    sparse_bytes: int = 0,
    data_state: bool = False,
    meta: Optional[dict] = None,
) -> Path:
    """`directory/iter_NNNNNNN` as a save leaves it once it got through `upto` (SAVE_STAGES); `sparse_bytes`: the
    model shard's size as a sparse file (no blocks written: gigabytes cost nothing); `meta`: meta.json's content
    instead of the true one."""
    stages = SAVE_STAGES[: SAVE_STAGES.index(upto) + 1]
    path = directory / iteration_name(iteration)
    path.mkdir(parents=True, exist_ok=True)
    for part in ("model", "optimizer", "lr_scheduler"):
        if part not in stages:
            continue
        (path / part).mkdir(exist_ok=True)
        shard = path / part / "__0_0.distcp"
        with open(shard, "wb") as handle:
            handle.write(b"\x01" * shard_bytes)
            if part == "model" and sparse_bytes:
                handle.truncate(sparse_bytes)
        (path / part / ".metadata").write_bytes(b"dcp-metadata")
    if "rng" in stages:
        (path / "rng.pt").write_bytes(b"rng")
    if "data_state" in stages and data_state:
        (directory / "rollout").mkdir(exist_ok=True)
        (directory / "rollout" / data_state_name(iteration - 1)).write_bytes(b"{}")
    if "meta" in stages:
        body = (
            meta
            if meta is not None
            else {
                "iteration": iteration,
                "rollout_id": iteration - 1,
                "next_rollout_id": iteration,
                "global_step": iteration,
                "micro_step": iteration,
                "world_size": 1,
                "timestamp": 0,
            }
        )
        (path / "meta.json").write_text(json.dumps(body))
    if "tracker" in stages:
        (directory / TRACKER_NAME).write_text(str(iteration))
    return path


def torn_model_write(directory: Path, iteration: int) -> Path:
    """The power went during the model's write: a shard cut short, no .metadata, nothing after it."""
    path = directory / iteration_name(iteration)
    (path / "model").mkdir(parents=True, exist_ok=True)
    (path / "model" / "__0_0.distcp").write_bytes(b"\x01" * 10)
    return path


def tracker(directory: Path) -> str:
    return (directory / TRACKER_NAME).read_text()


def read_ledger(capture_dir: Path) -> list[dict]:
    path = Path(capture_dir) / "checkpoints.jsonl"
    if not os.path.exists(path):
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def make_attempt(
    capture_root: Path,
    run: str,
    state: str,
    run_id: str,
    *,
    steps: tuple[int, int] = (0, 12),
    resume: Optional[dict] = None,
    started_at: str = "2026-08-20T10:00:00Z",
    ended_at: Optional[str] = "2026-08-20T11:00:00Z",
) -> Path:
    """A new attempt of `run` as a harness leaves it: its status (and resume.json), made current as a run makes it."""
    from harness.capture import Capture, RunAttempts, RunStatus

    attempts = RunAttempts(Path(capture_root) / run)
    attempt = attempts.new()
    status = RunStatus(
        run=run,
        run_id=run_id,
        state=state,
        exit_code=0 if state == "succeeded" else 1,
        started_at=started_at,
        ended_at=ended_at,
        steps_expected=steps[1],
        steps_complete=steps[0],
        error=None if state == "succeeded" else "it failed",
        attempt=attempt.number,
    )
    Capture(attempt.directory, run).write_status(status)
    if resume is not None:
        (attempt.directory / "resume.json").write_text(json.dumps(resume))
    if resume is None or resume.get("verified"):
        attempts.started(attempt)
    return attempt.directory


def resume_record(from_attempt: int, next_rollout: int, *, lineage: int = 1, verified: Optional[bool] = True) -> dict:
    return {
        "from_attempt": from_attempt,
        "lineage": lineage,
        "iteration": next_rollout,
        "next_rollout_id": next_rollout,
        "verified": verified,
        "cause": None if verified else "the trainer did not resume",
    }
