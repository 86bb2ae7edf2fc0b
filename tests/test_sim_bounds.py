"""The simulator's bounds (issue 22, item 12): sizes no GB10 run could have are refused in one line, naming the
limit, at `harness sim` and for experiments run on the simulator; a large step that is allowed still ends at
once on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.lab.milesnames import FILTER_PATH
from harness.sim.config import (
    MAX_ROLLOUT_ANSWERS,
    MAX_SAMPLES_PER_PROMPT,
    SimUsageError,
    parse_argv,
)
from support.timing import scaled

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


@pytest.mark.integration  # `python -m harness sim` in a process of its own
def test_harness_sim_refuses_a_billion_by_a_billion_in_one_line():
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "sim",
            "--rollout-batch-size",
            "1000000000",
            "--n-samples-per-prompt",
            "1000000000",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == "" and time.monotonic() - started < scaled(30)
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("harness sim: --n-samples-per-prompt 1000000000") and "at most 1024" in done.stderr


@pytest.mark.parametrize(
    "argv, limit",
    [
        (["--n-samples-per-prompt", str(MAX_SAMPLES_PER_PROMPT + 1)], f"at most {MAX_SAMPLES_PER_PROMPT}"),
        (["--rollout-batch-size", "1025", "--n-samples-per-prompt", "1024"], f"at most {MAX_ROLLOUT_ANSWERS:,}"),
        (
            ["--rollout-batch-size", "64", "--over-sampling-batch-size", "2048", "--n-samples-per-prompt", "1024"],
            f"at most {MAX_ROLLOUT_ANSWERS:,}",
        ),
        (["--rollout-batch-size", "4096", "--n-samples-per-prompt", "8", "--global-batch-size", "1"], "at most 4,096"),
        (["--num-rollout", "10000000"], "at most 1,000,000"),
    ],
)
def test_sizes_no_gb10_run_could_have_are_refused_naming_the_limit(argv, limit):
    with pytest.raises(SimUsageError) as refused:
        parse_argv(argv)
    assert "more than any GB10 run could have" in str(refused.value) and limit in str(refused.value)


def test_the_largest_sizes_allowed_run():
    config = parse_argv(["--rollout-batch-size", "1024", "--n-samples-per-prompt", "1024"])
    assert config.rollout_batch_size * config.n_samples_per_prompt == MAX_ROLLOUT_ANSWERS


def test_an_experiment_run_on_the_simulator_with_such_sizes_is_refused_before_anything_starts(tmp_path):
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    (experiments / "huge.yaml").write_text(
        "name: huge\nsteps: 2\nmiles:\n  args: {rollout-batch-size: 1000000000, n-samples-per-prompt: 1000000000}\n"
    )
    captures = tmp_path / "captures"
    result = runner.invoke(
        app,
        [
            "run",
            "huge",
            "--sim",
            "--sim-engine",
            "process",
            "--experiments-dir",
            str(experiments),
            "--capture-dir",
            str(captures),
        ],
        env={"COLUMNS": "300"},
    )
    assert result.exit_code == 2, result.output
    assert "run huge on the simulator: --n-samples-per-prompt 1000000000 is more than any GB10 run" in result.stderr
    assert not captures.exists() or not any(captures.iterdir())


@pytest.mark.integration
def test_a_large_allowed_step_ends_at_once_on_sigterm():
    # the largest rollout allowed, with the filter: seconds of CPU a rollout, stopped in the middle of one
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.sim",
            "--rollout-batch-size",
            "1024",
            "--over-sampling-batch-size",
            "1024",
            "--n-samples-per-prompt",
            "1024",
            "--dynamic-sampling-filter-path",
            FILTER_PATH,
            "--time-scale",
            "0",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        time.sleep(scaled(2.0))
        assert proc.poll() is None, "the rollout ended before the signal: not a large step"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=scaled(30))
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert took < scaled(2.0), f"{took:.1f} s to stop"
    assert proc.stderr.read().strip().startswith("harness sim: SIGTERM: stopped")
