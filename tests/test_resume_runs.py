"""Resumed runs end to end on the simulator, through the real engines: exactness, power cuts, the fallbacks that
must stop an attempt, retention, the disk rule, auto-resume, stop --checkpoint, and the down time kept out."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from harness.checkpoints.layout import iteration_name
from harness.summary.summarize import summarize
from support.resume_lab import COOL_GB10, FAST, ResumeLab, same_but_the_clock
from support.timing import scaled, wait_until

ROLLOUT_SIDE_PERF = re.compile(r"metrics\.py:\d+ - perf 7: ")


def ok(done) -> None:
    assert done.exit_code == 0, done.output[-3000:]


def crashed_first_attempt(lab: ResumeLab, crash: str = "model-write:9", time_scale: str = FAST, **experiment) -> str:
    """A first attempt whose trainer the simulator kills at a moment of a save (a power cut, as the disk sees it)."""
    name = lab.experiment(**experiment)
    done = lab.run(name, env={"HARNESS_SIM_CRASH_AT": crash}, time_scale=time_scale)
    assert done.exit_code == 1, done.output[-2000:]
    assert lab.status(name, 1)["state"] == "failed"
    return name


# --- exactness, and the down time kept out of every timing --------------------------------------------------------


def test_a_run_killed_during_step_7_resumes_exactly_as_if_it_never_stopped(resume_lab: ResumeLab) -> None:
    lab = resume_lab
    lab.experiment(batch=8, guard={})  # the simulator's own GB10: each attempt waits for its CPU side to cool first
    ok(lab.run("long", "--name", "whole"))  # the uninterrupted run: same seed, same flags

    harness = lab.spawn("long", time_scale="0.05")
    wait_until(
        lambda: (
            any(r.get("iteration") == 6 and r["complete"] for r in lab.ledger("long", 1))
            and ROLLOUT_SIDE_PERF.search(lab.log("long", 1))
        ),
        scaled(120),
        "checkpoint iter_0000006 verified and rollout 7 logged",
    )
    os.killpg(harness.pid, signal.SIGKILL)  # the harness, then what runs the trainer: nothing is shut down cleanly
    harness.wait()
    for handle in lab.objects():
        handle.kill()
    time.sleep(1.5)  # down time: in no step and no rollout time

    ok(lab.run("long", "--resume", time_scale="0.05"))  # the same time scale: the same run (the same run id)

    record = lab.resume_record("long", 2)
    assert (record["from_attempt"], record["next_rollout_id"], record["verified"]) == (1, 6, True)
    whole = {row["step"]: row["metrics"] for row in lab.metrics("whole", 1)}
    resumed = {row["step"]: row["metrics"] for row in lab.metrics("long", 2)}
    assert sorted(resumed) == list(range(6, 12))
    for step in range(6, 12):
        assert same_but_the_clock(resumed[step], whole[step]), step
    assert lab.status("long")["state"] == "succeeded" and lab.status("long")["steps_complete"] == 12

    run = summarize(lab.captures).runs["long"]
    assert run.steps.step == list(range(12)) and all(run.steps.complete)
    assert "rollouts 6 to 7 of attempt 1 redone after the resume (attempt 2 continued from rollout 6): not counted" in (
        run.notes
    )
    lineage = run.lineage
    assert lineage is not None and [a.attempt for a in lineage.attempts] == [1, 2]
    down = lineage.attempts[1].down_before_s
    assert down is not None and down >= 1.5 and lineage.down_s == down
    assert lineage.wall_s == pytest.approx(sum(a.wall_s for a in lineage.attempts))
    scale = run.time_scale
    for rollout, adjusted, overlap in zip(
        run.steps.rollout_time_s, run.steps.rollout_time_adjusted_s, run.steps.pause_overlap_s
    ):
        assert adjusted == pytest.approx(rollout - overlap)  # only the step's own attempt's pauses are taken out
        assert rollout * scale < down  # no rollout spans the time the run was down
    assert run.aggregates.pause_total_s * scale == pytest.approx(lineage.paused_s, abs=1e-3)


# --- power cuts at each moment of a save --------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize(
    ("moment", "chosen", "tracker_before"),
    [
        ("model-write", 6, "6"),  # iter_0000009's model half written: the previous checkpoint is the resume point
        ("after-meta", 9, "6"),  # iter_0000009 whole, the tracker still naming iter_0000006
        ("tracker-write", 9, "latest_checkpointed_iteration.txt is empty (torn by a power loss?)"),
        ("after-tracker", 9, "9"),  # whole and tracked, the save line never printed
    ],
)
def test_a_power_cut_at_each_moment_of_a_save_resumes_from_the_newest_complete(
    process_resume_lab: ResumeLab, moment: str, chosen: int, tracker_before: str
) -> None:
    lab = process_resume_lab
    crashed_first_attempt(lab, f"{moment}:9")

    ok(lab.run("long", "--resume"))

    record = lab.resume_record("long", 2)
    assert (record["checkpoint"], record["verified"]) == (iteration_name(chosen), True)
    assert record["tracker"]["before"] == tracker_before and record["tracker"]["after"] == str(chosen)
    assert record["tracker"]["rewritten"] is (tracker_before != str(chosen))
    assert lab.status("long")["state"] == "succeeded"
    assert [row["step"] for row in lab.metrics("long", 2)] == list(range(chosen, 12))


# --- each silent fallback stops the attempt, its line quoted ------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize(
    ("fault", "quoted"),
    [
        ("silent-no-load", "it printed no load line and its first rollout is 0"),
        ("no-dir", "`[FSDP] Checkpoint directory "),
        ("no-tracker", "`[FSDP] No tracker file at "),
        ("no-model", "`[FSDP] Model checkpoint "),
        ("load-fails", "`[FSDP] Failed to load model from "),
        ("no-data-state", "global_dataset_state_dict_5.pt does not exist.`"),
        ("loop-at-zero", "its first rollout is 0, not 6 (the rollout loop did not continue: slime#1558)"),
    ],
)
def test_each_fallback_the_simulator_imitates_stops_the_attempt_with_its_line_quoted(
    process_resume_lab: ResumeLab, fault: str, quoted: str
) -> None:
    lab = process_resume_lab
    crashed_first_attempt(lab)

    done = lab.run("long", "--resume", env={"HARNESS_SIM_RESUME_FAULT": fault})

    assert done.exit_code == 1, done.output[-2000:]
    status = lab.status("long", 2)
    assert status["state"] == "failed"
    assert status["error"].startswith("the trainer did not resume from iter_0000006: ") and quoted in status["error"]
    assert lab.metrics("long", 2) == []  # none of its steps is the run's
    assert lab.resume_record("long", 2)["verified"] is False
    assert lab.status("long")["attempt"] == 1  # the run's current attempt is still the one it continues
    ok(lab.run("long", "--resume"))  # the fault gone, the lineage continues from the same checkpoint
    assert lab.resume_record("long", 3)["from_attempt"] == 1
    assert lab.status("long")["state"] == "succeeded" and lab.status("long")["attempt"] == 3


@pytest.mark.integration
def test_a_continuation_with_nothing_left_to_run_is_refused_before_it_starts(process_resume_lab: ResumeLab) -> None:
    lab = process_resume_lab
    crashed_first_attempt(lab, "after-tracker:12")  # the last checkpoint whole: a resume would run no rollout

    done = lab.run("long", "--resume")

    assert done.exit_code == 2
    assert "nothing left to run: iter_0000012's next rollout 12 is at or past --num-rollout 12" in done.output
    assert len(list((lab.captures / ".attempts" / "long").glob("[0-9]*"))) == 1


@pytest.mark.integration
def test_a_reward_collapse_after_a_resume_is_noted_as_a_shock(process_resume_lab: ResumeLab) -> None:
    lab = process_resume_lab
    crashed_first_attempt(lab, steps=20, batch=32)  # the lab's batch: its reward varies little step to step

    ok(lab.run("long", "--resume", env={"HARNESS_SIM_RESUME_FAULT": "reward-collapse"}))

    run = summarize(lab.captures).runs["long"]
    (shock,) = run.lineage.shocks
    assert shock.rollout == 6 and shock.shock, shock
    assert any(note.startswith("resume shock at rollout 6 (attempt 2)") and "slime#1695" in note for note in run.notes)


# --- retention, the disk rule, auto-resume, stop --checkpoint: each on both engines -------------------------------


def test_keep_deletes_older_checkpoints_once_a_newer_one_is_verified(resume_lab: ResumeLab) -> None:
    lab = resume_lab
    lab.experiment(every=2, keep=2)

    ok(lab.run("long"))

    ledger = lab.ledger("long", 1)
    assert [(r["iteration"], r["complete"]) for r in ledger if r["event"] == "verified"] == [
        (n, True) for n in (2, 4, 6, 8, 10, 12)
    ]
    assert [r["iteration"] for r in ledger if r["event"] == "deleted"] == [2, 4, 6, 8]
    for row in ledger:
        if row["event"] == "deleted":  # only after a newer checkpoint was verified complete
            verified_before = [r["iteration"] for r in ledger[: ledger.index(row)] if r["event"] == "verified"]
            assert max(verified_before) >= row["iteration"] + 2 * 2
    assert sorted(p.name for p in lab.checkpoint_dir("long").glob("iter_*")) == ["iter_0000010", "iter_0000012"]


def test_the_disk_rule_refuses_a_resume_in_one_line_with_the_numbers(resume_lab: ResumeLab) -> None:
    lab = resume_lab
    crashed_first_attempt(lab)
    shard = lab.checkpoint_dir("long") / "iter_0000006" / "model" / "__0_0.distcp"
    with open(shard, "r+b") as handle:
        handle.truncate(10**13)  # a 10 TB model (sparse): no disk here has room for three

    done = lab.run("long", "--resume")

    assert done.exit_code == 2
    (line,) = [line for line in done.output.splitlines() if line.startswith("error:")]
    assert "the checkpoint root" in line and "needs room for 3 checkpoints of 10.0 TB" in line and "measured" in line
    assert len(list((lab.captures / ".attempts" / "long").glob("[0-9]*"))) == 1  # nothing started


def test_auto_resume_continues_after_a_killed_trainer(resume_lab: ResumeLab) -> None:
    lab = resume_lab
    lab.experiment()

    done = lab.run("long", "--auto-resume", "1", env={"HARNESS_SIM_CRASH_AT": "after-meta:3"})

    ok(done)
    assert "automatic resume 1 of 1" in done.output
    assert lab.status("long", 1)["state"] == "failed" and lab.status("long", 1)["exit_code"] == 137
    assert lab.resume_record("long", 2)["checkpoint"] == "iter_0000003"
    assert lab.status("long")["attempt"] == 2 and lab.status("long")["state"] == "succeeded"
    assert summarize(lab.captures).runs["long"].steps.step == list(range(12))


def test_stop_with_a_checkpoint_then_resume(resume_lab: ResumeLab) -> None:
    lab = resume_lab
    lab.experiment(every=100, guard=COOL_GB10)  # no save of its own before the last rollout
    harness = lab.spawn("long", time_scale="0.02")
    wait_until(lambda: len(lab.metrics("long", 1)) >= 2, scaled(120), "two steps")

    stopped = lab.command("stop", "long", "--checkpoint", "--timeout-s", str(scaled(120)))

    assert stopped.exit_code == 0, stopped.output
    harness.wait(scaled(60))
    assert lab.status("long", 1)["state"] == "stopped"
    (saved,) = [r for r in lab.ledger("long", 1) if r["event"] == "verified"]
    assert saved["complete"] and f"resume from {iteration_name(saved['iteration'])}" in stopped.output
    ok(lab.run("long", "--resume", time_scale="0.02"))
    assert lab.resume_record("long", 2)["next_rollout_id"] == saved["iteration"]
    assert lab.status("long")["state"] == "succeeded"


# --- bad input: one line, never a resume from the wrong place -----------------------------------------------------


@pytest.mark.integration
def test_two_harnesses_resuming_one_run_at_once(process_resume_lab: ResumeLab) -> None:
    lab = process_resume_lab
    crashed_first_attempt(lab, time_scale="0.02", guard=COOL_GB10)

    first = lab.spawn("long", "--resume", time_scale="0.02")
    wait_until(lambda: (lab.attempt_dir("long", 2) / "status.json").exists(), scaled(60), "the first resume")
    second = lab.spawn("long", "--resume", time_scale="0.02")
    said, _ = second.communicate(timeout=scaled(60))
    first.wait(scaled(120))

    assert second.returncode == 4, said
    assert "not resumed: another harness is running it" in said
    assert first.returncode == 0
    assert lab.resume_record("long", 2)["checkpoint"] == "iter_0000006"
    assert not (lab.attempt_dir("long", 3)).exists()


@pytest.mark.integration
def test_recover_names_the_runs_that_can_resume_and_the_command(process_resume_lab: ResumeLab) -> None:
    lab = process_resume_lab
    crashed_first_attempt(lab)

    said = lab.command("recover")

    assert said.exit_code == 0, said.output
    assert (
        f"long: can resume from iter_0000006 (rollout 6 onward): harness run long --resume --sim --time-scale 0.002 "
        f"--capture-dir {lab.captures}" in said.output
    )


@pytest.mark.integration
def test_a_fresh_start_over_a_complete_checkpoint_is_refused_and_force_sets_it_aside(
    process_resume_lab: ResumeLab,
) -> None:
    lab = process_resume_lab
    crashed_first_attempt(lab)

    refused = lab.run("long")
    forced = lab.run("long", "--force")

    assert refused.exit_code == 2 and "--resume continues from it" in refused.output
    ok(forced)
    aside = [p for p in (lab.checkpoints / "long").iterdir() if ".set-aside-" in p.name]
    assert len(aside) == 1 and (aside[0] / "iter_0000006" / "meta.json").exists()
    assert not (lab.attempt_dir("long", 2) / "resume.json").exists()  # a fresh lineage: attempt 2 resumed nothing


@pytest.mark.integration
def test_sweep_resume_continues_each_seed_that_can_and_starts_those_that_never_ran(
    process_resume_lab: ResumeLab,
) -> None:
    from typer.testing import CliRunner

    from harness.cli import app

    lab = process_resume_lab
    crashed_first_attempt(lab)  # seed 1: failed at iter_0000009's save

    done = CliRunner().invoke(app, lab.args("sweep", "long", "--seeds", "1", "2", "--resume"), env=lab.env)

    assert done.exit_code == 0, done.output[-3000:]
    assert lab.resume_record("long", 2)["checkpoint"] == "iter_0000006"
    assert lab.status("long")["state"] == "succeeded"
    assert "long-s2: it never ran, so there is nothing to resume: it starts from step 0" in done.output
    assert lab.status("long-s2")["state"] == "succeeded" and lab.status("long-s2")["attempt"] == 1


@pytest.mark.integration
def test_a_dry_run_of_a_resume_shows_the_load_and_starts_nothing(process_resume_lab: ResumeLab) -> None:
    lab = process_resume_lab
    crashed_first_attempt(lab)

    done = lab.run("long", "--resume", "--dry-run", "--json")

    assert done.exit_code == 0, done.output[-2000:]
    assert f"--load {lab.checkpoint_dir('long')}" in done.output.replace('",\n', " ").replace('"', "")
    assert len(list((lab.captures / ".attempts" / "long").glob("[0-9]*"))) == 1
    assert (lab.checkpoint_dir("long") / "latest_checkpointed_iteration.txt").read_text() == "6"  # nothing written
