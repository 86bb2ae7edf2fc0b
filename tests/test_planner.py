"""The over-sampling planner against exact binomial sums computed here, independently."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import HarnessError
from harness.stats import oversampling as planner

DATA = Path(__file__).resolve().parent / "data" / "captures"
runner = CliRunner()


def exact_p_below(n: int, b: int, k: float) -> Fraction:
    """P(Binomial(n, k) < b) in exact rational arithmetic from math.comb (one integer sum over k's denominator)."""
    kf = Fraction(k)
    a, d = kf.numerator, kf.denominator
    return Fraction(sum(math.comb(n, j) * a**j * (d - a) ** (n - j) for j in range(min(b, n + 1))), d**n)


def exact_p_at_least(n: int, b: int, k: float) -> Fraction:
    """P(Binomial(n, k) >= b), exactly."""
    return 1 - exact_p_below(n, b, k)


def exact_expected_batches(o: int, b: int, k: float, terms: int = 60) -> float:
    """1 + sum_{m>=1} P(Binomial(mO, k) < B), exact terms, summed until they vanish."""
    total = Fraction(1)
    for m in range(1, terms):
        term = exact_p_below(m * o, b, k)
        total += term
        if m * o * k > b and term < Fraction(1, 10**18):
            break
    return float(total)


@pytest.mark.parametrize(
    "o, b, k",
    [
        (4, 4, 0.5),
        (12, 4, 0.5),
        (48, 32, 0.5),
        (48, 32, 0.75),
        (75, 32, 0.5),
        (61, 32, 0.601),
        (40, 32, 0.9),
        (100, 10, 0.2),
    ],
)
def test_p_one_batch_is_the_binomial_tail(o, b, k):
    assert planner.p_one_batch(o, b, k) == pytest.approx(float(exact_p_at_least(o, b, k)), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("o, b, k", [(4, 4, 0.5), (12, 4, 0.5), (48, 32, 0.5), (32, 32, 0.5), (48, 32, 0.75)])
def test_expected_batches_is_the_series_of_binomial_lower_tails(o, b, k):
    assert planner.expected_batches(o, b, k) == pytest.approx(exact_expected_batches(o, b, k), rel=1e-12)


def test_small_case_by_hand():
    # B = 1, O = 2, k = 1/2: one batch unless both groups are dropped: 3/4.
    assert planner.p_one_batch(2, 1, 0.5) == 0.75
    # batches = ceil((1 + D) / 2), D geometric: P(D = d) = 2^-(d+1); E = sum_m P(D > 2m - 1) = 1 + 1/4 + 1/16 + ...
    assert planner.expected_batches(2, 1, 0.5) == pytest.approx(4 / 3, rel=1e-14)


def test_keep_rate_one_always_needs_one_batch():
    assert planner.p_one_batch(32, 32, 1.0) == 1.0
    assert planner.expected_batches(32, 32, 1.0) == 1.0


def test_recommendation_is_the_smallest_o_reaching_the_target():
    plan = planner.plan(32, 0.5, 0.9)
    exact = {o: float(exact_p_at_least(o, 32, 0.5)) for o in range(32, 90)}
    smallest = min(o for o, p in exact.items() if p >= 0.9)
    assert plan.recommended == smallest == 75
    assert [c.over_sampling_batch_size for c in plan.candidates] == list(range(32, 76))
    assert plan.candidates[-2].p_one_batch < 0.9 <= plan.candidates[-1].p_one_batch


@pytest.mark.parametrize("b, k, exact_up_to", [(32, 0.3, 200), (8, 0.1, 200), (32, 0.02, 0)])
def test_every_candidate_carries_the_exact_figures(b, k, exact_up_to):
    plan = planner.plan(b, k, 0.9)
    by_o = {c.over_sampling_batch_size: c for c in plan.candidates}
    assert list(by_o) == list(range(b, plan.recommended + 1))
    assert by_o[plan.recommended - 1].p_one_batch < 0.9 <= by_o[plan.recommended].p_one_batch
    for o in sorted({b, b + 1, (b + plan.recommended) // 2, plan.recommended - 1, plan.recommended}):
        exact = exact_p_at_least(o, b, k) if o <= exact_up_to else Fraction(planner.p_one_batch(o, b, k))
        assert by_o[o].p_one_batch == pytest.approx(float(exact), rel=1e-12, abs=1e-300)
        if o <= exact_up_to:
            assert by_o[o].expected_batches == pytest.approx(exact_expected_batches(o, b, k, terms=400), rel=1e-12)


def test_a_drop_rate_too_high_for_the_limit_says_so_with_the_best_size_and_its_probability():
    limit = 32 * planner.MAX_OVER_SAMPLING_FACTOR
    best = planner.p_one_batch(limit, 32, 0.01)

    with pytest.raises(HarnessError) as refused:
        planner.plan(32, 0.01, 0.9)

    assert f"the best is --over-sampling-batch-size {limit}, with P(one batch) {best:.3g}" in refused.value.message
    assert best == pytest.approx(float(exact_p_at_least(limit, 32, 0.01)), rel=1e-12)


def test_plan_refuses_impossible_inputs():
    with pytest.raises(HarnessError):
        planner.plan(32, 0.0)
    with pytest.raises(HarnessError):
        planner.plan(32, 0.5, target=1.0)
    with pytest.raises(HarnessError):
        planner.expected_batches(16, 32, 0.5)  # O below B


def test_monte_carlo_of_the_rollout_rule_agrees_with_the_formula():
    sim = planner.simulate(48, 32, 0.5, trials=20_000, seed=7)
    p = planner.p_one_batch(48, 32, 0.5)
    e = planner.expected_batches(48, 32, 0.5)
    # within 5 standard errors of the binomial figures
    assert abs(sim.p_one_batch - p) < 5 * math.sqrt(p * (1 - p) / sim.trials)
    assert abs(sim.mean_batches - e) < 0.03
    assert planner.simulate(48, 32, 0.5, trials=2_000, seed=7) == planner.simulate(48, 32, 0.5, trials=2_000, seed=7)


def test_keep_rate_from_a_filter_run_and_from_plain_runs():
    from harness.summary.summarize import summarize

    runs = summarize(DATA / "lab").to_dict()["runs"]
    measured = planner.keep_rate_from_runs({"e2b-dapo-filter": runs["e2b-dapo-filter"]})
    # kept 4 x 32 = 128 of 128 + (16 + 36 + 17 + 16) = 213 judged
    assert (measured.kept, measured.judged, measured.steps) == (128, 213, 4)
    assert measured.keep_rate == 128 / 213
    assert (measured.step_keep_min, measured.step_keep_max) == (32 / 68, 32 / 48)
    plain = planner.keep_rate_from_runs({"plain": runs["plain"]})
    # zero-variance groups among the 32 kept: 15, 16, 14, 13 -> 128 - 58 = 70 would have been kept
    assert (plain.kept, plain.judged) == (70, 128)


# --------------------------------------------------------------------------- the command


def test_plan_json_has_exactly_the_contract_shape():
    result = runner.invoke(app, ["plan", "--drop-rate", "0.5", "--rollout-batch-size", "4", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert set(document) == {"recommended_over_sampling_batch_size", "keep_rate", "candidates"}
    assert document["keep_rate"] == 0.5
    assert document["recommended_over_sampling_batch_size"] == 12
    for candidate in document["candidates"]:
        assert set(candidate) == {"over_sampling_batch_size", "p_one_batch", "expected_batches"}
        o = candidate["over_sampling_batch_size"]
        assert candidate["p_one_batch"] == pytest.approx(float(exact_p_at_least(o, 4, 0.5)), rel=1e-12)
    assert [c["over_sampling_batch_size"] for c in document["candidates"]] == list(range(4, 13))


def test_plan_from_run_takes_the_keep_rate_and_b_from_the_capture():
    result = runner.invoke(app, ["plan", "--from-run", "e2b-dapo-filter", "--capture-dir", str(DATA / "lab"), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["keep_rate"] == 128 / 213
    assert document["measured"]["steps"] == 4
    assert document["candidates"][0]["over_sampling_batch_size"] == 32
    assert document["recommended_over_sampling_batch_size"] == 70  # the per-step mixture (61 for the pooled rate)


def test_plan_table_shows_the_spread_and_the_recommendation():
    result = runner.invoke(app, ["plan", "--from-run", "e2b-dapo-filter", "plain", "--capture-dir", str(DATA / "lab")])
    assert result.exit_code == 0, result.output
    assert "per step 0.471 to 0.667" in result.output
    assert "recommended: --over-sampling-batch-size" in result.output
    assert "E[batches]" in result.output


def test_plan_simulate_reports_the_monte_carlo_beside_the_figures():
    result = runner.invoke(
        app, ["plan", "--drop-rate", "0.5", "--rollout-batch-size", "8", "--simulate", "--trials", "2000", "--json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    recommended = document["recommended_over_sampling_batch_size"]
    assert [s["over_sampling_batch_size"] for s in document["simulated"]] == [recommended - 1, recommended]
    assert all(s["trials"] == 2000 for s in document["simulated"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["plan", "--rollout-batch-size", "32"], "either --drop-rate"),
        (["plan", "--drop-rate", "0.5", "--from-run", "x", "--rollout-batch-size", "32"], "either --drop-rate"),
        (["plan", "--drop-rate", "0.5"], "--rollout-batch-size is needed"),
        (["plan", "--drop-rate", "1", "--rollout-batch-size", "32"], "keep rate"),
        (["plan", "--from-run", "nope", "--capture-dir", str(DATA / "lab")], "no capture of nope"),
    ],
)
def test_plan_errors_are_one_line(args, message):
    result = runner.invoke(app, args)
    assert result.exit_code != 0
    assert message in result.output
    assert "Traceback" not in result.output


# --------------------------------------------------------------------------- the per-step mixture


def exact_mixture_p_one_batch(o: int, b: int, rates: list[Fraction]) -> Fraction:
    """(1/N) sum_i P(Binomial(O, k_i) >= B), in exact rational arithmetic."""
    total = Fraction(0)
    for k in rates:
        a, d = k.numerator, k.denominator
        below = Fraction(sum(math.comb(o, j) * a**j * (d - a) ** (o - j) for j in range(b)), d**o)
        total += 1 - below
    return total / len(rates)


def test_plan_from_a_run_uses_the_mixture_of_its_steps_keep_rates_exactly():
    # e2b-dapo-filter (tests/data/captures/README.md): B = 32, dropped 16, 36, 17, 16 -> k_i = 32/48, 32/68, 32/49, 32/48
    rates = [Fraction(32, 48), Fraction(32, 68), Fraction(32, 49), Fraction(32, 48)]
    result = runner.invoke(app, ["plan", "--from-run", "e2b-dapo-filter", "--capture-dir", str(DATA / "lab"), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["keep_rate"] == 128 / 213  # still the pooled rate, as the contract names it
    assert document["measured"]["model"] == "per-step mixture"
    assert document["measured"]["step_keep_rates"] == [float(k) for k in rates]
    by_o = {c["over_sampling_batch_size"]: c for c in document["candidates"]}
    for o in (32, 48, 60, 61, 70, document["recommended_over_sampling_batch_size"]):
        if o in by_o:
            assert by_o[o]["p_one_batch"] == pytest.approx(float(exact_mixture_p_one_batch(o, 32, rates)), rel=1e-12)
    exact = {o: exact_mixture_p_one_batch(o, 32, rates) for o in range(32, 200)}
    recommended = min(o for o, p in exact.items() if p >= Fraction(9, 10))
    assert document["recommended_over_sampling_batch_size"] == recommended
    # the hard step (k = 32/68) needs far more prompts than the pooled rate suggests
    assert recommended > 61 == planner.plan(32, 128 / 213, 0.9).recommended
    # E[batches] is the mean of the per-step expectations
    o = recommended
    assert by_o[o]["expected_batches"] == pytest.approx(
        sum(exact_expected_batches(o, 32, float(k), terms=400) for k in rates) / 4, rel=1e-12
    )


def test_the_pooled_rate_understates_one_batch_steps_the_mixture_does_not():
    # 3 of 12 steps kept every group judged in one batch (k = 1), 9 steps kept half: pooled k = 0.6 or so
    measured = planner.Measured(
        keep_rate=0.6,
        kept=0,
        judged=0,
        steps=12,
        step_keep_min=0.5,
        step_keep_max=1.0,
        runs={},
        step_keep_rates=(1.0,) * 3 + (0.5,) * 9,
    )
    mixture = planner.plan_from_steps(32, measured, 0.9)
    at_32 = mixture.candidates[0]
    assert at_32.over_sampling_batch_size == 32
    assert at_32.p_one_batch == pytest.approx((3 * 1.0 + 9 * float(exact_p_at_least(32, 32, 0.5))) / 12, rel=1e-12)
    assert at_32.p_one_batch >= 0.25 > planner.p_one_batch(32, 32, 0.6)


def test_monte_carlo_of_the_mixture_agrees_with_it():
    rates = (32 / 48, 32 / 68, 32 / 49, 32 / 48)
    measured = planner.Measured(0.6, 0, 0, 4, min(rates), max(rates), {}, step_keep_rates=rates)
    candidate = planner.plan_from_steps(32, measured, 0.9).candidates[-1]
    sim = planner.simulate(candidate.over_sampling_batch_size, 32, 0.6, trials=20_000, seed=3, step_keep_rates=rates)
    p = candidate.p_one_batch
    assert abs(sim.p_one_batch - p) < 5 * math.sqrt(p * (1 - p) / sim.trials)


def test_monte_carlo_is_the_option_name_and_simulate_a_hidden_alias():
    help_text = runner.invoke(app, ["plan", "--help"]).output
    assert "--monte-carlo" in help_text and "--simulate" not in help_text
    assert "mean over i of P(Binomial(O, k_i) >= B)" in " ".join(help_text.split())
    for flag in ("--monte-carlo", "--simulate"):
        result = runner.invoke(
            app, ["plan", "--drop-rate", "0.5", "--rollout-batch-size", "8", flag, "--trials", "500", "--json"]
        )
        assert result.exit_code == 0, result.output
        assert len(json.loads(result.output)["simulated"]) == 2


def test_plan_sim_reads_the_simulators_capture_root(tmp_path, monkeypatch):
    import shutil

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HARNESS_CAPTURE_DIR", raising=False)
    shutil.copytree(DATA / "lab" / "e2b-dapo-filter", tmp_path / "capture" / "sim" / "e2b-dapo-filter")
    result = runner.invoke(app, ["plan", "--from-run", "e2b-dapo-filter", "--sim", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["measured"]["steps"] == 4
    result = runner.invoke(app, ["plan", "--from-run", "e2b-dapo-filter", "--json"])
    assert (
        result.exit_code != 0
        and "no capture of e2b-dapo-filter under capture/gpu; capture/sim has 1 simulated run: add --sim"
        in result.output
    )


def test_plan_from_a_filter_run_checks_the_model_against_its_one_batch_steps():
    # e2b-dapo-filter at O = 48: batches 1, 2, 2, 1 -> 2 of 4 steps needed one batch
    rates = [Fraction(32, 48), Fraction(32, 68), Fraction(32, 49), Fraction(32, 48)]
    result = runner.invoke(app, ["plan", "--from-run", "e2b-dapo-filter", "--capture-dir", str(DATA / "lab"), "--json"])
    (check,) = json.loads(result.output)["measured"]["one_batch_observed"]
    assert (check["over_sampling_batch_size"], check["steps"], check["one_batch_steps"]) == (48, 4, 2)
    assert check["p_one_batch"] == pytest.approx(float(exact_mixture_p_one_batch(48, 32, rates)), rel=1e-12)
    table = runner.invoke(app, ["plan", "--from-run", "e2b-dapo-filter", "--capture-dir", str(DATA / "lab")]).output
    assert (
        f"at O = 48: 2 of 4 filter steps needed one batch; the model says P(one batch) {check['p_one_batch']:.4f}"
        in " ".join(table.split())
    )
