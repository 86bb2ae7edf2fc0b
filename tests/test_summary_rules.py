"""The summary rules one at a time, on captures built in the test: times, config, batches, reward, aggregates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.summary.captures import read_capture
from harness.summary.summarize import summarize_run
from harness.times import format_time_us, parse_time_us

T0 = parse_time_us("2026-11-29T08:00:00Z")


def at(seconds: float) -> str:
    return format_time_us(T0 + round(seconds * 1_000_000))


# --------------------------------------------------------------------------- times


@pytest.mark.parametrize(
    "text, micros",
    [
        ("2026-11-29T08:00:00Z", 0),
        ("2026-11-29T08:00:00+00:00", 0),
        ("2026-11-29T08:00:00.5Z", 500_000),
        ("2026-11-29T08:00:00.123456Z", 123_456),
        ("2026-11-29T08:00:00.123456789Z", 123_456),  # Docker's nanoseconds: truncated, not rounded
        ("2026-11-29T08:00:00.999999999Z", 999_999),
        ("2026-11-29T09:00:00+01:00", 0),
        ("2026-11-29t08:00:00z", 0),
    ],
)
def test_rfc3339_to_microseconds(text, micros):
    assert parse_time_us(text) - T0 == micros


@pytest.mark.parametrize("text", ["2026-11-29 08:00", "2026-13-01T00:00:00Z", "2026-11-29T08:00:00", None, 5, ""])
def test_not_rfc3339_is_none(text):
    assert parse_time_us(text) is None


def test_format_round_trips():
    micros = parse_time_us("2026-11-29T07:52:40.814948Z")
    assert format_time_us(micros) == "2026-11-29T07:52:40.814948Z"


# --------------------------------------------------------------------------- a capture built here


def write_capture(
    root: Path,
    name: str,
    steps: list[dict],
    *,
    args: dict | None = None,
    argv: list[str] | None = None,
    pauses: list[dict] | None = None,
    state: str = "succeeded",
    ended: str | None = None,
    time_scale: float = 1,
    experiment: dict | None = None,
) -> Path:
    run = root / name
    run.mkdir(parents=True)
    status = {
        "run": name,
        "run_id": f"{name}-0",
        "state": state,
        "exit_code": 0,
        "started_at": at(0),
        "ended_at": ended if ended is not None else at(10_000),
        "steps_expected": len(steps),
        "steps_complete": len(steps),
        "error": None,
    }
    (run / "status.json").write_text(json.dumps(status))
    manifest = {
        "run": name,
        "run_id": f"{name}-0",
        "time_scale": time_scale,
        "experiment": experiment or {"name": name, "seed": 1, "steps": len(steps), "compare": None},
    }
    if argv is not None:
        manifest["trainer_argv"] = argv
    (run / "manifest.json").write_text(json.dumps(manifest))
    if args is not None:
        (run / "args.json").write_text(json.dumps(args))
    (run / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    if pauses is not None:
        (run / "pauses.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pauses))
    return run


def step(n: int, end: float, metrics: dict, complete: bool = True) -> dict:
    return {
        "step": n,
        "complete": complete,
        "t_rollout_end": at(end),
        "t_step_end": at(end + 10) if complete else None,
        "metrics": metrics,
    }


FILTER_ARGS = {
    "rollout_batch_size": 32,
    "over_sampling_batch_size": 48,
    "n_samples_per_prompt": 8,
    "dynamic_sampling_filter_path": "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter",
}
PLAIN_ARGS = {
    "rollout_batch_size": "32",
    "over_sampling_batch_size": "None",
    "n_samples_per_prompt": "8",
    "dynamic_sampling_filter_path": "None",
}


def summary_of(run_dir: Path) -> dict:
    return summarize_run(read_capture(run_dir)).to_dict()


# --------------------------------------------------------------------------- config


def test_args_json_raw_strings_are_read_as_values(tmp_path):
    doc = summary_of(write_capture(tmp_path, "plain", [step(0, 100, {"perf/rollout_time": 1.0})], args=PLAIN_ARGS))
    assert (doc["filter"], doc["rollout_batch_size"], doc["over_sampling_batch_size"], doc["n_samples_per_prompt"]) == (
        False,
        32,
        32,
        8,
    )  # O 'None' -> Miles's default, B
    assert not any("args.json" in note for note in doc["notes"])


def test_without_args_json_the_trainer_argv_is_read_and_said(tmp_path):
    argv = [
        "python3",
        "train.py",
        "--rollout-batch-size",
        "32",
        "--rollout-batch-size",
        "16",
        "--dynamic-sampling-filter-path",
        "x.y",
        "--over-sampling-batch-size",
        "24",
        "--n-samples-per-prompt",
        "4",
    ]
    doc = summary_of(write_capture(tmp_path, "f", [step(0, 100, {"perf/rollout_time": 1.0})], argv=argv))
    assert (doc["filter"], doc["rollout_batch_size"], doc["over_sampling_batch_size"], doc["n_samples_per_prompt"]) == (
        True,
        16,
        24,
        4,
    )  # the last --rollout-batch-size wins, as in argparse
    assert any("args.json missing" in n and "trainer_argv" in n for n in doc["notes"])


def test_an_fsdp_run_without_args_json_is_the_normal_case_and_gets_no_note(tmp_path):
    # Megatron's argument check prints the dump; the FSDP backend (the lab's) never does: the launch line is the source
    argv = [
        "python3",
        "train.py",
        "--train-backend",
        "fsdp",
        "--rollout-batch-size",
        "16",
        "--n-samples-per-prompt",
        "4",
    ]
    doc = summary_of(write_capture(tmp_path, "f", [step(0, 100, {"perf/rollout_time": 1.0})], argv=argv))
    assert (doc["rollout_batch_size"], doc["n_samples_per_prompt"]) == (16, 4)
    assert doc["config_sources"]["rollout_batch_size"] == "trainer_argv"
    assert not any("args.json" in n for n in doc["notes"])
    megatron = [*argv[:3], "megatron", *argv[4:]]
    doc = summary_of(write_capture(tmp_path, "m", [step(0, 100, {"perf/rollout_time": 1.0})], argv=megatron))
    assert any("args.json missing" in n for n in doc["notes"])  # Megatron prints one: its absence is worth a note


def test_filter_path_none_string_in_args_means_off_even_if_argv_says_on(tmp_path):
    argv = ["python3", "train.py", "--dynamic-sampling-filter-path", "x.y"]
    doc = summary_of(write_capture(tmp_path, "p", [step(0, 100, {})], args=PLAIN_ARGS, argv=argv))
    assert doc["filter"] is False  # args.json is what the trainer actually ran with


# --------------------------------------------------------------------------- batches, groups


@pytest.mark.parametrize(
    "drops, dropped, batches",
    [
        ({}, 0, 1),
        ({"drop_zero_std_1": 16}, 16, 1),  # 32 + 16 = 48: exactly one batch
        ({"drop_zero_std_1": 17}, 17, 2),  # 49 > 48: a second batch
        ({"drop_zero_std_1.0": 40, "drop_zero_std_0.0": 24}, 64, 2),  # 96 = 2 x 48
        ({"drop_zero_std_1": 40, "drop_zero_std_0": 25}, 65, 3),
    ],
)
def test_batches_is_ceil_of_kept_plus_dropped_over_o(tmp_path, drops, dropped, batches):
    metrics = {"perf/rollout_time": 1.0, **{f"rollout/dynamic_filter/{k}": v for k, v in drops.items()}}
    row = summary_of(write_capture(tmp_path, "f", [step(0, 100, metrics)], args=FILTER_ARGS))["steps"][0]
    assert (row["dropped_groups"], row["batches"]) == (dropped, batches)


def test_all_right_all_wrong_in_both_suffix_forms_and_minus_one(tmp_path):
    steps = [
        step(
            0,
            100,
            {
                "perf/rollout_time": 1.0,
                "rollout/dynamic_filter/drop_zero_std_1": 5,
                "rollout/dynamic_filter/drop_zero_std_0": 2,
            },
        ),
        step(
            1,
            200,
            {
                "perf/rollout_time": 1.0,
                "rollout/dynamic_filter/drop_zero_std_1.0": 7,
                "rollout/dynamic_filter/drop_zero_std_0.0": 3,
            },
        ),
        step(
            2,
            300,
            {
                "perf/rollout_time": 1.0,
                "rollout/dynamic_filter/drop_zero_std_1.0": 1,
                "rollout/dynamic_filter/drop_zero_std_-1.0": 4,
            },
        ),
    ]
    rows = summary_of(write_capture(tmp_path, "f", steps, args=FILTER_ARGS))["steps"]
    assert [(r["dropped_all_right"], r["dropped_all_wrong"]) for r in rows] == [(5, 2), (7, 3), (1, 4)]


def test_without_the_filter_dropped_and_batches_are_null_and_zero_std_counts_show(tmp_path):
    metrics = {"perf/rollout_time": 1.0, "rollout/zero_std/count_0.0": 3, "rollout/zero_std/count_1.0": 12}
    row = summary_of(write_capture(tmp_path, "p", [step(0, 100, metrics)], args=PLAIN_ARGS))["steps"][0]
    assert (row["dropped_groups"], row["dropped_all_right"], row["dropped_all_wrong"], row["batches"]) == (None,) * 4
    assert (row["zero_std_all_right"], row["zero_std_all_wrong"]) == (12, 3)


# --------------------------------------------------------------------------- reward


def test_filter_run_reward_is_the_unfiltered_one(tmp_path):
    metrics = {"perf/rollout_time": 1.0, "rollout/raw_reward": 0.5, "rollout/raw_reward_unfiltered": 0.7}
    row = summary_of(write_capture(tmp_path, "f", [step(0, 100, metrics)], args=FILTER_ARGS))["steps"][0]
    assert (row["reward"], row["raw_reward"], row["raw_reward_unfiltered"]) == (0.7, 0.5, 0.7)


def test_plain_run_reward_is_raw_reward(tmp_path):
    metrics = {"perf/rollout_time": 1.0, "rollout/raw_reward": 0.5}
    row = summary_of(write_capture(tmp_path, "p", [step(0, 100, metrics)], args=PLAIN_ARGS))["steps"][0]
    assert row["reward"] == 0.5


def test_filter_run_without_unfiltered_reward_derives_it_and_says_so_once(tmp_path):
    # B = 32 kept groups at 0.5, 10 dropped all right, 6 all wrong: (0.5 x 32 + 10) / 48
    metrics = {
        "perf/rollout_time": 1.0,
        "rollout/raw_reward": 0.5,
        "rollout/dynamic_filter/drop_zero_std_1": 10,
        "rollout/dynamic_filter/drop_zero_std_0": 6,
    }
    steps = [step(i, 100 * (i + 1), metrics) for i in range(3)]
    doc = summary_of(write_capture(tmp_path, "f", steps, args=FILTER_ARGS))
    assert [r["reward"] for r in doc["steps"]] == [26 / 48] * 3
    assert [r["reward_source"] for r in doc["steps"]] == ["derived"] * 3
    assert [r["raw_reward_unfiltered"] for r in doc["steps"]] == [None] * 3  # the printed key stays as printed
    assert doc["aggregates"]["reward_mean"] == 26 / 48
    assert doc["reward_source"] == "derived" and doc["reward_key"] == "rollout/raw_reward_unfiltered"
    assert sum("reward derived in every step with a reward (reward_source: derived)" in n for n in doc["notes"]) == 1
    assert not any("missing in steps" in n for n in doc["notes"])


def test_printed_and_derived_rewards_say_which_is_which(tmp_path):
    printed = {"perf/rollout_time": 1.0, "rollout/raw_reward": 0.5, "rollout/raw_reward_unfiltered": 0.6}
    derived = {"perf/rollout_time": 1.0, "rollout/raw_reward": 0.5}
    steps = [step(0, 100, printed), step(1, 200, derived)]
    doc = summary_of(write_capture(tmp_path, "f", steps, args=FILTER_ARGS))
    assert [(r["reward"], r["reward_source"]) for r in doc["steps"]] == [(0.6, "printed"), (0.5, "derived")]
    assert doc["reward_source"] == "printed and derived"
    assert any("reward derived in 1 step (reward_source: derived)" in n for n in doc["notes"])


def test_a_step_the_reward_cannot_be_derived_for_has_none_and_a_note_with_the_reason(tmp_path):
    aborted = {"perf/rollout_time": 1.0, "rollout/raw_reward": 0.5, "rollout/dynamic_filter/drop_group_has_aborted": 2}
    floats = {"perf/rollout_time": 1.0, "rollout/raw_reward": 0.5, "rollout/dynamic_filter/drop_zero_std_1.0": 3}
    steps = [step(0, 100, aborted), step(1, 200, floats)]
    doc = summary_of(write_capture(tmp_path, "f", steps, args=FILTER_ARGS))
    assert [(r["reward"], r["reward_source"]) for r in doc["steps"]] == [(None, None), (None, None)]
    notes = " | ".join(doc["notes"])
    assert "no reward in step 0: " in notes and "another reason than zero variance (group_has_aborted: 2)" in notes
    assert "no reward in step 1: " in notes and "rewards that are not integers" in notes
    assert doc["reward_source"] is None


def test_plain_run_rewards_are_printed(tmp_path):
    metrics = {"perf/rollout_time": 1.0, "rollout/raw_reward": 0.5}
    doc = summary_of(write_capture(tmp_path, "p", [step(0, 100, metrics)], args=PLAIN_ARGS))
    assert doc["steps"][0]["reward_source"] == "printed" and doc["reward_source"] == "printed"


# --------------------------------------------------------------------------- time rules


def test_simulated_run_converts_the_overlap_by_the_time_scale(tmp_path):
    # trainer says 100 s; at time_scale 0.01 that is 1 wall second ending at 10 s; a pause covers its last 0.25 s
    pauses = [{"start": at(9.75), "end": at(12), "reason": "sim", "peak_c": 86.0}]
    run = write_capture(
        tmp_path, "sim", [step(0, 10, {"perf/rollout_time": 100.0})], args=PLAIN_ARGS, pauses=pauses, time_scale=0.01
    )
    doc = summary_of(run)
    row = doc["steps"][0]
    assert (row["pause_overlap_s"], row["rollout_time_adjusted_s"], row["clean"]) == (25.0, 75.0, False)
    assert doc["aggregates"]["pause_total_s"] == pytest.approx(225.0)


def test_open_window_with_nothing_after_it_ends_at_the_run_end(tmp_path):
    pauses = [{"start": at(112), "end": None, "reason": "hot", "peak_c": 87.0}]  # after the step's end, at 110
    doc = summary_of(
        write_capture(
            tmp_path, "p", [step(0, 100, {"perf/rollout_time": 50.0})], args=PLAIN_ARGS, pauses=pauses, ended=at(130)
        )
    )
    assert doc["steps"][0]["pause_overlap_s"] == 0.0
    assert doc["aggregates"]["pause_total_s"] == 18.0
    assert any("never closed" in n and "the run's end" in n for n in doc["notes"])


def test_open_window_in_a_finished_run_ends_at_the_next_time_the_run_printed(tmp_path):
    pauses = [{"start": at(95), "end": None, "reason": "hot", "peak_c": 87.0}]
    doc = summary_of(
        write_capture(
            tmp_path, "p", [step(0, 100, {"perf/rollout_time": 50.0})], args=PLAIN_ARGS, pauses=pauses, ended=at(130)
        )
    )
    assert doc["steps"][0]["pause_overlap_s"] == 5.0
    assert doc["aggregates"]["pause_total_s"] == 5.0  # not 35: the rollout's perf line was printed at 100 s
    assert any("never closed" in n and "step 0's t_rollout_end" in n for n in doc["notes"])


def test_the_last_line_per_window_start_is_the_truth(tmp_path):
    pauses = [
        {"start": at(60), "end": None, "reason": "hot", "peak_c": 86.0},
        {"start": at(60), "end": at(70), "reason": "hot", "peak_c": 86.5},
    ]
    doc = summary_of(
        write_capture(tmp_path, "p", [step(0, 100, {"perf/rollout_time": 50.0})], args=PLAIN_ARGS, pauses=pauses)
    )
    assert doc["steps"][0]["pause_overlap_s"] == 10.0
    assert doc["aggregates"]["pause_total_s"] == 10.0


# --------------------------------------------------------------------------- aggregates


def test_incomplete_step_is_shown_but_left_out_of_medians_and_means(tmp_path):
    steps = [
        step(0, 100, {"perf/rollout_time": 10.0, "rollout/raw_reward": 0.2, "perf/step_time": 20.0}),
        step(1, 200, {"perf/rollout_time": 30.0, "rollout/raw_reward": 0.4, "perf/step_time": 40.0}),
        step(2, 300, {"perf/rollout_time": 1000.0, "rollout/raw_reward": 1.0}, complete=False),
    ]
    doc = summary_of(write_capture(tmp_path, "p", steps, args=PLAIN_ARGS, state="failed"))
    assert [r["complete"] for r in doc["steps"]] == [True, True, False]
    agg = doc["aggregates"]
    assert (agg["steps"], agg["incomplete_steps"]) == (2, 1)
    assert agg["rollout_time_adjusted_median_s"] == 20.0  # mean of the two middle values of [10, 30]
    assert agg["reward_mean"] == pytest.approx(0.3)
    assert agg["step_time_sum_s"] == 60.0
    assert doc["state"] == "failed"
    assert any(n.startswith("state failed") for n in doc["notes"])
    assert any("step 2 incomplete" in n for n in doc["notes"])


def test_reward_mean_first4_is_over_the_first_four_complete_steps(tmp_path):
    rewards = [0.1, 0.2, 0.3, 0.4, 0.9, 0.9]
    steps = [step(i, 100 * (i + 1), {"perf/rollout_time": 1.0, "rollout/raw_reward": r}) for i, r in enumerate(rewards)]
    agg = summary_of(write_capture(tmp_path, "p", steps, args=PLAIN_ARGS))["aggregates"]
    assert agg["reward_mean_first4"] == pytest.approx(0.25)
    assert agg["reward_mean"] == pytest.approx(sum(rewards) / 6)


def test_bad_lines_become_notes_and_the_other_lines_are_kept(tmp_path):
    run = write_capture(tmp_path, "p", [step(0, 100, {"perf/rollout_time": 1.0})], args=PLAIN_ARGS)
    with (run / "metrics.jsonl").open("a") as handle:
        handle.write("{not json\n")
        handle.write(json.dumps(step(1, 200, {"perf/rollout_time": 2.0})) + "\n")
    doc = summary_of(run)
    assert [r["step"] for r in doc["steps"]] == [0, 1]
    assert any("metrics.jsonl line 2" in n for n in doc["notes"])


def test_rows_are_sorted_by_step_and_a_repeated_step_keeps_the_last_line(tmp_path):
    steps = [
        step(1, 200, {"perf/rollout_time": 2.0}),
        step(0, 100, {"perf/rollout_time": 1.0}),
        step(1, 200, {"perf/rollout_time": 3.0}),
    ]
    doc = summary_of(write_capture(tmp_path, "p", steps, args=PLAIN_ARGS))
    assert [(r["step"], r["rollout_time_s"]) for r in doc["steps"]] == [(0, 1.0), (1, 3.0)]
    assert any("step 1 on lines 1 and 3" in n for n in doc["notes"])


def test_non_finite_values_are_null_never_nan(tmp_path):
    run = write_capture(tmp_path, "p", [], args=PLAIN_ARGS)
    (run / "metrics.jsonl").write_text(
        '{"step": 0, "complete": true, "t_rollout_end": "%s", "t_step_end": null, '
        '"metrics": {"perf/rollout_time": NaN, "rollout/raw_reward": Infinity}}\n' % at(100)
    )
    row = summary_of(run)["steps"][0]
    assert (row["rollout_time_s"], row["reward"], row["clean"]) == (None, None, None)


def test_a_run_listed_among_its_own_baselines_is_left_out_of_the_spread(tmp_path):
    from harness.summary.summarize import summarize

    compare = {"baseline": "base", "baselines": ["base", "mine"]}
    write_capture(
        tmp_path,
        "base",
        [step(0, 100, {"perf/rollout_time": 1.0, "rollout/raw_reward": 0.5})],
        args=PLAIN_ARGS,
        experiment={"name": "base", "seed": 1, "steps": 1, "compare": None},
    )
    write_capture(
        tmp_path,
        "mine",
        [step(0, 100, {"perf/rollout_time": 1.0, "rollout/raw_reward": 0.6})],
        args=PLAIN_ARGS,
        experiment={"name": "mine", "seed": 1, "steps": 1, "compare": compare},
    )
    (comparison,) = summarize(tmp_path).to_dict()["comparisons"]
    assert comparison["reward"]["baselines"] == {"base": 0.5}
    assert comparison["reward"]["above_all_baselines"] is True
    assert comparison["by_batches"] == {}
    assert any("without the filter" in n for n in comparison["notes"])


def test_values_the_parser_marked_non_finite_are_named_in_a_note(tmp_path):
    run = write_capture(tmp_path, "p", [], args=PLAIN_ARGS)
    line = step(0, 100, {"perf/rollout_time": None, "rollout/raw_reward": 0.5})
    line["non_finite"] = {"perf/rollout_time": "nan"}
    (run / "metrics.jsonl").write_text(json.dumps(line) + "\n")
    doc = summary_of(run)
    assert doc["steps"][0]["rollout_time_s"] is None
    assert "metrics.jsonl: perf/rollout_time (nan) in the log at step 0: read as null" in doc["notes"]


def test_keys_missing_from_args_json_come_from_the_trainer_argv(tmp_path):
    argv = ["python3", "train.py", "--over-sampling-batch-size", "40", "--dynamic-sampling-filter-path", "x.y"]
    doc = summary_of(
        write_capture(
            tmp_path,
            "f",
            [step(0, 100, {"perf/rollout_time": 1.0})],
            args={"rollout_batch_size": 32, "n_samples_per_prompt": 8},
            argv=argv,
        )
    )
    assert (doc["filter"], doc["over_sampling_batch_size"]) == (True, 40)
    assert doc["config_sources"]["rollout_batch_size"] == "args.json"
    assert "args.json has no filter, over_sampling_batch_size: read from the manifest's trainer_argv" in doc["notes"]
