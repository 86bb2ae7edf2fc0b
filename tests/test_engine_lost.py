"""The Docker engine going away mid-run: the run ends failed with that reason, never an uncaught exception.

The harness reaches the real engine through a socket forwarder; stopping the
forwarder is the engine going away (connection refused, open streams cut),
while the container itself keeps running, as it does when dockerd restarts
with live-restore or a remote engine's network drops.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.engines.spec import LABEL_CAPTURE_DIR
from support.lab import Lab, UnixProxy, docker_client

pytestmark = pytest.mark.docker


@pytest.fixture
def proxied(tmp_path: Path, fake_trainer: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        pytest.skip("the engine is not on a local socket")
    proxy = UnixProxy(host[len("unix://") :], tmp_path / "docker.sock")
    proxy.start()
    lab = Lab(tmp_path, "docker")
    lab.engine_host = host
    for name, value in {**lab.env, "DOCKER_HOST": proxy.host}.items():
        monkeypatch.setenv(name, value)
    yield lab, proxy
    proxy.stop()
    proxy.start()
    lab.cleanup()
    proxy.stop()


def cut_after_first_step(lab: Lab, run: str, proxy: UnixProxy, then: Any = None) -> threading.Thread:
    def cut() -> None:
        lab.wait_for(lambda: lab.metrics(run), what="the first step")
        proxy.stop()
        if then is not None:
            then()

    thread = threading.Thread(target=cut, daemon=True)
    thread.start()
    return thread


def test_an_engine_that_stays_away_ends_the_run_failed_and_recover_keeps_the_reason(
    proxied: Any, monkeypatch: Any
) -> None:
    from harness.engines import dockerrun as docker_engine

    lab, proxy = proxied
    monkeypatch.setattr(docker_engine, "ENGINE_PATIENCE_S", 3.0)
    run = lab.experiment("lost", scenario="hang")
    cut_after_first_step(lab, run, proxy)
    result = lab.cli("run", run, "--grace-s", "2")
    assert result.exit_code == 1, result.output
    assert "internal error" not in result.output and "Traceback" not in result.output
    status = lab.status(run)
    assert status["state"] == "failed" and status["capture_complete"] is False
    assert status["error"].startswith("the Docker engine went away while")
    assert "did not answer for 3 s" in status["error"] and "`harness recover` saves the rest" in status["error"]

    proxy.start()  # the engine is back; the container never stopped
    container = docker_client(lab.engine_host).containers.get(status["container"])
    assert container.status == "running"
    recovered = lab.capture_cli("recover", "--keep", "--grace-s", "2")
    assert recovered.exit_code == 0, recovered.output
    after = lab.status(run)
    assert after["state"] == "failed" and after["error"] == status["error"]
    assert after["capture_complete"] is True and after["exit_code"] == 143
    (handle,) = lab.objects()
    assert lab.log(run) == lab.engine_lines(handle)


def test_a_restarted_engine_that_killed_the_container_is_failed_with_both_reasons(
    proxied: Any, monkeypatch: Any
) -> None:
    from harness.engines import dockerrun as docker_engine

    lab, proxy = proxied
    monkeypatch.setattr(docker_engine, "ENGINE_PATIENCE_S", 30.0)
    run = lab.experiment("restarted", scenario="hang")

    def restart() -> None:  # dockerd going down takes its containers with it, then comes back
        client = docker_client(lab.engine_host)  # the engine itself, not through the (stopped) forwarder
        (container,) = client.containers.list(filters={"label": f"{LABEL_CAPTURE_DIR}={lab.captures / run}"})
        container.kill()
        time.sleep(1.5)
        proxy.start()

    cut_after_first_step(lab, run, proxy, then=restart)
    result = lab.cli("run", run)
    assert result.exit_code == 1, result.output
    status = lab.status(run)
    assert status["state"] == "failed" and status["exit_code"] == 137 and status["capture_complete"] is True
    assert "exit code 137" in status["error"] and "the Docker engine went away while" in status["error"]
    assert lab.objects() == []


def test_an_engine_lost_while_the_guard_holds_the_run_frozen_leaves_the_window_for_recover(
    proxied: Any, monkeypatch: Any, tmp_path: Path
) -> None:
    import json

    from harness.capture.reader import read_pauses
    from harness.engines import dockerrun as docker_engine

    lab, proxy = proxied
    monkeypatch.setattr(docker_engine, "ENGINE_PATIENCE_S", 3.0)
    temp = tmp_path / "temp"
    temp.write_text("60")
    run = lab.experiment(
        "lost-frozen", scenario="hang", guard={"sensor": f"file:{temp}", "poll_s": 0.1, "min_pause_s": 0}
    )
    client = docker_client(lab.engine_host)

    def freeze_then_cut() -> None:
        lab.wait_for(lambda: lab.metrics(run), what="the first step")
        temp.write_text("92")
        lab.wait_for(
            lambda: client.containers.list(
                filters={"label": f"{LABEL_CAPTURE_DIR}={lab.captures / run}", "status": "paused"}
            ),
            what="the guard's pause",
        )
        proxy.stop()

    threading.Thread(target=freeze_then_cut, daemon=True).start()
    result = lab.cli("run", run, "--grace-s", "2")
    assert result.exit_code == 1, result.output
    status = lab.status(run)
    assert status["state"] == "failed" and status["capture_complete"] is False
    assert (
        "heat guard: the run may still be frozen: its pause window stays open until `harness recover` thaws "
        "it and closes the window" in status["notes"]
    )
    [opened] = [json.loads(line) for line in (lab.captures / run / "pauses.jsonl").read_text().splitlines()]
    assert opened["end"] is None  # the harness could not thaw it, so the record does not say it did

    proxy.start()
    container = client.containers.get(status["container"])
    assert container.status == "paused"  # still frozen, as the record says
    recovered = lab.capture_cli("recover", "--keep", "--grace-s", "2")
    assert recovered.exit_code == 0, recovered.output
    assert "1 open pause window closed" in recovered.output
    after = lab.status(run)
    assert after["state"] == "failed" and after["error"] == status["error"]  # a final status is never rewritten
    assert after["capture_complete"] is True and after["exit_code"] == 143  # thawed, so it acted on SIGTERM
    [window] = read_pauses(lab.captures / run / "pauses.jsonl", [])
    assert window.end_us is not None
    assert any(note.startswith("harness recover closed 1 open pause window") for note in after["notes"])
