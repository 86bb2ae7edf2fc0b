"""A checkpoint verified on disk (stat and small reads), the resume's choice, the tracker, `keep`, the disk rule."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from harness.checkpoints.choose import NoCheckpoint, ResumeChoice, choose_checkpoint, point_tracker
from harness.checkpoints.disk import estimate_size, parameters_in_name, room_problem
from harness.checkpoints.keeper import CheckpointKeeper
from harness.checkpoints.layout import CheckpointSpec
from harness.checkpoints.retention import delete_checkpoint, to_delete
from harness.checkpoints.verify import read_tracker, verify_checkpoint
from support.checkpoints import SAVE_STAGES, torn_model_write, tracker, write_checkpoint


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    directory = tmp_path / "root" / "run" / "run-0123abcd"
    directory.mkdir(parents=True)
    return directory


def test_a_whole_checkpoint_is_complete_and_sized_by_stat(ckpt: Path) -> None:
    write_checkpoint(ckpt, 10, shard_bytes=100, data_state=True)

    check = verify_checkpoint(str(ckpt), 10, data_state=True)

    assert check.complete and check.why is None
    assert (check.rollout_id, check.next_rollout_id, check.name) == (9, 10, "iter_0000010")
    files = [p for p in (ckpt / "iter_0000010").rglob("*") if p.is_file()]
    assert check.bytes == sum(p.stat().st_size for p in files) + 2  # and the data state's 2 bytes


@pytest.mark.parametrize(
    ("upto", "missing"),
    [
        ("model", "optimizer"),
        ("optimizer", "lr_scheduler"),
        ("lr_scheduler", "rng.pt"),
        ("rng", "meta.json"),
    ],
)
def test_a_save_cut_short_is_incomplete_and_says_what_is_missing(ckpt: Path, upto: str, missing: str) -> None:
    write_checkpoint(ckpt, 10, upto=upto)

    check = verify_checkpoint(str(ckpt), 10, data_state=False)

    assert not check.complete and missing in (check.why or ""), check.why


def test_a_directory_without_metadata_is_incomplete(ckpt: Path) -> None:
    write_checkpoint(ckpt, 10)
    os.remove(ckpt / "iter_0000010" / "optimizer" / ".metadata")

    check = verify_checkpoint(str(ckpt), 10, data_state=False)

    assert check.why == "iter_0000010/optimizer/.metadata is not there (the save did not finish)"


def test_meta_json_naming_another_rollout_is_incomplete(ckpt: Path) -> None:
    write_checkpoint(ckpt, 10, meta={"iteration": 20, "rollout_id": 19, "next_rollout_id": 20})

    check = verify_checkpoint(str(ckpt), 10, data_state=False)

    assert not check.complete
    assert check.why == "iter_0000010/meta.json names another rollout: iteration should be 10, it says 20"


def test_the_data_source_state_is_needed_only_with_the_global_dataset(ckpt: Path) -> None:
    write_checkpoint(ckpt, 10)

    assert verify_checkpoint(str(ckpt), 10, data_state=False).complete
    check = verify_checkpoint(str(ckpt), 10, data_state=True)
    assert not check.complete and "global_dataset_state_dict_9.pt" in (check.why or "")


def test_a_checkpoint_that_is_a_link_out_of_its_root_is_refused(ckpt: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    write_checkpoint(elsewhere, 10)
    os.symlink(elsewhere / "iter_0000010", ckpt / "iter_0000010")

    check = verify_checkpoint(str(ckpt), 10, data_state=False)

    assert not check.complete and "symbolic link out of the run's checkpoint directory" in (check.why or "")
    choice = choose_checkpoint(str(ckpt), data_state=False, root=str(tmp_path / "root"))
    assert isinstance(choice, NoCheckpoint) and "symbolic link out" in choice.why


def test_verifying_reads_no_tensor_data(ckpt: Path) -> None:
    write_checkpoint(ckpt, 10, sparse_bytes=10 * 10**9)  # a 10 GB shard, sparse: no block of it written

    def read_bytes() -> int:
        return int(
            next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar")).split()[1]
        )

    results: list = []

    def measured() -> None:  # in a thread of its own: the suite's other threads read nothing meanwhile
        before = read_bytes()
        check = verify_checkpoint(str(ckpt), 10, data_state=False)
        results.append((before, check, read_bytes()))

    thread = threading.Thread(target=measured)
    thread.start()
    thread.join()
    before, check, after = results[0]

    assert check.complete and check.bytes > 10 * 10**9
    assert after - before < 64 << 10  # meta.json, and /proc/self/io itself: never the shard's 10 GB


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\0\0\0\0", "NUL bytes"),
        (b"", "empty"),
        (b"garbage!", "not a number"),
        (b"1" + b"0" * 30, "past any run"),
    ],
)
def test_a_torn_or_bad_tracker_names_no_checkpoint(ckpt: Path, content: bytes, why: str) -> None:
    (ckpt / "latest_checkpointed_iteration.txt").write_bytes(content)

    read = read_tracker(str(ckpt))

    assert read.iteration is None and why in (read.problem or "")


@pytest.mark.parametrize("tracker_bytes", [b"\0" * 8, b"garbage", b"1" + b"0" * 30, b"30"])
def test_the_resume_takes_the_newest_complete_checkpoint_whatever_the_tracker_says(
    ckpt: Path, tracker_bytes: bytes
) -> None:
    write_checkpoint(ckpt, 10)
    write_checkpoint(ckpt, 20)
    torn_model_write(ckpt, 30)
    (ckpt / "latest_checkpointed_iteration.txt").write_bytes(tracker_bytes)

    choice = choose_checkpoint(str(ckpt), data_state=False, root=str(ckpt.parent.parent))

    assert isinstance(choice, ResumeChoice)
    assert (choice.iteration, choice.next_rollout_id) == (20, 20)
    assert "iter_0000030" in choice.passed_over_text()
    record = point_tracker(str(ckpt), choice)
    assert tracker(ckpt) == "20"
    assert record["after"] == "20" and record["rewritten"] is (tracker_bytes != b"20")


@pytest.mark.parametrize("stage", ["model", "meta", "tracker"])
def test_a_power_cut_at_each_moment_of_a_save_leaves_the_newest_complete_as_the_resume_point(
    ckpt: Path, stage: str
) -> None:
    write_checkpoint(ckpt, 10)
    if stage == "model":
        torn_model_write(ckpt, 20)  # during the model's write
    else:
        write_checkpoint(ckpt, 20, upto=stage)  # after meta.json, before the tracker; or after the tracker

    choice = choose_checkpoint(str(ckpt), data_state=False, root=str(ckpt.parent.parent))

    assert isinstance(choice, ResumeChoice)
    assert choice.iteration == (10 if stage == "model" else 20)
    assert tracker(ckpt) == ("20" if stage == "tracker" else "10")


def test_no_complete_checkpoint_says_why(ckpt: Path) -> None:
    torn_model_write(ckpt, 10)

    choice = choose_checkpoint(str(ckpt), data_state=False, root=str(ckpt.parent.parent))

    assert isinstance(choice, NoCheckpoint) and "iter_0000010" in choice.why and "not there" in choice.why
    nothing = choose_checkpoint(str(ckpt / "absent"), data_state=False, root=str(ckpt.parent.parent))
    assert isinstance(nothing, NoCheckpoint) and "does not exist" in nothing.why


def test_keep_removes_only_what_is_older_than_the_newest_complete_ones() -> None:
    assert [d.iteration for d in to_delete([10, 20, 30, 40], [30, 20], keep=2)] == [10]
    assert [d.iteration for d in to_delete([10, 20, 30, 40], [30], keep=2)] == [10, 20]  # 20 torn: older than 30
    assert to_delete([10, 20], [], keep=1) == []  # nothing complete: nothing goes
    assert [d.iteration for d in to_delete([10, 20, 30], [30, 20, 10], keep=1)] == [10, 20]
    assert to_delete([40, 30], [30], keep=1) == []  # 40 is newer than the newest complete: a save under way
    with pytest.raises(ValueError):
        to_delete([10], [10], keep=0)


def test_deleting_a_linked_checkpoint_unlinks_it_and_never_follows_it(ckpt: Path, tmp_path: Path) -> None:
    elsewhere = write_checkpoint(tmp_path / "elsewhere", 10)
    os.symlink(elsewhere, ckpt / "iter_0000010")

    freed, why_not = delete_checkpoint(str(ckpt), 10)

    assert why_not is None and not os.path.lexists(ckpt / "iter_0000010")
    assert (elsewhere / "meta.json").exists()


def test_the_keeper_verifies_each_save_records_it_and_keeps_the_newest(ckpt: Path) -> None:
    spec = CheckpointSpec(str(ckpt.parent.parent), str(ckpt), "/checkpoints/run/run-0123abcd", 10, 2, False)
    records: list[dict] = []
    notes: list[str] = []
    keeper = CheckpointKeeper(spec, records.append, notes.append)
    keeper.start()
    for iteration in (10, 20, 30):
        write_checkpoint(ckpt, iteration)
        keeper.saved(f"/checkpoints/run/run-0123abcd/iter_{iteration:07d}", iteration * 100)
    torn_model_write(ckpt, 40)
    keeper.saved("/checkpoints/run/run-0123abcd/iter_0000040", 4000)
    keeper.saved("/elsewhere/iter_0000050", 5000)
    keeper.close()

    verified = [r for r in records if r["event"] == "verified"]
    assert [(r.get("iteration"), r["complete"], r["line"]) for r in verified] == [
        (10, True, 1000),
        (20, True, 2000),
        (30, True, 3000),
        (40, False, 4000),
        (None, False, 5000),
    ]
    assert all(r["bytes"] > 0 for r in verified[:3]) and "not an iter_NNNNNNN" in verified[4]["why"]
    deleted = [r for r in records if r["event"] == "deleted"]
    assert [r["iteration"] for r in deleted] == [10]
    assert sorted(os.listdir(ckpt)) == [
        "iter_0000020",
        "iter_0000030",
        "iter_0000040",
        "latest_checkpointed_iteration.txt",
    ]
    assert any("iter_0000040 is not complete" in note for note in notes)
    newest = keeper.newest_complete()
    assert newest is not None and newest.iteration == 30


def test_the_size_of_one_checkpoint_comes_from_measured_ones_first(tmp_path: Path) -> None:
    model = tmp_path / "Qwen3-0.6B"
    model.mkdir()
    with open(model / "model.safetensors", "wb") as handle:
        handle.truncate(1_200_000_000)  # 0.6e9 parameters in bf16

    measured = estimate_size([5_000, 7_000], simulated=True, model_dir=str(model), model_name="Qwen3-0.6B")
    simulated = estimate_size([], simulated=True, model_dir=str(model), model_name="Qwen3-0.6B")
    weights = estimate_size([], simulated=False, model_dir=str(model), model_name="x")
    named = estimate_size([], simulated=False, model_dir=str(tmp_path / "absent"), model_name="/data/Qwen3-0.6B")

    assert measured is not None and measured.bytes == 7_000 and "measured" in measured.source
    assert simulated is not None and "simulator" in simulated.source
    assert weights is not None and weights.bytes == 9_600_000_000 and "parameter count" in weights.source
    assert named is not None and named.bytes == 9_600_000_000 and "from its name" in named.source
    assert estimate_size([], simulated=False, model_dir=None, model_name="model") is None
    assert parameters_in_name("SmolLM-135M") == 135e6


def test_the_disk_rule_needs_room_for_keep_plus_one_and_says_the_numbers() -> None:
    size = estimate_size([10 * 10**9], simulated=False, model_dir=None, model_name=None)

    fits = room_problem(free=30 * 10**9, held=0, keep=2, estimate=size, root="/ck", run="long")
    short = room_problem(free=25 * 10**9, held=0, keep=2, estimate=size, root="/ck", run="long")
    with_held = room_problem(free=10 * 10**9, held=20 * 10**9, keep=2, estimate=size, root="/ck", run="long")

    assert fits is None and with_held is None
    assert short == (
        "run long not started: the checkpoint root /ck has 25.0 GB free, and keep: 2 needs room for 3 checkpoints of "
        "10.0 GB (30.0 GB; size measured: the largest of this run's 1 complete checkpoint(s)); free space, lower "
        "keep, or set HARNESS_CHECKPOINT_DIR to a larger disk"
    )


def test_every_stage_of_a_save_is_in_the_helper() -> None:
    assert SAVE_STAGES[-2:] == ("meta", "tracker")
