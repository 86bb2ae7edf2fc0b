"""Experiment files: loading, merging, and every rejection as one line with exit code 2."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import HarnessError
from harness.experiments.overrides import deep_merge
from harness.experiments.store import ExperimentStore
from harness.lab.milesnames import FILTER_PATH

REPO_EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
BASE = ["--rollout-batch-size", "32", "--n-samples-per-prompt", "8", "--num-rollout", "12", "--seed", "1"]

PARENT = """\
name: parent
steps: 4
miles:
  args: {rollout-batch-size: 32}
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def reject(tmp_path: Path, *args: str) -> str:
    """Run the CLI, expect exit 2 and exactly one error line; return it."""
    result = CliRunner().invoke(app, [*args, "--experiments-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.fixture
def parent_dir(tmp_path: Path) -> Path:
    write(tmp_path, "parent", PARENT)
    return tmp_path


# --- the shipped experiments -------------------------------------------------------------


def test_shipped_experiments_all_load() -> None:
    store = ExperimentStore(REPO_EXPERIMENTS)
    names = store.names()
    assert {"plain", "plain-48", "e2b-dapo-filter", "e6a-base", "seeds"} <= set(names)
    for name in names:
        if store.is_sweep(name):
            sweep = store.load_sweep(name)
            store.load(sweep.sweep)
        else:
            assert store.load(name).warnings == ()


def test_filter_run_carries_the_write_up_flags_exactly() -> None:
    store = ExperimentStore(REPO_EXPERIMENTS)
    exp = store.load("e2b-dapo-filter").experiment
    assert exp.miles.extra_args == (
        "--dynamic-sampling-filter-path "
        "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter "
        "--over-sampling-batch-size 48"
    )
    assert exp.filter_path(store.base_args) == FILTER_PATH
    flags = exp.effective_flags(store.base_args)
    assert flags["--over-sampling-batch-size"] == ["48"]
    assert flags["--rollout-batch-size"] == ["32"]
    assert flags["--n-samples-per-prompt"] == ["8"]
    assert flags["--num-rollout"] == ["12"]
    assert "--rollout-max-response-len" in flags
    assert "--rm-type" in flags and flags["--rm-type"] == ["math"]
    assert exp.compare is not None and exp.compare.baseline == "plain"
    assert exp.compare.baselines == ["e6a-base", "plain", "plain-48", "plain-48-s2", "plain-48-s3"]


def test_plain_48_is_the_over_sampling_control_without_filter() -> None:
    store = ExperimentStore(REPO_EXPERIMENTS)
    exp = store.load("plain-48").experiment
    assert exp.filter_path(store.base_args) is None
    assert exp.effective_flags(store.base_args)["--over-sampling-batch-size"] == ["48"]


def test_seeds_sweep_names_its_runs() -> None:
    store = ExperimentStore(REPO_EXPERIMENTS)
    sweep = store.load_sweep("seeds")
    assert sweep.sweep == "plain-48" and sweep.seeds == [1, 2, 3]
    runs = [store.load(sweep.sweep, seed=s).experiment.run_name for s in sweep.seeds]
    assert runs == ["plain-48", "plain-48-s2", "plain-48-s3"]


def test_seed_sets_miles_seed_and_rollout_seed() -> None:
    store = ExperimentStore(REPO_EXPERIMENTS)
    flags = store.load("plain", seed=3).experiment.effective_flags(store.base_args)
    assert flags["--seed"] == ["3"] and flags["--rollout-seed"] == ["3"]


# --- merging and overrides ---------------------------------------------------------------


def test_deep_merge_merges_mappings_and_replaces_lists_and_strings() -> None:
    parent = {"a": {"x": 1, "y": [1, 2]}, "s": "old", "keep": True}
    child = {"a": {"y": [3]}, "s": "new"}
    assert deep_merge(parent, child) == {"a": {"x": 1, "y": [3]}, "s": "new", "keep": True}
    assert parent == {"a": {"x": 1, "y": [1, 2]}, "s": "old", "keep": True}


def test_extends_merges_and_child_wins(parent_dir: Path) -> None:
    write(parent_dir, "child", "name: child\nextends: parent\nmiles:\n  args: {lr: 2e-6}\n")
    exp = ExperimentStore(parent_dir, BASE).load("child").experiment
    assert exp.steps == 4 and exp.extends == "parent"
    assert exp.miles.args == {"rollout-batch-size": 32, "lr": 2e-6}  # a number, as YAML 1.2 reads it


def test_set_overrides_typed_values(parent_dir: Path) -> None:
    store = ExperimentStore(parent_dir, BASE)
    exp = store.load("parent", overrides=["steps=2", "miles.args.over-sampling-batch-size=64"]).experiment
    assert exp.steps == 2
    assert exp.effective_flags(BASE)["--over-sampling-batch-size"] == ["64"]
    assert exp.effective_flags(BASE)["--num-rollout"] == ["2"]


def test_deprecated_filter_path_is_accepted_with_a_warning(parent_dir: Path) -> None:
    write(
        parent_dir,
        "old",
        "name: old\nextends: parent\nmiles:\n  extra_args: --dynamic-sampling-filter-path "
        "miles.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std --over-sampling-batch-size 48\n",
    )
    loaded = ExperimentStore(parent_dir, BASE).load("old")
    assert len(loaded.warnings) == 1
    assert "deprecated" in loaded.warnings[0] and FILTER_PATH in loaded.warnings[0]
    assert "old.yaml" in loaded.warnings[0]
    result = CliRunner().invoke(app, ["show", "old", "--experiments-dir", str(parent_dir)])
    assert result.exit_code == 0
    assert "deprecated" in result.stderr and FILTER_PATH in result.stderr


# --- rejections: one line, file, key, reason, exit 2 -------------------------------------------


def test_yaml_syntax_error_names_the_line(parent_dir: Path) -> None:
    write(parent_dir, "bad", "name: bad\nsteps: [1, 2\nimage: x\n")
    line = reject(parent_dir, "show", "bad")
    assert "bad.yaml:" in line and "YAML syntax error" in line
    assert any(f"bad.yaml:{n}" in line for n in (2, 3))


def test_duplicate_key_is_rejected(parent_dir: Path) -> None:
    write(parent_dir, "dup", "name: dup\nsteps: 2\nsteps: 3\n")
    line = reject(parent_dir, "show", "dup")
    assert "dup.yaml:3" in line and "duplicate key 'steps'" in line


def test_unknown_key_names_file_key_and_known_keys(parent_dir: Path) -> None:
    write(parent_dir, "typo", "name: typo\nextends: parent\nguard:\n  pause_at: 80\n")
    line = reject(parent_dir, "show", "typo")
    assert "typo.yaml: guard.pause_at: unknown key" in line
    assert "pause_at_c" in line


def test_unknown_key_in_a_parent_names_the_parent(parent_dir: Path) -> None:
    write(parent_dir, "parent", PARENT + "colour: blue\n")
    write(parent_dir, "child", "name: child\nextends: parent\n")
    line = reject(parent_dir, "show", "child")
    assert "parent.yaml: colour: unknown key" in line


def test_wrong_type_names_the_value(parent_dir: Path) -> None:
    write(parent_dir, "wrong", "name: wrong\nextends: parent\nsteps: twelve\n")
    line = reject(parent_dir, "show", "wrong")
    assert "wrong.yaml: steps:" in line and "integer" in line and "'twelve'" in line


def test_gpus_must_be_all_none_or_indices(parent_dir: Path) -> None:
    write(parent_dir, "g", "name: g\nextends: parent\ncontainer: {gpus: some}\n")
    assert "g.yaml: container.gpus" in reject(parent_dir, "show", "g")
    write(parent_dir, "g", "name: g\nextends: parent\ncontainer: {gpus: [0, 1]}\n")
    assert ExperimentStore(parent_dir, BASE).load("g").experiment.container.gpus == [0, 1]


def test_missing_parent(parent_dir: Path) -> None:
    write(parent_dir, "orphan", "name: orphan\nextends: nowhere\n")
    line = reject(parent_dir, "show", "orphan")
    assert "orphan.yaml: extends:" in line and "'nowhere' not found" in line


def test_cycle_in_extends(parent_dir: Path) -> None:
    write(parent_dir, "a", "name: a\nextends: b\nsteps: 1\n")
    write(parent_dir, "b", "name: b\nextends: a\n")
    line = reject(parent_dir, "show", "a")
    assert "extends: cycle in extends (a -> b -> a)" in line


def test_over_sampling_below_batch_in_extra_args(parent_dir: Path) -> None:
    write(parent_dir, "small", "name: small\nextends: parent\nmiles:\n  extra_args: --over-sampling-batch-size 16\n")
    line = reject(parent_dir, "show", "small")
    assert "small.yaml: miles.extra_args:" in line
    assert "--over-sampling-batch-size 16 is below --rollout-batch-size 32" in line


def test_over_sampling_below_batch_in_args(parent_dir: Path) -> None:
    write(parent_dir, "small", "name: small\nextends: parent\nmiles:\n  args: {over-sampling-batch-size: 8}\n")
    line = reject(parent_dir, "show", "small")
    assert "small.yaml: miles.args.over-sampling-batch-size:" in line and "below" in line


def test_over_sampling_below_batch_from_set(parent_dir: Path) -> None:
    line = reject(
        parent_dir,
        "run",
        "parent",
        "--dry-run",
        "--set",
        "miles.args.rollout-batch-size=64",
        "--set",
        "miles.args.over-sampling-batch-size=48",
    )
    assert line.startswith(
        "error: --set miles.args.over-sampling-batch-size=48: --over-sampling-batch-size 48 is below"
    )


def test_unsafe_name(parent_dir: Path) -> None:
    write(parent_dir, "stem", "name: bad name\nextends: parent\n")
    line = reject(parent_dir, "show", "stem")
    assert "stem.yaml: name:" in line and "not a safe name" in line
    write(parent_dir, "bad name", "name: bad name\nextends: parent\n")
    assert "'bad name' is not an experiment name" in reject(parent_dir, "show", "bad name")


def test_name_must_match_the_file_stem(parent_dir: Path) -> None:
    write(parent_dir, "stem", "name: other\nextends: parent\n")
    line = reject(parent_dir, "show", "stem")
    assert "stem.yaml: name: 'other' does not match the file name 'stem'" in line


def test_unknown_experiment_lists_the_known_ones(parent_dir: Path) -> None:
    line = reject(parent_dir, "run", "nope", "--dry-run")
    assert "unknown experiment 'nope'" in line and "known: parent" in line


def test_flags_owned_by_steps_and_seed_are_rejected(parent_dir: Path) -> None:
    write(parent_dir, "own", "name: own\nextends: parent\nmiles:\n  args: {num-rollout: 5}\n")
    line = reject(parent_dir, "show", "own")
    assert (
        "own.yaml: miles.args.num-rollout: flag 'num-rollout' is set by the harness: use the experiment's `steps` key"
        in line
    )
    write(parent_dir, "own", "name: own\nextends: parent\nmiles:\n  extra_args: --seed 7\n")
    assert "miles.extra_args: --seed is set by the harness: use the experiment's `seed` key" in reject(
        parent_dir, "show", "own"
    )
    write(parent_dir, "own", "name: own\nextends: parent\nmiles:\n  extra_args: --num-roll=7\n")
    assert "it abbreviates --num-rollout, which argparse would set" in reject(parent_dir, "show", "own")


def test_unbalanced_quote_in_extra_args(parent_dir: Path) -> None:
    write(parent_dir, "q", 'name: q\nextends: parent\nmiles:\n  extra_args: "--x \'unclosed"\n')
    line = reject(parent_dir, "show", "q")
    assert "q.yaml: miles.extra_args: cannot be split like a shell command line" in line


def test_guard_hysteresis_must_hold(parent_dir: Path) -> None:
    write(parent_dir, "hot", "name: hot\nextends: parent\nguard: {pause_at_c: 80, resume_at_c: 85}\n")
    line = reject(parent_dir, "show", "hot")
    assert "hot.yaml: guard: resume_at_c (85.0) must be below pause_at_c (80.0)" in line


def test_guard_sensor_and_limits_are_validated(parent_dir: Path) -> None:
    write(parent_dir, "s", "name: s\nextends: parent\nguard: {sensor: thermometer}\n")
    assert "s.yaml: guard.sensor:" in reject(parent_dir, "show", "s")
    write(parent_dir, "s", "name: s\nextends: parent\nlimits: {max_minutes: -5}\n")
    assert "s.yaml: limits.max_minutes:" in reject(parent_dir, "show", "s")
    write(parent_dir, "s", "name: s\nextends: parent\nguard: {sensor: 'file:/tmp/temp'}\n")
    assert ExperimentStore(parent_dir, BASE).load("s").experiment.guard.sensor == "file:/tmp/temp"


def test_bad_set_syntax(parent_dir: Path) -> None:
    line = reject(parent_dir, "show", "parent", "--set", "steps")
    assert "--set steps: expected KEY.PATH=VALUE" in line


def test_sweep_of_unknown_experiment_is_rejected_when_read(parent_dir: Path) -> None:
    write(parent_dir, "sw", "sweep: ghost\nseeds: [1, 1]\n")
    line = reject(parent_dir, "show", "sw")
    assert "sw.yaml: seeds:" in line and "distinct" in line


def test_broken_file_does_not_break_other_commands(parent_dir: Path) -> None:
    write(parent_dir, "broken", "name: broken\nsteps: [\n")
    write(parent_dir, "ok", "name: ok\nextends: parent\n")
    shown = CliRunner().invoke(app, ["show", "ok", "--experiments-dir", str(parent_dir)])
    assert shown.exit_code == 0 and "name: ok" in shown.output
    listed = CliRunner().invoke(app, ["ls", "--experiments-dir", str(parent_dir)], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    broken_row = next(line for line in listed.output.splitlines() if line.startswith("broken "))
    assert "YAML syntax error" in broken_row
    assert any("ok" in line and "parent" in line for line in listed.output.splitlines())


def test_a_broken_parent_breaks_only_its_children(parent_dir: Path) -> None:
    write(parent_dir, "parent", "name: parent\nsteps: [\n")
    write(parent_dir, "child", "name: child\nextends: parent\n")
    write(parent_dir, "alone", "name: alone\nsteps: 3\n")
    assert "parent.yaml:" in reject(parent_dir, "show", "child")
    assert CliRunner().invoke(app, ["show", "alone", "--experiments-dir", str(parent_dir)]).exit_code == 0


def test_load_raises_harness_error_not_pydantic(parent_dir: Path) -> None:
    write(parent_dir, "x", "name: x\n")
    with pytest.raises(HarnessError, match=r"x.yaml: steps: required key is missing"):
        ExperimentStore(parent_dir, BASE).load("x")


def test_volumes_must_be_host_colon_container(parent_dir: Path) -> None:
    write(parent_dir, "v", "name: v\nextends: parent\ncontainer: {volumes: ['data']}\n")
    assert "v.yaml: container.volumes: 'data' is not HOST:/CONTAINER[:ro|rw]" in reject(parent_dir, "show", "v")
    write(parent_dir, "v", "name: v\nextends: parent\ncontainer: {volumes: ['data:/data:rx']}\n")
    assert "container.volumes" in reject(parent_dir, "show", "v")
    write(parent_dir, "v", "name: v\nextends: parent\ncontainer: {volumes: ['${D:-data}:/data:ro', '/abs:/x']}\n")
    assert ExperimentStore(parent_dir, BASE).load("v").experiment.container.volumes[0] == "${D:-data}:/data:ro"


def test_a_sweep_shows_a_deprecation_warning_once_not_per_seed(parent_dir: Path) -> None:
    write(
        parent_dir,
        "old",
        "name: old\nextends: parent\nmiles:\n  extra_args: --dynamic-sampling-filter-path "
        "miles.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std\n",
    )
    write(parent_dir, "old-seeds", "sweep: old\nseeds: [1, 2, 3]\n")
    from harness.cli.runs import plan_from_cli

    result = CliRunner().invoke(app, ["run", "old-seeds", "--dry-run", "--experiments-dir", str(parent_dir)])
    assert result.exit_code == 2 and "is a sweep file: run it with `harness sweep old-seeds`" in result.stderr
    assert result.stderr.count("deprecated") == 1
    plans = plan_from_cli("old-seeds", parent_dir, parent_dir / "capture", [], [])
    assert [p.spec.run for p in plans] == ["old", "old-s2", "old-s3"]
    assert all("deprecated" in p.warnings[0] for p in plans)


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("limits.max_minutes", "limits: {max_minutes: .inf}"),
        ("miles.args.lr", "miles:\n  args: {lr: .nan}"),
        ("guard.pause_at_c", "guard: {pause_at_c: -.inf}"),
    ],
)
def test_non_finite_numbers_are_refused_at_the_edge(tmp_path, key, text) -> None:
    # a manifest is strict JSON: NaN or Infinity in the experiment could not be recorded
    write(tmp_path, "odd", f"name: odd\nsteps: 4\n{text}\n")
    line = reject(tmp_path, "run", "odd", "--dry-run", "--json")
    assert "odd.yaml" in line and line.split("odd.yaml: ", 1)[1].startswith(key)
    assert "finite number" in line.split("odd.yaml: ", 1)[1]
