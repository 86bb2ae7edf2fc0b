"""The simulated training run: rollouts and training steps on a clock, printed as Miles prints them.

Deciding and doing are apart: `run_rollout` (rollout.py) and `plan_training`
(below) say what a step does and how long each part takes in simulated
seconds; `SimRun` lets that time pass on its clock and prints the lines at
the moments they would appear. Every duration it prints is measured on the
clock (`perf/rollout_time` is the clock's time from the start of the rollout
to its perf line), so under `--time-scale X > 0` a pause of the process is in
the durations that span it, as in a real Miles log.

Per rollout id N, as Miles (colocated, one GPU) prints them:

- `ft event=gather_start ...` before the rollout's gather and `ft event=gather_end ...`
  after it, `First rollout sample: ...` with the first group judged, tqdm's
  `Rollout generation` bar at every tenth of the answers, `Finish rollout: ...`
  once B groups are kept (the noise lines the parser counts);
- `Abort request for [...]` when B groups are kept (RolloutManager);
- `perf N` rollout side (RolloutManager): rollout time, throughput, filter
  drops or zero-variance counts, unfiltered reward, lengths, truncation;
- `rollout N` (train rank 0): the reward and lengths of the kept answers;
- `step M` per optimizer step (twice with the Megatron backend);
- `perf N` train side: wait, sleep, log-prob, train, update, wake-up and
  step times (`perf/step_time` = train wait + train), the wait's share and
  the trainer's throughput;
- with `--eval-interval K`, after every K-th rollout: `eval N: {...}`, or
  `eval N skipped: ...` without `--eval-prompt-data`.

The argument dump comes only with the Megatron backend (its argument check
prints it); the FSDP backend, the lab's, prints none.

With `--load` the train actor loads the checkpoint the tracker names after
start-up (harness.sim.checkpoint) and the loop starts at its next rollout;
with `--save` a checkpoint is written at each save point, after the rollout's
train-side `perf N` line. A run loaded from a checkpoint prints, from its
first rollout on, the metrics the run that saved it printed, but for the
clock's (CLOCK_METRICS).
"""

from __future__ import annotations

import os
import random
import signal
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Callable, Optional, Sequence, TypedDict

from harness.lab.milesnames import (
    EVAL_PROMPT_DATA_FLAG,
    FILTER_PATH,
    FILTER_PATH_PUBLIC,
    RAW_REWARD,
    ROLLOUT_TIME,
    STEP_TIME,
    TRAIN_TIME,
    WRITE_UP_MILES,
)
from harness.sim import checkpoint, logfmt
from harness.sim.checkpoint import CheckpointUnreadable, CheckpointUnwritable, PowerCut, TrainState
from harness.sim.clock import Clock, SimulatedClock, StopRequest
from harness.sim.config import SimConfig, parse_argv
from harness.sim.logfmt import Actor, LogWriter
from harness.sim.model import Policy, PromptSource
from harness.sim.params import DEFAULT_PARAMS, ModelParams
from harness.sim.rollout import RolloutResult, rollout_side_metrics, run_rollout, train_side_rollout_metrics

if TYPE_CHECKING:
    from harness.sim.logfmt import TextSink

__all__ = [
    "CLOCK_METRICS",
    "CheckpointUnreadable",
    "CheckpointUnwritable",
    "MissingFilter",
    "SimRun",
    "StepLog",
    "simulate",
]

# The payload of one `step M` line (Miles's keys have slashes, so the functional form).
OptimizerStep = TypedDict(
    "OptimizerStep",
    {
        "train/loss": float,
        "train/pg_loss": float,
        "train/entropy_loss": float,
        "train/kl_loss": float,
        "train/pg_clipfrac": float,
        "train/ppo_kl": float,
        "train/grad_norm": float,
        "train/lr-pg_0": float,
        "train/step": int,
    },
)

# The metrics that are the clock's: durations and what is divided by them. A resumed run prints every other
# metric of its rollouts exactly as the uninterrupted run does; these follow its own clock.
CLOCK_METRICS = frozenset(
    {
        ROLLOUT_TIME,
        "perf/tokens_per_gpu_per_sec",
        "perf/longest_sample_tokens_per_sec",
        "perf/train_wait_time",
        "perf/sleep_time",
        "perf/log_probs_time",
        "perf/actor_train_time",
        "perf/actor_train_tflops",
        "perf/actor_train_tok_per_s",
        "perf/update_weights_time",
        "perf/wake_up_time",
        TRAIN_TIME,
        STEP_TIME,
        "perf/wait_time_ratio",
    }
)

TRAIN_ACTORS = {"fsdp": "FSDPTrainRayActor", "megatron": "MegatronTrainRayActor"}
PROGRESS_TENTHS = 10  # tqdm bar renders per rollout
MODEL_PARAMS = 0.6e9  # Qwen3-0.6B, for the nominal train throughput
SAMPLE_TEXT = (
    "<|im_start|>user\\nNatalia sold clips to 48 of her friends in April, and then she sold half as many clips "
    "in May. How many clips did Natalia sell altogether? Answer: {48 + 24}<|im_end|>"
)


class MissingFilter(Exception):
    """The Miles stood in for has no module for the filter path: it fails to import it at the first rollout."""

    def __init__(self, module: str, path: str) -> None:
        super().__init__(f"rollout 0: ModuleNotFoundError: No module named '{module}' (the filter path {path})")
        self.module = module


@dataclass(frozen=True)
class TrainPlan:
    """The train side of one step: simulated durations and the optimizer steps' payloads."""

    wait_extra_s: float
    sleep_s: float
    logprob_s: float
    actor_train_s: float
    update_weights_s: float
    wake_up_s: float
    optimizer_steps: list[OptimizerStep]


def plan_training(
    config: SimConfig, params: ModelParams, result: RolloutResult, train_seed: Optional[int] = None
) -> TrainPlan:
    """How long the train side of this step takes and what its `step M` lines say (seeded per step).

    `train_seed` is the seed of the train side's streams: --seed, or a loaded checkpoint's rng.pt.
    """
    seed = config.seed if train_seed is None else train_seed
    rng = random.Random(f"sim-train/{seed}/{result.step}")

    def jitter(seconds: float) -> float:
        return seconds * (1.0 + params.train_jitter * (2.0 * rng.random() - 1.0))

    ktokens = sum(answer.tokens for group in result.kept for answer in group.answers) / 1000.0
    signal = result.informative_share
    count = config.optimizer_steps_per_rollout
    optimizer_steps: list[OptimizerStep] = []
    for k in range(count):
        pg_loss = rng.gauss(0.0, 0.02) * signal
        optimizer_steps.append(
            {
                "train/loss": pg_loss,
                "train/pg_loss": pg_loss,
                "train/entropy_loss": 0.35 + 0.1 * signal,  # nominal: the model has no tokens
                "train/kl_loss": 0.0,  # the lab's --kl-loss-coef 0.00
                "train/pg_clipfrac": 0.004 * signal * rng.uniform(0.5, 1.5),
                "train/ppo_kl": 2e-4 * signal * rng.uniform(-1.0, 1.0),
                "train/grad_norm": (0.05 + 0.3 * signal) * rng.uniform(0.8, 1.2),
                "train/lr-pg_0": config.lr,
                "train/step": result.step * count + k,
            }
        )
    return TrainPlan(
        wait_extra_s=jitter(params.train_wait_extra_s),
        sleep_s=jitter(params.sleep_s),
        logprob_s=jitter(params.logprob_s_per_ktoken * ktokens),
        actor_train_s=jitter(params.actor_train_s_per_ktoken * ktokens),
        update_weights_s=jitter(params.update_weights_s),
        wake_up_s=jitter(params.wake_up_s),
        optimizer_steps=optimizer_steps,
    )


@dataclass
class StepLog:
    """What the simulator printed for rollout id `step`: the payload of each metric line."""

    step: int
    result: RolloutResult
    rollout_perf: dict[str, float] = field(default_factory=dict)  # numbers (a count is an int)
    rollout: dict[str, float] = field(default_factory=dict)
    optimizer_steps: list[OptimizerStep] = field(default_factory=list)
    train_perf: dict[str, float] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return bool(self.train_perf)


def job_id_for(miles_argv: Sequence[str]) -> str:
    """A Ray-shaped submission id (Ray's alphabet, 16 characters), the same for the same command line."""
    alphabet = sorted(set("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz123456789"))
    rng = random.Random("sim-job/" + "\0".join(miles_argv))
    return "raysubmit_" + "".join(rng.choice(alphabet) for _ in range(16))


def _sigkill_self(_moment: str, _iteration: int) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class SimRun:
    """One simulated `train.py` run: prints its log on `writer` as `clock` lets time pass.

    `power_cut(moment, iteration)` is called where HARNESS_SIM_CRASH_AT names a moment of a save: by
    default it SIGKILLs this process, as a power cut ends it.
    """

    def __init__(
        self,
        config: SimConfig,
        params: ModelParams,
        clock: Clock,
        writer: LogWriter,
        power_cut: Callable[[str, int], None] = _sigkill_self,
    ) -> None:
        self.config = config
        self.params = params
        self.clock = clock
        self.out = writer
        self.job_id = job_id_for(config.miles_argv)
        pids = random.Random(f"sim-pids/{config.seed}/{config.rollout_seed}")
        self.rollout_actor = Actor("RolloutManager", pids.randrange(2000, 4000), "rollout_manager")
        self.train_actor = Actor(
            TRAIN_ACTORS.get(config.train_backend, TRAIN_ACTORS["megatron"]),
            pids.randrange(4000, 6000),
            "actor_cell0_rank0",
        )
        self.source = PromptSource(
            params, config.seed, config.rollout_seed, config.n_samples_per_prompt, config.rollout_max_response_len
        )
        self.policy = Policy()
        self.train_seed = config.seed
        self.first_rollout = config.checkpoint.start_rollout_id or 0
        self.steps: list[StepLog] = []
        self.current_step: int | None = None
        self._power_cut = power_cut

    def start(self) -> None:
        """The job's first lines: Ray's submission, the launch line, the argument dump, start-up."""
        self.out.lines(logfmt.launch_lines(self.job_id, self.config.miles_argv))
        if self.config.prints_argument_dump:
            self.out.lines(logfmt.argument_dump_lines(self.config.dump))
        if self.config.dynamic_sampling_filter_path == FILTER_PATH_PUBLIC and self.config.miles == WRITE_UP_MILES:
            self.out.log(
                self.rollout_actor,
                "dynamic_sampling_filters.py:12",
                f"WARNING: {FILTER_PATH_PUBLIC} is deprecated; use {FILTER_PATH}",
            )
        self.clock.advance(self.params.startup_s)
        if self.config.checkpoint.load is not None:
            self.load(self.config.checkpoint.load)

    def load(self, load_dir: str) -> None:
        """`--load`: the train actor loads what the tracker names, then the rollout manager's data source."""
        flags = self.config.checkpoint
        loaded = checkpoint.load(
            load_dir,
            flags,
            seed=self.config.seed,
            lr=self.config.lr,
            params=self.params,
            advance=self.clock.advance,
            say=lambda where, message: self.out.log(self.train_actor, where, message),
        )
        if loaded.state is not None:
            self.policy = loaded.state.policy
            self.train_seed = loaded.state.train_seed
        if flags.start_rollout_id is None:
            self.first_rollout = loaded.next_rollout_id
        if flags.rollout_global_dataset and loaded.load_dir is not None and self.first_rollout >= 1:
            checkpoint.load_data_state(
                loaded.load_dir,
                self.first_rollout - 1,
                self.source,
                flags.resume_fault,
                lambda where, message: self.out.log(self.rollout_actor, where, message),
            )

    def run(self) -> list[StepLog]:
        """The whole job: start (and load), every rollout, its training and its save, Ray's success lines."""
        self.start()
        for step in range(self.first_rollout, self.config.num_rollout):
            self.current_step = step
            self.run_step(step)
            self.save_point(step)
        self.current_step = None
        self.out.lines(logfmt.job_end_lines(self.job_id, "succeeded"))
        return self.steps

    def run_step(self, step: int) -> StepLog:
        clock, out, rollout_actor = self.clock, self.out, self.rollout_actor
        config = self.config
        step_start = clock.now()  # before deciding: a pause while the rollout is computed is in the rollout
        out.log(rollout_actor, "ft_utils.py:61", f"ft event=gather_start rollout_id={step} rank=0")
        missing = config.missing_filter_module
        if missing is not None and config.dynamic_sampling_filter_path is not None:
            raise MissingFilter(missing, config.dynamic_sampling_filter_path)  # Miles imports the filter here
        result = run_rollout(config, self.params, self.source, self.policy, step, clock.check_stop)
        log = StepLog(step=step, result=result)
        self.steps.append(log)

        at = self._rollout_events(result, step_start)
        clock.advance(result.seconds - at)
        out.log(
            rollout_actor,
            "ft_utils.py:64",
            f"ft event=gather_end rollout_id={step} rank=0 groups={len(result.kept)} dropped={result.dropped_total}",
        )
        rollout_time = clock.now() - step_start
        longest = max(answer.tokens for group in result.kept for answer in group.answers)
        log.rollout_perf = {
            ROLLOUT_TIME: rollout_time,
            "perf/tokens_per_gpu_per_sec": result.tokens / rollout_time if rollout_time > 0 else 0.0,
            "perf/longest_sample_tokens_per_sec": longest / rollout_time if rollout_time > 0 else 0.0,
            **rollout_side_metrics(result, config.n_samples_per_prompt, config.prints_unfiltered_reward),
        }
        out.metric(rollout_actor, "metrics.py:88", "perf", step, log.rollout_perf)

        self._train_side(step, log, result, step_start)
        self._eval_line(step, log)
        return log

    def _rollout_events(self, result: RolloutResult, step_start: float) -> float:
        """The rollout's lines as its events happen (aborts, samples, the progress bar); the time reached."""
        clock, out, rollout_actor, config = self.clock, self.out, self.rollout_actor, self.config
        at = 0.0
        for when, event in _with_noise(result):
            clock.advance(when - at)
            at = when
            if event == "abort":
                out.log(rollout_actor, "sglang_rollout.py:350", f"Abort request for {logfmt.SGLANG_URLS!r}")
                out.log(rollout_actor, "sglang_rollout.py:356", _sample_line("Finish rollout", result.kept[-1]))
            elif event == "first":
                out.log(rollout_actor, "sglang_rollout.py:318", _sample_line("First rollout sample", result.judged[0]))
            elif event.startswith("progress "):
                tenth = int(event.split()[1])
                total = config.rollout_batch_size * config.n_samples_per_prompt
                out.line(
                    f"({rollout_actor.name} pid={rollout_actor.pid}) "
                    + logfmt.progress_line(total * tenth // PROGRESS_TENTHS, total, clock.now() - step_start)
                )
            elif event == "partial":
                out.log(
                    rollout_actor,
                    "sglang_rollout.py:372",
                    f"Collected {result.partial_answers} partial samples into the data buffer",
                )
        return at

    def _train_side(self, step: int, log: StepLog, result: RolloutResult, step_start: float) -> None:
        """Training on the rollout: its timers, the `rollout`, `step` and train-side `perf` lines."""
        clock, out, train_actor = self.clock, self.out, self.train_actor
        plan = plan_training(self.config, self.params, result, self.train_seed)
        self.policy.learn(self.params)
        clock.advance(plan.wait_extra_s)
        train_start = clock.now()
        clock.advance(plan.sleep_s)
        after_sleep = clock.now()
        clock.advance(plan.logprob_s)
        after_logprob = clock.now()
        log.rollout = train_side_rollout_metrics(result)
        out.metric(train_actor, "log_utils.py:40", "rollout", step, log.rollout)
        for payload in plan.optimizer_steps:
            clock.advance(plan.actor_train_s / len(plan.optimizer_steps))
            out.metric(train_actor, "model.py:512", "step", payload["train/step"], payload)
            if train_actor.name == TRAIN_ACTORS["megatron"]:  # Megatron prints each step line twice
                out.metric(train_actor, "log_utils.py:95", "step", payload["train/step"], payload)
            log.optimizer_steps.append(payload)
        after_train = clock.now()
        clock.advance(plan.update_weights_s)
        after_update = clock.now()
        clock.advance(plan.wake_up_s)
        step_end = clock.now()
        train_wait = train_start - step_start
        train_time = step_end - train_start
        actor_train = after_train - after_logprob
        trained_tokens = sum(answer.tokens for group in result.kept for answer in group.answers)
        tokens_per_s = trained_tokens / actor_train if actor_train > 0 else 0.0
        log.train_perf = {
            "perf/train_wait_time": train_wait,
            "perf/sleep_time": after_sleep - train_start,
            "perf/log_probs_time": after_logprob - after_sleep,
            "perf/actor_train_time": actor_train,
            "perf/actor_train_tflops": 6 * MODEL_PARAMS * tokens_per_s / 1e12,
            "perf/actor_train_tok_per_s": tokens_per_s,
            "perf/update_weights_time": after_update - after_train,
            "perf/wake_up_time": step_end - after_update,
            TRAIN_TIME: train_time,
            STEP_TIME: train_wait + train_time,
            "perf/wait_time_ratio": train_wait / (train_wait + train_time) if train_wait + train_time > 0 else 0.0,
        }
        out.metric(train_actor, "train_metric_utils.py:120", "perf", step, log.train_perf)

    def _eval_line(self, step: int, log: StepLog) -> None:
        """`eval N` every --eval-interval rollouts (`eval N skipped` without eval data)."""
        config, out = self.config, self.out
        if config.eval_interval is not None and (step + 1) % config.eval_interval == 0:
            if config.eval_prompt_data is None:
                out.log(None, "train.py:88", f"eval {step} skipped: no {EVAL_PROMPT_DATA_FLAG} given")
            else:
                name = config.eval_prompt_data.split()[0]
                out.metric(
                    self.rollout_actor, "metrics.py:120", "eval", step, {f"eval/{name}": log.rollout[RAW_REWARD]}
                )

    def save_point(self, step: int) -> None:
        """After rollout `step`: a checkpoint when one is due (--save-interval, the last rollout, the sentinel)."""
        flags = self.config.checkpoint
        if flags.save is None:
            return
        sentinel = flags.save_trigger_sentinel
        asked = sentinel is not None and os.path.exists(sentinel)
        if not checkpoint.save_due(step, self.config.num_rollout, flags.save_interval, asked):
            return
        iteration = step + 1
        crash = flags.crash_at

        def power_cut(moment: str) -> None:
            if crash is not None and crash.hits(moment, iteration):
                self._power_cut(moment, iteration)

        global_step = iteration * self.config.optimizer_steps_per_rollout
        directory = checkpoint.save(
            flags.save,
            step,
            TrainState(self.policy, global_step, self.config.lr, self.train_seed),
            checkpoint.data_state(self.source) if flags.rollout_global_dataset else None,
            checkpoint.SaveOptions(
                save_optim=flags.save_optim,
                micro_step=global_step * self.config.global_batch_size,  # Miles's --micro-batch-size 1
                timestamp=self.out.moment().timestamp(),
            ),
            params=self.params,
            advance=self.clock.advance,
            power_cut=power_cut,
        )
        self.out.log(self.train_actor, checkpoint.SAVED_AT, f"[FSDP] Saved checkpoint to {directory}")
        if asked and sentinel is not None:
            try:
                os.remove(sentinel)
            except FileNotFoundError:  # whoever asked took it back
                pass
            except OSError as err:  # Miles's os.remove raises: the job dies
                raise CheckpointUnwritable(f"{type(err).__name__}: {err}") from None


def _with_noise(result: RolloutResult) -> list[tuple[float, str]]:
    """The rollout's events with the noise Miles prints among them: the first sample (when the first group is
    judged, taken as a tenth of the way to the abort) and tqdm's bar at every tenth of the way to the abort."""
    events = [(result.abort_at / PROGRESS_TENTHS, "first")]
    events += [(result.abort_at * k / PROGRESS_TENTHS, f"progress {k}") for k in range(1, PROGRESS_TENTHS + 1)]
    return sorted(events + result.events, key=lambda event: event[0])  # stable: at a tie the bar comes first


def _sample_line(what: str, group: object) -> str:
    """`First rollout sample: [...]` / `Finish rollout: [...]`: the prompt and answer text (with braces, as math
    has), its label and reward."""
    answers = getattr(group, "answers", [])
    reward = answers[0].reward if answers else 0
    return f"{what}: [{SAMPLE_TEXT!r}], label: 72, reward: {reward}"


class _NullStream:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def simulate(
    argv: Sequence[str],
    params: ModelParams | None = None,
    stream: TextSink | None = None,
    start: datetime | None = None,
    env: dict[str, str] | None = None,
    stop_requested: StopRequest | None = None,
) -> list[StepLog]:
    """Run the simulator in this process on simulated time; the log goes to `stream` (default: nowhere).

    For tests and benchmarks: raises SimUsageError / MilesRefusal where the
    program would exit 2 / 1, CheckpointUnreadable / CheckpointUnwritable where a load / a save dies, Stopped
    once `stop_requested` answers a signal, and PowerCut where the program
    would SIGKILL itself (HARNESS_SIM_CRASH_AT in `env`, which is otherwise empty).
    """
    config = parse_argv(argv, env or {})
    clock = SimulatedClock() if stop_requested is None else SimulatedClock(stop_requested)
    writer = LogWriter(stream if stream is not None else _NullStream(), clock.now, start or datetime(2026, 1, 1))

    def power_cut(moment: str, iteration: int) -> None:
        raise PowerCut(moment, iteration)

    return SimRun(config, params or DEFAULT_PARAMS, clock, writer, power_cut).run()
