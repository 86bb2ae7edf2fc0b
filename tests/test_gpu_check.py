"""scripts/gpu-check.sh without a GPU: its refusals, the experiment and burner it writes, and its report.

The burn itself needs an NVIDIA GPU and PyTorch; what is tested here is
everything around it: a machine without a driver (or without a CUDA
PyTorch) gets one clear line, the experiment it writes loads and plans as
the harness reads experiments, the burner's lines are steps to the parser,
and the report reads a real guarded run's capture.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.experiments.store import ExperimentStore
from harness.mileslog import LogParser
from support.lab import Lab

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "gpu-check.sh"


def check(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHON": sys.executable, **(env or {})},
    )


def test_without_a_driver_it_says_so_in_one_line(tmp_path: Path) -> None:
    done = check(env={"PATH": "/usr/bin:/bin", "GPU_CHECK_DIR": str(tmp_path / "work")})
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "gpu-check: no NVIDIA driver here (nvidia-smi not found): run this on a machine with an NVIDIA GPU"
    ]
    assert not (tmp_path / "work").exists()  # nothing installed or written


def test_without_a_cuda_pytorch_it_says_so_in_one_line(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: NVIDIA GB10 (UUID: GPU-0000)'\n")
    (fake / "nvidia-smi").chmod(0o755)
    done = check(env={"PATH": f"{fake}:/usr/bin:/bin", "PYTHON": sys.executable})  # this python has no torch
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"gpu-check: PyTorch cannot use a GPU from {sys.executable} (set PYTHON to one with a CUDA build of PyTorch)"
    ]


def test_an_unknown_argument_is_refused() -> None:
    done = check("--bogus")
    assert done.returncode == 1 and done.stderr.startswith("gpu-check: unknown argument --bogus")


@pytest.mark.integration
def test_the_experiment_it_writes_is_a_guarded_process_run_around_the_idle_temperature(tmp_path: Path) -> None:
    done = check("--write-experiment", str(tmp_path), "41", env={"DURATION_S": "90"})
    assert done.returncode == 0, done.stderr
    experiment = ExperimentStore(tmp_path / "experiments", []).load("gpu-burn").experiment
    assert experiment.engine == "process" and experiment.steps == 9
    assert experiment.command == [sys.executable, "-u", str(tmp_path / "burn.py"), "--seconds", "90", "--steps", "9"]
    guard = experiment.guard
    assert (guard.sensor, guard.pause_at_c, guard.resume_at_c, guard.min_pause_s, guard.poll_s) == (
        "nvml",
        45.0,
        43.0,
        5.0,
        0.5,
    )
    assert guard.on_max_pause == "resume" and guard.max_pause_s >= 4 * guard.min_pause_s
    assert experiment.limits.max_minutes == 12
    planned = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "gpu-burn",
            "--dry-run",
            "--json",
            "--experiments-dir",
            str(tmp_path / "experiments"),
            "--capture-dir",
            str(tmp_path / "capture"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["engine"] == "process"


def test_the_burners_lines_are_complete_steps_to_the_parser(tmp_path: Path) -> None:
    assert check("--write-experiment", str(tmp_path), "41").returncode == 0
    spec = importlib.util.spec_from_file_location("burn", tmp_path / "burn.py")
    burn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(burn)  # torch is imported only when it burns
    parser = LogParser()
    records = [r for step in range(3) for line in burn.step_lines(step, 10.25, 400) for r in parser.feed(line)]
    assert [(r.step, r.complete) for r in records] == [(0, True), (1, True), (2, True)]
    assert records[1].metrics["perf/rollout_time"] == 10.25 and records[1].metrics["perf/step_time"] == 10.25


@pytest.mark.integration
def test_the_report_shows_each_window_and_the_fall_during_it(process_lab: Lab) -> None:
    lab = process_lab
    model = {"start_c": 84, "idle_c": 40, "hot_c": 95, "heat_tau_s": 2, "cool_tau_s": 0.5, "throttle_at_c": 200}
    run = lab.experiment(
        "burn",
        scenario="ticks",
        steps=1,
        env={"FAKE_TICKS": "120", "FAKE_TICK_S": "0.02"},
        guard={"sensor": "sim", "poll_s": 0.05, "min_pause_s": 0.3, "record_every_s": 0.2, "sim": model},
    )
    assert lab.cli("run", run).exit_code == 0
    done = check("--report", str(lab.captures / run))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "run burn: succeeded, 1/1 steps"
    assert lines[1] == ("guard: sensor sim, pause at 85.0 C, resume at 78.0 C, min pause 0.3 s, a reading every 0.05 s")
    rows = [line.split() for line in lines if line.split()[:1] and line.split()[0].isdigit()]
    assert len(rows) >= 1
    for row in rows:  # number, start, length s, peak C, at resume C, fall C, reason...
        assert float(row[2]) >= 0.3 and float(row[4]) >= 85 and float(row[8]) > 0
        assert re.match(r"GPU \d+\.\d C >= pause_at_c 85 C", " ".join(row[10:]))  # the sensor that paused it
    assert lines[-1].startswith(f"gpu-check: OK: {len(rows)} pause(s); the GPU cooled during ")


@pytest.mark.integration
def test_the_report_of_a_run_that_never_paused_fails_with_the_reason(process_lab: Lab, tmp_path: Path) -> None:
    lab = process_lab
    (tmp_path / "temp").write_text("50")
    run = lab.experiment("cool", steps=1, guard={"sensor": f"file:{tmp_path / 'temp'}", "poll_s": 0.05})
    assert lab.cli("run", run).exit_code == 0
    done = check("--report", str(lab.captures / run))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "gpu-check: the guard never paused the burn: the GPU did not reach pause_at_c (hottest 50.0 C)"
    )
