"""Under --ray, a run with checkpoints goes only to a node that sees the driver's checkpoint root (its token file)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from harness.cluster.node import check_task
from harness.cluster.rootcheck import TOKEN_PREFIX, root_tokens
from harness.experiments.store import ExperimentStore
from harness.run.plan import plan_runs
from support.experiment_files import write


def spec(tmp_path: Path, root: Path):
    experiments = tmp_path / "experiments"
    experiments.mkdir(exist_ok=True)
    write(
        experiments,
        "long",
        f"name: long\nsteps: 12\nengine: process\ncommand: [{sys.executable}, -c, pass]\n"
        "checkpoint: {every: 3}\nguard: {sensor: none}\n",
    )
    store = ExperimentStore(experiments, base_args=["--train-backend", "fsdp"])
    (plan,) = plan_runs(store, "long", [], [], tmp_path / "capture", {"HARNESS_CHECKPOINT_DIR": str(root)})
    return plan.spec


def test_a_node_that_sees_the_driver_s_root_passes_and_one_that_does_not_is_refused_in_one_line(tmp_path: Path) -> None:
    shared, elsewhere = tmp_path / "shared", tmp_path / "node-local"
    seen = spec(tmp_path, shared)
    unseen = spec(tmp_path, elsewhere)  # the same run as a node without the shared mount would see it

    with root_tokens([seen]) as tokens:
        (token,) = tokens.values()
        _, _, sees = check_task(seen, token)
        _, _, blind = check_task(unseen, token)

    assert sees == []
    assert len(blind) == 1 and blind[0].startswith(f"it cannot see the checkpoint root {elsewhere}")
    assert not [name for name in os.listdir(shared) if name.startswith(TOKEN_PREFIX)]  # the token is removed after


def test_a_run_without_checkpoints_is_not_asked_about_a_root(tmp_path: Path) -> None:
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    write(experiments, "plain", f"name: plain\nsteps: 2\nengine: process\ncommand: [{sys.executable}, -c, pass]\n")
    (plan,) = plan_runs(ExperimentStore(experiments, base_args=[]), "plain", [], [], tmp_path / "capture", {})

    with root_tokens([plan.spec]) as tokens:
        assert tokens == {}
        assert check_task(plan.spec, None)[2] == []
