"""`harness plan seeds` also gives the seeds an AdaStop design (harness decide) is expected to use, beside the
fixed design's: from the simulated table for the default design, simulated on the spot for another, and says so."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.stats.adaptive import expected_seeds, planned_seeds


def plan(*args: str) -> dict:
    done = CliRunner().invoke(app, ["plan", "seeds", *args, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_the_default_design_is_read_from_its_simulated_table_beside_the_fixed_design() -> None:
    easy, hard = plan("--effect", "0.04", "--sd", "0.02"), plan("--effect", "0.01", "--sd", "0.02")

    for document in (easy, hard):
        adaptive = document["adaptive"]
        assert adaptive["per_interim"] == 5 and adaptive["interims"] == 5 and adaptive["max_seeds"] == 25
        assert 5 <= adaptive["expected_seeds"] <= 25
        assert "simulated comparisons" in adaptive["source"] and adaptive["random_state"] == 20_210
    # a larger effect (2 SD against 0.5) needs fewer seeds, both ways, and the adaptive design fewer than the fixed
    assert easy["adaptive"]["expected_seeds"] < hard["adaptive"]["expected_seeds"]
    assert easy["seeds_needed"] < hard["seeds_needed"]
    assert easy["adaptive"]["expected_seeds"] < 25 and easy["adaptive"]["power"] > 0.9


def test_another_design_is_simulated_then_and_the_text_says_how() -> None:
    done = CliRunner().invoke(
        app, ["plan", "seeds", "--effect", "0.04", "--sd", "0.02", "--per-interim", "3", "--interims", "2"]
    )

    assert done.exit_code == 0, done.output
    text = " ".join(done.stdout.split())
    assert "AdaStop (harness decide, 3 seeds per interim, at most 2 interims, alpha 0.05): about" in text
    assert "by simulation with a fixed random state (20210): 200 comparisons simulated now" in text


def test_an_impossible_design_is_one_line() -> None:
    done = CliRunner().invoke(app, ["plan", "seeds", "--sd", "0.02", "--per-interim", "1"])
    assert done.exit_code == 2 and "--per-interim 1: at least 2 seeds" in done.output


@pytest.mark.integration
def test_the_table_agrees_with_a_fresh_simulation() -> None:
    table = planned_seeds(0.02, 0.02)  # effect / SD 1: a point of the table
    fresh = expected_seeds(0.02, 0.02, repetitions=200, random_state=7)

    assert abs(table.expected_seeds - fresh.expected_seeds) <= 4 * (table.standard_error + fresh.standard_error)
