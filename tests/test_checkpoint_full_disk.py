"""A disk that fills during a save: the attempt ends with the cause, the torn checkpoint is recorded as not complete
and why, and the resume starts from the previous complete one, which retention never deleted.

The checkpoint root is a small tmpfs of the test's own (root only; skipped elsewhere with the reason). The run saves
every 3 rollouts and keeps 1; once its second checkpoint (iter_0000006) is verified and the first deleted, another
writer fills the disk to within two pages, so the third save (iter_0000009) runs out of space after its model.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from harness.checkpoints.layout import iteration_name
from support.resume_lab import COOL_GB10, ResumeLab
from support.smalldisk import PAGE, SmallDisk, small_disk_at
from support.timing import scaled, wait_until

TIME_SCALE = "0.05"  # half a second or so a rollout: three of them between the second save and the third


@pytest.fixture
def checkpoint_disk(resume_lab: ResumeLab) -> Iterator[SmallDisk]:
    with small_disk_at(resume_lab.checkpoints, "4m") as disk:  # room for keep + 1 simulated checkpoints of 1 MiB
        yield disk


def test_a_disk_that_fills_during_a_save_leaves_the_previous_checkpoint_as_the_resume_point(
    resume_lab: ResumeLab, checkpoint_disk: SmallDisk
) -> None:
    lab = resume_lab
    lab.experiment(every=3, keep=1, guard=COOL_GB10)
    harness = lab.spawn("long", time_scale=TIME_SCALE)

    def second_kept_first_gone() -> bool:
        rows = lab.ledger("long", 1)
        return any(r["event"] == "verified" and r["iteration"] == 6 and r["complete"] for r in rows) and any(
            r["event"] == "deleted" and r["iteration"] == 3 for r in rows
        )

    try:
        wait_until(second_kept_first_gone, scaled(120), "iter_0000006 verified and iter_0000003 deleted")
        checkpoint_disk.fill(leave=2 * PAGE)  # the model's shard and .metadata fit; the optimizer's do not
        said, _ = harness.communicate(timeout=scaled(120))
    finally:
        if harness.poll() is None:
            harness.kill()
    directory = lab.checkpoint_dir("long")
    torn = directory / iteration_name(9)
    assert torn.is_dir(), f"the third save did not start before the disk filled: {said[-2000:]}"

    assert harness.returncode == 1, said[-2000:]
    status = lab.status("long", 1)
    assert status["state"] == "failed"
    assert status["error"] == (
        "exit code 1: OSError: [Errno 28] No space left on device; checkpoint iter_0000009 is not complete: "
        "iter_0000009/optimizer/.metadata is not there (the save did not finish); iter_0000006 (complete) is where "
        "--resume continues"
    ), status["error"]
    assert "iter_0000006 (complete) is where --resume continues" in said  # the person is told, in the one line
    ledger = lab.ledger("long", 1)
    (row,) = [r for r in ledger if r["event"] == "verified" and r["iteration"] == 9]
    assert (row["complete"], row["reported"], row["line"]) == (False, False, None)  # the trainer never said it saved
    assert row["why"] == "iter_0000009/optimizer/.metadata is not there (the save did not finish)", row
    assert [r["iteration"] for r in ledger if r["event"] == "deleted"] == [3]  # never iter_0000006
    assert (directory / iteration_name(6) / "meta.json").exists()

    checkpoint_disk.resize("16m")  # space freed
    resumed = lab.run("long", "--resume", time_scale=TIME_SCALE)

    assert resumed.exit_code == 0, resumed.output[-3000:]
    assert "passed over, not complete: iter_0000009 (iter_0000009/optimizer/.metadata is not there" in resumed.output
    record = lab.resume_record("long", 2)
    assert (record["checkpoint"], record["next_rollout_id"], record["verified"]) == ("iter_0000006", 6, True)
    assert lab.status("long")["state"] == "succeeded"
    assert [row["step"] for row in lab.metrics("long", 2)] == list(range(6, 12))


def test_a_root_without_room_for_keep_plus_one_refuses_before_anything_starts(
    resume_lab: ResumeLab, checkpoint_disk: SmallDisk
) -> None:
    lab = resume_lab
    lab.experiment(every=3, keep=2)
    checkpoint_disk.fill(leave=2 << 20)  # 2 MiB: room for two simulated checkpoints, and keep: 2 needs three

    done = lab.run("long")

    assert done.exit_code == 2, done.output[-2000:]
    (line,) = [line for line in done.output.splitlines() if line.startswith("error:")]
    assert f"run long not started: the checkpoint root {lab.checkpoints} has 2.1 MB free" in line, line
    assert "keep: 2 needs room for 3 checkpoints of 1.0 MB" in line and "the simulator's" in line, line
    assert not (lab.captures / "long").exists() and not (lab.captures / ".attempts").exists()
