"""A resumed run's lineage in the summary: each attempt's part, wall, paused and down time, and resume shock.

Times (docs/checkpoints.md, "A stitched run"): an attempt's wall time is its
status's `ended_at - started_at`; its paused time the union of its own pause
windows; both are summed over the attempts. The down time before an attempt
is from the previous attempt's end (its `ended_at`, else its last recorded
time) to its start: said on its own, and never in a step or a rollout time
(each rollout lies in one attempt, and only pause windows are taken out of it).

Resume shock (docs/checkpoints.md, "Resume shock"): for each resume at
rollout R, the mean reward of the complete steps R, R+1, R+2 against that of
R-3, R-2, R-1. It is a shock when the drop (before - after) is larger than
twice the run's median absolute step-to-step change of reward, taken over
consecutive complete steps of the run outside every resume's six steps. Twice
the median |change|: for steps that vary independently with spread s, the
median |change| is about 0.95 s and two 3-step means differ by about 0.82 s
(one spread), so a drop past it is past about 2.3 of those: a drop the run's
own variation seldom makes. Fewer than 5 such changes, or a side without 3
rewards: not judged (said).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from harness.checkpoints.stitch import StitchedPart
from harness.lab.milesnames import NO_LOAD_OPTIM_FLAG, NO_LOAD_RNG_FLAG
from harness.summary.aggregates import median
from harness.summary.document import Lineage, LineageAttempt, ResumeShock, StepTable
from harness.summary.notes import RunNotes
from harness.summary.windows import merge_windows, union_length
from harness.times import US_PER_S

SHOCK_STEPS = 3
SHOCK_FACTOR = 2.0
MIN_CHANGES = 5
LIKELY_CAUSES = {
    NO_LOAD_OPTIM_FLAG: f"the optimizer was not loaded ({NO_LOAD_OPTIM_FLAG}): Adam restarts its moments",
    NO_LOAD_RNG_FLAG: f"the random state was not loaded ({NO_LOAD_RNG_FLAG})",
}
UPSTREAM_CAUSE = (
    "a state the checkpoint does not restore (slime#1695: very low reward and large log-prob differences for a few "
    "steps after a resume)"
)


def run_lineage(parts: Sequence[StitchedPart], table: StepTable, argv: Sequence[str], notes: RunNotes) -> Lineage:
    """The lineage of a stitched run (its parts oldest first), its down times and shocks said in `notes`."""
    attempts: list[LineageAttempt] = []
    previous_end: Optional[int] = None
    for part in parts:
        start, end = part.started_us, part.ended_us
        down = (start - previous_end) / US_PER_S if start is not None and previous_end is not None else None
        if down is not None and part.resumed_from is not None:
            notes.append(
                f"down {_duration(down)} before attempt {part.attempt} (resumed from {part.resumed_from}): not in "
                "any step or rollout time"
            )
        steps = part.capture.steps
        given = [
            done
            for step, done in zip(steps.step, steps.complete)
            if step >= part.first and (part.until is None or step < part.until)
        ]
        attempts.append(
            LineageAttempt(
                attempt=part.attempt,
                state=str((part.capture.status or {}).get("state", "unknown")),
                started_at=_text((part.capture.status or {}).get("started_at")),
                ended_at=_text((part.capture.status or {}).get("ended_at")),
                first_rollout=part.first,
                until_rollout=part.until,
                steps=sum(given),
                redone=list(part.redone),
                wall_s=(end - start) / US_PER_S if start is not None and end is not None else None,
                paused_s=_paused_s(part),
                down_before_s=down,
                resumed_from=part.resumed_from,
            )
        )
        previous_end = end if end is not None else _last_time(part)
    walls = [a.wall_s for a in attempts]
    downs = [a.down_before_s for a in attempts[1:]]
    resumes = [(a.attempt, a.first_rollout) for a in attempts if a.resumed_from is not None]
    return Lineage(
        attempts=attempts,
        wall_s=math.fsum(w for w in walls if w is not None) if None not in walls else None,
        paused_s=math.fsum(a.paused_s for a in attempts),
        down_s=math.fsum(d for d in downs if d is not None) if None not in downs else None,
        shocks=resume_shocks(table, resumes, argv, notes),
    )


def resume_shocks(
    table: StepTable, resumes: Sequence[tuple[int, int]], argv: Sequence[str], notes: RunNotes
) -> list[ResumeShock]:
    """Each resume's shock check (module doc); a shock, or a check that could not be made, is said in `notes`."""
    reward = {
        step: value for step, value, done in zip(table.step, table.reward, table.complete) if done and value is not None
    }
    near = {r + k for _, r in resumes for k in range(-SHOCK_STEPS, SHOCK_STEPS)}
    changes = [
        abs(reward[step + 1] - value)
        for step, value in reward.items()
        if step + 1 in reward and step not in near and step + 1 not in near
    ]
    middle = median(changes) if len(changes) >= MIN_CHANGES else None
    threshold = SHOCK_FACTOR * middle if middle is not None else None
    shocks = []
    for attempt, rollout in resumes:
        before = [reward.get(step) for step in range(rollout - SHOCK_STEPS, rollout)]
        after = [reward.get(step) for step in range(rollout, rollout + SHOCK_STEPS)]
        before_mean, after_mean = _mean(before), _mean(after)
        drop = before_mean - after_mean if before_mean is not None and after_mean is not None else None
        shock = drop is not None and threshold is not None and drop > threshold
        shocks.append(ResumeShock(attempt, rollout, before_mean, after_mean, drop, threshold, shock))
        if shock:
            notes.append(
                f"resume shock at rollout {rollout} (attempt {attempt}): the mean reward of rollouts {rollout} to "
                f"{rollout + SHOCK_STEPS - 1} is {after_mean:.3f}, {drop:.3f} below the {before_mean:.3f} of the 3 "
                f"before, more than twice the run's median step-to-step change ({threshold:.3f}); likely cause: "
                f"{_cause(argv)}"
            )
        elif drop is None or threshold is None:
            why = "fewer than 3 rewarded steps on a side" if drop is None else "too few steps to know its variation"
            notes.append(f"resume at rollout {rollout} (attempt {attempt}) not checked for a shock: {why}")
    return shocks


def _cause(argv: Sequence[str]) -> str:
    for flag, cause in LIKELY_CAUSES.items():
        if flag in argv:
            return cause
    return UPSTREAM_CAUSE


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if len(present) == SHOCK_STEPS else None


def _paused_s(part: StitchedPart) -> float:
    windows = [(w.start_us, w.end_us) for w in part.capture.pauses if w.end_us is not None and w.froze]
    return union_length(*merge_windows(windows)) / US_PER_S


def _last_time(part: StitchedPart) -> Optional[int]:
    steps = part.capture.steps
    times = [t for t in (*steps.t_step_end_us, *steps.t_rollout_end_us) if t is not None]
    return max(times) if times else None


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _text(value: object) -> Optional[str]:
    return value if isinstance(value, str) else None
