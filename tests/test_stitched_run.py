"""A run of three attempts stitched into one, its figures worked out by hand.

    attempt 1  started 10:00:00, failed at 10:14:10 (850 s); steps 0-7; a 20 s pause inside step 1's rollout
    attempt 2  down 2460 s (41 min), resumed from iter_0000006; steps 6-9; failed 450 s later; a 50 s pause
               that covers 20 s of step 8's rollout
    attempt 3  down 600 s, resumed from iter_0000009; steps 9-19; succeeded 1200 s later

Every rollout takes 60 s, so each step's adjusted time is 60 s but steps 1 and 8 (40 s: their own attempt's
pause taken out). The stitched run: steps 0-5 of attempt 1, 6-8 of attempt 2, 9-19 of attempt 3; attempt 1's
6 and 7 and attempt 2's 9 redone (their rewards, 0.9, are never the run's). Wall 850 + 450 + 1200 = 2500 s,
paused 20 + 50 = 70 s, down 2460 + 600 = 3060 s, in no step.

Rewards: 0.50 and 0.52 alternating, but 0.10, 0.12, 0.10 at steps 9-11 (after the second resume). The run's
step-to-step changes outside the resumes' windows (steps 3-11) are all 0.02: threshold 0.04. The first resume
(rollout 6): 3-5 mean 0.5133, 6-8 mean 0.5067, drop 0.0067: no shock. The second (rollout 9): 6-8 mean 0.5067,
9-11 mean 0.1067, drop 0.4: a shock.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from harness.capture import Capture, RunAttempts, RunStatus
from harness.summary.serialize import dumps_summary
from harness.summary.summarize import summarize, summarize_directory

RUN, RUN_ID = "long", "long-0123abcd"
T0 = datetime(2026, 8, 20, 10, 0, 0, tzinfo=timezone.utc)
STEPS = 20


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def reward(step: int) -> float:
    return {9: 0.10, 10: 0.12, 11: 0.10}.get(step, 0.50 if step % 2 == 0 else 0.52)


def attempt(root: Path, *, start: float, end: float, state: str, steps: range, rewards=reward, resume=None, pauses=()):
    attempts = RunAttempts(root / RUN)
    made = attempts.new()
    capture = Capture(made.directory, RUN)
    rows = []
    for n, step in enumerate(steps):
        rollout_end = start + (n + 1) * 100
        rows.append(
            {
                "step": step,
                "complete": True,
                "t_rollout_end": at(rollout_end),
                "t_step_end": at(rollout_end + 20),
                "metrics": {"perf/rollout_time": 60.0, "rollout/raw_reward": rewards(step), "perf/step_time": 80.0},
            }
        )
    (made.directory / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (made.directory / "pauses.jsonl").write_text(  # as the guard writes a window: when it opens, when it closes
        "".join(
            json.dumps({"start": at(a), "end": end, "reason": "hot"}) + "\n" for a, b in pauses for end in (None, at(b))
        )
    )
    manifest = {
        "run": RUN,
        "run_id": RUN_ID,
        "time_scale": 1,
        "experiment": {"name": RUN, "seed": 1, "steps": STEPS, "miles": {"args": {}, "extra_args": ""}},
        "trainer_argv": ["python3", "train.py", "--num-rollout", str(STEPS)],
    }
    (made.directory / "manifest.json").write_text(json.dumps(manifest))
    if resume is not None:
        (made.directory / "resume.json").write_text(json.dumps(resume))
    status = RunStatus(
        RUN,
        RUN_ID,
        state,
        0 if state == "succeeded" else 137,
        at(start),
        at(end),
        STEPS,
        len(rows),
        None if state == "succeeded" else "killed",
        attempt=made.number,
    )
    capture.write_status(status)
    attempts.started(made)
    return made


def resumed(from_attempt: int, next_rollout: int) -> dict:
    return {
        "from_attempt": from_attempt,
        "lineage": 1,
        "iteration": next_rollout,
        "next_rollout_id": next_rollout,
        "verified": True,
    }


@pytest.fixture
def three_attempts(tmp_path: Path) -> Path:
    root = tmp_path / "capture"
    attempt(
        root,
        start=0,
        end=850,
        state="failed",
        steps=range(0, 8),
        pauses=[(150, 170)],
        rewards=lambda step: 0.9 if step >= 6 else reward(step),
    )
    t1 = 850 + 2460
    attempt(
        root,
        start=t1,
        end=t1 + 450,
        state="failed",
        steps=range(6, 10),
        resume=resumed(1, 6),
        pauses=[(t1 + 280, t1 + 330)],
        rewards=lambda step: 0.9 if step >= 9 else reward(step),
    )
    t2 = t1 + 450 + 600
    attempt(root, start=t2, end=t2 + 1200, state="succeeded", steps=range(9, 20), resume=resumed(2, 9))
    return root


def test_each_step_comes_from_the_attempt_that_made_the_lineage(three_attempts: Path) -> None:
    run = summarize(three_attempts).runs[RUN]

    assert run.steps.step == list(range(20))
    assert run.steps.reward == [reward(step) for step in range(20)]  # never the redone 0.9
    adjusted = run.steps.rollout_time_adjusted_s
    assert adjusted == [40.0 if step in (1, 8) else 60.0 for step in range(20)]
    assert run.steps.pause_overlap_s == [20.0 if step in (1, 8) else 0.0 for step in range(20)]
    assert run.state == "succeeded" and run.attempt == 3
    assert run.aggregates.steps == 20 and run.aggregates.clean_steps == 18
    assert run.aggregates.pause_total_s == 70.0
    assert run.aggregates.rollout_time_adjusted_median_s == 60.0


def test_the_lineage_sums_wall_and_paused_time_and_keeps_the_down_time_apart(three_attempts: Path) -> None:
    lineage = summarize(three_attempts).runs[RUN].lineage

    assert lineage is not None
    assert [(a.attempt, a.first_rollout, a.until_rollout, a.steps, a.redone) for a in lineage.attempts] == [
        (1, 0, 6, 6, [6, 7]),
        (2, 6, 9, 3, [9]),
        (3, 9, None, 11, []),
    ]
    assert [a.wall_s for a in lineage.attempts] == [850.0, 450.0, 1200.0]
    assert [a.paused_s for a in lineage.attempts] == [20.0, 50.0, 0.0]
    assert [a.down_before_s for a in lineage.attempts] == [None, 2460.0, 600.0]
    assert [a.resumed_from for a in lineage.attempts] == [None, "iter_0000006", "iter_0000009"]
    assert (lineage.wall_s, lineage.paused_s, lineage.down_s) == (2500.0, 70.0, 3060.0)


def test_redone_rollouts_and_down_time_are_noted(three_attempts: Path) -> None:
    notes = summarize(three_attempts).runs[RUN].notes

    assert (
        "rollouts 6 to 7 of attempt 1 redone after the resume (attempt 2 continued from rollout 6): not counted"
        in notes
    )
    assert "rollout 9 of attempt 2 redone after the resume (attempt 3 continued from rollout 9): not counted" in notes
    assert "down 41 min before attempt 2 (resumed from iter_0000006): not in any step or rollout time" in notes
    assert "down 10 min before attempt 3 (resumed from iter_0000009): not in any step or rollout time" in notes


def test_the_resume_shock_is_judged_against_the_run_s_own_variation(three_attempts: Path) -> None:
    run = summarize(three_attempts).runs[RUN]

    first, second = run.lineage.shocks
    assert (first.rollout, first.shock) == (6, False)
    assert first.before_mean == pytest.approx((0.52 + 0.50 + 0.52) / 3)
    assert first.after_mean == pytest.approx((0.50 + 0.52 + 0.50) / 3)
    assert first.threshold == pytest.approx(0.04)
    assert (second.rollout, second.shock) == (9, True)
    assert second.drop == pytest.approx(0.4)
    shock = [note for note in run.notes if note.startswith("resume shock at rollout 9 (attempt 3)")]
    assert len(shock) == 1 and "slime#1695" in shock[0] and "0.107" in shock[0]


def test_the_stitched_run_reads_back_and_a_run_that_never_resumed_has_no_lineage(three_attempts: Path) -> None:
    document = summarize(three_attempts)
    text = dumps_summary(document).decode()

    assert '"lineage": {' in text
    plain = summarize_directory(three_attempts / RUN)
    assert plain.summary.lineage is not None
    RunAttempts(three_attempts / RUN).make_current(RunAttempts(three_attempts / RUN).find(1), by="test", why="t")
    alone = summarize(three_attempts).runs[RUN]
    assert alone.lineage is None and alone.steps.step == list(range(8))
    assert '"lineage"' not in dumps_summary(summarize(three_attempts)).decode()


def test_tensorboard_shows_one_curve_with_a_marker_at_each_resume(three_attempts: Path) -> None:
    from harness.board.records import Scalar, Text
    from harness.board.replay import replay_records

    _, records = replay_records(RUN, three_attempts / RUN)

    rewards = {r.step: r.value for r in records if isinstance(r, Scalar) and r.tag == "rollout/raw_reward"}
    assert rewards == {step: reward(step) for step in range(20)}  # one value a step, none redone
    adjusted = {
        r.step: r.value for r in records if isinstance(r, Scalar) and r.tag == "harness/rollout_time_adjusted_s"
    }
    assert adjusted == {step: 40.0 if step in (1, 8) else 60.0 for step in range(20)}
    markers = [(r.step, r.value) for r in records if isinstance(r, Scalar) and r.tag == "run/resumed"]
    assert markers == [(6, 2.0), (9, 3.0)]
    texts = [r.text for r in records if isinstance(r, Text) and r.tag == "run/resumes"]
    assert texts == [
        "attempt 2 resumed at rollout 6 from iter_0000006 after 2460 s down",
        "attempt 3 resumed at rollout 9 from iter_0000009 after 600 s down",
    ]
