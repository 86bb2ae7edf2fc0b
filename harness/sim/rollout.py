"""One rollout as Miles runs it (`generate_rollout_async` with a dynamic filter), and its metrics. Pure.

The loop, as in Miles's sglang rollout:

- `remaining` counts the groups kept plus the groups still running;
  whenever it is below B (`--rollout-batch-size`), submit the next O
  (`--over-sampling-batch-size`) prompts;
- wait for the next group to finish (groups are judged in finishing order);
  the filter keeps it or drops it (a drop lowers `remaining`, and names its
  reason `zero_std_<round(reward, 1)>`);
- once B groups are kept, abort every request still running. Their answers
  are not used and not counted anywhere, not even in
  `rollout/raw_reward_unfiltered`; with `--partial-rollout` the aborted
  groups go back to the data source, answers generated as far as they got,
  and are submitted first by the next rollout.

Without a filter the same loop keeps every group, so with O = B nothing is
aborted; with O > B (plain-48) the slowest O - B groups are.

One bound Miles does not have: a rollout submits no batch after its first
that would take it past the prompts the data set holds
(`ModelParams.dataset_prompts`). Miles starts the data set again when it
runs out, so a filter that can keep no group (every answer cut, or one
answer per prompt) makes it generate forever; the simulator stops there
with `RolloutStarved`. A step of the lab submits 48 to 144.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Callable

from harness.lab.milesnames import (
    DROP_PREFIX,
    RAW_REWARD,
    RAW_REWARD_UNFILTERED,
    TRUNCATED_RATIO,
    ZERO_STD_COUNT_PREFIX,
)
from harness.sim.config import SimConfig
from harness.sim.engine import GenerationEngine
from harness.sim.model import Group, Policy, PromptSource
from harness.sim.params import ModelParams


@dataclass
class RolloutResult:
    """What one rollout did; times are seconds of simulated generation from its start."""

    step: int
    kept: list[Group]  # the B groups the step trains on, in finishing order
    judged: list[Group]  # every group that finished, kept or dropped, in finishing order
    dropped: dict[str, int]  # reason -> groups dropped, reasons in the order they first occurred
    aborted: list[Group]  # groups still running at the abort
    submissions: list[tuple[float, int]]  # (time, prompts) of each batch submitted
    abort_at: float  # when B groups were kept and the abort was sent
    tokens: int  # tokens generated, aborted requests included
    partial_answers: int = 0  # answers of aborted groups kept for the next rollout
    seconds: float = 0.0  # the whole rollout: generation, abort and drain, overheads
    events: list[tuple[float, str]] = field(default_factory=list)  # (time, event) for the log

    @property
    def batches(self) -> int:
        return len(self.submissions)

    @property
    def prompts_submitted(self) -> int:
        return sum(count for _, count in self.submissions)

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    @property
    def informative_share(self) -> float:
        """The share of kept groups with a learning signal (answers that differ in reward)."""
        return sum(1 for group in self.kept if not group.zero_std) / max(1, len(self.kept))


# Prompts drawn between two checks for a stop request: a rollout of thousands of prompts stops within milliseconds.
TAKE_CHUNK = 64
# Answers drawn and queued between two checks, at most (one group, of at most 1024 answers, at least): so even the
# largest rollout allowed (harness.sim.config) answers a stop request within a few milliseconds of CPU.
TAKE_ANSWERS = 4096


class RolloutStarved(Exception):
    """The filter kept too few groups for a batch from as many prompts as the data set holds."""

    def __init__(
        self,
        step: int,
        kept: int,
        batch: int,
        prompts_submitted: int,
        dropped: int,
        running: int,
        over_sampling: int,
        dataset_prompts: int,
    ) -> None:
        super().__init__(
            f"rollout {step}: the dynamic filter kept {kept} of {batch} groups from {prompts_submitted} prompts "
            f"({dropped} dropped, {running} still running), and another {over_sampling} would take more prompts "
            f"than the data set holds ({dataset_prompts}): the batch cannot fill"
        )
        self.step, self.kept, self.batch = step, kept, batch
        self.prompts_submitted, self.dropped, self.running = prompts_submitted, dropped, running


def _no_stop() -> None:
    return None


def drop_reason(group: Group) -> str:
    """The zero-variance filter's reason: `zero_std_` + the common reward as Python prints round(r, 1)."""
    return f"zero_std_{round(group.answers[0].reward, 1)}"


def run_rollout(
    config: SimConfig,
    params: ModelParams,
    source: PromptSource,
    policy: Policy,
    step: int,
    check_stop: Callable[[], None] = _no_stop,
) -> RolloutResult:
    """Run rollout `step` to the moment B groups are kept, abort the rest, and say what happened.

    `check_stop` is called between groups and raises to stop the rollout (a
    signal); RolloutStarved when the data set's worth of prompts cannot fill B.
    """
    engine = GenerationEngine(params)
    batch, over_sampling = config.rollout_batch_size, config.over_sampling_batch_size
    kept: list[Group] = []
    judged: list[Group] = []
    dropped: dict[str, int] = {}
    submissions: list[tuple[float, int]] = []
    remaining = 0  # Miles's remaining_batch_size: kept + running
    while len(kept) < batch:
        while remaining < batch:
            submitted = sum(count for _, count in submissions)
            if submissions and submitted + over_sampling > params.dataset_prompts:
                raise RolloutStarved(
                    step,
                    len(kept),
                    batch,
                    submitted,
                    len(judged) - len(kept),
                    remaining - len(kept),
                    over_sampling,
                    params.dataset_prompts,
                )
            chunk = max(1, min(TAKE_CHUNK, TAKE_ANSWERS // config.n_samples_per_prompt))
            taken = 0
            while taken < over_sampling:  # queued a chunk at a time: the same queue as all at once, stoppable
                check_stop()
                groups = source.take(min(chunk, over_sampling - taken), policy, step)
                engine.submit(groups)
                taken += len(groups)
            remaining += taken
            submissions.append((engine.now, taken))
        check_stop()
        group = engine.next_finished()
        if group is None:  # cannot happen: remaining >= batch > kept means a group is running
            raise RuntimeError(f"rollout {step}: nothing running with {len(kept)} of {batch} groups kept")
        judged.append(group)
        if config.uses_filter and group.zero_std:
            reason = drop_reason(group)
            dropped[reason] = dropped.get(reason, 0) + 1
            remaining -= 1
            continue
        kept.append(group)

    abort_at = engine.now
    aborted = engine.abort()
    result = RolloutResult(
        step=step,
        kept=kept,
        judged=judged,
        dropped=dropped,
        aborted=aborted,
        submissions=submissions,
        abort_at=abort_at,
        tokens=engine.tokens,
    )
    result.events.append((abort_at, "abort"))
    drained = abort_at + params.abort_drain_s
    if config.partial_rollout:
        source.give_back(aborted)
        result.partial_answers = sum(len(group.answers) for group in aborted)
        result.events.append((drained, "partial"))
    result.seconds = drained + params.rollout_overhead_s
    return result


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def rollout_side_metrics(result: RolloutResult, n_samples: int = 8, unfiltered: bool = True) -> dict[str, float]:
    """The rollout-side `perf N` keys that do not depend on the clock, in Miles's order.

    Drop reasons and zero-variance counts appear only for values that occurred,
    as in Miles. Response lengths, repetition, truncation and pass rates are
    over the kept answers; the unfiltered reward (only with `unfiltered`: the
    write-up's Miles) is over every answer of every judged group. The
    zero-variance percentages read 0, as they do for integer rewards.
    """
    metrics: dict[str, float] = {}
    for reason, count in result.dropped.items():
        metrics[f"{DROP_PREFIX}{reason}"] = count
    zero_std: dict[str, int] = {}
    for group in result.kept:
        if group.zero_std:
            key = f"{ZERO_STD_COUNT_PREFIX}{round(group.answers[0].reward, 1)}"
            zero_std[key] = zero_std.get(key, 0) + 1
    metrics.update(sorted(zero_std.items()))
    metrics["rollout/zero_std/all_zero_percentage"] = 0.0
    metrics["rollout/zero_std/all_one_percentage"] = 0.0
    if unfiltered:
        metrics[RAW_REWARD_UNFILTERED] = _mean([float(r) for g in result.judged for r in g.rewards])
    lengths = [answer.tokens for group in result.kept for answer in group.answers]
    metrics["rollout/response_len/mean"] = _mean([float(n) for n in lengths])
    metrics["rollout/response_len/median"] = float(statistics.median(lengths))
    metrics["rollout/response_len/max"] = max(lengths)
    metrics["rollout/response_len/min"] = min(lengths)
    metrics["rollout/repetition_frac"] = 0.0
    metrics[TRUNCATED_RATIO] = _mean(
        [1.0 if answer.truncated else 0.0 for group in result.kept for answer in group.answers]
    )
    k = 1
    while k <= n_samples:
        metrics[f"passrate/pass@{k}"] = _mean([_pass_at_k(group, k) for group in result.kept])
        k *= 2
    return metrics


def _pass_at_k(group: Group, k: int) -> float:
    """The unbiased pass@k estimate of one group: 1 - C(n - right, k) / C(n, k)."""
    n = len(group.answers)
    right = sum(1 for answer in group.answers if answer.reward >= 1)
    if n - right < k:
        return 1.0
    return 1.0 - math.comb(n - right, k) / math.comb(n, k)


def train_side_rollout_metrics(result: RolloutResult) -> dict[str, float]:
    """The train rank's `rollout N` keys: over the kept groups only (so biased with a filter).

    Log-probs and advantages are nominal (the model has no tokens): GRPO's
    normalised rewards and advantages are 0 on average by construction.
    """
    answers = [answer for group in result.kept for answer in group.answers]
    truncated = _mean([1.0 if answer.truncated else 0.0 for answer in answers])
    return {
        RAW_REWARD: _mean([float(answer.reward) for answer in answers]),
        "rollout/rewards": 0.0,
        "rollout/response_lengths": _mean([float(answer.tokens) for answer in answers]),
        "rollout/truncated": truncated,
        "rollout/log_probs": -0.3 - 0.1 * truncated,
        "rollout/ref_log_probs": -0.3 - 0.1 * truncated,
        "rollout/advantages": 0.0,
        "rollout/returns": 0.0,
    }
