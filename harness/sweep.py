"""Which runs of a sweep to start, and why: cached (default), retry, force (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from harness.capture import RERUN_ON_RETRY, RunStatus

Mode = Literal["cached", "retry", "force"]


@dataclass(frozen=True)
class Decision:
    """Run it or skip it, and the reason shown to the user."""

    run: str
    action: Literal["run", "skip"]
    reason: str


def decide(run: str, run_id: str, status: Optional[RunStatus], mode: Mode) -> Decision:
    """Whether `run` should start given its existing capture (if any) and the rerun mode."""
    if status is None:
        return Decision(run, "run", "no capture yet")
    if status.state == "running":
        return Decision(run, "skip", f"its capture says running (harness pid {status.harness_pid} on "
                                     f"{status.harness_host}); if that harness is gone, `harness recover` settles it")
    changed = "" if status.run_id == run_id else f" with another configuration (run id {status.run_id}, now {run_id})"
    if mode == "force":
        return Decision(run, "run", f"--force: reruns the {status.state} capture{changed} (kept under .replaced/)")
    if status.state == "succeeded":
        return Decision(run, "skip", f"succeeded{changed} at {status.ended_at}; --force reruns it")
    if status.state in RERUN_ON_RETRY:
        if mode == "retry":
            return Decision(run, "run", f"--retry: was {status.state} ({status.error or 'no reason recorded'})")
        return Decision(run, "skip", f"was {status.state} ({status.error or 'no reason recorded'}); --retry reruns it")
    return Decision(run, "skip", f"unknown state {status.state!r} in its status.json")
