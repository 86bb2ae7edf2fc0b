"""How a run ended, as the state its capture records: decided from the facts of its end (pure).

The contract's rule (docs/architecture.md, "The capture contract"): `succeeded` is exit 0 with every expected step
complete; the rest says what went wrong. The runner decides with it when a run ends, and `harness recover` when it
settles a run whose harness is gone: one rule for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

from harness.capture.records import RunState

if TYPE_CHECKING:
    from harness.mileslog.records import Failure


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as facts."""

    state: RunState
    error: Optional[str]
    steps_usable: bool
    capture_complete: bool = True


@dataclass(frozen=True)
class RunEnd:
    """What is known when a run ends.

    `stop_state`, `stop_reason`: why the harness stopped it (None: it was not
    stopped); `failure`: the failure the parser recognised in its log;
    `capture_error`: the capture stopped being written; `engine_error`: the
    engine was lost for good; `outages`: the engine went away and came back;
    `gone`: what ran the trainer vanished from the engine (removed from outside).
    """

    exit_code: Optional[int]
    steps_complete: int
    steps_expected: int
    stop_state: Optional[str] = None
    stop_reason: Optional[str] = None
    failure: Optional["Failure"] = None
    capture_error: Optional[str] = None
    engine_error: Optional[str] = None
    outages: Sequence[str] = ()
    gone: Optional[str] = None


def decide_outcome(end: RunEnd) -> Outcome:
    """The final state from the exit code, the complete steps and why the harness stopped it (pure)."""
    steps_complete, steps_expected = end.steps_complete, end.steps_expected
    all_steps = steps_complete >= steps_expected
    if end.gone and end.stop_state is None:
        # Final, with nothing left to recover: what it printed after the capture's last line went with it.
        return Outcome(
            RunState.FAILED,
            f"{end.gone}; the lines it printed after the capture's last one are gone with it "
            f"({steps_complete} of {steps_expected} steps were saved)",
            False,
        )
    if end.capture_error:
        return Outcome(
            RunState.FAILED,
            f"{end.capture_error}: the capture stops there, so the run cannot be trusted",
            False,
            capture_complete=False,
        )
    if end.engine_error:
        return Outcome(
            RunState.FAILED,
            f"{end.engine_error}; the container is left with its labels: once the engine "
            "answers again, `harness recover` saves the rest",
            False,
            capture_complete=False,
        )
    lost = f" (while it ran, {end.outages[0]})" if end.outages else ""
    if end.stop_state is not None:
        error = (end.stop_reason or end.stop_state) + lost
        if all_steps:
            error += f"; all {steps_expected} steps had completed, so the steps are usable"
        return Outcome(RunState(end.stop_state), error, all_steps)
    if end.exit_code == 0:
        if all_steps:  # every step completed: usable, as for a run stopped after its last step
            return Outcome(RunState.SUCCEEDED, None, True)
        return Outcome(
            RunState.NO_METRICS, f"exited 0 after {steps_complete} of {steps_expected} complete steps" + lost, False
        )
    failure = end.failure
    if failure and "reason" in failure:  # named as such: the image's Miles has no filter path
        reason = f"{failure['reason']} ({failure['line']})"
    else:
        reason = failure["line"] if failure else _exit_reason(end.exit_code)
    return Outcome(RunState.FAILED, f"exit code {end.exit_code}: {reason}{lost}", False)


def _exit_reason(exit_code: Optional[int]) -> str:
    if exit_code is None:
        return "no exit code"
    if exit_code == 137:
        return "killed (SIGKILL: out of memory, docker kill, or a hard stop)"
    if exit_code == 143:
        return "terminated (SIGTERM)"
    return "the trainer printed no failure the parser recognises"
