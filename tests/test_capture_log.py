"""What the summary reads from container.log: the simulator's time scale, and the first line after a time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.capture.reader import first_stamps_after, sim_time_scale
from harness.times import parse_time_us

REPO = Path(__file__).resolve().parent.parent
T0 = "2026-11-29T12:00:00"


def stamp(seconds: int, fraction: str = "") -> str:
    return f"{T0[:-2]}{seconds:02d}{fraction}Z"


def us(seconds: int, fraction_us: int = 0) -> int:
    return parse_time_us(stamp(seconds)) + fraction_us


def first_line_of_the_simulator(time_scale: str) -> str:
    """The first line the real simulator prints at this time scale (it is stopped once the line is read)."""
    env = {**os.environ, "HARNESS_SIM_TIME_SCALE": time_scale}
    with subprocess.Popen(
        [sys.executable, "-m", "harness.sim.entry", "--num-rollout", "1"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as sim:
        try:
            return sim.stdout.readline()
        finally:
            sim.kill()


@pytest.mark.integration
def test_the_time_scale_the_simulator_prints_first_is_read(tmp_path):
    log = tmp_path / "container.log"
    log.write_text(f"{stamp(0, '.123456789')} {first_line_of_the_simulator('0.25')}{stamp(1)} Job submitted\n")
    assert sim_time_scale(log, []) == ("0.25", 1)


def test_a_log_without_the_simulators_line_has_no_time_scale(tmp_path):
    log = tmp_path / "container.log"
    log.write_text(f"{stamp(0)} python3 train.py --time-scale 0.1\n")
    assert sim_time_scale(log, []) is None
    assert sim_time_scale(tmp_path / "absent.log", []) is None


def test_a_log_that_is_not_a_regular_file_is_a_note_not_a_hang(tmp_path):
    log = tmp_path / "container.log"
    os.mkfifo(log)
    notes: list[str] = []
    assert sim_time_scale(log, notes) is None and first_stamps_after(log, [us(0)], notes) == {}
    assert notes == ["container.log is not a regular file (it is a FIFO)"] * 2


def test_the_first_line_stamped_after_each_time(tmp_path):
    log = tmp_path / "container.log"
    log.write_text(
        "".join(
            [
                f"{stamp(1)} one\n",
                "a line without its receive time\n",
                f"{stamp(5, '.000001')} five and a microsecond\n",
                f"{stamp(9)} nine\n",
            ]
        )
    )
    found = first_stamps_after(log, [us(0), us(1), us(5), us(5, 1), us(9)], [])
    assert found == {us(0): (us(1), 1), us(1): (us(5, 1), 3), us(5): (us(5, 1), 3), us(5, 1): (us(9), 4)}
    assert first_stamps_after(tmp_path / "absent.log", [us(0)], []) == {}


@pytest.mark.integration
def test_a_simulated_run_whose_manifest_lost_its_time_scale_is_summarized_as_with_it(tmp_path):
    """A real process-engine simulator run: its numbers with the manifest's time scale, without it, and without both."""
    import json

    from typer.testing import CliRunner

    from harness.cli import app
    from harness.summary.summarize import summarize
    from harness.times import format_time_us

    captures = tmp_path / "capture"
    done = CliRunner().invoke(
        app,
        [
            "run",
            "e2b-dapo-filter",
            "--sim",
            "--sim-engine",
            "process",
            "--time-scale",
            "0.001",
            "--capture-dir",
            str(captures),
        ],
        env={"HARNESS_LOCK_DIR": str(tmp_path / "locks"), "HARNESS_PROCESS_DIR": str(tmp_path / "processes")},
    )
    assert done.exit_code == 0, done.output
    run = captures / "e2b-dapo-filter"
    step = json.loads((run / "metrics.jsonl").read_text().splitlines()[3])
    end = parse_time_us(step["t_rollout_end"])
    half = int(step["metrics"]["perf/rollout_time"] * 0.001 * 1e6 / 2)  # half the rollout, in wall microseconds
    (run / "pauses.jsonl").write_text(
        json.dumps({"start": format_time_us(end - half), "end": format_time_us(end), "reason": "hot", "peak_c": 87.0})
        + "\n"
    )

    def summary() -> dict:
        return summarize(captures).to_dict()["runs"]["e2b-dapo-filter"]

    truth = summary()
    assert truth["time_scale"] == 0.001 and truth["steps"][3]["pause_overlap_s"] > 0
    manifest = json.loads((run / "manifest.json").read_text())
    for broken in (0, None, "abc"):
        (run / "manifest.json").write_text(json.dumps({**manifest, "time_scale": broken}))
        got = summary()
        assert (got["time_scale"], got["steps"], got["aggregates"]) == (0.001, truth["steps"], truth["aggregates"])
    (run / "container.log").write_text("".join((run / "container.log").read_text().splitlines(True)[1:]))
    unknown = summary()
    assert [row["rollout_time_adjusted_s"] for row in unknown["steps"]] == [None] * 12
    assert unknown["aggregates"]["rollout_time_adjusted_median_s"] is None
