"""The `checkpoint:` and `resume:` blocks: validated once, the checkpoint flags owned, the launch spec they make."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.experiments.store import ExperimentStore
from harness.run.plan import plan_launch
from harness.summary.conditions import read_conditions
from support.experiment_files import cli, one_error_line, planned, write

REPO = Path(__file__).resolve().parent.parent
CHECKPOINTED = "name: long\nextends: parent\nsteps: 20\ncheckpoint:\n  every: 5\n"


def spec_of(directory: Path, name: str, *, engine_process: bool = False, environ: dict | None = None, seed=None):
    store = ExperimentStore(directory)
    experiment = store.load(name, seed=seed).experiment
    if engine_process:
        experiment = experiment.model_copy(update={"engine": "process", "command": ["python3", "-m", "x"]})
    return plan_launch(
        experiment, base_args=store.base_args, capture_root="capture/gpu", project_root="/lab", environ=environ or {}
    )


@pytest.mark.parametrize(
    ("block", "key"),
    [("every: 0", "checkpoint.every"), ("every: 5\n  keep: 0", "checkpoint.keep"), ("every: -3", "checkpoint.every")],
)
def test_an_interval_or_a_keep_of_zero_is_one_line_naming_the_file_and_key(exp_dir: Path, block: str, key: str) -> None:
    write(exp_dir, "long", f"name: long\nextends: parent\ncheckpoint:\n  {block}\n")

    line = one_error_line(cli(exp_dir, "run", "long", "--dry-run"))

    assert "long.yaml" in line and key in line


@pytest.mark.parametrize("directory", ["/abs/path", "../out", "a/../../b", ".hidden"])
def test_a_checkpoint_dir_outside_the_root_is_refused(exp_dir: Path, directory: str) -> None:
    write(exp_dir, "long", f"name: long\nextends: parent\ncheckpoint:\n  every: 5\n  dir: {directory!r}\n")

    line = one_error_line(cli(exp_dir, "run", "long", "--dry-run"))

    assert "checkpoint.dir" in line


def test_auto_resume_needs_a_checkpoint_block(exp_dir: Path) -> None:
    write(exp_dir, "long", "name: long\nextends: parent\nresume:\n  auto: 2\n")

    line = one_error_line(cli(exp_dir, "run", "long", "--dry-run"))

    assert "resume.auto needs a `checkpoint` block" in line


@pytest.mark.parametrize(
    "flag",
    [
        "--save",
        "--load",
        "--save-interval",
        "--start-rollout-id",
        "--ckpt-step",
        "--no-save-optim",
        "--save-trigger-sentinel",
    ],
)
def test_each_checkpoint_flag_is_owned_and_points_at_the_block(exp_dir: Path, flag: str) -> None:
    bare = flag == "--no-save-optim"
    write(exp_dir, "hand", f'name: hand\nextends: parent\nmiles:\n  extra_args: "{flag}{"" if bare else " 3"}"\n')
    write(exp_dir, "args", f"name: args\nextends: parent\nmiles:\n  args: {{{flag[2:]}: {'true' if bare else '3'}}}\n")

    for name in ("hand", "args"):
        line = one_error_line(cli(exp_dir, "run", name, "--dry-run"))
        assert f"{flag[2:]}" in line and "set by the harness" in line and "`checkpoint` block" in line, line


def test_an_abbreviation_of_the_save_flags_is_refused(exp_dir: Path) -> None:
    write(exp_dir, "hand", 'name: hand\nextends: parent\nmiles:\n  extra_args: "--save-int 3"\n')

    line = one_error_line(cli(exp_dir, "run", "hand", "--dry-run"))

    assert "--save-interval" in line


def test_the_spec_saves_in_the_run_s_directory_under_the_mounted_root(exp_dir: Path) -> None:
    write(exp_dir, "long", CHECKPOINTED)

    spec = spec_of(exp_dir, "long")

    ckpt = spec.checkpoint
    assert ckpt is not None
    assert (ckpt.root, ckpt.every, ckpt.keep) == ("/lab/checkpoints", 5, 2)
    assert ckpt.directory == f"/lab/checkpoints/long/{spec.run_id}"
    assert ckpt.trainer_directory == f"/checkpoints/long/{spec.run_id}"
    saved = [
        "--save",
        ckpt.trainer_directory,
        "--save-interval",
        "5",
        "--save-trigger-sentinel",
        f"/checkpoints/long/{spec.run_id}/.harness-save-now",
    ]
    argv = list(spec.trainer_argv)
    assert argv[argv.index("--save") : argv.index("--save") + 6] == saved
    assert " ".join(saved) in spec.env["MILES_ARGS"]
    assert [(m.source, m.target, m.read_only) for m in spec.mounts][-1] == ("/lab/checkpoints", "/checkpoints", False)
    assert "--load" not in argv


def test_the_process_engine_gets_host_paths_and_no_mount(exp_dir: Path) -> None:
    write(exp_dir, "long", CHECKPOINTED)

    spec = spec_of(exp_dir, "long", engine_process=True, environ={"HARNESS_CHECKPOINT_DIR": "/srv/ckpt"})

    assert spec.checkpoint is not None
    assert spec.checkpoint.trainer_directory == spec.checkpoint.directory == f"/srv/ckpt/long/{spec.run_id}"
    assert not any(m.target == "/checkpoints" for m in spec.mounts)


def test_the_block_s_dir_lies_under_the_root(exp_dir: Path) -> None:
    write(exp_dir, "long", CHECKPOINTED + "  dir: shared/place\n")

    spec = spec_of(exp_dir, "long", environ={"HARNESS_CHECKPOINT_DIR": "ckpt"})

    assert spec.checkpoint is not None
    assert spec.checkpoint.directory == "/lab/ckpt/shared/place"
    assert spec.checkpoint.trainer_directory == "/checkpoints/shared/place"


def test_the_checkpoint_block_changes_neither_the_run_id_nor_the_condition_of_seeds(
    exp_dir: Path, tmp_path: Path
) -> None:
    write(exp_dir, "long", CHECKPOINTED)
    bare = tmp_path / "bare"
    bare.mkdir()
    write(bare, "parent", (exp_dir / "parent.yaml").read_text())
    write(bare, "long", "name: long\nextends: parent\nsteps: 20\n")

    with_block, without = spec_of(exp_dir, "long"), spec_of(bare, "long")
    seed_2 = spec_of(exp_dir, "long", seed=2)

    assert with_block.run_id == without.run_id
    assert without.checkpoint is None and "checkpoint" not in without.to_dict()

    def condition(spec, experiment):
        manifest = {"experiment": experiment, "trainer_argv": list(spec.trainer_argv), "image": spec.image}
        return read_conditions(manifest, 1.0).config_hash

    store = ExperimentStore(exp_dir)
    first = store.load("long").experiment.to_dict()
    second = store.load("long", seed=2).experiment.to_dict()
    assert with_block.trainer_argv != seed_2.trainer_argv
    assert condition(with_block, first) == condition(seed_2, second)


def test_the_long_experiments_run_200_steps_with_a_checkpoint_every_10() -> None:
    store = ExperimentStore(REPO / "experiments")
    for name, short in (("e2b-dapo-filter-long", "e2b-dapo-filter"), ("plain-48-long", "plain-48")):
        long, base = store.load(name).experiment, store.load(short).experiment
        assert long.steps == 200 and base.steps == 12
        assert long.checkpoint is not None and (long.checkpoint.every, long.checkpoint.keep) == (10, 2)
        assert base.checkpoint is None
        assert long.miles.extra_args == base.miles.extra_args
        assert long.miles.args == {**base.miles.args, "rollout-global-dataset": True}  # a resume is exact only so


def test_a_dry_run_shows_the_save_flags(exp_dir: Path) -> None:
    write(exp_dir, "long", CHECKPOINTED)

    shown = planned(cli(exp_dir, "run", "long", "--dry-run"))

    assert "--save-interval" in shown and "/checkpoints/long/" in shown
