"""The issue's bad input, end to end through `harness run --resume` on the simulator (process engine): each gets one
clear line, and never a resume from the wrong place.

The first attempt dies right after its save of iter_0000009 (whole, and tracked), so without tampering the resume
would continue from iter_0000009; each test then spoils something a power loss or a hand could, and checks where the
resume goes, or that it is refused in one line with nothing started.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from harness.checkpoints.layout import TRACKER_NAME
from support.resume_lab import ResumeLab

pytestmark = pytest.mark.integration


def crashed_after_the_save_of_9(lab: ResumeLab, **experiment: int) -> Path:
    lab.experiment(**experiment)
    done = lab.run("long", env={"HARNESS_SIM_CRASH_AT": "after-tracker:9"})
    assert done.exit_code == 1, done.output[-2000:]
    directory = lab.checkpoint_dir("long")
    assert (directory / TRACKER_NAME).read_text() == "9"
    return directory


def one_error(done) -> str:
    """The command's one error line (and no traceback)."""
    errors = [line for line in done.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.output, done.output[-2000:]
    return errors[0]


@pytest.mark.parametrize(
    ("spoil", "why"),
    [
        ("link-out", "iter_0000009 is a symbolic link out of the run's checkpoint directory"),
        ("meta-other-rollout", "iter_0000009/meta.json names another rollout: iteration should be 9, it says 3"),
        ("no-metadata", "iter_0000009/optimizer/.metadata is not there (the save did not finish)"),
    ],
)
def test_a_spoiled_newest_checkpoint_is_passed_over_and_the_resume_continues_from_the_one_before(
    process_resume_lab: ResumeLab, tmp_path: Path, spoil: str, why: str
) -> None:
    lab = process_resume_lab
    directory = crashed_after_the_save_of_9(lab)
    newest = directory / "iter_0000009"
    if spoil == "link-out":  # the same checkpoint, whole, but outside the run's directory
        elsewhere = tmp_path / "elsewhere" / "iter_0000009"
        shutil.move(str(newest), elsewhere)
        os.symlink(elsewhere, newest)
    elif spoil == "meta-other-rollout":
        meta = json.loads((newest / "meta.json").read_text())
        (newest / "meta.json").write_text(json.dumps({**meta, "iteration": 3, "rollout_id": 2, "next_rollout_id": 3}))
    else:
        (newest / "optimizer" / ".metadata").unlink()

    done = lab.run("long", "--resume")

    assert done.exit_code == 0, done.output[-3000:]
    assert f"passed over, not complete: iter_0000009 ({why}" in done.output
    record = lab.resume_record("long", 2)
    assert (record["checkpoint"], record["verified"], record["first_rollout"]) == ("iter_0000006", True, 6)
    assert record["tracker"] == {**record["tracker"], "before": "9", "after": "6", "rewritten": True}
    assert [row["step"] for row in lab.metrics("long", 2)] == list(range(6, 12))


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"\0" * 8, "latest_checkpointed_iteration.txt holds NUL bytes (torn by a power loss?)"),
        (b"iter_9\n", "latest_checkpointed_iteration.txt holds 'iter_9', not a number"),
        (b"1" + b"0" * 30, "latest_checkpointed_iteration.txt names iteration 10000000000000000000..., past any run"),
    ],
)
def test_a_torn_or_absurd_tracker_is_never_trusted_and_is_made_to_name_the_checkpoint(
    process_resume_lab: ResumeLab, content: bytes, said: str
) -> None:
    lab = process_resume_lab
    directory = crashed_after_the_save_of_9(lab)
    (directory / TRACKER_NAME).write_bytes(content)

    done = lab.run("long", "--resume")

    assert done.exit_code == 0, done.output[-3000:]
    record = lab.resume_record("long", 2)
    assert (record["checkpoint"], record["verified"], record["first_rollout"]) == ("iter_0000009", True, 9)
    assert (record["tracker"]["before"], record["tracker"]["rewritten"]) == (said, True)
    assert lab.status("long")["state"] == "succeeded"


def test_a_checkpoint_directory_linked_out_of_the_root_is_refused_in_one_line(
    process_resume_lab: ResumeLab, tmp_path: Path
) -> None:
    lab = process_resume_lab
    directory = crashed_after_the_save_of_9(lab)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(directory), elsewhere)
    os.symlink(elsewhere, directory)

    done = lab.run("long", "--resume")

    assert done.exit_code == 2
    line = one_error(done)
    assert line == (
        f"error: run long not started: its checkpoint directory {directory} refused: it leads out of "
        f"{lab.checkpoints} (to {elsewhere})"
    ), line
    assert not lab.attempt_dir("long", 2).exists()
    assert (elsewhere / TRACKER_NAME).read_text() == "9"  # nothing written where the link leads


def test_a_resume_of_another_configuration_is_refused_in_one_line(process_resume_lab: ResumeLab) -> None:
    lab = process_resume_lab
    directory = crashed_after_the_save_of_9(lab)
    lab.experiment(batch=8)  # the same run name, another configuration: another run id

    done = lab.run("long", "--resume")

    assert done.exit_code == 2
    line = one_error(done)
    assert "run long: attempt 1 ran another configuration (run id long-" in line and "--force" in line, line
    assert not lab.attempt_dir("long", 2).exists()
    assert (directory / TRACKER_NAME).read_text() == "9"
