"""What `--resume` (and a fresh start of a checkpointed run) decides before anything starts: each refusal one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.checkpoints.layout import CheckpointSpec
from harness.errors import HarnessError
from harness.experiments.store import ExperimentStore
from harness.run.plan import plan_runs
from harness.run.resume import plan_checkpoint_start
from support.checkpoints import make_attempt, resume_record, torn_model_write, write_checkpoint
from support.experiment_files import write

LONG = """\
name: long
steps: 12
engine: process
command: [python3, -m, trainer]
miles:
  args: {rollout-global-dataset: true}
guard: {sensor: none}
checkpoint:
  every: 3
  keep: 2
"""


@pytest.fixture
def dirs(tmp_path: Path) -> dict:
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    write(experiments, "long", LONG)
    write(experiments, "plain", "name: plain\nsteps: 12\nengine: process\ncommand: [python3, x]\n")
    return {"experiments": experiments, "captures": tmp_path / "capture", "root": tmp_path / "ckpt"}


def planned(dirs: dict, name: str = "long"):
    store = ExperimentStore(dirs["experiments"], base_args=["--train-backend", "fsdp"])
    (plan,) = plan_runs(store, name, [], [], dirs["captures"], {"HARNESS_CHECKPOINT_DIR": str(dirs["root"])})
    return plan


def directory_of(plan) -> Path:
    ckpt: CheckpointSpec = plan.spec.checkpoint
    path = Path(ckpt.directory)
    path.mkdir(parents=True, exist_ok=True)
    (path / ".harness-run.json").write_text(json.dumps({"run": plan.spec.run, "run_id": plan.spec.run_id}))
    return path


def refusal(plan, **kwargs) -> str:
    with pytest.raises(HarnessError) as caught:
        plan_checkpoint_start(plan, **{"resume": True, "mode": "retry", **kwargs})
    assert "\n" not in caught.value.message
    return caught.value.message


def test_a_resume_continues_the_head_from_the_newest_complete_checkpoint_and_loads_after_the_save_flags(dirs) -> None:
    plan = planned(dirs)
    make_attempt(dirs["captures"], "long", "failed", plan.spec.run_id, steps=(7, 12))
    directory = directory_of(plan)
    write_checkpoint(directory, 3, data_state=True)
    write_checkpoint(directory, 6, data_state=True)
    torn_model_write(directory, 9)

    resumed = plan_checkpoint_start(plan, resume=True, mode="retry")

    start = resumed.checkpoints
    assert start is not None and start.resume is not None
    assert (start.resume.from_attempt, start.resume.lineage, start.resume.choice.iteration) == (1, 1, 6)
    argv = list(resumed.spec.trainer_argv)
    sentinel = argv.index("--save-trigger-sentinel")
    assert argv[sentinel + 2 : sentinel + 4] == ["--load", str(directory)]
    assert resumed.spec.env["MILES_ARGS"].endswith(f"--load {directory}")
    assert resumed.spec.run_id == plan.spec.run_id
    assert any("iter_0000009" in note for note in start.notes)
    assert start.estimate is not None and "measured" in start.estimate.source
    assert "--load" not in plan.spec.trainer_argv  # planning never changes its input


def test_a_resume_of_a_refused_resume_continues_the_attempt_before_it(dirs) -> None:
    plan = planned(dirs)
    make_attempt(dirs["captures"], "long", "failed", plan.spec.run_id)
    make_attempt(dirs["captures"], "long", "failed", plan.spec.run_id, resume=resume_record(1, 6, verified=False))
    write_checkpoint(directory_of(plan), 6, data_state=True)

    resumed = plan_checkpoint_start(plan, resume=True, mode="retry")

    assert resumed.checkpoints is not None and resumed.checkpoints.resume is not None
    assert resumed.checkpoints.resume.from_attempt == 1


def test_a_run_without_a_checkpoint_block_cannot_resume(dirs) -> None:
    assert "has no `checkpoint` block" in refusal(planned(dirs, "plain"))


def test_a_succeeded_run_has_nothing_to_resume(dirs) -> None:
    plan = planned(dirs)
    make_attempt(dirs["captures"], "long", "succeeded", plan.spec.run_id)

    assert "succeeded" in refusal(plan) and "--force starts anew" in refusal(plan)


def test_no_complete_checkpoint_refuses_in_one_line_naming_force(dirs) -> None:
    plan = planned(dirs)
    make_attempt(dirs["captures"], "long", "failed", plan.spec.run_id)
    torn_model_write(directory_of(plan), 3)

    message = refusal(plan)

    assert message.startswith("run long: no complete checkpoint to resume from: none of its 1 checkpoint(s)")
    assert message.endswith("--force starts anew (make: FORCE=1)")


def test_an_attempt_of_another_configuration_is_refused(dirs) -> None:
    plan = planned(dirs)
    make_attempt(dirs["captures"], "long", "failed", "long-99999999")
    write_checkpoint(directory_of(plan), 6, data_state=True)

    assert "ran another configuration (run id long-99999999" in refusal(plan)


def test_a_directory_of_another_run_id_is_refused(dirs) -> None:
    plan = planned(dirs)
    make_attempt(dirs["captures"], "long", "failed", plan.spec.run_id)
    directory = directory_of(plan)
    write_checkpoint(directory, 6, data_state=True)
    (directory / ".harness-run.json").write_text(json.dumps({"run": "other", "run_id": "other-12345678"}))

    assert "run id other-12345678's" in refusal(plan)
    (directory / ".harness-run.json").unlink()
    assert "has no .harness-run.json" in refusal(plan)


def test_a_checkpoint_directory_linked_out_of_the_root_is_refused(dirs, tmp_path: Path) -> None:
    plan = planned(dirs)
    make_attempt(dirs["captures"], "long", "failed", plan.spec.run_id)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    Path(plan.spec.checkpoint.directory).parent.mkdir(parents=True)
    os.symlink(elsewhere, plan.spec.checkpoint.directory)

    assert "leads out of" in refusal(plan)


def test_a_checkpoint_whose_next_rollout_is_the_last_leaves_nothing_to_run(dirs) -> None:
    plan = planned(dirs)
    make_attempt(dirs["captures"], "long", "failed", plan.spec.run_id, steps=(12, 12))
    write_checkpoint(directory_of(plan), 12, data_state=True)

    message = refusal(plan)

    assert "nothing left to run: iter_0000012's next rollout 12 is at or past --num-rollout 12" in message


def test_a_fresh_start_over_a_complete_checkpoint_is_refused_and_force_moves_it_aside(dirs) -> None:
    plan = planned(dirs)
    make_attempt(dirs["captures"], "long", "failed", plan.spec.run_id)
    write_checkpoint(directory_of(plan), 6, data_state=True)

    message = refusal(plan, resume=False)
    forced = plan_checkpoint_start(plan, resume=False, mode="force")

    assert "holds iter_0000006, complete (rollout 5); --resume continues from it" in message
    assert forced.checkpoints is not None and forced.checkpoints.move_aside_to is not None
    assert forced.checkpoints.move_aside_to.startswith(plan.spec.checkpoint.directory + ".set-aside-")
    assert os.path.isdir(Path(plan.spec.checkpoint.directory) / "iter_0000006")  # deciding moves nothing


def test_the_disk_rule_refuses_with_the_numbers_from_the_measured_checkpoint(dirs) -> None:
    plan = planned(dirs)
    make_attempt(dirs["captures"], "long", "failed", plan.spec.run_id)
    huge = 10**13  # a 10 TB shard, sparse: no disk here has room for three more
    write_checkpoint(directory_of(plan), 6, data_state=True, sparse_bytes=huge)

    message = refusal(plan)

    assert message.startswith("run long not started: the checkpoint root")
    assert "keep: 2 needs room for 3 checkpoints of 10.0 TB" in message and "size measured" in message


def test_a_fresh_start_sizes_a_checkpoint_from_the_model(dirs) -> None:
    plan = planned(dirs)

    started = plan_checkpoint_start(plan, resume=False, mode="retry")

    assert started.checkpoints is not None and started.checkpoints.resume is None
    assert started.checkpoints.estimate is None  # the test's base run names no model: no size known, no refusal
