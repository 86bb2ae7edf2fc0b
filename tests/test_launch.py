"""The launch spec: pinned for the filter run and a seed-2 run, pure, secrets redacted."""

from __future__ import annotations

import copy
import hashlib
import json
import shlex
from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from harness.engines.spec import docker_run_command
from harness.experiments.store import ExperimentStore
from harness.run.plan import compute_run_id, plan_launch

REPO = Path(__file__).resolve().parent.parent
FILTER_ARGS = (
    "--dynamic-sampling-filter-path miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter "
    "--over-sampling-batch-size 48"
)
SECTION_1_1 = (
    "--train-backend fsdp --hf-checkpoint /data/models/Qwen3-0.6B --prompt-data /data/gsm8k/train.parquet "
    "--input-key messages --label-key label --apply-chat-template --rollout-shuffle --rm-type math "
    "--num-rollout 12 --rollout-batch-size 32 --n-samples-per-prompt 8 --rollout-max-response-len 1024 "
    "--rollout-temperature 0.8 --global-batch-size 256 --advantage-estimator grpo --use-kl-loss "
    "--kl-loss-coef 0.00 --kl-loss-type low_var_kl --entropy-coef 0.00 --eps-clip 0.2 --eps-clip-high 0.28 "
    "--optimizer adam --lr 1e-6 --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98 "
    "--actor-num-nodes 1 --actor-num-gpus-per-node 1 --colocate --rollout-num-gpus-per-engine 1 "
    "--sglang-mem-fraction-static 0.5"
)


def plan(name: str, seed: int | None = None, environ: dict[str, str] | None = None):
    store = ExperimentStore(REPO / "experiments")
    experiment = store.load(name, seed=seed).experiment
    return plan_launch(
        experiment,
        base_args=store.base_args,
        capture_root="capture/gpu",
        project_root="/lab",
        environ=environ or {},
    )


def expected_spec(run: str, run_id: str, experiment: str, seed: int, extra: str) -> dict:
    trainer_args = f"{SECTION_1_1} --seed {seed} --rollout-seed {seed}"
    return {
        "run": run,
        "run_id": run_id,
        "experiment": experiment,
        "seed": seed,
        "engine": "docker",
        "image": "miles-gb10-lab:latest",
        "command": None,
        "container_name": f"mgl-{run_id}-{hashlib.sha256(f'/lab/capture/gpu/{run}'.encode()).hexdigest()[:6]}",
        "trainer_argv": ["python3", "train.py", *shlex.split(trainer_args), *shlex.split(extra)],
        "env": {"MILES_ARGS": trainer_args, "MILES_EXTRA_ARGS": extra},
        "labels": {
            "org.miles-gb10-lab.run": run,
            "org.miles-gb10-lab.run-id": run_id,
            "org.miles-gb10-lab.experiment": experiment,
            "org.miles-gb10-lab.capture-dir": f"/lab/capture/gpu/{run}",
        },
        "mounts": [{"source": "/lab/data", "target": "/data", "read_only": True}],
        "device_requests": [
            {"driver": "nvidia", "count": -1, "device_ids": None, "capabilities": [["gpu", "utility"]]}
        ],
        "shm_size": "32g",
        "ipc_mode": "host",
        "init": True,
        "ulimits": {"memlock": -1, "stack": 67108864},
        "capture_dir": f"/lab/capture/gpu/{run}",
        "steps_expected": 12,
        "max_minutes": 240.0,
        "missing_env": [],
        "secret_env": [],
    }


def as_json(spec) -> dict:
    return json.loads(json.dumps(spec.to_dict()))


def test_pinned_spec_for_the_filter_run() -> None:
    spec = plan("e2b-dapo-filter")
    assert as_json(spec) == expected_spec(
        "e2b-dapo-filter", "e2b-dapo-filter-e7ddb289", "e2b-dapo-filter", 1, FILTER_ARGS
    )
    assert spec.env["MILES_EXTRA_ARGS"] == FILTER_ARGS


def test_pinned_spec_for_a_seed_2_run() -> None:
    spec = plan("plain-48", seed=2)
    assert as_json(spec) == expected_spec(
        "plain-48-s2", "plain-48-s2-e31fbdb1", "plain-48", 2, "--over-sampling-batch-size 48"
    )


def test_run_id_changes_with_what_changes_results_only() -> None:
    store = ExperimentStore(REPO / "experiments")
    base = store.load("plain").experiment
    argv = ["python3", "train.py"]
    same = base.model_copy(update={"description": "reworded"})
    assert compute_run_id(base, argv, base.image) == compute_run_id(same, argv, base.image)
    assert compute_run_id(base, argv, base.image) != compute_run_id(base, argv, "other:tag")
    assert compute_run_id(base, argv, base.image) != compute_run_id(base, [*argv, "--lr", "2e-6"], base.image)
    assert compute_run_id(base, argv, base.image).startswith("plain-")


def test_planning_does_not_mutate_its_input() -> None:
    store = ExperimentStore(REPO / "experiments")
    experiment = store.load("e2b-dapo-filter").experiment
    before = copy.deepcopy(experiment.to_dict())
    base_args = list(store.base_args)
    base_before = list(base_args)
    environ = {"HF_TOKEN": "x"}
    plan_launch(experiment, base_args=base_args, capture_root="c", project_root="/p", environ=environ)
    assert experiment.to_dict() == before
    assert base_args == base_before
    assert environ == {"HF_TOKEN": "x"}


def test_listed_secrets_pass_through_and_are_shown_redacted(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "name: s\nsteps: 1\ncontainer:\n  pass_env: [HF_TOKEN, WANDB_API_KEY]\n  env: {DB_PASSWORD: hunter2, MODE: x}\n"
    )
    store = ExperimentStore(tmp_path, ["--rollout-batch-size", "4"])
    spec = plan_launch(
        store.load("s").experiment,
        base_args=store.base_args,
        capture_root="c",
        project_root="/p",
        environ={"HF_TOKEN": "hf_abc", "OTHER": "not passed"},
    )
    assert spec.env["HF_TOKEN"] == "hf_abc" and "OTHER" not in spec.env
    assert spec.missing_env == ("WANDB_API_KEY",)
    shown = spec.to_dict()["env"]
    assert shown["HF_TOKEN"] == "***" and shown["DB_PASSWORD"] == "***" and shown["MODE"] == "x"
    by_hand = docker_run_command(spec)
    assert "hf_abc" not in " ".join(by_hand) and "hunter2" not in " ".join(by_hand)
    assert by_hand[by_hand.index("HF_TOKEN") - 1] == "-e"


def test_gpu_indices_and_none_become_device_requests(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text("name: g\nsteps: 1\ncontainer: {gpus: [0, 2]}\n")
    (tmp_path / "n.yaml").write_text("name: n\nsteps: 1\ncontainer: {gpus: none}\n")
    store = ExperimentStore(tmp_path, [])
    kw = dict(base_args=[], capture_root="c", project_root="/p", environ={})
    indexed = plan_launch(store.load("g").experiment, **kw)
    assert [(r.count, r.device_ids) for r in indexed.device_requests] == [(None, ("0", "2"))]
    assert plan_launch(store.load("n").experiment, **kw).device_requests == ()


def test_dry_run_shows_extra_args_gpu_request_and_argv_and_starts_nothing() -> None:
    result = CliRunner().invoke(
        app,
        ["run", "e2b-dapo-filter", "--dry-run", "--experiments-dir", str(REPO / "experiments")],
        env={"COLUMNS": "80", "DOCKER_HOST": "unix:///nonexistent.sock"},
    )
    assert result.exit_code == 3, result.output  # no Docker here: the run would not start, and the plan is shown
    out = result.stdout
    assert f"MILES_EXTRA_ARGS={FILTER_ARGS}" in " ".join(out.split())  # fitted to 80 columns, words whole
    assert "gpu request     all GPUs (driver nvidia, capabilities gpu,utility)" in out
    assert "python3 train.py \\" in out
    assert "--over-sampling-batch-size 48\n" in out
    assert "dry run: nothing started" in out


def test_dry_run_json_is_one_document() -> None:
    result = CliRunner().invoke(
        app,
        ["run", "plain-48", "--seed", "2", "--dry-run", "--json", "--experiments-dir", str(REPO / "experiments")],
        env={"DOCKER_HOST": "unix:///nonexistent.sock"},
    )
    assert result.exit_code == 3, result.output  # no Docker here: the run would not start, and the plan is shown
    spec = json.loads(result.stdout)
    assert spec["run"] == "plain-48-s2"
    assert spec["env"]["MILES_EXTRA_ARGS"] == "--over-sampling-batch-size 48"
    assert spec["trainer_argv"][-2:] == ["--over-sampling-batch-size", "48"]


def test_volume_host_paths_expand_environment_variables_with_defaults() -> None:
    from harness.run.plan import expand_env

    assert expand_env("${MILES_LAB_DATA:-data}", {}) == "data"
    assert expand_env("${MILES_LAB_DATA:-data}", {"MILES_LAB_DATA": "/srv/data"}) == "/srv/data"
    assert expand_env("${HOME}/x", {"HOME": "/home/a"}) == "/home/a/x"
    spec = plan("plain", environ={"MILES_LAB_DATA": "/srv/lab-data"})
    assert [(m.source, m.target, m.read_only) for m in spec.mounts] == [("/srv/lab-data", "/data", True)]


def test_two_capture_roots_running_one_experiment_ask_docker_for_two_container_names(tmp_path: Path) -> None:
    store = ExperimentStore(REPO / "experiments")
    experiment = store.load("plain").experiment

    def name_under(root: str) -> str:
        return plan_launch(
            experiment, base_args=store.base_args, capture_root=root, project_root="/lab", environ={}
        ).container_name

    def dry_run_name(root: Path) -> str:
        argv = [
            "run",
            "plain",
            "--dry-run",
            "--json",
            "--capture-dir",
            str(root),
            "--experiments-dir",
            str(REPO / "experiments"),
        ]
        shown = CliRunner().invoke(app, argv)
        # 0, or 3 where this machine's engine would refuse the run (no image, no GPU runtime): the plan is shown
        assert shown.exit_code in (0, 3), shown.output
        return json.loads(shown.stdout)["container_name"]

    # --dry-run shows the name run asks for: the one planned for the capture root it was given (its first attempt's),
    # and only that root's
    first = f"{name_under(str(tmp_path / 'a'))}-a1"
    assert dry_run_name(tmp_path / "a") == first != f"{name_under(str(tmp_path / 'b'))}-a1"
    assert name_under("capture/gpu") != name_under("/elsewhere/capture/gpu")
    assert name_under("capture/gpu").startswith("mgl-plain-")
