"""Ctrl-C on a run: the hint names the attempt that was interrupted, `status` shows the exit code the shell saw,
and a rerun says it starts from step 0.

Was: after Ctrl-C on a rerun, `harness logs plain-48 --sim` showed attempt 1's
succeeded log; the harness exited 130 while `status` showed the trainer's 143;
and nothing said a rerun starts again from step 0.
"""

from __future__ import annotations

import signal

import pytest

from harness.capture import RunState
from harness.run.decide import exit_code_for_state
from support.lab import Lab
from support.messages import messages


def has_a_step(lab: Lab, run: str, attempt: int) -> bool:
    metrics = lab.captures / ".attempts" / run / str(attempt) / "metrics.jsonl"
    return metrics.exists() and bool(metrics.read_text().strip())


def interrupt(lab: Lab, run: str, attempt: int, *args: str) -> str:
    """Start `harness run RUN ARGS`, Ctrl-C it after its first step; its output (exit 130)."""
    harness = lab.spawn("run", run, *args)
    lab.wait_for(lambda: has_a_step(lab, run, attempt), what=f"attempt {attempt}'s first step")
    harness.send_signal(signal.SIGINT)
    out, _ = harness.communicate(timeout=120)
    assert harness.returncode == 130, out
    return out


@pytest.mark.integration
def test_ctrl_c_on_a_rerun_names_its_attempt_and_the_rerun_says_it_starts_from_step_0(process_lab: Lab) -> None:
    run = process_lab.experiment("rerun", steps=3, env={"FAKE_DELAY_S": "0.6"})
    assert process_lab.cli("run", run).exit_code == 0
    out = interrupt(process_lab, run, 2, "--force")

    assert f"{run}: attempt 2, from step 0 (a rerun does not resume attempt 1)" in out
    (hint,) = [m for m in messages(out) if m.startswith(f"warning: run {run} interrupted")]
    command = f"harness logs {run} --attempt 2 --capture-dir {process_lab.captures}"
    assert f"`{command}`" in hint
    logs = process_lab.capture_cli("logs", run, "--attempt", "2")
    attempt_log = (process_lab.captures / ".attempts" / run / "2" / "container.log").read_text()
    assert logs.exit_code == 0 and logs.stdout.splitlines() == [
        line.split(" ", 1)[1] for line in attempt_log.splitlines()
    ]


@pytest.mark.integration
def test_status_shows_the_exit_code_the_harness_exited_with(process_lab: Lab) -> None:
    run = process_lab.experiment("stopped", steps=3, env={"FAKE_DELAY_S": "0.6"})
    interrupt(process_lab, run, 1)
    trainer = process_lab.status(run)["exit_code"]

    shown = process_lab.capture_cli("status")
    row = next(line for line in shown.stdout.splitlines() if line.startswith(run + " "))
    assert " 130 " in f" {row} "
    if trainer != 130:  # the trainer's own, where it differs, said as the trainer's
        assert f"(trainer {trainer})" in row


@pytest.mark.parametrize(
    ("state", "code"),
    [
        (RunState.SUCCEEDED, 0),
        (RunState.INTERRUPTED, 130),
        (RunState.FAILED, 1),
        (RunState.NO_METRICS, 1),
        (RunState.STOPPED, 1),
        (RunState.RUNNING, None),
        (RunState.NOT_STARTED, None),
    ],
)
def test_the_exit_code_of_a_state_is_the_one_run_exits_with(state: RunState, code: int | None) -> None:
    assert exit_code_for_state(state) == code
