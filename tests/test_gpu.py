"""What runs on a GPU machine today (marker `gpu`; skipped where nvidia-smi lists no GPU).

- The NVML probe behind a manifest's driver facts (harness.run.provenance) reports
  the driver and the GPUs that nvidia-smi sees.
- A run with `gpus: all` of the stand-in trainer (Docker with the NVIDIA
  runtime) is a smoke capture: scripts/check-capture.py accepts it, as
  `make smoke` checks the real one, and its manifest carries the driver facts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.run.provenance import nvml_probe
from support.images import FAKE_TRAINER_DIR, FAKE_TRAINER_IMAGE

pytestmark = pytest.mark.gpu

REPO_ROOT = Path(__file__).resolve().parent.parent
FAKE_TRAINER = FAKE_TRAINER_IMAGE


def nvidia_smi(field: str) -> list[str]:
    """One value per GPU, as nvidia-smi reports it."""
    done = subprocess.run(
        ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def test_the_nvml_probe_reports_the_driver_and_the_gpus_nvidia_smi_sees():
    facts = nvml_probe()

    assert facts["available"] is True, facts
    assert facts["driver_version"] == nvidia_smi("driver_version")[0]
    assert facts["gpus"] == nvidia_smi("name")
    assert facts["unsupported"] == []


@pytest.mark.docker
def test_a_gpu_run_of_the_stand_in_trainer_is_a_smoke_capture_that_check_capture_accepts(
    tmp_path, python_image, docker_build
):
    docker_build(FAKE_TRAINER_DIR, FAKE_TRAINER)
    experiments, captures = tmp_path / "experiments", tmp_path / "capture"
    experiments.mkdir()
    (experiments / "gpu-smoke.yaml").write_text(
        json.dumps(
            {
                "name": "gpu-smoke",
                "steps": 2,
                "image": FAKE_TRAINER,
                "miles": {"extra_args": ""},
                "container": {
                    "gpus": "all",
                    "shm_size": "64m",
                    "ipc": "private",
                    "env": {"FAKE_SCENARIO": "steps"},
                    "volumes": [],
                    "ulimits": {},
                },
                "guard": {"sensor": "none"},
            }
        )
    )

    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "gpu-smoke",
            "--experiments-dir",
            str(experiments),
            "--capture-dir",
            str(captures),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HARNESS_LOCK_DIR": str(tmp_path / "locks")},
    )
    checked = subprocess.run(
        [
            sys.executable,
            "scripts/check-capture.py",
            str(captures / "gpu-smoke"),
            "--state",
            "succeeded",
            "--complete-steps",
            "2",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.endswith("succeeded, 2 complete steps\n")
    manifest = json.loads((captures / "gpu-smoke" / "manifest.json").read_text())
    assert manifest["nvml"]["driver_version"] == nvidia_smi("driver_version")[0]
