"""The engine API others build on (the heat guard, recover, logs), and files that follow the umask.

`engine.attach(id)` finds a container by id or name and a process by its run
id or any live pid; the handle pauses, resumes and says whether it is paused.
A pid is signalled only while it is still the process that was recorded.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.engines import EXITED, GONE, PAUSED, RUNNING
from harness.engines.process import ForeignProcess, ProcessEngine
from harness.errors import HarnessError
from support.lab import IMAGE, Lab, docker_client
from support.timing import eventually

pytestmark = pytest.mark.integration


@pytest.mark.docker
def test_docker_attach_by_name_or_id_pauses_and_resumes(fake_trainer: str) -> None:
    from harness.engines.docker import DockerEngine

    client = docker_client()
    container = client.containers.run(
        IMAGE, environment={"FAKE_SCENARIO": "hang"}, detach=True, name=f"mgl-attach-{os.getpid()}"
    )
    try:
        engine = DockerEngine()
        for handle in (engine.attach(container.name), engine.attach(container.id)):
            handle.pause()
            assert handle.is_paused() and handle.describe().state == PAUSED
            handle.resume()
            assert not handle.is_paused() and handle.describe().state == RUNNING
        with pytest.raises(HarnessError, match="no container 'mgl-no-such-thing'"):
            engine.attach("mgl-no-such-thing")
    finally:
        container.remove(force=True)


def test_process_attach_by_pid_freezes_the_group_of_a_process_it_did_not_start(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)",
        ],
        start_new_session=True,
    )

    def members() -> list[int]:
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == child.pid]

    try:
        assert eventually(lambda: len(members()) == 2)  # the process and the child it started
        handle = ProcessEngine(tmp_path).attach(str(child.pid))
        assert isinstance(handle, ForeignProcess)
        handle.pause()
        assert eventually(lambda: all(_state(p) == "T" for p in members()))
        assert handle.is_paused()
        handle.resume()
        assert eventually(lambda: all(_state(p) in "RS" for p in members())) and not handle.is_paused()
        handle.stop(grace_s=2)
        assert handle.describe().state == GONE
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def test_a_pid_reused_by_another_process_is_never_signalled(tmp_path: Path) -> None:
    from harness.capture import ProcessIdentity

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        handle = ProcessEngine(tmp_path).attach(str(child.pid))
        real = handle.identity()
        handle._identity = ProcessIdentity(real.pid, real.pgid, real.start_ticks - 1, real.boot_id)  # as if reused
        handle.kill()
        time.sleep(0.2)
        assert child.poll() is None  # not the recorded process: left alone
        assert handle.describe().state == GONE
    finally:
        child.kill()
        child.wait()


def test_a_process_run_outlives_its_harness_and_is_found_again(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "process")
    run = lab.experiment("long", scenario="hang")
    from harness.engines.spec import LABEL_RUN
    from harness.experiments.store import ExperimentStore
    from harness.run.plan import plan_launch

    spec = plan_launch(
        ExperimentStore(lab.experiments).load(run).experiment,
        base_args=[],
        capture_root=str(lab.captures),
        project_root=str(tmp_path),
        environ={},
    )
    started = ProcessEngine(lab.processes).start(spec, {"extra": "1"})
    try:
        found = ProcessEngine(lab.processes).list({LABEL_RUN: run, "extra": None})
        assert [h.id for h in found] == [started.id]
        again = ProcessEngine(lab.processes).attach(started.id)
        by_pid = ProcessEngine(lab.processes).attach(str(started.facts()["pid"]))
        assert again.id == by_pid.id == started.id and again.describe().state == RUNNING
        assert eventually(lambda: any("still generating" in line for line in again.logs()))
        again.stop(grace_s=5)
        assert again.describe().state == EXITED and again.describe().exit_code == 143
        lines = list(again.logs())
        assert lines[-1].split(" ", 1)[1] == "fake trainer: SIGTERM, shutting down"
        assert all(line[:4].isdigit() and line.split(" ", 1)[0].endswith("Z") for line in lines)
        again.remove()
        assert ProcessEngine(lab.processes).list({LABEL_RUN: None}) == []
    finally:
        started.kill()


def _pgid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError):
        return -1


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_every_file_of_a_run_and_its_summary_follows_the_umask(tmp_path: Path) -> None:
    lab = Lab(tmp_path, "process")
    run = lab.experiment("modes", steps=2)
    old = os.umask(0o027)
    try:
        assert lab.cli("run", run).exit_code == 0
        summarized = CliRunner().invoke(app, ["summarize", "--capture-dir", str(lab.captures)])
        assert summarized.exit_code == 0, summarized.output
        reported = CliRunner().invoke(app, ["report", "--capture-dir", str(lab.captures)])
        assert reported.exit_code == 0, reported.output
    finally:
        os.umask(old)
    written = [p for p in lab.captures.rglob("*") if p.is_file() and ".locks" not in p.parts]
    names = {p.name for p in written}
    assert {
        "status.json",
        "manifest.json",
        "args.json",
        "container.log",
        "metrics.jsonl",
        "miles-gb10-lab.json",
        "report.md",
    } <= names
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {p.name: "0o640" for p in written}


@pytest.mark.docker
def test_docker_list_skips_a_container_removed_between_the_listing_and_its_lookup(
    monkeypatch: pytest.MonkeyPatch, busybox_image: str
) -> None:
    import docker

    from harness.engines.docker import DockerEngine

    client = docker.from_env()
    label, ours = "org.miles-gb10-lab.test-list-race", uuid.uuid4().hex  # never another suite's at the same time
    kept = client.containers.create(busybox_image, ["true"], labels={label: ours})
    gone = client.containers.create(busybox_image, ["true"], labels={label: ours})
    from docker.models.containers import ContainerCollection

    original = ContainerCollection.get

    def get_after_removal(self: ContainerCollection, container_id: str) -> object:
        if container_id == gone.id:
            gone.remove(force=True)  # removed by someone else just after the listing
        return original(self, container_id)

    monkeypatch.setattr(ContainerCollection, "get", get_after_removal)
    try:
        assert [handle.id for handle in DockerEngine(client).list({label: ours})] == [kept.id]
    finally:
        kept.remove(force=True)
        try:
            gone.remove(force=True)
        except docker.errors.NotFound:
            pass
