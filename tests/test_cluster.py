"""Runs placed by Ray over several hosts: real Ray nodes on this machine (`ray.cluster_utils.Cluster`).

One cluster for the module: a head without GPUs and two worker nodes that
declare one GPU each. Each node has its own process-engine root, its own
copy of the captures and its own PATH, as two hosts would. The trainer is
the simulated Miles trainer at a fixed pace, through the process engine.
The test that removes a node comes last.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest
from typer.testing import CliRunner

from harness.cli import app
from support import raynodes
from support.timing import scaled

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parent.parent
SIM_LINES = 86  # what the simulated trainer prints below (3 steps, 8 prompts x 4 answers; 14 noise lines a step)
ONLY_ON_A = "mgl-node-a-trainer"


class RayNodes(raynodes.RayNodes):
    """The module's cluster: nodes a and b; host a alone has the command ONLY_ON_A."""

    def node_env(self, name: str) -> dict[str, str]:
        env = super().node_env(name)
        if name == "a":  # a command only host a has
            bin_dir = self.home(name) / "bin"
            bin_dir.mkdir(parents=True)
            script = bin_dir / ONLY_ON_A
            script.write_text("#!/bin/sh\nexec true\n")
            script.chmod(0o755)
            env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
        return env


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from raynodes.started_nodes(tmp_path_factory, RayNodes)


class RayLab:
    """Experiments and the driver's captures for one test."""

    def __init__(self, root: Path, ray_cluster: RayNodes) -> None:
        self.root = root
        self.cluster = ray_cluster
        self.experiments = root / "experiments"
        self.captures = root / "capture"
        self.experiments.mkdir()
        self.env = {"HARNESS_LOCK_DIR": str(root / "locks")}

    def sim(
        self,
        name: str = "sim",
        *,
        time_scale: float = 0.02,
        steps: int = 3,
        guard: Optional[dict] = None,
        command: Optional[list] = None,
        extra: Optional[dict] = None,
    ) -> str:
        data = {
            "name": name,
            "steps": steps,
            "engine": "process",
            "command": command
            or [
                sys.executable,
                "-m",
                "harness.sim",
                "--num-rollout",
                str(steps),
                "--rollout-batch-size",
                "8",
                "--n-samples-per-prompt",
                "4",
                "--time-scale",
                str(time_scale),
            ],
            "container": {"gpus": "none"},
            "guard": guard or {"sensor": "none"},
            **(extra or {}),
        }
        (self.experiments / f"{name}.yaml").write_text(json.dumps(data))
        return name

    def dirs(self) -> list[str]:
        return ["--experiments-dir", str(self.experiments), "--capture-dir", str(self.captures)]

    def cli(self, *args: str) -> Any:
        return CliRunner().invoke(app, [*args, *self.dirs(), "--ray", self.cluster.address], env=self.env)

    def status(self, run: str) -> dict:
        return json.loads((self.captures / run / "status.json").read_text())

    def manifest(self, run: str) -> dict:
        return json.loads((self.captures / run / "manifest.json").read_text())

    def lines(self, run: str, name: str = "container.log", root: Optional[Path] = None) -> list[str]:
        path = (root or self.captures / run) / name
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def ray_lab(tmp_path: Path, ray_cluster: RayNodes) -> RayLab:
    yield RayLab(tmp_path, ray_cluster)
    ray_cluster.kill_leftovers()


HOT_GUARD = {
    "sensor": "sim",
    "poll_s": 0.2,
    "record_every_s": 0.2,
    "min_pause_s": 0,
    "pause_at_c": 60,
    "resume_at_c": 50,
    "sim": {"heat_tau_s": 1, "cool_tau_s": 0.3},
}


def test_a_sweep_of_four_seeds_uses_both_nodes_one_run_each_at_a_time_and_every_capture_is_whole_on_the_driver(
    ray_lab: RayLab, ray_cluster: RayNodes
) -> None:
    ray_lab.sim(guard=HOT_GUARD)  # the simulated sensor heats up: pause windows and samples are streamed too
    result = ray_lab.cli("sweep", "sim", "--seeds", "1", "2", "3", "4")
    assert result.exit_code == 0, result.output
    runs = ["sim", "sim-s2", "sim-s3", "sim-s4"]
    spans: dict[str, list[tuple[str, str]]] = {}
    for run in runs:
        status, manifest = ray_lab.status(run), ray_lab.manifest(run)
        assert status["state"] == "succeeded" and status["steps_complete"] == 3, status
        assert status["harness_pid"] == os.getpid()  # the driver is the run's harness
        node = manifest["ray"]
        assert set(node) == {"node_id", "node_ip", "hostname"}
        spans.setdefault(node["node_id"], []).append((status["started_at"], status["ended_at"]))
        lines = ray_lab.lines(run)
        assert len(lines) == SIM_LINES and len(set(lines)) == SIM_LINES  # every line, each once
        copy = ray_cluster.node_copy(node["node_id"], run)  # the node keeps its own copy: the same files
        for name in ("container.log", "metrics.jsonl", "pauses.jsonl", "guard.jsonl"):
            assert ray_lab.lines(run, name) == ray_lab.lines(run, name, copy), name
        assert json.loads((copy / "manifest.json").read_text()) == manifest
        assert len([row for row in map(json.loads, ray_lab.lines(run, "metrics.jsonl")) if row["complete"]]) == 3
        assert ray_lab.lines(run, "pauses.jsonl") and ray_lab.lines(run, "guard.jsonl")
    assert set(spans) == {node.node_id for node in ray_cluster.nodes.values()}  # both nodes used
    for node_id, node_spans in spans.items():  # a node never runs two at once
        ordered = sorted(node_spans)
        assert all(earlier[1] <= later[0] for earlier, later in zip(ordered, ordered[1:])), (node_id, ordered)
    for run in runs:
        assert f"{run} on " in result.output  # live progress names each run's host
    # The driver's board shows the runs Ray placed, as a local run's: one TensorBoard run per seed.
    boards = sorted(path.name for path in (ray_lab.captures / "tensorboard" / "sim").iterdir())
    assert boards == ["s1", "s2", "s3", "s4"]
    assert all(any((ray_lab.captures / "tensorboard" / "sim" / seed).glob("events.out.tfevents.*")) for seed in boards)

    shown = CliRunner().invoke(app, ["status", "--capture-dir", str(ray_lab.captures)], env={"COLUMNS": "300"})
    header, *rows = shown.output.splitlines()[1:]
    assert header.split()[-1] == "host" and all(
        row.split()[-1] == ray_lab.manifest(row.split()[0])["ray"]["hostname"] for row in rows
    )

    again = ray_lab.cli("sweep", "sim", "--seeds", "1", "2", "3", "4")  # done runs are skipped, as in a local sweep
    assert again.exit_code == 0 and again.output.count(" skipped: succeeded at ") == 4, again.output


def test_a_node_without_what_the_run_needs_is_refused_before_anything_starts(
    ray_lab: RayLab, ray_cluster: RayNodes
) -> None:
    ray_lab.sim("needs-a", command=[ONLY_ON_A])  # host a has this command; host b does not
    result = ray_lab.cli("sweep", "needs-a", "--seeds", "1", "2")
    assert result.exit_code == 3, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and ONLY_ON_A in lines[0], result.output
    assert ray_cluster.nodes["b"].node_id[:12] in lines[0] and ray_cluster.nodes["a"].node_id[:12] not in lines[0]
    assert not ray_lab.captures.exists() and not ray_cluster.process_runs()


@pytest.mark.docker
def test_a_node_whose_docker_lacks_the_image_is_refused_in_one_line_naming_node_and_image(
    ray_lab: RayLab, ray_cluster: RayNodes
) -> None:
    image = "miles-gb10-lab/absent:never-built"
    (ray_lab.experiments / "absent.yaml").write_text(
        json.dumps(
            {
                "name": "absent",
                "steps": 1,
                "image": image,
                "container": {"gpus": "none", "ulimits": {}, "shm_size": "64m", "ipc": "private"},
            }
        )
    )
    result = ray_lab.cli("run", "absent")
    assert result.exit_code == 3, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and image in lines[0] and "node " in lines[0], result.output
    assert any(node.node_id[:12] in lines[0] for node in ray_cluster.nodes.values())
    assert not ray_lab.captures.exists()


def test_recover_with_ray_settles_the_runs_of_a_killed_driver_through_the_nodes(
    ray_lab: RayLab, ray_cluster: RayNodes
) -> None:
    # Runs of minutes (100 steps of about a second): the driver is killed in the middle of both, however late the
    # second starts on a busy machine (with 3 steps, one had ended before the other's first step)
    ray_lab.sim(time_scale=0.06, steps=100)
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "sweep",
            "sim",
            "--seeds",
            "1",
            "2",
            *ray_lab.dirs(),
            "--ray",
            ray_cluster.address,
        ],
        cwd=REPO,
        env={**os.environ, **ray_lab.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + scaled(120)
        while not all(_steps(ray_lab, run) >= 1 for run in ("sim", "sim-s2")):
            assert time.monotonic() < deadline and driver.poll() is None, driver.communicate()[0]
            time.sleep(0.1)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.communicate()
    assert {ray_lab.status(run)["state"] for run in ("sim", "sim-s2")} == {"running"}
    trainers = {run.labels["org.miles-gb10-lab.run"]: run for run in ray_cluster.process_runs()}
    assert set(trainers) == {"sim", "sim-s2"}  # the trainers outlive the driver (and its Ray workers), on their nodes
    assert all(trainer.describe().alive for trainer in trainers.values())

    result = CliRunner().invoke(
        app,
        ["recover", "--ray", ray_cluster.address, "--capture-dir", str(ray_lab.captures), "--grace-s", "5"],
        env=ray_lab.env,
    )
    assert result.exit_code == 0, result.output
    for run in ("sim", "sim-s2"):
        status = ray_lab.status(run)
        assert status["state"] in ("interrupted", "succeeded") and status["capture_complete"], status
        assert f"{run}: {status['state']}" in result.output
        lines = ray_lab.lines(run)
        assert len(lines) == len(set(lines)) and lines[0].split(" ", 1)[1].startswith("harness sim:")
        assert status["state"] != "succeeded" or len(lines) == SIM_LINES
    assert not ray_cluster.process_runs()  # stopped and removed on their nodes


def test_harness_stop_and_ctrl_c_reach_the_runs_on_their_nodes(ray_lab: RayLab, ray_cluster: RayNodes) -> None:
    # Runs of minutes (100 steps of about a second): `sim` still runs when Ctrl-C comes, however long the stop of
    # sim-s2 takes on a busy machine (with 3 steps of 9 s, it had succeeded by then under two suites at once).
    ray_lab.sim(time_scale=0.06, steps=100)
    driver = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "sweep",
            "sim",
            "--seeds",
            "1",
            "2",
            "3",
            "4",
            *ray_lab.dirs(),
            "--ray",
            ray_cluster.address,
        ],
        cwd=REPO,
        env={**os.environ, **ray_lab.env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + scaled(120)
        while not all(_steps(ray_lab, run) >= 1 for run in ("sim", "sim-s2")):
            assert time.monotonic() < deadline and driver.poll() is None, driver.communicate()[0]
            time.sleep(0.05)
        stopped = CliRunner().invoke(
            app,
            ["stop", "sim-s2", "--reason", "enough", "--capture-dir", str(ray_lab.captures), "--timeout-s", "30"],
            env=ray_lab.env,
        )
        assert stopped.exit_code == 0 and "sim-s2: stopped (enough" in stopped.output, stopped.output
        driver.send_signal(signal.SIGINT)
        out, _ = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 130, out
    assert ray_lab.status("sim-s2")["state"] == "stopped" and ray_lab.status("sim-s2")["stop_reason"] == "enough"
    first = ray_lab.status("sim")
    assert first["state"] == "interrupted" and "SIGINT" in first["error"] and first["capture_complete"], first
    # sim-s2's GPU went to a queued run; the other stayed queued until Ctrl-C cancelled it: nothing written
    later = {
        run: (ray_lab.status(run)["state"] if (ray_lab.captures / run).exists() else None)
        for run in ("sim-s3", "sim-s4")
    }
    assert set(later.values()) <= {"interrupted", None} and None in later.values(), later
    assert not ray_cluster.process_runs()  # both trainers stopped, their engine objects removed


def _steps(ray_lab: RayLab, run: str) -> int:
    try:
        return ray_lab.status(run)["steps_complete"] + len(ray_lab.lines(run, "metrics.jsonl"))
    except (OSError, ValueError):
        return 0


def test_a_run_over_two_hosts_dry_run_prints_what_each_host_would_start(ray_lab: RayLab, ray_cluster: RayNodes) -> None:
    ray_lab.sim()
    result = ray_lab.cli("run", "sim", "--nodes", "2", "--dry-run")
    assert result.exit_code == 0, result.output
    hosts = [line for line in result.output.splitlines() if line.startswith("host ")]
    assert len(hosts) == 2 and "Ray head" in hosts[0] and "Ray worker" in hosts[1]
    assert {node.node_id[:12] for node in ray_cluster.nodes.values()} == {line.split("node ")[1][:12] for line in hosts}
    assert "submission id  sim-" in result.output and "docker run --detach" in result.output
    assert not ray_lab.captures.exists() and not ray_cluster.process_runs()  # nothing started

    as_json = json.loads(ray_lab.cli("run", "sim", "--nodes", "2", "--dry-run", "--json").output)
    assert [host["role"] for host in as_json["hosts"]] == ["head", "worker"]
    for args, fragment in [
        (("--nodes", "3", "--dry-run"), "--nodes 3 needs 3"),
        (("--nodes", "2"), "only its --dry-run is implemented"),
    ]:
        refused = ray_lab.cli("run", "sim", *args)
        assert refused.exit_code == 2 and fragment in refused.output and len(refused.output.splitlines()) == 1

    single = ray_lab.cli("run", "sim")  # one run, placed by Ray, reported as a local run is
    assert single.exit_code == 0 and "sim: succeeded, 3/3 steps complete, exit code 0" in single.output, single.output
    assert ray_lab.manifest("sim")["ray"]["node_id"] in {node.node_id for node in ray_cluster.nodes.values()}


def test_a_node_lost_mid_sweep_interrupts_its_run_only_and_retry_reruns_it(
    ray_lab: RayLab, ray_cluster: RayNodes
) -> None:
    ray_lab.sim(time_scale=0.04)
    lost: dict[str, str] = {}

    def remove_a_node_mid_run() -> None:
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline:
            for run in ("sim", "sim-s2"):
                if _steps(ray_lab, run) >= 1 and (ray_lab.captures / run / "manifest.json").exists():
                    node_id = ray_lab.manifest(run)["ray"]["node_id"]
                    if ray_lab.status(run)["state"] == "running":
                        lost.update(run=run, node_id=node_id)
                        ray_cluster.cluster.remove_node(ray_cluster.nodes.pop(ray_cluster.node_name_of(node_id)))
                        return
            time.sleep(0.05)

    remover = threading.Thread(target=remove_a_node_mid_run)
    remover.start()
    result = ray_lab.cli("sweep", "sim", "--seeds", "1", "2")
    remover.join()
    assert lost, result.output
    assert result.exit_code == 1, result.output
    other = "sim-s2" if lost["run"] == "sim" else "sim"
    status = ray_lab.status(lost["run"])
    assert status["state"] == "interrupted" and lost["node_id"][:12] in status["error"], status
    assert not status["capture_complete"]
    assert ray_lab.status(other)["state"] == "succeeded"

    retried = ray_lab.cli("sweep", "sim", "--seeds", "1", "2", "--retry")
    assert retried.exit_code == 0, retried.output
    assert ray_lab.status(lost["run"])["state"] == "succeeded" and len(ray_lab.lines(lost["run"])) == SIM_LINES
