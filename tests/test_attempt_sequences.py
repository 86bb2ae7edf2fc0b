"""The sequences that cost a lab its good capture before attempts existed, each as it was tried by a new user."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.lab import Lab

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.integration


def first_line_of(lab: Lab, run: str, attempt: int) -> bool:
    metrics = lab.captures / ".attempts" / run / str(attempt) / "metrics.jsonl"
    return metrics.exists() and bool(metrics.read_text().strip())


def test_an_interrupted_rerun_never_costs_the_succeeded_capture(lab: Lab) -> None:
    run = lab.experiment("rerun", steps=3, env={"FAKE_DELAY_S": "0.6"})
    assert lab.cli("run", run).exit_code == 0
    harness = lab.spawn("run", run, "--force")
    lab.wait_for(lambda: first_line_of(lab, run, 2), what="the rerun's first step")
    harness.send_signal(signal.SIGINT)
    out, _ = harness.communicate(timeout=120)
    assert harness.returncode == 130, out

    assert lab.status(run)["state"] == "succeeded" and lab.status(run)["steps_complete"] == 3
    assert lab.attempts(run) == [(1, "succeeded"), (2, "interrupted")]
    rerun = json.loads((lab.captures / ".attempts" / run / "2" / "status.json").read_text())
    assert 1 <= rerun["steps_complete"] < 3  # interrupted after its first step, before its last
    shown = lab.capture_cli("status")
    said = " ".join(shown.output.split())
    assert f"succeeded; a newer attempt interrupted {rerun['steps_complete']}/3" in said, shown.output
    summary = lab.capture_cli("summarize", "--no-figures")
    assert summary.exit_code == 0, summary.output
    document = json.loads((lab.captures / "summary" / "miles-gb10-lab.json").read_text())
    assert len(document["runs"][run]["steps"]) == 3  # never the 1-step attempt
    history = lab.capture_cli("history", run)
    assert history.exit_code == 0 and "1 *" in history.output and "interrupted" in history.output


def test_restore_makes_the_rerun_current_and_the_summary_follows(lab: Lab) -> None:
    run = lab.experiment("chosen", steps=2)
    assert lab.cli("run", run).exit_code == 0
    assert lab.cli("run", run, "--force", "--set", "steps=1").exit_code == 0  # a succeeded rerun: current
    assert lab.status(run)["steps_expected"] == 1

    restored = lab.capture_cli("restore", run, "1", "--reason", "the 2-step one is the lab's")

    assert restored.exit_code == 0, restored.output
    assert lab.status(run)["steps_expected"] == 2
    choice = json.loads((lab.captures / ".attempts" / run / "current.jsonl").read_text().splitlines()[-1])
    assert choice["attempt"] == 1 and choice["why"] == "the 2-step one is the lab's"
    assert choice["by"].startswith("harness restore, by ")


@pytest.mark.docker
def test_a_kept_container_never_blocks_a_later_attempt_or_another_capture_root(
    tmp_path: Path,
    fake_trainer: str,
) -> None:
    (tmp_path / "one").mkdir(), (tmp_path / "two").mkdir()
    lab, other = Lab(tmp_path / "one", "docker"), Lab(tmp_path / "two", "docker")
    try:
        run = lab.experiment("keepme", steps=1)
        kept = lab.cli("run", run, "--keep")
        assert kept.exit_code == 0, kept.output
        forced = lab.cli("run", run, "--force")  # was: a container named mgl-keepme-... already exists
        assert forced.exit_code == 0, forced.output
        assert lab.attempts(run) == [(1, "succeeded"), (2, "succeeded")]
        other.experiment("keepme", steps=1)
        elsewhere = other.cli("run", run)
        assert elsewhere.exit_code == 0, elsewhere.output
    finally:
        lab.cleanup()
        other.cleanup()


@pytest.mark.docker
def test_a_container_removed_from_outside_is_recorded_as_such_with_no_endless_hint(
    tmp_path: Path,
    fake_trainer: str,
) -> None:
    lab = Lab(tmp_path, "docker")
    try:
        run = lab.experiment("removed", scenario="hang")
        harness = lab.spawn("run", run)
        lab.wait_for(lambda: lab.metrics(run), what="the first step")
        (container,) = [handle for handle in lab.objects()]
        # The harness may hear of the kill's 137 before the removal or after it: each order is driven apart in
        # test_docker_removed.py, and both are a removal.
        subprocess.run(["docker", "rm", "-f", container.id], check=True, capture_output=True, timeout=60)
        out, _ = harness.communicate(timeout=120)

        status = lab.status(run)
        assert status["state"] == "failed", out
        assert status["error"].startswith("its container was removed while it ran; the lines it printed after ")
        assert "make the capture directory writable" not in status["error"]
        assert status["capture_complete"] is True
        shown = lab.capture_cli("status")
        assert "harness recover" not in shown.output
        before = lab.status(run)
        recovered = lab.capture_cli("recover")
        assert recovered.exit_code == 0, recovered.output
        assert lab.status(run) == before  # final: nothing left for recover to do
    finally:
        lab.cleanup()


def test_a_variant_runs_under_its_own_name_beside_the_run(lab: Lab) -> None:
    run = lab.experiment("base", steps=2)
    assert lab.cli("run", run).exit_code == 0
    refused = lab.cli("run", run, "--set", "steps=1")
    assert (
        refused.exit_code == 2 and "--name NAME runs this configuration under a run name of its own" in refused.stderr
    )
    variant = lab.cli("run", run, "--set", "steps=1", "--name", "base-1-step")
    assert variant.exit_code == 0, variant.output
    assert lab.status("base")["steps_expected"] == 2 and lab.status("base-1-step")["steps_expected"] == 1
    taken = lab.cli("run", run, "--name", "base")
    assert taken.exit_code == 2 and "--name base: " in taken.stderr and "makes that run" in taken.stderr


def test_the_demos_quick_look_has_its_own_capture_root(tmp_path: Path) -> None:
    env = {
        "HARNESS_LOCK_DIR": str(tmp_path / "locks"),
        "HARNESS_PROCESS_DIR": str(tmp_path / "processes"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "demo",
            "--steps",
            "1",
            "--time-scale",
            "0.002",
            "--sim-engine",
            "process",
            "--experiments-dir",
            str(REPO / "experiments"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (tmp_path / "capture" / "sim-quick" / "plain").is_symlink()
    assert not (tmp_path / "capture" / "sim").exists()  # the demo's own root is untouched: `make demo` is unaffected
    assert "capture/sim-quick" in done.stdout + done.stderr


@pytest.mark.parametrize("settled_by", ["recover", "run"])
def test_a_succeeded_rerun_killed_at_its_exit_becomes_current_once_settled(lab: Lab, settled_by: str) -> None:
    """Issue 35, item 8: the newest attempt that succeeded is current after recover (or the next run) too."""
    from support.lab import killed

    run = lab.experiment("atexit", steps=2)
    assert lab.cli("run", run).exit_code == 0
    killed(lab.spawn("run", run, "--force", failpoint="at-exit"))
    assert os.readlink(lab.captures / run) == f".attempts/{run}/1"  # its harness died before it could say so
    lab.wait_for(lambda: all(not handle.describe().alive for handle in lab.objects()), what="the trainer's end")

    if settled_by == "recover":
        settled = lab.capture_cli("recover")
        assert settled.exit_code == 0, settled.output
        assert f"{run}: succeeded, 2/2 steps saved" in settled.output
        assert "attempt 2 is current (it succeeded)" in settled.output
    else:
        again = lab.cli("run", run)  # settles what the dead harness left, then finds the run succeeded
        assert again.exit_code == 0, again.output

    assert lab.attempts(run) == [(1, "succeeded"), (2, "succeeded")]
    assert os.readlink(lab.captures / run) == f".attempts/{run}/2"
    choice = json.loads((lab.captures / ".attempts" / run / "current.jsonl").read_text().splitlines()[-1])
    assert choice["attempt"] == 2 and choice["by"] == f"harness {settled_by}"
    assert lab.status(run)["attempt"] == 2
