"""Experiment files at their edges: YAML 1.2 floats, and files that are not regular files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from harness.experiments.store import ExperimentStore
from harness.experiments.yamlfile import BoundedLoader, load_mapping
from support.experiment_files import cli, one_error_line, planned, write

BASE = ["--rollout-batch-size", "32", "--num-rollout", "12", "--seed", "1"]


@pytest.mark.parametrize(
    "text, number", [("1e2", 100.0), ("1E-3", 0.001), ("-2.5e+3", -2500.0), (".5e1", 5.0), ("1.e2", 100.0)]
)
def test_exponent_floats_are_numbers_as_in_yaml_1_2(text: str, number: float) -> None:
    value = yaml.load(text, Loader=BoundedLoader)
    assert isinstance(value, float) and value == number


@pytest.mark.parametrize("text", ["1e", "e2", "abc1e2", "1e2x", "0x1e2"])
def test_words_that_only_look_like_exponents_stay_words(text: str) -> None:
    assert isinstance(yaml.load(text, Loader=BoundedLoader), (str, int))
    assert yaml.load(text, Loader=BoundedLoader) != float(100)


def test_the_plain_safe_loader_is_left_as_it_was() -> None:
    assert yaml.safe_load("1e2") == "1e2"  # only the harness's loader reads YAML 1.2 floats


def test_an_exponent_float_in_a_file_and_in_set(exp_dir: Path) -> None:
    write(exp_dir, "hot", "name: hot\nextends: parent\nguard: {pause_at_c: 9.5e1, resume_at_c: 7E1}\n")
    assert load_mapping(exp_dir / "hot.yaml")["guard"] == {"pause_at_c": 95.0, "resume_at_c": 70.0}
    store = ExperimentStore(exp_dir, base_args=BASE)
    guard = store.load("hot", overrides=["guard.pause_at_c=1e2"]).experiment.guard
    assert guard.pause_at_c == 100.0 and guard.resume_at_c == 70.0
    planned(cli(exp_dir, "run", "hot", "--dry-run", "--set", "guard.pause_at_c=1e2", "--set", "guard.resume_at_c=8E1"))


@pytest.mark.parametrize("target", ["/dev/zero", "DIRECTORY", "FIFO"])
def test_an_experiment_file_that_is_not_a_regular_file_says_so(exp_dir: Path, target: str) -> None:
    path = exp_dir / "zero.yaml"
    if target == "DIRECTORY":
        path.mkdir()
    elif target == "FIFO":
        os.mkfifo(path)
    else:
        path.symlink_to(target)
    line = one_error_line(cli(exp_dir, "show", "zero"))
    assert "zero.yaml" in line and "not a regular file" in line and "unknown experiment" not in line
    done = cli(exp_dir, "ls")
    assert done.exit_code == 0, done.output
    row = next(line for line in done.output.splitlines() if line.split() and line.split()[0] == "zero")
    assert "broken" in row and "not a regular file" in row and "unknown experiment" not in row


def test_a_parent_that_is_not_a_regular_file_says_so(exp_dir: Path) -> None:
    (exp_dir / "dev.yaml").symlink_to("/dev/zero")
    write(exp_dir, "child", "name: child\nextends: dev\nsteps: 1\n")
    line = one_error_line(cli(exp_dir, "show", "child"))
    assert "child.yaml: extends:" in line and "not a regular file" in line
