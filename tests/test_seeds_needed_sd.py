"""One answer for "seeds needed": the plan, the report and the verdicts use one SD, and each names it.

The report's seeds needed pool the SD of both conditions' per-seed means;
`harness plan seeds --from-runs A B` must give that same number, one
condition must say whose SD it used, and a bare `harness plan seeds` uses
the documented default effect and says so.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.stats import seeds as seedstats
from harness.summary.publish import report_from_summary, summarize_to_files
from harness.summary.summarize import summarize
from support.seedcaptures import write_three_conditions

runner = CliRunner()


@pytest.fixture(scope="module")
def three_root(tmp_path_factory: pytest.TempPathFactory):
    root = write_three_conditions(tmp_path_factory.mktemp("seeds") / "captures")
    return root, summarize(root)


def plan(*args: str) -> dict:
    result = runner.invoke(app, ["plan", "seeds", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_two_conditions_give_the_report_s_pooled_sd_and_seeds_needed(three_root):
    root, document = three_root
    block = next(b for b in document.comparisons[0].across_seeds if b.baseline_conditions == ["plain"])

    result = plan("--effect", "0.02", "--from-runs", "e2b-dapo-filter", "plain", "--capture-dir", str(root))
    assert result["sd"] == block.pooled_sd
    assert result["seeds_needed"] == block.seeds_needed_for_effect
    assert "pooled" in result["sd_from"] and "e2b-dapo-filter" in result["sd_from"] and "plain" in result["sd_from"]
    either_way = plan("--effect", "0.02", "--from-runs", "plain", "e2b-dapo-filter", "--capture-dir", str(root))
    assert either_way["sd"] == block.pooled_sd and either_way["seeds_needed"] == block.seeds_needed_for_effect


def test_one_condition_says_whose_sd_it_used_and_that_the_report_pools_two(three_root):
    root, document = three_root
    spread = document.conditions["plain"].reward_mean

    result = plan("--effect", "0.02", "--from-runs", "plain", "--capture-dir", str(root))
    assert result["sd"] == spread.sd
    assert "plain alone" in result["sd_from"]
    text = one_line(
        runner.invoke(
            app, ["plan", "seeds", "--effect", "0.02", "--from-runs", "plain", "--capture-dir", str(root)]
        ).output
    )
    assert "SD of plain alone" in text and "pools the SD of both conditions" in text


def test_three_conditions_are_one_line_of_error(three_root):
    root, _ = three_root
    args = ["plan", "seeds", "--from-runs", "plain", "plain-48", "e2b-dapo-filter", "--capture-dir", str(root)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "one condition or two" in result.output and "Traceback" not in result.output
    assert result.output.count("\n") == 1


def test_without_effect_the_documented_default_is_used_and_said():
    result = plan("--sd", "0.015")
    assert result["effect"] == seedstats.DEFAULT_EFFECT and result["effect_from"] == "the default"
    text = one_line(runner.invoke(app, ["plan", "seeds", "--sd", "0.015"]).output)
    assert f"a difference of {seedstats.DEFAULT_EFFECT:g}" in text and "the default; --effect D for another" in text
    given = plan("--effect", "0.05", "--sd", "0.015")
    assert given["effect"] == 0.05 and given["effect_from"] == "given (--effect)"


def test_bare_plan_seeds_gives_each_comparison_of_the_captures_as_the_report_does(three_root):
    root, document = three_root
    blocks = [b for c in document.comparisons[:1] for b in c.across_seeds]

    result = plan("--capture-dir", str(root))
    assert result["effect"] == seedstats.DEFAULT_EFFECT and result["effect_from"] == "the default"
    got = {row["comparison"]: (row["sd"], row["seeds_needed"]) for row in result["comparisons"]}
    assert got == {
        "e2b-dapo-filter against plain": (blocks[0].pooled_sd, blocks[0].seeds_needed_for_effect),
        "e2b-dapo-filter against plain + plain-48 (pooled)": (blocks[1].pooled_sd, blocks[1].seeds_needed_for_effect),
    }
    text = one_line(runner.invoke(app, ["plan", "seeds", "--capture-dir", str(root)]).output)
    assert "pooled SD" in text and "the default; --effect D for another" in text


def test_bare_plan_seeds_without_comparisons_is_one_line(tmp_path):
    from support.seedcaptures import write_run

    write_run(tmp_path, "plain", 1, [0.6, 0.62])
    result = runner.invoke(app, ["plan", "seeds", "--capture-dir", str(tmp_path)])
    assert result.exit_code != 0 and "--sd X or --from-runs CONDITION [CONDITION]" in result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output


def test_every_seeds_needed_of_the_report_names_its_sd(tmp_path):
    from support.seedcaptures import write_run

    root = tmp_path / "captures"
    compare = {"baseline": "plain", "baselines": ["plain"]}
    for seed, rewards in {1: [0.60, 0.62], 2: [0.66, 0.70], 3: [0.63, 0.61]}.items():
        write_run(root, "plain", seed, rewards)
    for seed, rewards in {1: [0.62, 0.66], 2: [0.61, 0.69], 3: [0.68, 0.64]}.items():
        write_run(root, "tuned", seed, rewards, compare=compare)
    published = summarize_to_files(root, tmp_path / "summary" / "s.json")
    text = report_from_summary(published.summary_path).report.read_text()  # type: ignore[union-attr]
    table = [line for line in text.splitlines() if line.startswith("| comparison |")]
    assert table and "pooled SD" in table[0]
    (block,) = {b.condition + b.against: b for c in published.document.comparisons for b in c.across_seeds}.values()
    sd = f"pooled SD {block.pooled_sd:.3f} of both sides' seeds"
    assert block.seeds_needed is not None and "seeds each" in block.verdict
    assert sd in block.verdict and text.count(sd) >= 2  # the verdict and the figure's caption


def test_the_report_uses_baselines_for_one_thing_only(three_root, tmp_path):
    root, _ = three_root
    published = summarize_to_files(root, tmp_path / "summary" / "s.json", figures=False)
    text = report_from_summary(published.summary_path).report.read_text()  # type: ignore[union-attr]
    across = text.split("## Across seeds", 1)[1].split("\n## ", 1)[0]
    assert "baselines" not in across.replace("-vs-baselines.svg", "")  # the pool is of conditions (a file name aside)
    assert "plain + plain-48 (pooled)" in across
    assert "baselines (3 runs)" in text  # the compare block's baseline runs, as every run's verdict says
