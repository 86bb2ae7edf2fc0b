"""Whether to start a run given its existing capture, and why: cached (default), retry, force (pure).

`run` decides in `retry` mode (`--force`: force), a sweep in the mode given.
The decision is made under the capture's lock, so the capture cannot change
between deciding and acting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from harness.capture import RERUN_ON_RETRY, RunState, RunStatus

Mode = Literal["cached", "retry", "force"]


@dataclass(frozen=True)
class Decision:
    """Run it or skip it, and the reason shown to the user; `keep_old`: the old capture goes to .replaced/."""

    run: str
    action: Literal["run", "skip"]
    reason: str
    keep_old: bool = True


def decide(run: str, run_id: str, status: Optional[RunStatus], mode: Mode, broken: Optional[str] = None) -> Decision:
    """Whether `run` should start given its existing capture (if any) and the rerun mode.

    A capture that never started (`not_started`) counts as no capture: it is
    run again in every mode, and replaced rather than kept.
    """
    if broken is not None:
        if mode == "force":
            return Decision(run, "run", f"--force: replaces a capture whose status is broken ({broken}; kept "
                                        "under .replaced/)")
        return Decision(run, "skip", f"its status is broken ({broken}); --force replaces it (kept under .replaced/)")
    if status is None:
        return Decision(run, "run", "no capture yet")
    if status.state == RunState.NOT_STARTED:
        return Decision(run, "run", f"its last attempt never started ({status.error or 'no reason recorded'})",
                        keep_old=False)
    if status.state == RunState.RUNNING:
        return Decision(run, "skip", f"its capture says running (harness pid {status.harness_pid} on "
                                     f"{status.harness_host}); if that harness is gone, `harness recover` settles it")
    changed = "" if status.run_id == run_id else f" with another configuration (run id {status.run_id}, now {run_id})"
    if mode == "force":
        return Decision(run, "run", f"--force: reruns the {status.state} capture{changed} (kept under .replaced/)")
    if status.state == RunState.SUCCEEDED:
        return Decision(run, "skip", f"succeeded{changed} at {status.ended_at}; --force reruns it")
    if status.state in RERUN_ON_RETRY:
        if mode == "retry":
            return Decision(run, "run", f"--retry: was {status.state} ({status.error or 'no reason recorded'})")
        return Decision(run, "skip", f"was {status.state} ({status.error or 'no reason recorded'}); --retry reruns it")
    return Decision(run, "skip", f"unknown state {status.state!r} in its status.json")
