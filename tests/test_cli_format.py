"""The look of what a run prints: a line per step piped within 100 columns, one time format, a temperature whole.

Was: a piped run's step took two lines (about 150 characters); `0:00:04
elapsed, ~0:30 left` mixed two clocks; `status` at 120 columns broke `95.5 C`
over two lines beside a long state.
"""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from harness.cli.progress import PlainReporter
from harness.cli.tables import Column, print_table
from harness.engines.spec import LaunchSpec
from harness.guard import GuardReading
from harness.mileslog import LogParser
from harness.run.timeleft import format_left
from harness.times import clock_text

FILTER_ARGV = ("--dynamic-sampling-filter-path", "x.filter", "--over-sampling-batch-size", "48")
CLOCK = re.compile(r"\b\d+:\d\d(?::\d\d)?\b")


def spec(run: str, steps: int = 12) -> LaunchSpec:
    return LaunchSpec(
        run=run,
        run_id=f"{run}-1234abcd",
        experiment=run,
        seed=2,
        engine="docker",
        image="i",
        command=None,
        container_name="c",
        trainer_argv=FILTER_ARGV,
        env={},
        labels={},
        mounts=(),
        device_requests=(),
        shm_size="1g",
        ipc_mode="host",
        init=True,
        ulimits={},
        capture_dir="/c",
        steps_expected=steps,
        max_minutes=None,
    )


def step_record(step: int, rollout_s: float = 188.74):
    lines = [
        f"x.py:1 - perf {step}: {{'perf/rollout_time': {rollout_s}, 'rollout/dynamic_filter/drop_zero_std_1': 18, "
        "'rollout/dynamic_filter/drop_zero_std_0': 12, 'rollout/raw_reward_unfiltered': 0.6721}",
        f"x.py:2 - rollout {step}: {{'rollout/raw_reward': 0.7}}",
        f"x.py:3 - perf {step}: {{'perf/step_time': 200.0}}",
    ]
    parser = LogParser()
    return [r for line in lines for r in parser.feed(line)][0]


class Ticks:
    """A monotonic clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def piped_steps(run: str, width: int, steps: int = 12, step_s: float = 400.0) -> list[str]:
    out, ticks = io.StringIO(), Ticks()
    reporter = PlainReporter(out, width=width, clock=ticks)
    reporter.started(spec(run, steps))
    for step in range(steps):
        ticks.now += step_s
        reporter.guard(run, GuardReading(temp_c=95.5, pauses=12 + step, paused_s=610.0 + step))
        reporter.step(run, step_record(step), step + 1)
    return out.getvalue().splitlines()[1:]


@pytest.mark.parametrize("run", ["plain", "e2b-dapo-filter", "e2b-dapo-filter-s2", "plain-48-seed-variant-s3"])
def test_a_piped_run_prints_one_line_per_step_within_100_columns(run: str) -> None:
    lines = piped_steps(run, 100)

    assert len(lines) == 12, lines  # one line per step, never a continuation line
    for number, line in enumerate(lines):
        assert len(line) <= 100, line
        assert line.startswith(f"{run}: step {number} ") and "reward 0.672" in line and "rollout 188.7" in line


def test_a_wide_pipe_keeps_every_part_of_the_step_line() -> None:
    (line,) = piped_steps("e2b-dapo-filter-s2", 250, steps=1)

    assert "step 0 (1/1 complete)" in line and "rollout 188.7 trainer s" in line
    assert "dropped 30 (right 18, wrong 12)" in line and "95.5 C, 12 pauses, 610 wall s" in line
    assert "6:40 elapsed" in line


def test_a_narrow_pipe_gives_up_the_clock_and_the_pauses_before_the_numbers_of_the_step() -> None:
    (short_name,) = piped_steps("plain", 100, steps=1)
    (long_name,) = piped_steps("e2b-dapo-filter-s2", 100, steps=1)

    assert (
        short_name
        == "plain: step 0 (1/1) | rollout 188.7 trainer s | dropped 18 right, 12 wrong | reward 0.672 | 95.5 C"
    )
    assert long_name == "e2b-dapo-filter-s2: step 0 (1/1) | rollout 188.7 s | dropped 18 right, 12 wrong | reward 0.672"


@given(st.floats(min_value=0, max_value=10 * 24 * 3600, allow_nan=False))
def test_every_clock_is_one_format(seconds: float) -> None:
    shown = clock_text(seconds)
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    assert shown == (f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}")
    assert format_left(seconds) == f"~{shown}"


def test_elapsed_and_left_on_a_step_line_are_one_clock() -> None:
    (line,) = piped_steps("plain", 250, steps=1, step_s=4)
    clocks = CLOCK.findall(line)

    assert clocks and "0:00:04" not in line and "0:04 elapsed" in line
    assert all(not clock.startswith("0:") or clock.count(":") == 1 for clock in clocks), clocks


def test_status_durations_are_the_same_clock() -> None:
    from harness.capture import RunState, RunStatus
    from harness.run.capture_ops import duration_text

    status = RunStatus(
        run="r",
        run_id="r-1",
        state=RunState.SUCCEEDED,
        exit_code=0,
        started_at="2026-12-01T10:00:00Z",
        ended_at="2026-12-01T10:00:04Z",
        steps_expected=1,
        steps_complete=1,
        error=None,
    )
    assert duration_text(status) == "0:04"


def test_status_keeps_a_temperature_whole_beside_a_long_state_at_120_columns() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    columns = [
        Column("run"),
        Column("state", wrap=True),
        Column("steps", "right"),
        Column("pauses (wall s)", drop=4),
        Column("exit code", "right", drop=3),
        Column("started", drop=1),
        Column("duration", "right"),
        Column("guard", wrap=True, drop=5),
    ]
    row = (
        "e2b-dapo-filter",
        "succeeded; a newer attempt interrupted 1/12",
        "12/12",
        "9 (41 s)",
        "0",
        "2026-12-03 09:39:39",
        "14:02",
        "95.5 C",
    )
    print_table(console, columns, [tuple(Text(cell) for cell in row)])

    assert "95.5 C" in out.getvalue(), out.getvalue()
