"""`harness plan seeds`: how many seeds a difference in reward needs, by the function the summary uses."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.stats import seeds as seedstats
from harness.summary.summarize import summarize
from support.seedcaptures import seeds_for_power, write_three_conditions

runner = CliRunner()


def plan(*args: str) -> dict:
    result = runner.invoke(app, ["plan", "seeds", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_seeds_for_an_effect_and_a_given_spread_with_a_table_of_power():
    result = plan("--effect", "0.02", "--sd", "0.015")

    assert result["seeds_needed"] == seeds_for_power(0.02, 0.015) == 10
    assert (result["alpha"], result["power"], result["sd_from"]) == (0.05, 0.8, "given (--sd)")
    table = {row["seeds"]: row["power"] for row in result["table"]}
    assert table[10] >= 0.8 > table[8] and list(table) == sorted(table)
    text = runner.invoke(app, ["plan", "seeds", "--effect", "0.02", "--sd", "0.015"]).output
    assert "needed: 10 seeds per condition" in text and "<- needed" in text


def test_from_runs_takes_the_spread_of_a_condition_s_seeds_as_the_summary_pools_them(tmp_path):
    root = write_three_conditions(tmp_path / "captures")
    document = summarize(root)
    spread = document.conditions["plain-48"].reward_mean

    result = plan("--effect", "0.02", "--from-runs", "plain-48", "--capture-dir", str(root))
    assert result["sd"] == spread.sd
    assert result["sd_from"].startswith("SD of plain-48 alone, its 5 seeds over steps 0-5")
    assert result["seeds_needed"] == seedstats.seeds_needed(0.02, spread.sd).seeds == seeds_for_power(0.02, spread.sd)
    by_run = plan("--effect", "0.02", "--from-runs", "plain-48-s3", "--capture-dir", str(root))
    assert by_run["sd"] == spread.sd and "(the condition of run plain-48-s3)" in by_run["sd_from"]


def test_its_numbers_are_the_summary_s(tmp_path):
    document = summarize(write_three_conditions(tmp_path / "captures"))
    block = document.comparisons[0].across_seeds[0]

    result = plan("--effect", "0.02", "--sd", repr(block.pooled_sd))
    assert result["seeds_needed"] == block.seeds_needed_for_effect


@pytest.mark.parametrize(
    "args, said",
    [
        (["--effect", "0.02", "--sd", "0.01", "--from-runs", "plain"], "give either --sd X or --from-runs"),
        (["--effect", "0", "--sd", "0.01"], "--effect must be a difference above 0"),
        (["--effect", "nan", "--sd", "0.01"], "--effect must be a difference above 0"),
        (["--effect", "0.02", "--sd", "-1"], "must be 0 or more"),
    ],
)
def test_bad_input_is_one_line(args, said):
    result = runner.invoke(app, ["plan", "seeds", *args])
    assert result.exit_code != 0 and said in result.output and "Traceback" not in result.output
    assert result.output.count("\n") == 1


def test_a_condition_without_a_spread_or_unknown_is_one_line(tmp_path):
    from support.seedcaptures import write_run

    root = write_three_conditions(tmp_path / "captures")
    write_run(root, "e6a-base", 1, [0.6, 0.62])
    alone = runner.invoke(
        app, ["plan", "seeds", "--effect", "0.02", "--from-runs", "e6a-base", "--capture-dir", str(root)]
    )
    assert alone.exit_code != 0
    assert "e6a-base has 1 seed with a reward: no spread across seeds to plan from" in alone.output
    unknown = runner.invoke(
        app, ["plan", "seeds", "--effect", "0.02", "--from-runs", "nope", "--capture-dir", str(root)]
    )
    assert unknown.exit_code != 0 and "no condition or run nope under" in unknown.output
    assert "(conditions: e2b-dapo-filter, e6a-base, plain, plain-48)" in unknown.output


def test_a_spread_of_zero_says_why_there_is_no_number():
    result = plan("--effect", "0.02", "--sd", "0")
    assert result["seeds_needed"] is None and "do not vary" in result["why"] and result["table"] == []


def test_plan_without_seeds_is_still_the_over_sampling_plan_and_its_help_names_both():
    over = runner.invoke(app, ["plan", "--drop-rate", "0.5", "--rollout-batch-size", "32", "--json"])
    assert over.exit_code == 0 and json.loads(over.output)["recommended_over_sampling_batch_size"] == 75
    assert "harness plan seeds --help" in " ".join(runner.invoke(app, ["plan", "--help"]).output.split())
    seeds_help = " ".join(runner.invoke(app, ["plan", "seeds", "--help"]).output.split())
    assert "--effect" in seeds_help and "--from-runs CONDITION" in seeds_help and "80% power" in seeds_help
