"""SIGKILL the harness at every point of a run; after `harness recover` nothing is lost and the state is true.

The harness is killed by a failpoint (HARNESS_FAILPOINT) before the capture,
before the container, between creating and starting it, right after the
start, mid-stream, at the exit and before the removal. After recover: every
line the engine holds is in container.log exactly once and in order,
metrics.jsonl has every complete step once, and the state is final and says
what happened (the trainer's own end when it ended by itself, `interrupted`
when recover had to stop it, `not_started` when it never started).
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from support.lab import Lab, killed

STEPS = 3
CASES = [
    # failpoint, scenario, the state recover must record (None: no capture was made)
    ("before-capture", "steps", None),
    ("before-container", "steps", "not_started"),
    ("after-create", "steps", "not_started"),
    ("after-start", "steps", "succeeded"),
    ("mid-stream:3", "steps", "succeeded"),
    ("mid-stream:20", "steps", "succeeded"),
    ("at-exit", "steps", "succeeded"),
    ("before-remove", "steps", "succeeded"),
    ("after-start", "hang", "interrupted"),
    ("mid-stream:20", "hang", "interrupted"),
]


@pytest.mark.parametrize(("point", "scenario", "state"), CASES, ids=[f"{p}-{s}" for p, s, _ in CASES])
def test_sigkill_at_any_point_then_recover_loses_nothing(
    lab: Lab, point: str, scenario: str, state: Optional[str]
) -> None:
    run = lab.experiment("crash", scenario=scenario, steps=STEPS)
    killed(lab.spawn("run", run, failpoint=point))
    if scenario == "steps":  # let a trainer that outlived its harness finish, so its end is known
        if state not in (None, "not_started"):  # (else no trainer ever ran)
            # Its end as the engine's log holds it, not only its state: Docker may say "exited" before its log
            # copier has written the last lines, and an empty list of objects is no end at all.
            lab.wait_for(lambda: trainer_done(lab), what="the trainer's end, logged")
    else:  # let it reach its endless step 1, so what recover stops is known
        lab.wait_for(
            lambda: any("still generating" in line for h in lab.objects() for line in lab.engine_lines(h)),
            what="the trainer's step 1",
        )

    result = lab.capture_cli("recover", "--keep", "--grace-s", "5")
    assert result.exit_code == 0, result.output

    if state is None:
        assert not (lab.captures / run).exists() and lab.objects() == []
    else:
        status = lab.status(run)
        assert status["state"] == state, status
        assert_nothing_lost(lab, run, status)
    if state != "succeeded":  # a run that never started, or never ended, runs again without --force
        lab.cleanup()
        again = lab.cli("run", run, "--set", "container.env.FAKE_SCENARIO=steps")
        assert again.exit_code == 0, again.output
        assert lab.status(run)["state"] == "succeeded"


def trainer_done(lab: Lab) -> bool:
    """The trainer has exited and its last line is in the engine's log."""
    objects = lab.objects()
    return bool(objects) and all(
        not h.describe().alive and lab.engine_lines(h)[-1:] != [] and lab.engine_lines(h)[-1].endswith("training done")
        for h in objects
    )


def assert_nothing_lost(lab: Lab, run: str, status: dict) -> None:
    objects = lab.objects()
    if status["state"] == "not_started":
        assert objects == [] and lab.log(run) == [] and lab.metrics(run) == []
        return
    (handle,) = objects  # kept by --keep, to compare with what the engine holds
    assert lab.log(run) == lab.engine_lines(handle)  # every line, once, in order, stamps and all
    rows = lab.metrics(run)
    complete = [r["step"] for r in rows if r["complete"]]
    assert complete == sorted(set(complete))
    assert status["steps_complete"] == len(complete)
    if status["state"] == "succeeded":
        assert complete == list(range(STEPS)) and status["exit_code"] == 0
    else:
        assert status["state"] == "interrupted" and status["exit_code"] == 143
        assert complete == [0] and [r["step"] for r in rows if not r["complete"]] == [1]
        assert "stopped by harness recover" in status["error"]
    assert status["capture_complete"] is True and status["ended_at"]


def test_recover_settles_each_capture_once(lab: Lab) -> None:
    run = lab.experiment("crash", scenario="hang", steps=STEPS)
    killed(lab.spawn("run", run, failpoint="mid-stream:20"))
    first = lab.capture_cli("recover", "--grace-s", "5")
    assert first.exit_code == 0 and "crash: interrupted" in first.output
    settled = (lab.captures / run / "status.json").read_bytes()
    second = lab.capture_cli("recover", "--grace-s", "5")
    assert second.exit_code == 0 and "nothing to recover" in second.output
    assert (lab.captures / run / "status.json").read_bytes() == settled
    assert lab.objects() == []


def test_recover_leave_running_then_recover_again_completes_the_capture(lab: Lab) -> Any:
    run = lab.experiment("crash", scenario="hang", steps=STEPS)
    killed(lab.spawn("run", run, failpoint="mid-stream:20"))
    left = lab.capture_cli("recover", "--leave-running")
    assert left.exit_code == 0, left.output
    status = lab.status(run)
    assert (
        status["state"] == "interrupted" and status["capture_complete"] is False and "left running" in status["error"]
    )
    (handle,) = lab.objects()
    assert handle.describe().alive
    again = lab.capture_cli("recover", "--keep", "--grace-s", "5")
    assert again.exit_code == 0, again.output
    final = lab.status(run)
    assert final["state"] == "interrupted" and final["error"] == status["error"]  # a final state is kept
    assert final["capture_complete"] is True and final["exit_code"] == 143
    assert lab.log(run) == lab.engine_lines(handle)


def test_recover_cuts_a_torn_last_line_and_resumes_after_the_last_whole_one(lab: Lab) -> None:
    run = lab.experiment("torn", scenario="hang", steps=STEPS)
    killed(lab.spawn("run", run, failpoint="mid-stream:20"))
    with (lab.captures / run / "container.log").open("ab") as log:
        log.write(b"2026-11-")  # what a full disk or a power cut leaves behind
    result = lab.capture_cli("recover", "--keep", "--grace-s", "5")
    assert result.exit_code == 0, result.output
    assert lab.status(run)["state"] == "interrupted"
    (handle,) = lab.objects()
    assert lab.log(run) == lab.engine_lines(handle)
