"""Runs for real: a real Docker engine, real containers of a stand-in trainer, the real harness."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.engines.spec import LABEL_CAPTURE_DIR, LABEL_RUN
from support.lab import IMAGE, Lab, killed, masked

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def client() -> Any:
    import docker

    return docker.from_env(timeout=None)


def containers_of(client: Any, docker_lab: Lab) -> list[Any]:
    """The lab's containers; never another test's or another project's, which may come and go meanwhile."""
    import docker

    listed = client.containers.list(all=True, filters={"label": LABEL_RUN}, sparse=True)
    ours = [
        c.id
        for c in listed
        if (c.attrs.get("Labels") or {}).get(LABEL_CAPTURE_DIR, "").startswith(f"{docker_lab.root}/")
    ]
    found = []
    for container_id in ours:
        try:
            found.append(client.containers.get(container_id))
        except docker.errors.NotFound:
            pass  # removed since it was listed
    return found


def test_a_successful_run_captures_everything_and_removes_its_container(docker_lab: Lab, client: Any) -> None:
    run = docker_lab.experiment(
        "ok",
        steps=3,
        extra="--over-sampling-batch-size 48 --dynamic-sampling-filter-path "
        "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter",
    )
    result = docker_lab.cli("run", run)
    assert result.exit_code == 0, result.output
    status = docker_lab.status(run)
    assert status["state"] == "succeeded" and status["exit_code"] == 0
    assert status["steps_complete"] == 3 and status["steps_expected"] == 3
    assert set(status) >= {
        "run",
        "run_id",
        "state",
        "exit_code",
        "started_at",
        "ended_at",
        "steps_expected",
        "steps_complete",
        "error",
    }
    log = docker_lab.log(run)
    assert all(line[:4].isdigit() and line[10] == "T" and line.split(" ", 1)[0].endswith("Z") for line in log)
    texts = [line.split(" ", 1)[1] for line in log]
    assert texts[0].startswith("Running entrypoint for job raysubmit_fake: python3 train.py")
    assert texts[-1] == "training done"
    assert sum("- perf " in t for t in texts) == 6 and sum("- step " in t for t in texts) == 6
    rows = docker_lab.metrics(run)
    assert [(r["step"], r["complete"]) for r in rows] == [(0, True), (1, True), (2, True)]
    assert rows[1]["metrics"]["perf/rollout_time"] == 51.0 and rows[1]["metrics"]["perf/step_time"] == 61.0
    assert rows[1]["metrics"]["rollout/dynamic_filter/drop_zero_std_1"] == 11
    assert rows[0]["t_rollout_end"] and rows[0]["t_step_end"]
    manifest = json.loads((docker_lab.captures / run / "manifest.json").read_text())
    assert manifest["experiment"]["name"] == run and manifest["time_scale"] == 1
    assert manifest["handle"]["image_id"].startswith("sha256:")
    assert manifest["env"]["MILES_EXTRA_ARGS"].endswith("apply_reward_nonzero_std_filter")
    assert {"git_sha", "git_dirty", "harness_version", "engine", "nvml"} <= set(manifest)
    args = json.loads((docker_lab.captures / run / "args.json").read_text())
    assert args["over_sampling_batch_size"] == 48 and args["num_rollout"] == 3
    assert containers_of(client, docker_lab) == []
    assert "ok: step 2 (3/3 complete)" in result.output


def test_oom_traceback_and_exit_1_is_failed_with_the_reason(docker_lab: Lab) -> None:
    run = docker_lab.experiment("oom", scenario="oom", steps=3)
    result = docker_lab.cli("run", run)
    assert result.exit_code == 1
    status = docker_lab.status(run)
    assert status["state"] == "failed" and status["exit_code"] == 1
    assert "torch.OutOfMemoryError: CUDA out of memory" in status["error"]
    assert status["steps_complete"] == 1
    assert "torch.OutOfMemoryError" in result.stderr


def test_exit_0_without_all_steps_is_no_metrics(docker_lab: Lab) -> None:
    run = docker_lab.experiment("quiet", scenario="no_metrics")
    result = docker_lab.cli("run", run)
    assert result.exit_code == 1
    status = docker_lab.status(run)
    assert status["state"] == "no_metrics" and status["exit_code"] == 0
    assert status["error"] == "exited 0 after 0 of 2 complete steps"


def test_docker_kill_from_outside_is_failed_137(docker_lab: Lab, client: Any) -> None:
    run = docker_lab.experiment("killed", scenario="hang")
    harness = docker_lab.spawn("run", run)
    docker_lab.wait_for(lambda: containers_of(client, docker_lab) and docker_lab.metrics(run), what="the first step")
    containers_of(client, docker_lab)[0].kill()
    harness.wait(60)
    assert harness.returncode == 1
    status = docker_lab.status(run)
    assert status["state"] == "failed" and status["exit_code"] == 137
    assert "137" in status["error"]
    assert containers_of(client, docker_lab) == []


def test_sigkilled_harness_then_recover_leaves_nothing_running(docker_lab: Lab, client: Any) -> None:
    run = docker_lab.experiment("orphan", scenario="hang")
    harness = docker_lab.spawn("run", run)
    docker_lab.wait_for(lambda: docker_lab.metrics(run), what="the first step")
    harness.send_signal(signal.SIGKILL)
    harness.wait(30)
    assert docker_lab.status(run)["state"] == "running"
    lines_before = len(docker_lab.log(run))
    container = containers_of(client, docker_lab)[0]
    container.pause()  # a harness killed during a heat pause leaves the container frozen
    time.sleep(1)
    result = docker_lab.capture_cli("recover", "--grace-s", "5")  # its own captures: never another test's leftovers
    assert result.exit_code == 0, result.output
    assert f"{run}: interrupted" in result.output
    assert containers_of(client, docker_lab) == []
    status = docker_lab.status(run)
    assert status["state"] == "interrupted" and "harness recover" in status["error"]
    assert status["exit_code"] == 143
    log = docker_lab.log(run)
    assert len(log) > lines_before and log[-1].endswith("fake trainer: SIGTERM, shutting down")
    assert len(log) == len(set(log))  # nothing saved twice
    assert [r["step"] for r in docker_lab.metrics(run) if r["complete"]] == [0]


def test_sigterm_to_the_harness_stops_gracefully_and_marks_interrupted(docker_lab: Lab, client: Any) -> None:
    run = docker_lab.experiment("term", scenario="hang")
    harness = docker_lab.spawn("run", run, "--grace-s", "10")
    docker_lab.wait_for(lambda: docker_lab.metrics(run), what="the first step")
    harness.send_signal(signal.SIGTERM)
    out, _ = harness.communicate(timeout=60)
    assert harness.returncode == 130, out
    status = docker_lab.status(run)
    assert status["state"] == "interrupted" and status["exit_code"] == 143
    assert "SIGTERM" in status["error"]
    assert docker_lab.log(run)[-1].endswith("fake trainer: SIGTERM, shutting down")
    assert [(r["step"], r["complete"]) for r in docker_lab.metrics(run)] == [(0, True), (1, False)]
    assert containers_of(client, docker_lab) == []


def test_time_limit_stops_the_run_and_kills_after_the_grace(docker_lab: Lab) -> None:
    run = docker_lab.experiment("slow", scenario="hang", env={"FAKE_IGNORE_SIGTERM": "1"})
    started = time.monotonic()
    result = docker_lab.cli("run", run, "--max-minutes", "0.05", "--grace-s", "2")
    assert result.exit_code == 1
    status = docker_lab.status(run)
    assert status["state"] == "stopped" and status["exit_code"] == 137
    assert status["error"].startswith("time limit of 0.05 min reached")
    assert "ignoring SIGTERM" in "\n".join(docker_lab.log(run))
    assert time.monotonic() - started < 40


def test_a_run_stopped_after_all_its_steps_keeps_them_usable(docker_lab: Lab) -> None:
    run = docker_lab.experiment("late", scenario="hang", steps=1)  # step 0 completes, then it never exits
    result = docker_lab.cli("run", run, "--max-minutes", "0.05", "--grace-s", "5")
    assert result.exit_code == 1
    status = docker_lab.status(run)
    assert status["state"] == "stopped" and status["steps_complete"] == 1 and status["steps_usable"] is True
    assert "all 1 steps had completed, so the steps are usable" in status["error"]


def test_harness_stop_stops_a_run_with_the_reason(docker_lab: Lab) -> None:
    run = docker_lab.experiment("stoppable", scenario="hang")
    harness = docker_lab.spawn("run", run, "--grace-s", "10")
    docker_lab.wait_for(lambda: docker_lab.metrics(run), what="the first step")
    result = docker_lab.capture_cli("stop", run, "--reason", "queue slot over")
    assert result.exit_code == 0, result.output
    harness.wait(60)
    status = docker_lab.status(run)
    assert status["state"] == "stopped" and status["error"].startswith("queue slot over")
    assert not (docker_lab.captures / run / "stop-request.json").exists()


def test_burst_of_100000_lines_and_a_1mb_line_arrive_intact(docker_lab: Lab) -> None:
    run = docker_lab.experiment("burst", scenario="burst", steps=2)
    result = docker_lab.cli("run", run)
    assert result.exit_code == 0, result.output
    texts = [line.split(" ", 1)[1] for line in docker_lab.log(run)]
    noise = [t for t in texts if t.startswith("INFO:     127.0.0.1")]
    assert len(noise) == 100_000
    assert [int(t.rsplit("line=", 1)[1]) for t in noise] == list(range(100_000))
    big = [t for t in texts if t.startswith("BIG ")]
    assert len(big) == 1 and big[0] == "BIG " + "x" * (1024 * 1024) + " END"
    assert docker_lab.status(run)["steps_complete"] == 2


def test_a_broken_log_stream_reconnects_without_loss_or_duplicates(docker_lab: Lab, monkeypatch: Any) -> None:
    from harness.engines import dockerrun as docker_engine

    original = docker_engine.DockerRun._open_logs
    opened = []

    def flaky(self: Any, since: Any, follow: bool) -> Any:
        stream = original(self, since, follow)
        opened.append(since)
        if len(opened) > 3:
            return stream

        def breaking() -> Any:
            lines = 0
            for chunk in stream:  # a chunk holds what arrived at once: one line or many
                lines += chunk.count(b"\n")
                if lines >= 25:
                    yield chunk[: len(chunk) // 2]  # a line cut in half, then the connection drops
                    raise ConnectionResetError("connection reset by peer")
                yield chunk

        return breaking()

    monkeypatch.setattr(docker_engine.DockerRun, "_open_logs", flaky)
    run = docker_lab.experiment("flaky", scenario="steps", steps=4, env={"FAKE_DELAY_S": "0.01"})
    result = docker_lab.cli("run", run)
    assert result.exit_code == 0, result.output
    assert len(opened) >= 4 and all(s is not None for s in opened[1:])
    assert masked(line.split(" ", 1)[1] for line in docker_lab.log(run)) == reference_output(docker_lab, run)
    assert [r["step"] for r in docker_lab.metrics(run)] == [0, 1, 2, 3]


def reference_output(docker_lab: Lab, run: str) -> list[str]:
    """What the same container prints when nothing breaks, straight from Docker."""
    import docker

    env = json.loads((docker_lab.captures / run / "manifest.json").read_text())["launch_spec"]["env"]
    container = docker.from_env().containers.run(IMAGE, environment={**env, "FAKE_DELAY_S": "0"}, detach=True)
    try:
        container.wait()
        return masked(container.logs().decode().split("\n")[:-1])
    finally:
        container.remove(force=True)


def test_sweep_skips_succeeded_and_retries_only_failures(docker_lab: Lab) -> None:
    docker_lab.experiment("sw", steps=1)
    first = docker_lab.cli("sweep", "sw", "--seeds", "1", "2")
    assert first.exit_code == 0, first.output
    assert docker_lab.status("sw")["state"] == "succeeded" and docker_lab.status("sw-s2")["state"] == "succeeded"
    # as if seed 2 had failed
    (docker_lab.captures / "sw-s2" / "status.json").write_text(
        json.dumps({**docker_lab.status("sw-s2"), "state": "failed", "error": "made up for the test"})
    )
    cached = docker_lab.cli("sweep", "sw", "--seeds", "1", "2")
    assert cached.exit_code == 1
    assert "sw skipped: succeeded at " in cached.output
    assert "sw-s2 skipped: was failed (made up for the test); --retry reruns it" in cached.output
    started_1 = docker_lab.status("sw")["started_at"]
    retried = docker_lab.cli("sweep", "sw", "--seeds", "1", "2", "--retry")
    assert retried.exit_code == 0, retried.output
    assert "--retry reruns it: it was failed (made up for the test)" in retried.output
    assert docker_lab.status("sw")["started_at"] == started_1
    assert docker_lab.status("sw-s2")["state"] == "succeeded"
    assert docker_lab.attempts("sw-s2") == [(1, "failed"), (2, "succeeded")]  # the failed one is kept


def test_run_refuses_to_overwrite_a_success_without_force(docker_lab: Lab) -> None:
    run = docker_lab.experiment("once", steps=1)
    assert docker_lab.cli("run", run).exit_code == 0
    again = docker_lab.cli("run", run)
    assert again.exit_code == 0 and "once: already succeeded at " in again.stderr and "--force" in again.stderr
    assert docker_lab.cli("run", run, "--force").exit_code == 0
    assert docker_lab.attempts(run) == [(1, "succeeded"), (2, "succeeded")]


def test_recover_leave_running_thaws_and_saves_but_does_not_stop(docker_lab: Lab, client: Any) -> None:
    run = docker_lab.experiment("kept-alive", scenario="hang")
    harness = docker_lab.spawn("run", run)
    docker_lab.wait_for(lambda: docker_lab.metrics(run), what="the first step")
    harness.send_signal(signal.SIGKILL)
    harness.wait(30)
    container = containers_of(client, docker_lab)[0]
    container.pause()
    result = docker_lab.capture_cli("recover", "--leave-running")  # its own captures: never another test's leftovers
    assert result.exit_code == 0, result.output
    container.reload()
    assert container.status == "running"
    status = docker_lab.status(run)
    assert status["state"] == "interrupted" and "left running" in status["error"] and status["exit_code"] is None
    assert any("INFO still generating" in line for line in docker_lab.log(run))
    container.remove(force=True)


def test_run_warns_about_leftovers_and_recover_touches_only_what_a_capture_owns(docker_lab: Lab, client: Any) -> None:
    from harness.capture import this_host
    from harness.engines.spec import LABEL_RUN_ID
    from harness.run.execute import LABEL_HARNESS_HOST, LABEL_HARNESS_PID

    dead = docker_lab.experiment("killed", scenario="hang")
    killed(docker_lab.spawn("run", dead, failpoint="mid-stream:20"))
    ghost = client.containers.create(
        IMAGE,
        labels={  # labelled, but no capture names it
            LABEL_RUN: "ghost",
            LABEL_RUN_ID: "ghost-00000000",
            LABEL_CAPTURE_DIR: str(docker_lab.captures / "ghost"),
            LABEL_HARNESS_PID: "999999",
            LABEL_HARNESS_HOST: this_host(),
        },
    )
    unrelated = client.containers.run(IMAGE, environment={"FAKE_SCENARIO": "hang"}, detach=True)
    try:
        run = docker_lab.experiment("after", steps=1)
        result = docker_lab.cli("run", run)
        assert result.exit_code == 0, result.output
        assert "run killed (container mgl-killed-" in result.stderr and "harness recover` settles it" in result.stderr
        assert "ghost" not in result.stderr  # recover would not act on it, so it is no leftover of a run
        elsewhere = (
            docker_lab.captures.parent / "elsewhere"
        )  # another capture root: its runs are not told of this one's
        other_root = CliRunner().invoke(
            app,
            [
                "run",
                docker_lab.experiment("other-root", steps=1),
                "--experiments-dir",
                str(docker_lab.experiments),
                "--capture-dir",
                str(elsewhere),
            ],
            env=docker_lab.env,
        )
        assert other_root.exit_code == 0, other_root.output
        assert "killed" not in other_root.stderr and "settles it" not in other_root.stderr
        recovered = CliRunner().invoke(app, ["recover", "--grace-s", "2", "--capture-dir", str(docker_lab.captures)])
        assert recovered.exit_code == 0, recovered.output
        assert "killed: interrupted" in recovered.output
        assert "ghost: container" in recovered.output and "left alone: no capture at" in recovered.output
        ghost.reload()
        assert ghost.status == "created"  # not its capture's: never touched
        unrelated.reload()
        assert unrelated.status == "running"  # no harness label: never even listed
    finally:
        unrelated.remove(force=True)
        ghost.remove(force=True)
