"""Live progress: what a person watching a run sees per step, on a terminal and in a pipe."""

from __future__ import annotations

import io

from rich.console import Console

from harness.cli.progress import PlainReporter, RichReporter, describe_step, reporter_for
from harness.mileslog import LogParser

LINES = [
    "x.py:1 - perf 0: {'perf/rollout_time': 88.74, 'rollout/dynamic_filter/drop_zero_std_1': 18, "
    "'rollout/dynamic_filter/drop_zero_std_0': 2, 'rollout/raw_reward_unfiltered': 0.6721}",
    "x.py:2 - rollout 0: {'rollout/raw_reward': 0.7}",
    "x.py:3 - perf 0: {'perf/step_time': 100.0}",
]


def record():
    parser = LogParser()
    return [r for line in LINES for r in parser.feed(line)][0]


def test_a_filter_step_shows_rollout_time_dropped_split_and_the_unfiltered_reward() -> None:
    from harness.cli.progress import step_summary

    assert describe_step(step_summary(record(), filter_on=True)) == (
        "rollout 88.7 trainer s | dropped 20 (right 18, wrong 2) | reward 0.672"
    )
    # without the filter the same keys give rollout/raw_reward (keys.step_reward)
    assert describe_step(step_summary(record(), filter_on=False)).endswith("| reward 0.700")


def test_without_the_filter_the_zero_variance_groups_are_shown() -> None:
    parser = LogParser()
    lines = [
        "x.py:1 - perf 3: {'perf/rollout_time': 50.0, 'rollout/zero_std/count_1': 9, 'rollout/zero_std/count_0.0': 3}",
        "x.py:2 - rollout 3: {'rollout/raw_reward': 0.5}",
        "x.py:3 - perf 3: {'perf/step_time': 60.0}",
    ]
    (rec,) = [r for line in lines for r in parser.feed(line)]
    from harness.cli.progress import step_summary

    assert describe_step(step_summary(rec)) == "rollout 50.0 trainer s | zero-variance 9 right, 3 wrong | reward 0.500"


def test_a_terminal_gets_the_live_panel_and_a_pipe_plain_lines() -> None:
    terminal = Console(file=io.StringIO(), force_terminal=True, width=120)
    pipe = Console(file=io.StringIO(), force_terminal=False)
    assert isinstance(reporter_for(terminal), RichReporter)
    assert type(reporter_for(pipe)) is PlainReporter


def test_the_live_panel_shows_the_last_step() -> None:
    from harness.engines.spec import LaunchSpec

    out = io.StringIO()
    progress = RichReporter(Console(file=out, force_terminal=True, width=120))
    spec = LaunchSpec(
        run="e2b",
        run_id="e2b-1234",
        experiment="e2b",
        seed=1,
        engine="docker",
        image="i",
        command=None,
        container_name="c",
        trainer_argv=(),
        env={},
        labels={},
        mounts=(),
        device_requests=(),
        shm_size="1g",
        ipc_mode="host",
        init=True,
        ulimits={},
        capture_dir="/c",
        steps_expected=12,
        max_minutes=None,
    )
    progress.started(spec)
    progress.step(spec.run, record(), 1)
    rendered = io.StringIO()
    Console(file=rendered, width=120).print(progress._render())
    text = rendered.getvalue()
    assert " 1/12 " in text and "dropped 20 (right 18, wrong 2)" in text and "\u2501" in text  # a bar of steps
