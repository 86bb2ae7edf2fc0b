"""A checkpointed run placed by Ray, its driver and trainer killed after a checkpoint, resumed with `--ray` on
another node from the checkpoint root both nodes see; and a node that cannot see the root refused in one line.

One cluster for the module: a head without GPUs and nodes a and b, one GPU each and a resource named after the
node (`node-a`, `node-b`), so a test says where a run goes through the experiment's `cluster.resources` (not part
of the run id). The trainer is the simulator through the process engine; the checkpoint root is the test's, which
every node of this machine sees at the same path. The node that cannot see it is a Ray node of its own started in
a mount namespace where a tmpfs hides the root (root only: skipped elsewhere, with the reason).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from harness.capture import CaptureLock
from harness.summary.summarize import summarize
from support import raynodes
from support.resume_lab import COOL_GB10, ResumeLab
from support.timing import scaled, wait_until

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parent.parent
STEPS = 12
TIME_SCALE = "0.05"  # about half a second a rollout: the driver is killed mid-run however busy the machine is
FAST = "0.002"  # a 12-step run in about a second
SHARED = "shared-root"  # the resource of the nodes that see the checkpoint root


@pytest.fixture(scope="module")
def resume_ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[raynodes.RayNodes]:
    yield from raynodes.started_nodes(
        tmp_path_factory,
        lambda root: raynodes.RayNodes(root, resources={name: {f"node-{name}": 1, SHARED: 1} for name in ("a", "b")}),
    )


class RayResumeLab(ResumeLab):
    """A resume lab whose runs Ray places on the module's nodes (their trainers on each node's process engine)."""

    def __init__(self, root: Path, nodes: raynodes.RayNodes) -> None:
        super().__init__(root, "process")
        self.nodes = nodes
        self.ray_address = nodes.address
        # The nodes' own engines and process directories serve the runs: the driver passes only these.
        self.env = {"HARNESS_LOCK_DIR": str(root / "locks"), "HARNESS_CHECKPOINT_DIR": str(self.checkpoints)}


@pytest.fixture
def ray_resume_lab(tmp_path: Path, resume_ray_cluster: raynodes.RayNodes) -> Iterator[RayResumeLab]:
    yield RayResumeLab(tmp_path, resume_ray_cluster)
    resume_ray_cluster.kill_leftovers()


def test_a_run_killed_after_a_checkpoint_resumes_with_ray_on_another_node_verified_and_whole(
    ray_resume_lab: RayResumeLab, resume_ray_cluster: raynodes.RayNodes
) -> None:
    lab = ray_resume_lab
    lab.experiment(resources={"node-a": 1}, guard=COOL_GB10)
    driver = lab.spawn("long", time_scale=TIME_SCALE)
    try:
        wait_until(
            lambda: (
                any(r.get("iteration") == 3 and r["complete"] for r in lab.ledger("long", 1))
                and len(lab.metrics("long", 1)) >= 4
            ),
            scaled(120),
            "checkpoint iter_0000003 verified on the driver and rollout 3 recorded",
        )
    finally:
        os.killpg(driver.pid, signal.SIGKILL)  # the driver: its Ray job's workers go with it
        driver.communicate()
    (trainer,) = resume_ray_cluster.process_runs(["a"])
    trainer.kill()  # the power goes: the trainer (and its supervisor) with it, in the middle of its run

    recovered = lab.command("recover", "--ray", resume_ray_cluster.address, "--grace-s", "5")
    assert recovered.exit_code == 0, recovered.output
    first = lab.status("long", 1)
    assert first["state"] in ("failed", "interrupted"), first
    newest = max(
        int(path.name.removeprefix("iter_"))
        for path in (lab.checkpoints / "long").glob("*/iter_*")
        if (path / "meta.json").exists()
    )
    said = [line for line in recovered.output.splitlines() if line.startswith("long: can resume from")]
    assert said == [
        f"long: can resume from iter_{newest:07d} (rollout {newest} onward): harness run long --resume --sim "
        f"--time-scale {TIME_SCALE} --capture-dir {lab.captures} --ray {resume_ray_cluster.address}"
    ], recovered.output

    # where it runs is not part of the run id: the same run, on the other node
    lab.experiment(resources={"node-b": 1}, guard=COOL_GB10)
    resumed = lab.run("long", "--resume", time_scale=TIME_SCALE)

    assert resumed.exit_code == 0, resumed.output[-3000:]
    assert "long: succeeded, 12/12 steps complete" in resumed.output
    manifest = lab.manifest("long", 2)
    assert manifest["ray"]["node_id"] == resume_ray_cluster.nodes["b"].node_id
    record = lab.resume_record("long", 2)
    assert (record["from_attempt"], record["checkpoint"], record["verified"]) == (1, f"iter_{newest:07d}", True)
    assert record["first_rollout"] == record["next_rollout_id"] == newest
    log = (lab.attempt_dir("long", 2) / "container.log").read_text().splitlines()
    assert f"[FSDP] Loaded model from {lab.checkpoints}/long/" in log[record["load_line"] - 1]
    assert f"iter_{newest:07d}/model" in log[record["load_line"] - 1]
    assert [row["step"] for row in lab.metrics("long", 2)] == list(range(newest, STEPS))
    status = json.loads((lab.captures / "long" / "status.json").read_text())
    assert (status["attempt"], status["state"], status["steps_complete"]) == (2, "succeeded", STEPS)

    run = summarize(lab.captures).runs["long"]
    assert run.steps.step == list(range(STEPS)) and all(run.steps.complete)
    assert [part.attempt for part in run.lineage.attempts] == [1, 2]
    ran_past = sorted(row["step"] for row in lab.metrics("long", 1) if row["step"] >= newest)
    if ran_past:  # rollouts attempt 1 ran past the checkpoint: noted as redone, not counted
        assert any(
            f"of attempt 1 redone after the resume (attempt 2 continued from rollout {newest})" in note
            for note in run.notes
        ), run.notes
    assert not resume_ray_cluster.process_runs()


@contextmanager
def node_that_cannot_see(hidden: Path, nodes: raynodes.RayNodes) -> Iterator[subprocess.Popen]:
    """A GPU node of the cluster whose processes run in a mount namespace where a tmpfs hides `hidden` (a host
    without the shared mount): `ray start --block` under `unshare --mount`, stopped after."""
    if os.geteuid() != 0:
        pytest.skip("a node that cannot see the checkpoint root is made with a mount namespace: run as root (CI does)")
    if shutil.which("unshare") is None:
        pytest.skip("a node that cannot see the checkpoint root is made with unshare(1), which is not installed")
    ray = Path(sys.executable).parent / "ray"
    start = shlex.join(
        [
            str(ray),
            "start",
            "--address",
            nodes.address,
            "--num-cpus",
            "1",
            "--num-gpus",
            "1",
            "--object-store-memory",
            str(raynodes.OBJECT_STORE_BYTES),
            "--disable-usage-stats",
            "--block",
        ]
    )
    script = f"mount -t tmpfs -o size=1m tmpfs {shlex.quote(str(hidden))} && exec {start}"
    node = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        env={**os.environ, **nodes.node_env("blind")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    said: list[str] = []
    try:
        assert node.stdout is not None
        for line in node.stdout:  # `ray start` says so once the node has joined the cluster
            said.append(line)
            if "Ray runtime started" in line:
                break
        else:
            pytest.fail("the node in its mount namespace did not start: " + "".join(said[-20:]))
        yield node
    finally:
        os.killpg(node.pid, signal.SIGTERM)  # `ray start --block` stops its raylet and workers on SIGTERM
        try:
            node.wait(scaled(30))
        except subprocess.TimeoutExpired:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait()


def test_a_node_that_cannot_see_the_checkpoint_root_is_refused_in_one_line_and_nothing_is_resumed(
    ray_resume_lab: RayResumeLab, resume_ray_cluster: raynodes.RayNodes
) -> None:
    lab = ray_resume_lab
    lab.experiment(resources={"node-a": 1})
    crashed = lab.run("long", time_scale=FAST, env={"HARNESS_SIM_CRASH_AT": "after-meta:9"})
    assert crashed.exit_code == 1, crashed.output[-2000:]
    directory = next((lab.checkpoints / "long").iterdir())
    tracker = (directory / "latest_checkpointed_iteration.txt").read_text()
    lab.experiment(resources={})  # any node with a GPU may take it: a, b, or the one that cannot see the root

    with node_that_cannot_see(lab.checkpoints, resume_ray_cluster):
        refused = lab.run("long", "--resume", time_scale=FAST)

    assert refused.exit_code == 3, refused.output
    (line,) = [line for line in refused.output.splitlines() if line.startswith("error:")]
    assert line.startswith("error: not started: node ") and line.count("it cannot see the checkpoint root") == 1
    assert f"it cannot see the checkpoint root {lab.checkpoints} " in line and "own copy" not in line, line
    assert not any(node.node_id[:12] in line for node in resume_ray_cluster.nodes.values())  # the one that cannot
    assert not lab.attempt_dir("long", 2).exists()  # nothing started, nothing decided on the checkpoint directory
    assert (directory / "latest_checkpointed_iteration.txt").read_text() == tracker
    assert not [name for name in os.listdir(lab.checkpoints) if name.startswith(".harness-ray-check-")]

    resumed = lab.run("long", "--resume", time_scale=FAST)  # that node gone: a node that sees it resumes it
    assert resumed.exit_code == 0, resumed.output[-3000:]
    record = lab.resume_record("long", 2)
    assert (record["checkpoint"], record["verified"]) == ("iter_0000009", True)


def test_two_resumes_of_one_run_under_ray_at_once_the_second_is_refused_with_exit_4(
    ray_resume_lab: RayResumeLab, resume_ray_cluster: raynodes.RayNodes
) -> None:
    lab = ray_resume_lab
    lab.experiment(resources={"node-a": 1})
    crashed = lab.run("long", time_scale=FAST, env={"HARNESS_SIM_CRASH_AT": "after-meta:6"})
    assert crashed.exit_code == 1, crashed.output[-2000:]

    with CaptureLock(lab.captures / "long", {"pid": os.getpid(), "host": "elsewhere", "run": "long"}) as held:
        held.acquire(wait=False)  # as the first resume's driver holds it while its attempt runs
        second = lab.run("long", "--resume", time_scale=FAST)

    assert second.exit_code == 4, second.output
    (line,) = [line for line in second.output.splitlines() if line.startswith("error:")]
    assert "run long not resumed: another harness is running it" in line, second.output
    assert not lab.attempt_dir("long", 2).exists()
