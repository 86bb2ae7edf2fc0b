"""The live board of a resumed attempt is the run's one curve from its start: the lineage's earlier steps already on
it, the resume marker at the rollout it continued from, its own steps after them; and the same once it ended.

The simulator through the process engine: attempt 1 dies in the save of iter_0000009 (steps 0 to 8 recorded), and
attempt 2 resumes from iter_0000006, watched as each of its steps is recorded (the moment `harness run` prints it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.experiments.store import ExperimentStore
from harness.run.context import RecordingReporter, RunContext, RunOptions
from harness.run.lifecycle import run_planned
from harness.run.plan import plan_runs
from harness.run.simswap import choose_target
from support.resume_lab import ResumeLab

pytestmark = pytest.mark.integration

TIME_SCALE = "0.01"  # a few tenths of a second a step: the board thread keeps up with each step, as it does live
REWARD = "rollout/raw_reward"


def board(directory: Path) -> dict[str, dict[int, list[float]]]:
    """Every scalar under `directory`, read as TensorBoard reads it: tag -> step -> the values written there."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    found: dict[str, dict[int, list[float]]] = {}
    for path in sorted(directory.rglob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.HasField("tensor") and value.metadata.plugin_data.plugin_name == "scalars":
                    number = float(tensor_util.make_ndarray(value.tensor))
                elif value.HasField("simple_value"):
                    number = value.simple_value
                else:
                    continue
                found.setdefault(value.tag, {}).setdefault(event.step, []).append(number)
    return found


def texts(directory: Path, tag: str) -> dict[int, list[str]]:
    from tbparse import SummaryReader

    frame = SummaryReader(str(directory), pivot=False).text
    rows = frame[frame["tag"] == tag] if len(frame) else frame
    said: dict[int, list[str]] = {}
    for step, value in zip(rows["step"] if len(rows) else [], rows["value"] if len(rows) else []):
        said.setdefault(int(step), []).append(str(value))
    return said


class Watching(RecordingReporter):
    """Reads the board each time a step of the resumed attempt is recorded."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory
        self.seen: dict[int, dict[str, dict[int, list[float]]]] = {}

    def step(self, run: str, record: Any, steps_complete: int) -> None:
        self.seen[record.step] = board(self.directory)
        super().step(run, record, steps_complete)


def test_the_live_board_of_a_resumed_attempt_holds_the_lineage_before_its_own_steps(
    process_resume_lab: ResumeLab,
) -> None:
    lab = process_resume_lab
    lab.experiment()
    crashed = lab.run("long", env={"HARNESS_SIM_CRASH_AT": "model-write:9"}, time_scale=TIME_SCALE)
    assert crashed.exit_code == 1, crashed.output[-2000:]
    first = {row["step"]: row["metrics"] for row in lab.metrics("long", 1)}
    assert sorted(first) == list(range(9))
    tensorboard = lab.captures / "tensorboard"

    target = choose_target("process", float(TIME_SCALE), sys.executable)
    store = ExperimentStore(lab.experiments)
    (plan,) = plan_runs(store, "long", [], [], lab.captures, dict(os.environ), sim=target)
    watching = Watching(tensorboard)
    status = run_planned(plan, RunContext(options=RunOptions(resume=True), reporter=watching)).status

    assert status is not None and status.state == "succeeded", status
    assert lab.resume_record("long", 2)["next_rollout_id"] == 6
    assert sorted(watching.seen) == list(range(6, 12))
    for step in range(7, 12):  # while it runs: the one curve so far, each step once
        seen = watching.seen[step]
        counts = {k: len(v) for k, v in seen[REWARD].items()}
        assert set(range(step)) <= set(counts) <= set(range(step + 1)) and set(counts.values()) == {1}, (step, counts)
        for earlier in range(6):  # the lineage's steps, as attempt 1 recorded them
            assert seen[REWARD][earlier] == [pytest.approx(first[earlier][REWARD])], earlier
        assert seen["run/resumed"] == {6: [2.0]}, step  # the marker at the rollout it continued from

    after = board(tensorboard)  # ended: the run's one curve, rebuilt from the stitched capture
    assert {k: len(v) for k, v in after[REWARD].items()} == {k: 1 for k in range(12)}
    assert after["run/resumed"] == {6: [2.0]}
    assert list(texts(tensorboard, "run/resumes")) == [6]
    while_running = watching.seen[11]
    for tag, steps in while_running.items():  # what the live board showed is what the rebuilt board shows
        if tag.startswith(("guard/",)):
            continue
        for step, values in steps.items():
            assert after[tag][step] == pytest.approx(values), (tag, step)


def test_a_refused_resume_leaves_the_board_showing_the_attempt_it_would_have_continued(
    process_resume_lab: ResumeLab,
) -> None:
    lab = process_resume_lab
    lab.experiment()
    crashed = lab.run("long", env={"HARNESS_SIM_CRASH_AT": "model-write:9"}, time_scale=TIME_SCALE)
    assert crashed.exit_code == 1, crashed.output[-2000:]

    refused = lab.run("long", "--resume", env={"HARNESS_SIM_RESUME_FAULT": "no-tracker"}, time_scale=TIME_SCALE)

    assert refused.exit_code == 1 and lab.resume_record("long", 2)["verified"] is False, refused.output[-2000:]
    after = board(lab.captures / "tensorboard")
    assert {k: len(v) for k, v in after[REWARD].items()} == {k: 1 for k in range(9)}  # attempt 1, current, whole
    assert "run/resumed" not in after
