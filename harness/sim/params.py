"""Every number the simulated trainer's model uses, in one place, with what it is calibrated against.

The targets are the lab's measurements at the section-1.1 run (Qwen3-0.6B on
GSM8K, 32 prompts x 8 answers, answers cut at 1024 tokens, one GB10):

- plain GRPO: about half of the groups zero-variance, mostly all right
  (the write-up: "about half of our groups had every answer right or every
  answer wrong"; it gives no per-step counts); 12-step mean reward about
  0.66, first four steps about 0.63, five baselines 0.638-0.660;
- the filter at O=48: 16-48 groups dropped per step, median 36, most of them
  all right; 3 of 12 steps needed only one batch of prompts;
- rollout time: plain median 58.0 s; one-batch filter steps 88.7 s (1.5x),
  two-batch steps 164.4 s (2.8x); plain steps about 100 s in all.

`bench/sim_calibration.py` prints what these parameters give beside those
figures; docs/simulator.md explains the model. Change a number here, rerun the
bench, and say in the commit what it moved.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelParams:
    """The model of the prompts, the answers, the GB10's generation engine and the trainer."""

    # ---- prompts: the pass rate of the policy on each prompt ---------------------------
    # A prompt's pass rate before training is Beta(a, b): U-shaped, so many prompts are
    # (almost) always solved and some (almost) never. This is the policy at its most decided
    # (see `decisiveness_spread`): Beta(0.34, 0.2) then gives groups of 8 that are all right
    # 41% and all wrong 18% of the time; over the rollouts' spread of decisiveness 32% and
    # 13% (with the length cut below, plain runs keep about 11 all-right and 4 all-wrong
    # groups of 32): the write-up's "about half of our groups had every answer right or every
    # answer wrong", mostly right, and with the filter at O=48 a median of about 31 groups
    # dropped, 10-49 from the 10th to the 90th percentile (the lab: 16-48, median 36).
    pass_rate_alpha: float = 0.34
    pass_rate_beta: float = 0.2
    # Rollouts differ in how decided the policy is: rollout t multiplies every prompt's logit
    # by exp(-spread * E_t), E_t exponential with mean 1, drawn from the seeds and t (the same
    # in every run with those seeds, filter or not). A less decided rollout pulls every pass
    # rate toward a half, so it has fewer zero-variance groups; its mean reward moves little.
    # Calibrated against the filter's one-batch steps: a step needs only one batch of 48 when
    # those 48 prompts hold at most 16 zero-variance groups. With independent prompts at the
    # plain runs' half that is about 3% of steps (3 or more of 12: 0.5%); the lab had 3 of 12.
    # At 0.45 about a fifth of filter steps need one batch (21% over 60 seeds) and a third
    # batch is rare (under 1%). The spread is one-sided (a rollout is at most as decided as
    # the Beta above) because the lab's 12 steps spread downward only: three at 16 drops or
    # fewer, none over 48. A two-sided spread (a log-normal factor, sigma 0.35, on the former
    # Beta(0.5, 0.3)) wide enough for 16% of one-batch steps makes 5% of steps need three or
    # more batches, dropping up to 137 groups (60 seeds). A shift of every logit instead (an
    # easier or harder rollout) cannot do it: all-right and all-wrong groups trade places and
    # the zero-variance share barely moves (45-52% for shifts of -1 to +1). What makes real
    # rollouts differ this much the lab's logs cannot tell (prompts are shuffled, so not the
    # data set's order); the model puts it in the policy's state for the rollout.
    decisiveness_spread: float = 0.45
    # Learning: every rollout's training moves every prompt's pass rate up by this much on
    # the logit scale, the same with the filter or without it (Adam's step size does not
    # follow the gradient's size), so a reward gap between runs in the model is what the
    # rollout counted, not what the model learned. Calibrated on the lab's plain run: mean
    # reward of the first four steps 0.625 and of all twelve 0.657 (the model: 0.62 and 0.64
    # over seeds 1-60; 0.59 to 0.70 for one seed's twelve steps).
    learning_logit_per_step: float = 0.07

    # The data set: GSM8K's training split. Only a bound: no step may submit more prompts than it holds
    # (harness.sim.rollout.RolloutStarved), where Miles would start it again and, with a filter that can
    # keep nothing, never end. A step of the lab submits 48 to 144.
    dataset_prompts: int = 7473

    # ---- answers: lengths in tokens --------------------------------------------------
    # A prompt's typical answer length grows with its difficulty (1 - pass rate): from
    # `length_easy_tokens` for a prompt always solved to `length_hard_tokens` for one never
    # solved. Each answer varies around that (log-normal, `length_sigma`), and a wrong answer
    # is longer (`wrong_length_factor`). With the 1024-token cap this gives a mean length of
    # about 410 tokens and about 1.5% of answers cut (a cut answer scores 0). These three
    # set how strongly a group's finishing time follows its reward, hence the bias of the
    # unfiltered reward: the filter run's reads about 0.03 above plain's (the lab: 0.686
    # against 0.657, and 0.672 against 0.625 over the first four steps). The same link
    # biases plain-48 about 2.5 times as much (+0.07; the lab's three plain-48 seeds read
    # like plain): it aborts the slowest third of one batch, where a filter step aborts only
    # second-batch groups, late as much for starting late. No parameter here changes that
    # ratio, so the model matches the filter and misses plain-48 (docs/simulator.md).
    length_easy_tokens: float = 330.0
    length_hard_tokens: float = 420.0
    length_sigma: float = 0.45
    wrong_length_factor: float = 1.1

    # ---- the generation engine (SGLang on a saturated GB10) --------------------------
    # Decoding is throughput-bound: one decode iteration advances every running request by
    # one token and takes `decode_fixed_s + running * decode_per_request_s`. With 256
    # running requests that is about 1,900 tokens/s, and a plain batch of 32 x 8 answers
    # takes about 57 s of generation: the lab's plain median rollout of 58.0 s with the
    # overheads below. Time grows with the tokens generated by every running request, so
    # one batch of 48 prompts costs about 1.5x one of 32 (the lab: 88.7 s, 1.5x) and a step
    # that needs a second batch about 2.8x (the lab: 164.4 s).
    decode_fixed_s: float = 0.001
    decode_per_request_s: float = 0.000525
    # SGLang runs at most this many requests at once (the KV cache of the engine's share of
    # the GB10's memory); the rest wait in its queue, first in first out. 256 = one plain
    # batch of 32 x 8, so an over-sampled batch queues. A smaller cap makes groups finish
    # more in the order they were submitted: the two-batch ratio falls (2.3 at 96).
    max_running_requests: int = 256

    # ---- fixed costs -------------------------------------------------------------------
    # Inside perf/rollout_time besides generation: fetching and tokenising prompts, rewards,
    # converting the kept samples for training.
    rollout_overhead_s: float = 1.0
    # Abort and drain: Miles posts /abort_request and waits for the aborted requests.
    abort_drain_s: float = 0.4
    # Before the first rollout: Ray, the SGLang engine and the actor start (shown only in
    # line timestamps; not in any perf metric).
    startup_s: float = 45.0
    # The train side (colocated: the engine sleeps while the actor trains). Log-probs of the
    # actor and the reference, then the optimizer steps; their time grows with the tokens
    # trained. With about 105 k tokens per step the train side takes about 40 s, a plain
    # step about 100 s. Not calibrated: the write-up's only step-time figures (sums of 60
    # and 113 minutes over 12 steps) include its heat pauses; the model has none of its own.
    train_wait_extra_s: float = 1.0  # perf/train_wait_time = rollout + this (data hand-over)
    logprob_s_per_ktoken: float = 0.07
    actor_train_s_per_ktoken: float = 0.25
    update_weights_s: float = 3.1
    sleep_s: float = 1.4
    wake_up_s: float = 2.2
    # Every train-side time varies by this fraction (uniform +-), seeded per step.
    train_jitter: float = 0.05

    # ---- checkpoints (--save / --load) --------------------------------------------------
    # The simulator's checkpoint files are a few kilobytes; these nominal sizes only set how long
    # a save or a load takes on the clock. Qwen3-0.6B: 0.6e9 parameters in fp32 (FSDP's master
    # weights, 4 bytes each) and Adam's two fp32 moments (8 bytes each): 12 bytes a parameter,
    # the low end of MILES-LOGS's 12 to 16. Not calibrated (no lab log has a save): a few
    # seconds a GB, as a local NVMe disk under torch.distributed.checkpoint.
    checkpoint_model_gb: float = 2.4
    checkpoint_optimizer_gb: float = 4.8
    checkpoint_write_s_per_gb: float = 2.0
    checkpoint_read_s_per_gb: float = 1.0
    # HARNESS_SIM_RESUME_FAULT=reward-collapse (THUDM/slime#1695): for this many rollouts after a
    # load every prompt's logit is this much lower, then training goes on as if it had not been.
    # 6 on the logit scale brings a plain run's mean reward of about 0.6 down to 0.2-0.3 (seed 1,
    # loaded at rollout 3); with the filter the kept groups' reward reads 0.3-0.5 and the
    # unfiltered one 0.2-0.3, as the filter keeps only groups with a right answer.
    resume_collapse_logit: float = 6.0
    resume_collapse_rollouts: int = 3


DEFAULT_PARAMS = ModelParams()
