"""The Miles rules exist once: progress, `parse-log` and the summary read the same reward and step time."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.progress import PlainReporter, RichReporter
from harness.engines.spec import LaunchSpec
from harness.lab.milesnames import RAW_REWARD, RAW_REWARD_UNFILTERED, STEP_TIME, STEP_TIME_OLD
from harness.mileslog import LogParser, keys, parse_file
from support.summaries import summary_rewards

LOGS = Path(__file__).parent / "data" / "logs"
FILTER_LOG = LOGS / "container-log-docker-timestamps.log"  # filter on; both reward keys at step 0
PLAIN_LOG = LOGS / "plain-48-both-reward-keys.log"  # no filter, O = 48; Miles logs both reward keys


def spec_for(argv: list[str]) -> LaunchSpec:
    return LaunchSpec(
        run="r",
        run_id="r-1",
        experiment="r",
        seed=1,
        engine="docker",
        image="i",
        command=None,
        container_name="c",
        trainer_argv=tuple(argv),
        env={},
        labels={},
        mounts=(),
        device_requests=(),
        shm_size="1g",
        ipc_mode="host",
        init=True,
        ulimits={},
        capture_dir="/c",
        steps_expected=3,
        max_minutes=None,
    )


def progress_rewards(log: Path) -> tuple[dict[int, float | None], str]:
    """What live progress shows per step, fed line by line as the runner feeds it."""
    launch = parse_file(log).launch
    plain = PlainReporter(stream=io.StringIO())
    rich = RichReporter(Console(file=io.StringIO(), force_terminal=True, width=120))
    for progress in (plain, rich):
        progress.started(spec_for(launch))
    parser = LogParser()
    shown: dict[int, float | None] = {}
    records = [r for line in log.read_text().splitlines() for r in parser.feed(line)] + parser.finish()
    for n, record in enumerate(records, start=1):
        plain.step("r", record, n)
        rich.step("r", record, n)
        shown[record.step] = rich.last["reward"]
    return shown, plain.stream.getvalue()


def parse_log_rewards(log: Path) -> tuple[dict[int, float | None], dict]:
    result = CliRunner().invoke(app, ["parse-log", str(log), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    return {step["step"]: step["reward"] for step in doc["steps"]}, doc


@pytest.mark.parametrize(("log", "key"), [(FILTER_LOG, RAW_REWARD_UNFILTERED), (PLAIN_LOG, RAW_REWARD)])
def test_progress_parse_log_and_the_summary_report_the_same_reward_for_each_step(log, key, tmp_path) -> None:
    summary, document = summary_rewards(log, tmp_path)
    parse_log, doc = parse_log_rewards(log)
    progress, printed = progress_rewards(log)
    assert summary == parse_log == progress
    assert document["reward_key"] == doc["reward_key"] == key
    assert any(value is not None for value in summary.values())
    for step, value in summary.items():
        assert f"step {step}" in printed
        shown = "-" if value is None else f"{value:.3f}"
        assert any(line.startswith(f"r: step {step}") and f"reward {shown} |" in line for line in printed.splitlines())


def test_a_plain_run_that_logs_both_keys_is_rewarded_by_raw_reward() -> None:
    # Without the filter, O = 48 still aborts the groups beyond the first 32 kept: the two
    # keys differ, and the write-up's baselines are rollout/raw_reward.
    parse_log, doc = parse_log_rewards(PLAIN_LOG)
    assert parse_log == {0: 0.625, 1: 0.65625, 2: 0.6171875}
    assert doc["filter"] is False


def test_the_filter_run_without_the_unfiltered_key_has_no_reward() -> None:
    parse_log, doc = parse_log_rewards(FILTER_LOG)
    assert parse_log == {0: 0.7, 1: None}  # step 1 logged no rollout/raw_reward_unfiltered
    assert doc["filter"] is True


def test_step_time_falls_back_to_the_older_name_and_says_so() -> None:
    assert keys.step_time({"perf/step_time": 90.0, "perf/total_train_time": 1.0}) == (90.0, STEP_TIME)
    assert keys.step_time({"perf/total_train_time": 91.0}) == (91.0, STEP_TIME_OLD)
    assert keys.step_time({"perf/step_time": math.nan, "perf/total_train_time": 91.0}) == (91.0, STEP_TIME_OLD)
    assert keys.step_time({"perf/step_time": "fast"}) == (None, None)
    assert keys.step_time({}) == (None, None)


def test_the_parse_log_table_shows_the_one_reward_and_the_older_step_time() -> None:
    result = CliRunner().invoke(app, ["parse-log", str(PLAIN_LOG)], env={"COLUMNS": "200"})
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["0", "yes", "58.5", "-", "-", "12", "3", "0.625", "90.0"] in rows  # no filter: dropped null, as the summary
    assert ["1", "yes", "60.0", "-", "-", "13", "2", "0.656", "91.0"] in rows  # perf/total_train_time
    assert "reward: rollout/raw_reward (no filter, from the argument dump)" in result.stdout


@pytest.mark.parametrize(
    ("args", "argv", "expected"),
    [
        ({"dynamic_sampling_filter_path": "miles.rollout.filter_hub.x"}, None, (True, "argument dump")),
        ({"dynamic_sampling_filter_path": None}, ["--dynamic-sampling-filter-path", "x"], (False, "argument dump")),
        ({"dynamic_sampling_filter_path": "None"}, None, (False, "argument dump")),
        ({"lr": 1e-6}, ["python3", "train.py", "--dynamic-sampling-filter-path", "x"], (True, "launch line")),
        (
            None,
            ["python3", "train.py", "--dynamic-sampling-filter-path", "a", "--dynamic-sampling-filter-path", "None"],
            (False, "launch line"),
        ),
        (None, ["python3", "train.py", "--rollout-batch-size", "32"], (False, "launch line")),
        (None, None, (None, "none")),
    ],
)
def test_the_filter_setting_comes_from_the_dump_then_the_launch_line(args, argv, expected) -> None:
    assert keys.filter_setting(args, argv) == expected


def test_the_reward_rule() -> None:
    both = {RAW_REWARD: 0.5, RAW_REWARD_UNFILTERED: 0.7}
    assert keys.reward_key(True) == RAW_REWARD_UNFILTERED and keys.reward_key(False) == RAW_REWARD
    assert keys.step_reward(both, filter_on=True) == 0.7
    assert keys.step_reward(both, filter_on=False) == 0.5
    assert keys.step_reward({RAW_REWARD: 0.5}, filter_on=True) is None  # counts only the kept groups
    assert keys.step_reward({RAW_REWARD: math.inf}, filter_on=False) is None
    assert keys.step_reward({RAW_REWARD: True}, filter_on=False) is None
