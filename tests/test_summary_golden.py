"""Hand-made captures against golden summaries, plus the hand-worked numbers asserted one by one.

The captures are in tests/data/captures/<case>/, the expected documents in
tests/data/golden/summary-<case>.json, and the arithmetic behind every
number in tests/data/captures/README.md. `REGEN_GOLDEN=1 pytest
tests/test_summary_golden.py` rewrites the golden files and fails on purpose:
read the diff, then run again without it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from harness.summary.serialize import dumps_summary
from harness.summary.summarize import summarize
from support.machine import regenerate_golden
from support.summaries import summary_schema_validator

DATA = Path(__file__).resolve().parent / "data"
CASES = ["lab", "edge"]
VOLATILE = ("generated_at", "harness_version")


def produced(case: str) -> dict:
    document = summarize(DATA / "captures" / case)
    return json.loads(dumps_summary(document))  # exactly what is written


def stable(document: dict) -> dict:
    return {k: v for k, v in document.items() if k not in VOLATILE}


@pytest.fixture(scope="module")
def schema_validator() -> Any:
    return summary_schema_validator()


@pytest.mark.parametrize("case", CASES)
def test_summary_matches_the_golden_file(case):
    golden = DATA / "golden" / f"summary-{case}.json"
    document = stable(produced(case))
    if regenerate_golden():  # the writer's own layout, without the keys that change from run to run
        text = dumps_summary(summarize(DATA / "captures" / case)).decode()
        golden.write_text(
            "".join(
                line
                for line in text.splitlines(keepends=True)
                if not line.startswith(tuple(f'  "{key}": ' for key in VOLATILE))
            )
        )
        pytest.fail(f"regenerated {golden.name}: check the diff, then rerun without REGEN_GOLDEN")
    assert document == json.loads(golden.read_text())


@pytest.mark.parametrize("case", CASES)
def test_summary_is_valid_against_the_schema(case, schema_validator):
    schema_validator.validate(produced(case))


def test_schema_rejects_a_missing_contract_key_and_a_bad_state(schema_validator):
    document = produced("lab")
    broken = json.loads(json.dumps(document))
    del broken["runs"]["plain"]["steps"][0]["pause_overlap_s"]
    with pytest.raises(jsonschema.ValidationError):
        schema_validator.validate(broken)
    broken = json.loads(json.dumps(document))
    broken["runs"]["plain"]["state"] = "done"
    with pytest.raises(jsonschema.ValidationError):
        schema_validator.validate(broken)


# ---------------------------------------------------------------- the hand-worked numbers (README.md)


@pytest.fixture(scope="module")
def lab_summary() -> dict:
    return produced("lab")


@pytest.fixture(scope="module")
def edge() -> dict:
    return produced("edge")


def column(run: dict, key: str) -> list:
    return [row[key] for row in run["steps"]]


def test_lab_plain_window_cutting_a_rollout_and_touching_windows(lab_summary):
    plain = lab_summary["runs"]["plain"]
    assert column(plain, "pause_overlap_s") == [0.0, 10.0, 0.0, 0.0]
    assert column(plain, "rollout_time_adjusted_s") == [60.0, 50.0, 62.0, 56.0]
    assert column(plain, "clean") == [True, False, True, True]
    agg = plain["aggregates"]
    assert agg["rollout_time_adjusted_median_s"] == 58.0
    assert (agg["clean_steps"], agg["rollout_time_clean_median_s"]) == (3, 60.0)
    assert agg["pause_total_s"] == 84.0
    assert agg["step_time_sum_s"] == 410.0
    assert agg["reward_mean"] == pytest.approx(0.655, abs=1e-15)
    assert column(plain, "zero_std_all_right") == [12, 14, 10, 13]
    assert column(plain, "zero_std_all_wrong") == [3, 2, 4, 0]
    assert plain["over_sampling_batch_size"] == 32  # 'None' in args.json: Miles's default, B


def test_lab_filter_run_two_windows_overlapping_windows_open_window(lab_summary):
    run = lab_summary["runs"]["e2b-dapo-filter"]
    assert column(run, "pause_overlap_s") == [20.5, 70.0, 0.0, 20.0]
    assert column(run, "rollout_time_adjusted_s") == [68.2, 90.0, 150.0, 70.0]
    assert column(run, "dropped_groups") == [16, 36, 17, 16]
    assert column(run, "dropped_all_right") == [12, 30, 17, 10]
    assert column(run, "dropped_all_wrong") == [4, 6, 0, 6]
    assert column(run, "batches") == [1, 2, 2, 1]
    assert column(run, "reward") == [0.70, 0.72, 0.66, 0.74]
    agg = run["aggregates"]
    assert agg["rollout_time_adjusted_median_s"] == 80.0
    assert (agg["dropped_groups_min"], agg["dropped_groups_median"], agg["dropped_groups_max"]) == (16, 16.5, 36)
    # the open window [980, ...] ends at step 3's t_rollout_end, T+1000: the run printed it, so it was not frozen
    assert agg["pause_total_s"] == 110.5
    assert agg["step_time_sum_s"] == 645.0
    assert agg["reward_mean"] == pytest.approx(0.705, abs=1e-15)


def test_lab_comparison_by_batches_and_the_baseline_spread(lab_summary):
    (comparison,) = lab_summary["comparisons"]
    assert (comparison["run"], comparison["baseline"]) == ("e2b-dapo-filter", "plain")
    assert comparison["by_batches"] == {
        "1": {"steps": 2, "rollout_time_adjusted_median_s": 69.1, "ratio": 69.1 / 58.0},
        "2": {"steps": 2, "rollout_time_adjusted_median_s": 120.0, "ratio": 120.0 / 58.0},
    }
    reward = comparison["reward"]
    assert set(reward["baselines"]) == {"e6a-base", "plain", "plain-48", "plain-48-s2"}
    assert reward["baselines_missing"] == ["plain-48-s3"]
    assert (reward["spread_min"], reward["spread_max"]) == (pytest.approx(0.64), pytest.approx(0.66))
    assert reward["above_all_baselines"] is True
    assert (reward["steps_higher"], reward["steps_compared"]) == (3, 4)
    assert reward["verdict"] == (
        "0.705 with the filter against 0.655 for plain; above every baseline found (0.640 to 0.660; no capture of "
        "plain-48-s3), higher in 3 of 4 steps; but one seed of 4 steps, and the reward counted before the filter "
        "leans high (aborted slow answers are not in it), so this is not evidence of learning: run a second seed."
    )


def test_lab_skips_summary_dir_and_files(lab_summary):
    assert sorted(lab_summary["runs"]) == ["e2b-dapo-filter", "e6a-base", "plain", "plain-48", "plain-48-s2"]
    assert lab_summary["skipped"] == []


def test_edge_failed_old_filter_run(edge):
    run = edge["runs"]["old-filter"]
    assert run["state"] == "failed"
    assert (run["filter"], run["rollout_batch_size"], run["over_sampling_batch_size"], run["n_samples_per_prompt"]) == (
        True,
        8,
        12,
        4,
    )
    assert column(run, "complete") == [True, True, False]
    assert column(run, "batches") == [1, 2, 1]
    assert column(run, "dropped_other") == [0, 1, 0]
    # step 0's drop keys are floats (`_1.0`): not derivable; step 1 dropped a group for another reason;
    # step 2 (incomplete) dropped 2 all wrong: (0.55 x 8 + 0) / (8 + 2)
    assert column(run, "reward")[:2] == [None, None] and column(run, "reward")[2] == pytest.approx(0.44)
    assert column(run, "reward_source") == [None, None, "derived"]
    agg = run["aggregates"]
    assert (agg["steps"], agg["incomplete_steps"], agg["rollout_time_adjusted_median_s"]) == (2, 1, 50.0)
    assert (agg["dropped_groups_min"], agg["dropped_groups_median"], agg["dropped_groups_max"]) == (4, 5.0, 6)
    assert agg["step_time_sum_s"] == 150.0
    notes = " | ".join(run["notes"])
    for expected in (
        "metrics.jsonl line 2",
        "state failed",
        "trainer_argv",
        "no reward in step 0: rollout/raw_reward_unfiltered not printed and not derivable: rewards that are not",
        "no reward in step 1: rollout/raw_reward_unfiltered not printed and not derivable: groups dropped for",
        "reward derived in every step with a reward",
        "step 2 incomplete",
        "2 complete steps of 5 expected",
        "ends before it starts",
    ):
        assert expected in notes


def test_edge_simulated_run_with_nanosecond_times(edge):
    run = edge["runs"]["tiny-plain"]
    assert run["time_scale"] == 0.01
    assert column(run, "pause_overlap_s") == [50.0, 0.0, 40.0]
    assert column(run, "rollout_time_adjusted_s") == [50.0, 80.0, 50.0]
    assert run["aggregates"]["pause_total_s"] == pytest.approx(137.6544, abs=1e-9)
    assert column(run, "step_time_s") == [120.0, 130.0, 140.0]  # step 2 from perf/total_train_time


def test_edge_running_run_unknown_state_and_skipped_directory(edge):
    running = edge["runs"]["running"]
    assert running["steps"][0]["pause_overlap_s"] == 40.0  # open window counted to the last time in the capture
    assert running["aggregates"]["pause_total_s"] == 60.0
    assert edge["runs"]["garbled"]["state"] == "unknown"
    assert edge["skipped"] == [{"directory": "no-status", "reason": "no status.json, so not a run"}]


def test_edge_comparison_without_a_comparable_reward(edge):
    (comparison,) = edge["comparisons"]
    assert comparison["by_batches"]["1"]["ratio"] == 0.8 and comparison["by_batches"]["2"]["ratio"] == 1.2
    assert comparison["reward"]["run_mean"] is None
    assert comparison["reward"]["above_all_baselines"] is None
    assert comparison["reward"]["verdict"] == "No reward verdict: old-filter has no reward in any complete step."
