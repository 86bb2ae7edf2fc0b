"""The parts of `--ray` that need no Ray cluster: the capture stream, the `cluster:` key, the plan of a run over
several hosts, the progress board, and Ray imported only when `--ray` is used."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.capture import Capture
from harness.capture.writer import EventSink
from harness.cluster.board import Board
from harness.cluster.connect import Node, NodeFacts, run_request
from harness.cluster.scaleout import GCS_PORT, plan_scale_out
from harness.errors import HarnessError
from harness.experiments.store import ExperimentStore
from harness.run.plan import plan_launch

REPO = Path(__file__).resolve().parent.parent
SPARKS = (NodeFacts("a" * 56, "10.0.0.1", "spark-1"), NodeFacts("b" * 56, "10.0.0.2", "spark-2"))


def write_experiment(directory: Path, **data: object) -> ExperimentStore:
    directory.mkdir(exist_ok=True)
    (directory / f"{data['name']}.yaml").write_text(json.dumps(data))
    return ExperimentStore(directory)


# --- the capture stream ------------------------------------------------------------------------


@pytest.mark.integration
def test_a_run_forwarded_through_the_writer_gives_the_same_capture_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's writes, applied by EventSink to another directory, are the local capture file for file."""
    from harness.run.context import RunContext
    from harness.run.lifecycle import run_planned
    from harness.run.plan import plan_runs

    monkeypatch.setenv("HARNESS_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("HARNESS_PROCESS_DIR", str(tmp_path / "processes"))
    store = write_experiment(
        tmp_path / "experiments",
        name="sim",
        steps=2,
        engine="process",
        command=[
            sys.executable,
            "-m",
            "harness.sim",
            "--num-rollout",
            "2",
            "--rollout-batch-size",
            "8",
            "--n-samples-per-prompt",
            "4",
        ],
        container={"gpus": "none"},
        guard={
            "sensor": "sim",
            "poll_s": 0.05,
            "record_every_s": 0.05,
            "min_pause_s": 0,
            "pause_at_c": 46,
            "resume_at_c": 45.5,
            "sim": {"heat_tau_s": 0.2, "cool_tau_s": 0.05},
        },
    )
    (plan,) = plan_runs(store, "sim", [], [], tmp_path / "local", {})
    elsewhere = Capture(tmp_path / "elsewhere" / "sim")
    elsewhere.directory.mkdir(parents=True)
    sink = EventSink(elsewhere)
    kinds: set[str] = set()

    def forward(event: tuple) -> None:
        kinds.add(event[1])
        sink.apply(copy.deepcopy(event))

    result = run_planned(plan, RunContext(forward=forward))
    sink.close()
    assert result.status is not None and result.status.state == "succeeded"
    local = Path(plan.spec.capture_dir)
    names = (
        "status.json",
        "manifest.json",
        "args.json",
        "container.log",
        "metrics.jsonl",
        "pauses.jsonl",
        "guard.jsonl",
    )
    assert kinds == set(names)
    for name in names:
        assert (elsewhere.directory / name).read_bytes() == (local / name).read_bytes(), name
    assert sink.lines == len((local / "container.log").read_text().splitlines())


def test_the_sink_refuses_what_is_not_a_capture_write(tmp_path: Path) -> None:
    sink = EventSink(Capture(tmp_path))
    for event in [("json", "../escape.json", {}), ("jsonl", "status.json", {}), ("shell", "x", "rm -rf /")]:
        with pytest.raises(ValueError):
            sink.apply(event)
    assert list(tmp_path.iterdir()) == []


# --- the cluster: key ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cluster, fragment",
    [
        ({"resources": {"GPU": 2}}, "every run asks for one GPU"),
        ({"resources": {"spark": 0}}, "not a positive amount"),
        ({"resources": {"9 lives": 1}}, "not a Ray resource name"),
        ({"nodes": 2}, "unknown key"),
        ({"num_cpus": -1}, "greater than or equal to 0"),
    ],
)
def test_the_cluster_key_is_validated_like_every_key(tmp_path: Path, cluster: dict, fragment: str) -> None:
    store = write_experiment(tmp_path, name="x", steps=1, cluster=cluster)
    with pytest.raises(HarnessError) as error:
        store.load("x")
    assert "x.yaml: cluster" in error.value.message and fragment in error.value.message


def test_the_cluster_key_asks_for_resources_beside_one_gpu_and_leaves_the_run_id_alone(tmp_path: Path) -> None:
    plain = write_experiment(tmp_path / "a", name="x", steps=1).load("x").experiment
    placed = (
        write_experiment(tmp_path / "b", name="x", steps=1, cluster={"resources": {"spark": 1}, "num_cpus": 2})
        .load("x")
        .experiment
    )
    assert run_request(placed.cluster) == {"GPU": 1.0, "CPU": 2.0, "spark": 1.0}
    assert run_request(plain.cluster) == {"GPU": 1.0}
    specs = [plan_launch(e, base_args=[], capture_root="c", project_root="/p", environ={}) for e in (plain, placed)]
    assert specs[0].run_id == specs[1].run_id  # where a run is placed does not change what it measures
    node = Node(SPARKS[0], {"GPU": 1.0, "CPU": 20.0, "spark": 1.0})
    assert node.can_take(run_request(placed.cluster)) and not Node(SPARKS[1], {"GPU": 1.0}).can_take(
        run_request(placed.cluster)
    )


# --- one run over several hosts -------------------------------------------------------------------


def e2b_spec():  # noqa: ANN201
    store = ExperimentStore(REPO / "experiments")
    loaded = store.load("e2b-dapo-filter")
    spec = plan_launch(
        loaded.experiment,
        base_args=store.base_args,
        capture_root="capture/gpu",
        project_root="/srv/lab",
        environ={"MILES_LAB_DATA": "/srv/data"},
    )
    return loaded.experiment, spec


def test_a_run_over_two_sparks_starts_a_ray_head_and_a_worker_of_the_lab_image_and_submits_the_job() -> None:
    experiment, spec = e2b_spec()
    before = copy.deepcopy(spec.to_dict())
    plan = plan_scale_out(
        spec,
        SPARKS,
        cluster_env={"NCCL_SOCKET_IFNAME": "enp1s0f1np1"},
        metadata={"run": spec.run, "run_id": spec.run_id, "git_sha": None},
    )
    assert spec.to_dict() == before  # planning changes nothing
    head, worker = plan.hosts
    assert (head.role, worker.role) == ("head", "worker") and head.host == SPARKS[0]
    for launch in plan.hosts:
        argv = list(launch.argv)
        assert argv[:2] == ["docker", "run"] and argv[argv.index("--network") + 1] == "host"
        assert "--device" in argv and "/dev/infiniband" in argv and "memlock=-1" in argv
        assert "NCCL_SOCKET_IFNAME=enp1s0f1np1" in argv and "NCCL_IB_DISABLE=0" in argv
        assert argv[argv.index("--entrypoint") + 1 : argv.index("--entrypoint") + 3] == ["ray", spec.image]
        assert "/srv/data:/data:ro" in argv and f"org.miles-gb10-lab.run-id={spec.run_id}" in argv
        assert argv[argv.index("--node-ip-address") + 1] == launch.host.node_ip
    assert "--head" in head.argv and "--address" not in head.argv
    assert worker.argv[list(worker.argv).index("--address") + 1] == f"10.0.0.1:{GCS_PORT}"
    job = plan.job
    assert job.submission_id == spec.run_id and job.address == "http://10.0.0.1:8266"
    assert job.metadata == {"run": spec.run, "run_id": spec.run_id}  # values as strings, None left out
    assert "--actor-num-nodes 2" in job.entrypoint and "--rollout-num-gpus 2" in job.entrypoint
    assert "--over-sampling-batch-size 48" in job.entrypoint and job.entrypoint.startswith("python3 train.py ")
    assert plan.warnings == (
        "GLOO_SOCKET_IFNAME is not set in cluster.env: NCCL and Gloo pick an interface "
        "themselves, maybe not the fast port",
    )
    assert json.loads(json.dumps(plan.to_dict()))["nodes"] == 2


def test_a_secret_reaches_the_hosts_containers_by_name_only() -> None:
    store = ExperimentStore(REPO / "experiments")
    experiment = store.load("plain", overrides=["container.env.HF_TOKEN=hf_abc123"]).experiment
    spec = plan_launch(experiment, base_args=store.base_args, capture_root="c", project_root="/p", environ={})
    plan = plan_scale_out(spec, SPARKS, cluster_env={}, metadata={})
    text = json.dumps(plan.to_dict())
    assert "hf_abc123" not in text and "HF_TOKEN" in text


# --- the board ----------------------------------------------------------------------------------


def test_the_board_says_each_run_its_host_step_and_pause_state() -> None:
    changes: list[str] = []
    board = Board(lambda line, what: changes.append(line.describe()))
    board.add("plain-48-s2", 12, filter_on=True)
    board.placed("plain-48-s2", "spark-2")
    board.event("plain-48-s2", ("status", "status.json", {"state": "running", "steps_expected": 12}))
    board.event(
        "plain-48-s2",
        (
            "jsonl",
            "metrics.jsonl",
            {
                "step": 0,
                "complete": True,
                "metrics": {
                    "perf/rollout_time": 88.74,
                    "rollout/raw_reward": 0.7,
                    "rollout/raw_reward_unfiltered": 0.672,
                },
            },
        ),
    )
    board.event("plain-48-s2", ("jsonl", "guard.jsonl", {"temp_c": 86.5}))
    board.event(
        "plain-48-s2", ("jsonl", "pauses.jsonl", {"start": "2026-11-30T12:03:04Z", "end": None, "peak_c": 86.5})
    )
    board.event("plain-48-s2", ("jsonl", "metrics.jsonl", {"step": 1, "complete": False}))
    board.event(
        "plain-48-s2", ("jsonl", "pauses.jsonl", {"start": "2026-11-30T12:03:04Z", "end": "2026-11-30T12:03:40Z"})
    )
    assert changes == [
        "plain-48-s2 on spark-2: starting, step 0/12, -",
        "plain-48-s2 on spark-2: running, step 0/12, -",
        "plain-48-s2 on spark-2: running, step 1/12, rollout 88.7 trainer s, reward 0.672, -",
        "plain-48-s2 on spark-2: running, step 1/12, rollout 88.7 trainer s, reward 0.672, "
        "PAUSED since 12:03:04, 86.5 C",
        "plain-48-s2 on spark-2: running, step 1/12, rollout 88.7 trainer s, reward 0.672, 86.5 C",
    ]


def test_the_board_derives_the_reward_where_miles_does_not_print_it() -> None:
    changes: list[str] = []
    board = Board(lambda line, what: changes.append(line.describe()))
    board.add("public-s1", 12, filter_on=True, batch=8)
    board.placed("public-s1", "spark-1")
    metrics = {
        "perf/rollout_time": 60.0,
        "rollout/raw_reward": 0.5,  # the 8 kept groups' mean; no rollout/raw_reward_unfiltered
        "rollout/dynamic_filter/drop_zero_std_1": 2,
        "rollout/dynamic_filter/drop_zero_std_0": 6,
    }
    board.event("public-s1", ("jsonl", "metrics.jsonl", {"step": 0, "complete": True, "metrics": metrics}))
    assert board.line("public-s1").reward == (0.5 * 8 + 2 * 1) / (8 + 2 + 6)
    assert "reward 0.375" in changes[-1]


# --- Ray only when --ray is used ----------------------------------------------------------------

PROBE = """
import sys
{block}
from harness.cli import app
try:
    app({args!r}, standalone_mode=False)
except SystemExit:
    pass
print("RAY:" + str("ray" in sys.modules))
"""


def probe(args: list[str], block: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args, block=block)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RAY_ADDRESS": ""},
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["run", "--help"],
        ["sweep", "--help"],
        ["status"],
        ["run", "e2b-dapo-filter", "--dry-run"],
        ["sweep", "seeds", "--dry-run"],
    ],
)
def test_ray_is_imported_only_when_ray_is_used(args: list[str]) -> None:
    out = probe(args)
    assert out.stdout.strip().splitlines()[-1] == "RAY:False", out.stdout[-500:] + out.stderr[-500:]


@pytest.mark.integration
@pytest.mark.parametrize(
    "args", [["run", "plain", "--ray", "auto"], ["sweep", "seeds", "--ray", "auto"], ["recover", "--ray", "auto"]]
)
def test_without_ray_installed_ray_fails_in_one_line_saying_how_to_install_it(args: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['ray'] = None\nfrom harness.cli import main; main()", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install '.[cluster]'" in lines[0] and "Traceback" not in out.stderr, lines


# Ray's own words when `auto` finds no cluster (ray.init raises ConnectionError with them).
RAY_NO_CLUSTER = (
    "Could not find any running Ray instance. Please specify the one to connect to by setting "
    "`--address` flag or `RAY_ADDRESS` environment variable."
)


def test_with_no_cluster_running_the_error_names_our_flag_not_rays(monkeypatch: pytest.MonkeyPatch) -> None:
    # A real `auto` lookup would find any cluster on this machine (Ray scans the processes), so Ray's refusal is
    # raised at its entry point; the harness's handling of it runs for real.
    from harness.cluster import connect as joining

    ray = joining.import_ray()
    monkeypatch.setattr(ray, "is_initialized", lambda: False)

    def refuse(**kwargs: object) -> None:
        raise ConnectionError(RAY_NO_CLUSTER)

    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(HarnessError) as err:
        joining.connect("auto")
    assert "--ray HOST:PORT" in err.value.message and "--address" not in err.value.message, err.value.message


# --- deciding on a capture: the same with --ray as without ------------------------------------


class FakeRay:
    """The little of Ray's API a sweep whose every run is skipped touches: no nodes, a control actor."""

    class _Remote:
        def options(self, **_: object) -> "FakeRay._Remote":
            return self

        def remote(self, *_: object) -> object:
            return object()

    def nodes(self) -> list:
        return []

    def remote(self, _: object) -> "FakeRay._Remote":
        return FakeRay._Remote()


@pytest.fixture
def ray_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """`harness ARGS` on the simulator, with `--ray fake` joining a Ray cluster that is a FakeRay."""
    from typer.testing import CliRunner

    from harness.cli import app
    from harness.cluster import connect

    monkeypatch.setattr(connect, "connect", lambda address: FakeRay())
    monkeypatch.setattr(connect, "disconnect", lambda: None)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    env = {
        "DOCKER_HOST": "unix:///nonexistent.sock",
        "HARNESS_LOCK_DIR": str(tmp_path / "locks"),
        "HARNESS_PROCESS_DIR": str(tmp_path / "processes"),
        "HARNESS_EXPERIMENT": "",
        "COLUMNS": "250",
    }
    captures = tmp_path / "capture"

    def invoke(*args: str):  # noqa: ANN202
        return CliRunner().invoke(
            app,
            [*args, "--sim", "--sim-engine", "process", "--time-scale", "0.002", "--capture-dir", str(captures)],
            env=env,
        )

    return invoke


@pytest.mark.integration
def test_run_with_ray_refuses_a_changed_capture_exactly_as_run_does_naming_what_changed(ray_cli) -> None:  # noqa: ANN001
    first = ray_cli("run", "plain", "--set", "steps=1")
    assert first.exit_code == 0, first.output

    local = ray_cli("run", "plain", "--set", "steps=2")
    on_ray = ray_cli("run", "plain", "--set", "steps=2", "--ray", "fake")

    assert local.exit_code == on_ray.exit_code == 2
    assert "steps 1 -> 2" in local.output
    assert on_ray.output == local.output  # the same decision, the same words, nothing more


@pytest.mark.integration
def test_a_sweep_with_ray_skips_a_succeeded_run_with_the_line_a_local_sweep_prints(ray_cli) -> None:  # noqa: ANN001
    first = ray_cli("sweep", "plain-48", "--seeds", "1", "--set", "steps=1")
    assert first.exit_code == 0, first.output

    local = ray_cli("sweep", "plain-48", "--seeds", "1", "--set", "steps=1")
    on_ray = ray_cli("sweep", "plain-48", "--seeds", "1", "--set", "steps=1", "--ray", "fake")

    assert local.exit_code == on_ray.exit_code == 0, on_ray.output
    skipped = [line for line in local.output.splitlines() if line.startswith("plain-48 skipped: succeeded at ")]
    assert len(skipped) == 1 and skipped[0] in on_ray.output.splitlines()
    assert "skipping" not in on_ray.output and "running:" not in on_ray.output


@pytest.mark.integration
def test_the_driver_decides_with_the_configuration_changes_the_local_path_names(ray_cli, tmp_path: Path) -> None:  # noqa: ANN001
    from harness.cluster.driver import RaySweep
    from harness.run.context import RecordingReporter, RunContext, RunOptions
    from harness.run.lifecycle import decide_on_capture
    from harness.run.plan import plan_runs
    from harness.run.simswap import SimTarget

    first = ray_cli("run", "plain", "--set", "steps=1")
    assert first.exit_code == 0, first.output
    target = SimTarget("process", 0.002, sys.executable, "a test")
    (plan,) = plan_runs(
        ExperimentStore(REPO / "experiments"), "plain", [], ["steps=3"], tmp_path / "capture", {}, sim=target
    )
    reporter = RecordingReporter()
    ctx = RunContext(options=RunOptions(mode="cached"), reporter=reporter, provenance={})
    sweep = RaySweep(FakeRay(), "fake", ctx=ctx, board=Board(lambda *_: None))

    (run,) = sweep.run([plan])

    decisions = [event[2] for event in reporter.of("decided")]
    assert decisions == [run.decision] == [decide_on_capture(plan, "cached")]
    assert run.decision.refused and "steps 1 -> 3" in run.decision.reason


@pytest.mark.integration
def test_ray_s_own_lines_go_to_a_file_named_once_and_the_harness_s_stay_on_standard_error(tmp_path: Path) -> None:
    """Was: a sweep whose node died printed the raylet's [state-dump] and (raylet) accessor.cc lines among its own."""
    code = (
        "import os, sys\n"
        "from harness.cluster.connect import RAY_OUTPUT\n"
        "path = RAY_OUTPUT.divert()\n"
        "print(f'Ray logs to {path}', file=sys.stderr, flush=True)\n"
        "os.write(2, b'[state-dump] NodeManager: (raylet) accessor.cc:123 lost\\n')\n"
        "from harness.cli.app import warn\n"
        "warn('a run of the harness')\n"
        "RAY_OUTPUT.restore()\n"
        "os.write(2, b'back on stderr\\n')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HARNESS_RAY_LOG_DIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    (log,) = tmp_path.glob("driver-*.log")
    assert "[state-dump]" in log.read_text() and "[state-dump]" not in done.stderr
    assert f"Ray logs to {log}" in done.stderr and "warning: a run of the harness" in done.stderr
    assert done.stderr.rstrip().endswith("back on stderr")
