"""The time left: the median pause-adjusted step time so far, times the steps to go."""

from __future__ import annotations

import io
import time

import pytest

from harness.cli.progress import PlainReporter
from harness.run.timeleft import TimeLeft, format_left


def test_pauses_are_taken_out_of_the_step_times() -> None:
    clock = TimeLeft(started_s=100.0)
    clock.step(110.0, paused_total_s=0.0)
    clock.step(135.0, paused_total_s=15.0)  # 25 s, of which the guard held it 15: a 10 s step
    clock.step(146.0, paused_total_s=15.0)

    assert clock.step_times_s() == [10.0, 10.0, 11.0]
    assert clock.median_step_s() == 10.0
    assert clock.left_s(9) == 90.0
    assert clock.left_s(9, now_s=150.0, paused_total_s=15.0) == 86.0  # 4 s into the next step


def test_no_estimate_before_the_first_step_and_none_left_at_the_end() -> None:
    clock = TimeLeft(started_s=0.0)
    assert clock.left_s(12) is None
    clock.step(5.0, 0.0)
    assert clock.left_s(0) == 0.0


def test_the_time_left_is_said_as_a_clock() -> None:
    assert format_left(None) == "-"
    assert format_left(75.4) == "~1:15"
    assert format_left(3725) == "~1:02:05"


@pytest.mark.integration
def test_after_three_steps_the_estimate_is_within_ten_percent_of_a_run_with_known_step_times(
    process_lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trainer whose steps take a known time (the fake trainer's delay, twice a step), run as `run` runs it."""
    from harness.experiments.store import ExperimentStore
    from harness.run.context import RunContext
    from harness.run.lifecycle import run_planned
    from harness.run.plan import plan_runs

    run = process_lab.experiment("paced", steps=8, env={"FAKE_DELAY_S": "0.4"})
    (plan,) = plan_runs(ExperimentStore(process_lab.experiments), run, [], [], process_lab.captures, {})
    reporter = PlainReporter(io.StringIO(), specs=[plan.spec], width=400)
    estimates: list[tuple[float, float | None]] = []
    recorded_step = reporter._record_step

    def record_step(run_name: str, record: object, steps_complete: int) -> object:
        view = recorded_step(run_name, record, steps_complete)  # type: ignore[arg-type]
        if record.complete:  # type: ignore[attr-defined]
            estimates.append((time.monotonic(), view.left_s(time.monotonic())))
        return view

    monkeypatch.setattr(reporter, "_record_step", record_step)
    result = run_planned(plan, RunContext(reporter=reporter))

    assert result.status is not None and result.status.state == "succeeded"
    at_third, estimate = estimates[2]
    actual = estimates[-1][0] - at_third  # until the last step was seen complete
    assert estimate is not None and abs(estimate - actual) <= 0.1 * actual, (estimate, actual)
