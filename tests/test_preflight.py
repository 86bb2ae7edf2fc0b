"""A run that never started is not a failed run: pre-flight checks before any capture, and `not_started`.

Before a capture is made, `run` checks that the image is on the engine, that
every bind-mount source exists and that a requested GPU has a runtime; each
missing piece is one line with the command that fixes it, and `--dry-run`
shows the same as warnings. A run that still fails before its container or
process starts is recorded `not_started`, which run and sweep treat as no
capture at all.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.images import content_tagged
from support.lab import IMAGE, Lab


def no_gpu_runtime() -> bool:
    import shutil

    from harness.engines.docker import GPU_HOOKS
    from harness.engines.dockerapi import DockerApi

    return "nvidia" not in DockerApi().runtimes() and not any(shutil.which(h) for h in GPU_HOOKS)


def nothing_made(lab: Lab, run: str) -> bool:
    return not (lab.captures / run).exists() and lab.objects() == []


@pytest.mark.docker
def test_a_missing_image_fails_before_any_capture_and_says_make_image(docker_lab: Lab) -> None:
    run = docker_lab.experiment("noimage", image="miles-gb10-lab/no-such-image:test")
    result = docker_lab.cli("run", run)
    assert result.exit_code == 3
    assert result.stderr.count("\n") == 1
    assert "image 'miles-gb10-lab/no-such-image:test' is not on the Docker engine" in result.stderr
    assert "`make image`" in result.stderr
    assert nothing_made(docker_lab, run)


@pytest.mark.docker
def test_a_missing_data_directory_fails_before_any_capture_and_says_make_data(
    docker_lab: Lab, monkeypatch: Any
) -> None:
    monkeypatch.setenv("MILES_LAB_DATA", str(docker_lab.root / "data"))
    run = docker_lab.experiment("nodata", volumes=["${MILES_LAB_DATA:-data}:/data:ro"])
    result = docker_lab.cli("run", run)
    assert result.exit_code == 2
    assert f"the data directory {docker_lab.root / 'data'} (mounted at /data) does not exist" in result.stderr
    assert "`make data`" in result.stderr and result.stderr.count("\n") == 1
    assert nothing_made(docker_lab, run)


@pytest.mark.docker
def test_a_gpu_request_without_a_gpu_runtime_fails_before_any_capture(docker_lab: Lab) -> None:
    if not no_gpu_runtime():
        pytest.skip("this Docker engine has an NVIDIA runtime")
    run = docker_lab.experiment("nogpu", gpus="all")
    result = docker_lab.cli("run", run)
    assert result.exit_code == 3
    assert "the run asks for GPUs, but the Docker engine" in result.stderr and "NVIDIA" in result.stderr
    assert nothing_made(docker_lab, run)


@pytest.mark.docker
def test_dry_run_shows_the_same_checks_as_warnings_and_starts_nothing(docker_lab: Lab, monkeypatch: Any) -> None:
    monkeypatch.setenv("MILES_LAB_DATA", str(docker_lab.root / "data"))
    run = docker_lab.experiment(
        "allwrong", image="miles-gb10-lab/no-such-image:test", gpus="all", volumes=["${MILES_LAB_DATA:-data}:/data:ro"]
    )
    result = docker_lab.cli("run", run, "--dry-run")
    assert result.exit_code == docker_lab.cli("run", run).exit_code == 3, result.output  # as the run is refused
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: pre-flight: ")]
    assert any("`make image`" in w for w in warnings) and any("`make data`" in w for w in warnings)
    assert any("asks for GPUs" in w for w in warnings) == no_gpu_runtime()
    assert "dry run: nothing started" in result.stdout
    assert nothing_made(docker_lab, run)


@pytest.mark.docker
def test_a_container_that_cannot_start_is_not_started_and_runs_again_without_retry(
    docker_lab: Lab, docker_build: Any
) -> None:
    context = docker_lab.root / "no-entry"
    context.mkdir()
    (context / "Dockerfile").write_text(f'FROM {IMAGE}\nENTRYPOINT ["/no/such/trainer"]\n')
    broken = docker_build(context, content_tagged("miles-gb10-lab/no-entry:test", context))
    run = docker_lab.experiment("entry", image=broken, steps=1, init=False)  # no init that starts and then fails
    result = docker_lab.cli("run", run)
    assert result.exit_code == 3
    assert "run entry did not start: Docker could not start" in result.stderr
    status = docker_lab.status(run)
    assert status["state"] == "not_started" and "/no/such/trainer" in status["error"]
    assert docker_lab.objects() == []  # it never ran: nothing to keep
    shown = docker_lab.capture_cli("status")
    assert "not_started" in shown.output

    docker_lab.experiment("entry", steps=1)  # the image fixed
    sweep = docker_lab.cli("sweep", run, "--seeds", "1")
    assert sweep.exit_code == 0, sweep.output
    assert "its last attempt never started" in sweep.output  # in the sweep table, once it ran
    assert docker_lab.status(run)["state"] == "succeeded"
    assert docker_lab.attempts(run) == [(1, "not_started"), (2, "succeeded")]  # the first attempt is kept


@pytest.mark.integration
def test_a_missing_command_fails_before_any_capture(process_lab: Lab) -> None:
    run = process_lab.experiment("nocmd", command=["/no/such/trainer", "--flag"])
    result = process_lab.cli("run", run)
    assert result.exit_code == 2
    assert "the command '/no/such/trainer' is not found or not executable" in result.stderr
    assert nothing_made(process_lab, run)
    dry = process_lab.cli("run", run, "--dry-run")
    assert dry.exit_code == 2 and "warning: pre-flight: the command '/no/such/trainer'" in dry.stderr


@pytest.mark.integration
def test_a_process_that_cannot_start_is_not_started_and_runs_again(process_lab: Lab) -> None:
    script = process_lab.root / "trainer"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    run = process_lab.experiment("interp", command=[str(script)], steps=1)
    result = process_lab.cli("run", run)
    assert result.exit_code == 3
    status = process_lab.status(run)
    assert status["state"] == "not_started" and "cannot start" in status["error"]
    assert process_lab.objects() == []
    process_lab.experiment("interp", steps=1)
    again = process_lab.cli("run", run)
    assert again.exit_code == 0, again.output
    assert process_lab.status(run)["state"] == "succeeded"
    assert process_lab.attempts(run) == [(1, "not_started"), (2, "succeeded")]
    assert json.loads((process_lab.captures / run / "manifest.json").read_text())["run_id"] != status["run_id"]
