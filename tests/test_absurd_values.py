"""Absurd values (issue 22, item 9): a reward the run's reward type cannot give is left out of the means with a
note; every number a verdict or a table prints has a sane width, whatever it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.cli import app
from harness.summary.report import render_report
from harness.summary.sanity import number_text
from harness.summary.summarize import summarize
from harness.summary.verdict import RewardFacts, reward_verdict

runner = CliRunner()


def write_run(
    root: Path, name: str, rewards: list[float], *, rm_type: str | None = None, compare: object = None
) -> None:
    run = root / name
    run.mkdir(parents=True)
    (run / "status.json").write_text(
        json.dumps({"run": name, "run_id": f"{name}-0", "state": "succeeded", "exit_code": 0, "steps_expected": 4})
    )
    manifest = {
        "run": name,
        "run_id": f"{name}-0",
        "time_scale": 1,
        "experiment": {"name": name, "seed": 1, "miles": {"args": {}}},
    }
    manifest["experiment"]["compare"] = compare
    (run / "manifest.json").write_text(json.dumps(manifest))
    args = {"rollout_batch_size": 32, "over_sampling_batch_size": None, "n_samples_per_prompt": 8}
    if rm_type is not None:
        args["rm_type"] = rm_type
    (run / "args.json").write_text(json.dumps(args))
    lines = [
        {
            "step": n,
            "complete": True,
            "t_rollout_end": f"2026-11-29T12:0{n}:00Z",
            "metrics": {"perf/rollout_time": 50.0, "rollout/raw_reward": r, "perf/step_time": 9.0},
        }
        for n, r in enumerate(rewards)
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_one_reward_of_1e308_under_rm_type_math_is_left_out_of_the_mean_with_a_note(tmp_path):
    write_run(tmp_path, "r", [0.5, 1e308, 0.25, 0.75])  # the base run's --rm-type math, read from the experiment
    run = summarize(tmp_path).to_dict()["runs"]["r"]
    assert run["aggregates"]["reward_mean"] == pytest.approx(0.5)
    assert [row["reward"] for row in run["steps"]] == [0.5, None, 0.25, 0.75]
    note = next(note for note in run["notes"] if "1e+308" in note)
    assert "rollout/raw_reward" in note and "step 1" in note and "--rm-type math" in note and "0 to 1" in note
    assert not any("missing" in note for note in run["notes"]), run["notes"]


@pytest.mark.parametrize("value", [-0.5, 1.5])
def test_a_math_reward_below_0_or_above_1_is_out_of_range(tmp_path, value):
    write_run(tmp_path, "r", [0.5, value, 0.5, 0.5], rm_type="math")
    run = summarize(tmp_path).to_dict()["runs"]["r"]
    assert run["aggregates"]["reward_mean"] == pytest.approx(0.5)
    assert any(repr(value) in note and "0 to 1" in note for note in run["notes"])


def test_another_reward_type_has_the_documented_plausible_range(tmp_path):
    write_run(tmp_path, "r", [-1.0, 5.0, 2000.0, 1.0], rm_type="remote_rm")
    run = summarize(tmp_path).to_dict()["runs"]["r"]
    assert run["aggregates"]["reward_mean"] == pytest.approx(5.0 / 3)
    note = next(note for note in run["notes"] if "2000.0" in note)
    assert "--rm-type remote_rm" in note and "-1000 to 1000" in note


@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(0, 3))
def test_a_number_is_shown_at_a_sane_width_whatever_it_is(value, digits):
    text = number_text(value, digits)
    assert len(text) <= 16
    if abs(value) < 1e307:  # beyond, rounding the mantissa up can pass the largest float
        assert float(text) == pytest.approx(value, rel=0.05, abs=10.0**-digits)


def test_a_verdict_with_a_mean_of_1e308_is_short():
    facts = RewardFacts(
        run="r", baseline="b", filter=False, run_mean=1e308, baseline_mean=-1.7e308, baselines={"b": -1.7e308}
    )
    verdict = reward_verdict(facts)
    assert "1.000e+308" in verdict and len(verdict) < 300


def test_tables_and_the_report_show_huge_numbers_at_a_sane_width(tmp_path):
    write_run(tmp_path, "r", [0.5, 0.5, 0.5, 0.5], rm_type="remote_rm")
    metrics = tmp_path / "r" / "metrics.jsonl"
    metrics.write_text(metrics.read_text().replace('"perf/rollout_time": 50.0', '"perf/rollout_time": 1e300'))
    document = summarize(tmp_path)
    assert document.runs["r"].aggregates.rollout_time_adjusted_median_s == 1e300
    report = render_report(document)
    assert "1.0e+300" in report and "0" * 50 not in report
    result = runner.invoke(app, ["summarize", "--capture-dir", str(tmp_path), "--no-figures"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "1.0e+300" in result.output and "0" * 50 not in result.output


def test_figure_captions_in_the_report_show_huge_numbers_at_a_sane_width(tmp_path):
    write_run(tmp_path, "b", [0.5, 0.5, 0.5, 0.5], rm_type="remote_rm")
    write_run(tmp_path, "r", [0.5, 0.5, 0.5, 0.5], rm_type="remote_rm", compare={"baseline": "b"})
    metrics = tmp_path / "b" / "metrics.jsonl"
    metrics.write_text(metrics.read_text().replace('"perf/rollout_time": 50.0', '"perf/rollout_time": 1e300'))
    report = render_report(summarize(tmp_path))
    assert "median 1.0e+300 s" in report and "0" * 50 not in report
