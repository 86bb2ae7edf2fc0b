"""The simulator's rollout keeps Miles's invariants, over many seeds and batch shapes."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest

from harness.lab.milesnames import FILTER_PATH, FILTER_PATH_PUBLIC
from harness.sim.clock import SimulatedClock, Stopped
from harness.sim.config import MilesRefusal, UnfillableBatch, parse_argv
from harness.sim.engine import GenerationEngine
from harness.sim.model import Policy, PromptSource
from harness.sim.params import DEFAULT_PARAMS
from harness.sim.rollout import RolloutStarved, run_rollout
from harness.sim.trainer import StepLog, simulate

FILTER = ["--dynamic-sampling-filter-path", FILTER_PATH]
SEEDS = range(1, 13)
# (batch, over-sampling, samples): the lab's shapes, a tiny one, and an over-sampling that is no multiple of B.
SHAPES = [(32, 48, 8), (32, 32, 8), (4, 6, 4), (16, 40, 8)]


def run(seed: int, batch: int, over: int, samples: int, *extra: str, steps: int = 4) -> list[StepLog]:
    argv = [
        "--rollout-batch-size",
        str(batch),
        "--over-sampling-batch-size",
        str(over),
        "--n-samples-per-prompt",
        str(samples),
        "--num-rollout",
        str(steps),
        "--seed",
        str(seed),
        "--rollout-seed",
        str(seed),
        *extra,
    ]
    return simulate(argv)


Shape = tuple[int, int, int]
FilterRuns = list[tuple[Shape, StepLog]]


@pytest.fixture(scope="module")
def filter_runs() -> dict[tuple[Shape, int], list[StepLog]]:
    """Every shape x seed with the filter on: (shape, seed) -> its step logs."""
    return {(shape, seed): run(seed, *shape, *FILTER) for shape in SHAPES for seed in SEEDS}


@pytest.fixture(scope="module")
def filter_steps(filter_runs: dict[tuple[Shape, int], list[StepLog]]) -> FilterRuns:
    """Every shape x seed with the filter on: ((B, O, n), step log) for each step."""
    return [(shape, log) for (shape, _), logs in filter_runs.items() for log in logs]


def test_every_step_keeps_exactly_the_batch_size(filter_steps: FilterRuns) -> None:
    for (batch, _, _), log in filter_steps:
        assert len(log.result.kept) == batch, (batch, log.step)
        assert len({id(group) for group in log.result.kept}) == batch


def test_prompts_are_submitted_in_whole_over_sampling_batches(filter_steps: FilterRuns) -> None:
    for (_, over, _), log in filter_steps:
        counts = [count for _, count in log.result.submissions]
        assert counts and all(count == over for count in counts)
        assert log.result.prompts_submitted % over == 0


def test_a_batch_is_submitted_only_when_kept_plus_running_fell_below_b(filter_steps: FilterRuns) -> None:
    for (batch, over, _), log in filter_steps:
        # Each batch after the first was needed: the drops before it pushed kept + running below B.
        batches_needed = 1
        while batches_needed * over - log.result.dropped_total < batch:
            batches_needed += 1
        assert log.result.batches == batches_needed, (batch, over, log.result.dropped_total)


def test_dropped_is_judged_minus_kept_and_the_drop_keys_say_so(filter_steps: FilterRuns) -> None:
    for _, log in filter_steps:
        result = log.result
        assert result.dropped_total == len(result.judged) - len(result.kept)
        printed = {k: v for k, v in log.rollout_perf.items() if k.startswith("rollout/dynamic_filter/drop_")}
        assert sum(printed.values()) == result.dropped_total
        assert set(printed) <= {"rollout/dynamic_filter/drop_zero_std_1", "rollout/dynamic_filter/drop_zero_std_0"}
        assert all(count > 0 for count in printed.values())  # a reason that did not occur has no key


def test_with_the_filter_no_kept_group_is_zero_variance(filter_steps: FilterRuns) -> None:
    for _, log in filter_steps:
        assert not any(group.zero_std for group in log.result.kept)
        assert not any(key.startswith("rollout/zero_std/count_") for key in log.rollout_perf)
        assert log.rollout_perf["rollout/zero_std/all_zero_percentage"] == 0.0  # as Miles prints for int rewards


def test_every_submitted_group_is_judged_or_aborted_never_both(filter_steps: FilterRuns) -> None:
    for _, log in filter_steps:
        judged = {group.prompt for group in log.result.judged}
        aborted = {group.prompt for group in log.result.aborted}
        assert not judged & aborted
        assert len(judged) + len(aborted) == log.result.prompts_submitted


def test_aborted_groups_are_not_in_the_unfiltered_reward(filter_steps: FilterRuns) -> None:
    differs = 0
    for _, log in filter_steps:
        judged = [r for group in log.result.judged for r in group.rewards]
        everything = judged + [r for group in log.result.aborted for r in group.rewards]
        assert log.rollout_perf["rollout/raw_reward_unfiltered"] == pytest.approx(sum(judged) / len(judged))
        differs += sum(everything) / len(everything) != pytest.approx(sum(judged) / len(judged))
    assert differs > len(filter_steps) // 2  # the aborted answers would have changed it


def test_the_unfiltered_reward_counts_dropped_groups_and_the_reward_only_kept_ones() -> None:
    log = run(1, 32, 48, 8, *FILTER, steps=1)[0]
    kept = [r for group in log.result.kept for r in group.rewards]
    assert log.rollout["rollout/raw_reward"] == pytest.approx(sum(kept) / len(kept))
    assert log.rollout_perf["rollout/raw_reward_unfiltered"] != pytest.approx(log.rollout["rollout/raw_reward"])


@pytest.mark.parametrize("batch,over,samples", SHAPES)
def test_without_the_filter_nothing_is_dropped(batch: int, over: int, samples: int) -> None:
    for seed in SEEDS:
        for log in run(seed, batch, over, samples):
            assert log.result.dropped_total == 0
            assert not any(key.startswith("rollout/dynamic_filter/") for key in log.rollout_perf)
            assert log.result.batches == 1 and len(log.result.kept) == batch
            zero_std = sum(1 for group in log.result.kept if group.zero_std)
            counts = sum(v for k, v in log.rollout_perf.items() if k.startswith("rollout/zero_std/count_"))
            assert counts == zero_std
            assert len(log.result.aborted) == over - batch  # plain-48 aborts the slowest 16


def test_runs_are_deterministic(filter_runs: dict[tuple[Shape, int], list[StepLog]]) -> None:
    for shape in SHAPES:  # the module's run of seed 7, and another
        first, second = filter_runs[shape, 7], run(7, *shape, *FILTER)
        assert [payloads(log) for log in first] == [payloads(log) for log in second]
    assert payloads(filter_runs[(32, 48, 8), 7][0]) != payloads(filter_runs[(32, 48, 8), 8][0])


def test_the_deprecated_filter_path_behaves_as_the_current_one(
    filter_runs: dict[tuple[Shape, int], list[StepLog]],
) -> None:
    for seed in (1, 2, 3):
        current = filter_runs[(32, 48, 8), seed]
        deprecated = run(seed, 32, 48, 8, "--dynamic-sampling-filter-path", FILTER_PATH_PUBLIC)
        assert [payloads(log) for log in current] == [payloads(log) for log in deprecated]


def test_over_sampling_below_the_batch_size_is_refused_as_miles_refuses_it() -> None:
    with pytest.raises(
        MilesRefusal, match="over_sampling_batch_size 16 should be greater than or equal to rollout_batch_size 32"
    ):
        parse_argv(["--rollout-batch-size", "32", "--over-sampling-batch-size", "16"])
    assert parse_argv(["--rollout-batch-size", "24"]).over_sampling_batch_size == 24  # Miles's default: B


def test_partial_rollout_resubmits_the_aborted_groups_first_with_what_they_generated() -> None:
    logs = run(3, 32, 48, 8, *FILTER, "--partial-rollout", steps=3)
    plain = run(3, 32, 48, 8, *FILTER, steps=3)
    for before, after in zip(logs, logs[1:]):
        aborted = {group.prompt for group in before.result.aborted}
        assert aborted
        seen_next = {group.prompt for group in after.result.judged + after.result.aborted}
        assert aborted <= seen_next  # the buffer is submitted before new prompts
        carried = [group for group in after.result.judged if group.prompt in aborted]
        assert all(group.first_step == before.step and group.submissions == 2 for group in carried)
    # Without it the aborted prompts are gone: the data set moved on.
    for before, after in zip(plain, plain[1:]):
        seen_next = {group.prompt for group in after.result.judged + after.result.aborted}
        assert not {group.prompt for group in before.result.aborted} & seen_next


def test_partial_answers_keep_their_tokens_across_the_abort() -> None:
    source = PromptSource(DEFAULT_PARAMS, seed=1, rollout_seed=1, n_samples=8, max_response_len=1024)
    groups = source.take(48, Policy(), step=0)
    engine = GenerationEngine(DEFAULT_PARAMS)
    engine.submit(groups)
    for _ in range(20):
        engine.next_finished()
    aborted = engine.abort()
    assert len(aborted) == 28
    progress = [answer.generated for group in aborted for answer in group.answers]
    assert any(0 < n for n in progress)
    assert all(answer.generated <= answer.tokens for group in aborted for answer in group.answers)


def test_groups_are_judged_in_the_order_they_finish() -> None:
    source = PromptSource(DEFAULT_PARAMS, seed=2, rollout_seed=2, n_samples=8, max_response_len=1024)
    engine = GenerationEngine(DEFAULT_PARAMS)
    engine.submit(source.take(48, Policy(), step=0))
    times = []
    while (group := engine.next_finished()) is not None:
        assert group.finished
        times.append(engine.now)
    assert len(times) == 48 and times == sorted(times)


def test_generation_is_throughput_bound_48_prompts_cost_about_one_and_a_half_times_32() -> None:
    ratios = []
    for seed in range(1, 11):
        durations = []
        for prompts in (32, 48):
            source = PromptSource(DEFAULT_PARAMS, seed=seed, rollout_seed=seed, n_samples=8, max_response_len=1024)
            engine = GenerationEngine(DEFAULT_PARAMS)
            engine.submit(source.take(prompts, Policy(), step=0))
            while engine.next_finished() is not None:
                pass
            durations.append(engine.now)
        ratios.append(durations[1] / durations[0])
    assert 1.35 < sum(ratios) / len(ratios) < 1.65


def test_answers_cut_at_the_response_cap_score_zero() -> None:
    logs = run(1, 32, 32, 8, "--rollout-max-response-len", "400", steps=2)
    answers = [answer for log in logs for group in log.result.kept for answer in group.answers]
    cut = [answer for answer in answers if answer.truncated]
    assert cut and all(answer.reward == 0 and answer.tokens == 400 for answer in cut)
    assert all(answer.tokens <= 400 for answer in answers)
    ratio = sum(log.rollout_perf["rollout/truncated_ratio"] for log in logs) / 2
    assert ratio == pytest.approx(len(cut) / len(answers))


def test_harder_prompts_get_longer_answers() -> None:
    source = PromptSource(DEFAULT_PARAMS, seed=1, rollout_seed=1, n_samples=8, max_response_len=4096)
    groups = source.take(400, Policy(), step=0)
    easy = [a.tokens for g in groups if g.pass_rate > 0.9 for a in g.answers]
    hard = [a.tokens for g in groups if g.pass_rate < 0.1 for a in g.answers]
    assert sum(hard) / len(hard) > 1.2 * sum(easy) / len(easy)


def test_learning_raises_the_pass_rates_slowly() -> None:
    logs = run(1, 32, 32, 8, steps=12)
    first = sum(log.rollout["rollout/raw_reward"] for log in logs[:4]) / 4
    last = sum(log.rollout["rollout/raw_reward"] for log in logs[-4:]) / 4
    source = PromptSource(DEFAULT_PARAMS, seed=1, rollout_seed=1, n_samples=8, max_response_len=1024)
    early = source.new_group(5, Policy(shift=0.0), 0).pass_rate
    later = source.new_group(5, Policy(shift=12 * DEFAULT_PARAMS.learning_logit_per_step), 0).pass_rate
    assert early < later < early + 0.2
    assert abs(last - first) < 0.2


def test_the_log_holds_every_payload() -> None:
    stream = io.StringIO()
    logs = simulate(["--num-rollout", "2"], stream=stream)
    text = stream.getvalue()
    for log in logs:
        assert repr(log.rollout_perf) in text and repr(log.train_perf) in text


def payloads(log: StepLog) -> tuple:
    return (log.rollout_perf, log.rollout, log.optimizer_steps, log.train_perf)


# --- a filter that cannot fill a batch, and a stop inside a rollout -----------------------------------------


@pytest.mark.parametrize("path", [FILTER_PATH, FILTER_PATH_PUBLIC])
def test_one_answer_per_prompt_with_the_filter_is_refused_as_no_group_could_ever_be_kept(path: str) -> None:
    with pytest.raises(UnfillableBatch, match=r"--n-samples-per-prompt 1 with the zero-variance filter: .*every group"):
        parse_argv(["--n-samples-per-prompt", "1", "--dynamic-sampling-filter-path", path])
    assert parse_argv(["--n-samples-per-prompt", "1"]).n_samples_per_prompt == 1  # without the filter it runs


def starved_rollout(dataset_prompts: int, over: int):  # noqa: ANN201
    """A rollout whose every answer is cut (so scores 0, so every group is dropped), on a data set this big."""
    params = replace(DEFAULT_PARAMS, dataset_prompts=dataset_prompts)
    config = parse_argv(["--rollout-max-response-len", "1", "--over-sampling-batch-size", str(over), *FILTER])
    source = PromptSource(params, seed=1, rollout_seed=1, n_samples=8, max_response_len=1)
    return lambda: run_rollout(config, params, source, Policy(), 0)


@pytest.mark.parametrize("dataset,over,submitted", [(480, 48, 480), (500, 48, 480), (40, 32, 32)])
def test_a_filter_that_cannot_fill_the_batch_stops_once_a_data_set_of_prompts_was_submitted(
    dataset: int, over: int, submitted: int
) -> None:
    with pytest.raises(RolloutStarved) as caught:
        starved_rollout(dataset, over)()
    starved = caught.value
    assert (starved.step, starved.kept, starved.batch) == (0, 0, 32)
    assert starved.prompts_submitted == submitted  # whole batches of O, never more than the data set
    # It stops as soon as kept + running fell below B with no prompts left: those 31 cannot fill 32.
    assert (starved.running, starved.dropped) == (31, submitted - 31)
    assert str(starved) == (
        f"rollout 0: the dynamic filter kept 0 of 32 groups from {submitted} prompts "
        f"({submitted - 31} dropped, 31 still running), and another {over} would take more "
        f"prompts than the data set holds ({dataset}): the batch cannot fill"
    )


def test_the_default_data_set_is_gsm8k_s_training_split_far_above_what_a_step_of_the_lab_submits(
    filter_steps: FilterRuns,
) -> None:
    assert DEFAULT_PARAMS.dataset_prompts == 7473
    assert max(log.result.prompts_submitted for _, log in filter_steps) * 20 < DEFAULT_PARAMS.dataset_prompts


class StopAfter:
    """A stop request that arrives after `calls` checks: as a signal does, in the middle of a rollout."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def __call__(self) -> int | None:
        self.calls -= 1
        return 15 if self.calls < 0 else None


@pytest.mark.parametrize("calls", [0, 3, 40])
def test_a_stop_requested_inside_a_rollout_stops_it_there(calls: int) -> None:
    stop = StopAfter(calls)
    clock = SimulatedClock(stop)
    with pytest.raises(Stopped) as caught:
        run_rollout(
            parse_argv(FILTER),
            DEFAULT_PARAMS,
            PromptSource(DEFAULT_PARAMS, seed=1, rollout_seed=1, n_samples=8, max_response_len=1024),
            Policy(),
            0,
            check_stop=clock.check_stop,
        )
    assert caught.value.signum == 15 and stop.calls == -1  # checked once more after the request, then stopped


def test_a_first_batch_larger_than_the_data_set_still_runs_as_miles_runs_it() -> None:
    params = replace(DEFAULT_PARAMS, dataset_prompts=20)
    source = PromptSource(params, seed=1, rollout_seed=1, n_samples=4, max_response_len=1024)
    result = run_rollout(parse_argv(["--rollout-batch-size", "24"]), params, source, Policy(), 0)
    assert len(result.kept) == 24 and result.prompts_submitted == 24
