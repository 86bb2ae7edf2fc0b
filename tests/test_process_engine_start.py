"""The process engine's start: the supervisor's launcher and the harness that waits for it, in either order.

The launcher (`python -m harness.engines.shim --detach DIR`) forks the
supervisor, waits until it has written state.json (or start-error.json), and
exits 0. A harness slow to look (a loaded machine: a Ray sweep of four seeds
beside a second suite) once saw no state.json, then the launcher ended, and
took a started run for "the process supervisor ended at once: (no output)".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from harness.engines import process
from harness.engines.process import ProcessEngine
from harness.engines.spec import LaunchSpec
from support.timing import scaled

pytestmark = pytest.mark.integration


def sleeper_spec(tmp_path: Path, run: str = "slow-start") -> LaunchSpec:
    return LaunchSpec(
        run=run,
        run_id=f"{run}-00000000",
        experiment=run,
        seed=1,
        engine="process",
        image="none",
        command=(sys.executable, "-c", "import time; time.sleep(30)"),
        container_name=run,
        trainer_argv=(),
        env={},
        labels={},
        mounts=(),
        device_requests=(),
        shm_size="1g",
        ipc_mode="private",
        init=False,
        ulimits={},
        capture_dir=str(tmp_path / "capture" / run),
        steps_expected=1,
        max_minutes=None,
    )


class LateLookingLauncher(subprocess.Popen):  # type: ignore[type-arg]
    """The launcher as a harness slow to look sees it: by the time it asks whether the launcher ended, it has
    (the scheduler kept the harness away for as long as the launcher took). The OS process is the real one."""

    def poll(self) -> Optional[int]:
        return self.wait(timeout=scaled(60))


def test_a_launcher_that_ended_after_it_saw_the_supervisor_start_is_a_started_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process.subprocess, "Popen", LateLookingLauncher)

    run = ProcessEngine(tmp_path / "processes").start(sleeper_spec(tmp_path), {})
    try:
        assert run.describe().alive
        assert json.loads(run.state_path.read_text())["pid"] > 0
    finally:
        run.kill()
        run.wait(timeout=scaled(30))


def test_a_supervisor_that_fails_before_the_trainer_starts_says_why_not_no_output(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    (directory / "run.json").write_text(json.dumps({"id": "run", "labels": {}, "command": ["true"]}))
    (directory / "output.log").mkdir()  # the supervisor cannot open its log: it fails before state.json

    launched = subprocess.run(
        [sys.executable, "-m", "harness.engines.shim", "--detach", str(directory)],
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )

    assert launched.returncode == 1
    last = launched.stderr.strip().splitlines()[-1] if launched.stderr.strip() else ""
    assert "output.log: refused: it is a directory" in last, launched.stderr  # the engine shows shim.err's tail
    assert not (directory / "state.json").exists()
