"""The prompts and the answers: pass rates, lengths, rewards. Pure and seeded.

A prompt of the data set has a pass rate before training, drawn from a
U-shaped Beta distribution (`ModelParams`). Training moves every prompt's
pass rate on the logit scale (`Policy.shift`), and each rollout has its own
decisiveness, a factor of at most 1 on every logit (`rollout_decisiveness`):
the prompts of one rollout are not independent draws, so the share of
zero-variance groups varies from step to step as much as the lab's does.

A group is the prompt's `--n-samples-per-prompt` answers, drawn when the
rollout submits it: each is right with the prompt's current pass rate, and
has a length that grows with the prompt's difficulty (longer still when
wrong). An answer that reaches `--rollout-max-response-len` is cut there and
scores 0, as the rule-based math reward scores an answer without a final
result.

Randomness comes from `random.Random` seeded with strings (stable across
Python versions and processes): the data set's pass rates from
`--rollout-seed` (Miles's data shuffling seed), the answers from `--seed`
(the sampling seed) and the prompt, a rollout's decisiveness from both seeds
and the rollout. So two runs with the same seeds see the same prompts in the
same order, and the same prompt at the same point of training gets the same
answers, filter or not: differences between runs come from what the rollout
does with them, not from noise.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass, field

from harness.sim.params import ModelParams

PASS_RATE_FLOOR = 1e-6  # keeps the logit finite; a pass rate this small is never right in a run


@dataclass
class Answer:
    """One answer (sample) of a group: its full length, its reward, and how much of it is generated."""

    tokens: int  # length when finished, at most the response cap
    reward: int  # 1 right, 0 wrong or cut
    truncated: bool  # cut at --rollout-max-response-len
    generated: int = 0  # tokens generated so far (kept across steps by --partial-rollout)

    @property
    def finished(self) -> bool:
        return self.generated >= self.tokens


@dataclass
class Group:
    """One prompt and its answers."""

    prompt: int  # position in the data set's order
    pass_rate: float  # when its answers were drawn
    answers: list[Answer]
    first_step: int  # the rollout that first submitted it
    submissions: int = 0  # how many times a rollout submitted it (more than once: --partial-rollout)

    @property
    def rewards(self) -> list[int]:
        return [answer.reward for answer in self.answers]

    @property
    def zero_std(self) -> bool:
        """True when every answer has the same reward: GRPO learns nothing from the group."""
        first = self.answers[0].reward
        return all(answer.reward == first for answer in self.answers)

    @property
    def finished(self) -> bool:
        return all(answer.finished for answer in self.answers)


def logit(p: float) -> float:
    p = min(max(p, PASS_RATE_FLOOR), 1.0 - PASS_RATE_FLOOR)
    return math.log(p / (1.0 - p))


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@dataclass
class Policy:
    """What training has done so far: a shift of every prompt's pass rate on the logit scale.

    `collapse_logit` and `collapse_rollouts` imitate a broken resume (THUDM/slime#1695): while
    rollouts are left, every logit is that much lower; training goes on underneath.
    """

    shift: float = 0.0
    collapse_logit: float = 0.0
    collapse_rollouts: int = 0

    def pass_rate(self, base: float, decisiveness: float = 1.0) -> float:
        """The pass rate now of a prompt whose pass rate before training was `base`, in a rollout this decided."""
        if self.collapse_rollouts > 0:
            return sigmoid(decisiveness * (logit(base) + self.shift - self.collapse_logit))
        return sigmoid(decisiveness * (logit(base) + self.shift))

    def learn(self, params: ModelParams) -> None:
        """One rollout's training: every pass rate moves up by the same step on the logit scale."""
        self.shift += params.learning_logit_per_step
        if self.collapse_rollouts > 0:
            self.collapse_rollouts -= 1


@dataclass
class PromptSource:
    """The data set in the rollout seed's order, and Miles's buffer of aborted groups.

    `take(n)` is Miles's data source: groups from the buffer first (only filled
    under --partial-rollout), then the next prompts of the data set. Dropped and
    aborted prompts use up the data set: the cursor never goes back.
    """

    params: ModelParams
    seed: int
    rollout_seed: int
    n_samples: int
    max_response_len: int
    cursor: int = 0
    buffer: list[Group] = field(default_factory=list)

    def base_pass_rate(self, prompt: int) -> float:
        rng = random.Random(f"sim-data/{self.rollout_seed}/{prompt}")
        rate = rng.betavariate(self.params.pass_rate_alpha, self.params.pass_rate_beta)
        return min(max(rate, PASS_RATE_FLOOR), 1.0 - PASS_RATE_FLOOR)

    def take(self, n: int, policy: Policy, step: int) -> list[Group]:
        """The next n groups: buffered (partly generated) ones first, then fresh prompts."""
        groups = self.buffer[:n]
        del self.buffer[:n]
        while len(groups) < n:
            groups.append(self.new_group(self.cursor, policy, step))
            self.cursor += 1
        for group in groups:
            group.submissions += 1
        return groups

    def give_back(self, groups: list[Group]) -> None:
        """Aborted groups kept for the next rollout (--partial-rollout)."""
        self.buffer.extend(groups)

    def decisiveness(self, step: int) -> float:
        """How decided the policy is at rollout `step`: the factor (0 < f <= 1) on every prompt's logit."""
        return rollout_decisiveness(self.params.decisiveness_spread, self.seed, self.rollout_seed, step)

    def new_group(self, prompt: int, policy: Policy, step: int) -> Group:
        rate = policy.pass_rate(self.base_pass_rate(prompt), self.decisiveness(step))
        rng = random.Random(f"sim-answers/{self.seed}/{self.rollout_seed}/{prompt}")
        answers = [draw_answer(rng, rate, self.params, self.max_response_len) for _ in range(self.n_samples)]
        return Group(prompt=prompt, pass_rate=rate, answers=answers, first_step=step)


@functools.lru_cache(maxsize=1024)
def rollout_decisiveness(spread: float, seed: int, rollout_seed: int, step: int) -> float:
    """exp(-spread * E), E exponential with mean 1, drawn per rollout from the seeds alone.

    So every run with these seeds has the same policy state at the same
    rollout, filter or not, as it has the same learning.
    """
    if spread == 0.0:
        return 1.0
    rng = random.Random(f"sim-policy/{seed}/{rollout_seed}/{step}")
    return math.exp(-spread * rng.expovariate(1.0))


def typical_length(pass_rate: float, params: ModelParams) -> float:
    """The median length of a right answer to a prompt with this pass rate."""
    return params.length_easy_tokens + (params.length_hard_tokens - params.length_easy_tokens) * (1.0 - pass_rate)


def draw_answer(rng: random.Random, pass_rate: float, params: ModelParams, max_len: int) -> Answer:
    """One answer: right with the pass rate; its length log-normal around the prompt's; cut answers score 0."""
    right = rng.random() < pass_rate
    length = typical_length(pass_rate, params) * math.exp(params.length_sigma * rng.gauss(0.0, 1.0))
    if not right:
        length *= params.wrong_length_factor
    tokens = max(1, int(round(length)))
    if tokens >= max_len:
        return Answer(tokens=max_len, reward=0, truncated=True)
    return Answer(tokens=tokens, reward=1 if right else 0, truncated=False)
