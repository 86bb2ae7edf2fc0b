"""A lab for resumed runs on the simulator, on either engine: experiments with a checkpoint block, a checkpoint root
of the lab's own, the harness in process or as a process a test can SIGKILL.

Fixture (registered in conftest.py): `resume_lab`, a ResumeLab on each engine in turn (Docker marked `docker`, with
the sim image built from this tree; the process engine marked `integration`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.engines.spec import LABEL_CAPTURE_DIR, LABEL_RUN
from harness.sim.trainer import CLOCK_METRICS  # a resumed run's differ from an uninterrupted one's; nothing else

REPO = Path(__file__).resolve().parents[2]
FAST = "0.002"  # wall seconds per simulated second: a 12-step run of the small batch in about a second
# The simulator's switches, passed to the trainer from the harness's environment (`pass_env`): their values are not
# part of the run id, so an attempt with a fault and the resume after it are one run.
SIM_SWITCHES = ["HARNESS_SIM_RESUME_FAULT", "HARNESS_SIM_CRASH_AT"]
# The simulated GB10 of the lab's runs (the experiment's guard block): its CPU side starts at 50 C, below the 55 C
# every simulated run waits for (harness.run.simswap.SIM_START_BELOW_C), so no attempt first waits seconds to cool.
GB10: dict[str, Any] = {"sim": {"cpu": {"start_c": 50}}}
# One that never gets hot enough to pause: it heats toward 80 C (the pause is at 85 C) and its CPU side toward 90 C
# (paused at 95 C). The heat guard still runs and records. For the runs of a second or more a step whose test says
# nothing of pauses, which take a third of such a run's time; the exact resume keeps them and checks them.
COOL_GB10: dict[str, Any] = {"sim": {"hot_c": 80, "cpu": {"start_c": 50, "hot_c": 90}}}


class ResumeLab:
    """Experiments, captures, locks, process runs and checkpoints under one temporary directory, for one engine."""

    def __init__(self, root: Path, engine: str) -> None:
        self.root = root
        self.engine = engine
        self.experiments = root / "experiments"
        self.captures = root / "capture"
        self.checkpoints = root / "checkpoints"
        self.experiments.mkdir()
        self.ray_address: Optional[str] = None  # a lab whose runs Ray places (tests/test_resume_cluster.py)
        self.env = {
            "HARNESS_LOCK_DIR": str(root / "locks"),
            "HARNESS_PROCESS_DIR": str(root / "processes"),
            "HARNESS_ENGINES": engine,
            "HARNESS_CHECKPOINT_DIR": str(self.checkpoints),
        }

    def experiment(
        self,
        name: str = "long",
        *,
        steps: int = 12,
        every: int = 3,
        keep: int = 2,
        batch: int = 4,
        auto: int = 0,
        resources: Optional[dict[str, float]] = None,
        guard: Optional[dict[str, Any]] = None,
    ) -> str:
        data: dict[str, Any] = {
            "name": name,
            "steps": steps,
            "miles": {
                "args": {
                    "rollout-global-dataset": True,
                    "rollout-batch-size": batch,
                    "n-samples-per-prompt": 4,
                    "global-batch-size": batch * 4,
                }
            },
            "container": {"pass_env": SIM_SWITCHES},
            "checkpoint": {"every": every, "keep": keep},
            "resume": {"auto": auto},
            "guard": GB10 if guard is None else guard,
        }
        if resources is not None:  # where Ray places it: not part of the run id
            data["cluster"] = {"resources": resources}
        (self.experiments / f"{name}.yaml").write_text(json.dumps(data))
        return name

    def args(self, *args: str, time_scale: str = FAST) -> list[str]:
        return [
            *args,
            "--sim",
            "--sim-engine",
            self.engine,
            "--time-scale",
            time_scale,
            "--experiments-dir",
            str(self.experiments),
            "--capture-dir",
            str(self.captures),
            *(["--ray", self.ray_address] if self.ray_address else []),
        ]

    def run(self, *args: str, time_scale: str = FAST, env: Optional[dict] = None) -> Any:
        """`harness run ARGS` on the simulator, in process."""
        return CliRunner().invoke(app, self.args("run", *args, time_scale=time_scale), env={**self.env, **(env or {})})

    def spawn(self, *args: str, time_scale: str = FAST, env: Optional[dict] = None) -> subprocess.Popen:
        """`harness run ARGS` on the simulator as a process of its own (one a test can kill)."""
        return subprocess.Popen(
            [sys.executable, "-m", "harness", *self.args("run", *args, time_scale=time_scale)],
            cwd=REPO,
            env={**os.environ, **self.env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def command(self, *args: str) -> Any:
        """A command that reads captures only (status, history, stop, recover, summarize)."""
        return CliRunner().invoke(app, [*args, "--capture-dir", str(self.captures)], env={**self.env, "COLUMNS": "400"})

    # --- what the captures and checkpoints hold ----------------------------------------------------

    def attempt_dir(self, run: str, number: int) -> Path:
        return self.captures / ".attempts" / run / str(number)

    def status(self, run: str, number: Optional[int] = None) -> dict:
        directory = self.captures / run if number is None else self.attempt_dir(run, number)
        return json.loads((directory / "status.json").read_text())

    def metrics(self, run: str, number: int) -> list[dict]:
        path = self.attempt_dir(run, number) / "metrics.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def ledger(self, run: str, number: int) -> list[dict]:
        path = self.attempt_dir(run, number) / "checkpoints.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def manifest(self, run: str, number: int) -> dict:
        return json.loads((self.attempt_dir(run, number) / "manifest.json").read_text())

    def resume_record(self, run: str, number: int) -> dict:
        return json.loads((self.attempt_dir(run, number) / "resume.json").read_text())

    def log(self, run: str, number: int) -> str:
        path = self.attempt_dir(run, number) / "container.log"
        return path.read_text() if path.exists() else ""

    def checkpoint_dir(self, run: str) -> Path:
        (found,) = (self.checkpoints / run).iterdir()
        return found

    def objects(self) -> list[Any]:
        """Handles on what the engine holds for this lab."""
        if self.engine == "docker":
            from harness.engines.docker import DockerEngine

            found = DockerEngine().list({LABEL_RUN: None})
        else:
            from harness.engines.process import ProcessEngine

            found = ProcessEngine(self.root / "processes").list({LABEL_RUN: None})
        inside = str(self.root) + os.sep
        return [h for h in found if h.describe().labels.get(LABEL_CAPTURE_DIR, "").startswith(inside)]

    def cleanup(self) -> None:
        for handle in self.objects():
            for action in (handle.kill, handle.remove):
                try:
                    action()
                except Exception:
                    pass


def same_but_the_clock(a: dict, b: dict) -> bool:
    """Two steps' metrics equal value for value, but for the clock's (harness.sim.trainer.CLOCK_METRICS)."""
    return {k: v for k, v in a.items() if k not in CLOCK_METRICS} == {
        k: v for k, v in b.items() if k not in CLOCK_METRICS
    }


@pytest.fixture(
    params=[
        pytest.param("docker", marks=pytest.mark.docker),
        pytest.param("process", marks=pytest.mark.integration),
    ]
)
def resume_lab(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ResumeLab]:
    """A resume lab on each engine in turn."""
    if request.param == "docker":
        request.getfixturevalue("sim_image")
    lab = ResumeLab(tmp_path, request.param)
    for name, value in lab.env.items():
        monkeypatch.setenv(name, value)
    yield lab
    lab.cleanup()


@pytest.fixture
def process_resume_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ResumeLab]:
    """A resume lab on the process engine."""
    lab = ResumeLab(tmp_path, "process")
    for name, value in lab.env.items():
        monkeypatch.setenv(name, value)
    yield lab
    lab.cleanup()
