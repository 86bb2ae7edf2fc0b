"""Miles's command line, as the simulator reads it: the flags it models, the rest kept for the dump.

The simulator is a drop-in for Miles's `train.py`, so it takes the same argv
(the lab's base run plus MILES_EXTRA_ARGS) unchanged. It reads the flags that
change what a rollout does; every other flag is accepted, ignored, and shown
in the argument dump as given. `--time-scale` is the simulator's own flag and
is taken out before anything else sees the argv.

Miles's own rules kept here: the last occurrence of a flag wins (argparse);
`--over-sampling-batch-size` defaults to `--rollout-batch-size` and must be
at least it (Miles asserts it while parsing its arguments); the deprecated
filter path is an alias of the current one.

`--miles VERSION` (or HARNESS_SIM_MILES) is the simulator's own flag too: which
Miles it stands in for. `08752a12` (the default, the write-up's main) prints
`rollout/raw_reward_unfiltered` and has both filter paths; `public-2026-08`
(the public snapshots up to August 2026) prints no unfiltered reward and has
only `FILTER_PATH_PUBLIC`: the other path fails at the first rollout, as
Miles fails to import it there.

Checkpoints (`--save`, `--load`, ... as Miles's FSDP backend takes them) are
read into `CheckpointFlags`, with the two settings of the tests read from the
environment: HARNESS_SIM_RESUME_FAULT (which upstream fallback of a load to
imitate) and HARNESS_SIM_CRASH_AT (the moment of a save to cut the power at).
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from typing import NoReturn, Sequence, Union

from harness.lab.milesnames import (
    CKPT_STEP_FLAG,
    EVAL_INTERVAL_FLAG,
    EVAL_PROMPT_DATA_FLAG,
    FILTER_FLAG,
    FILTER_PATH,
    FILTER_PATH_PUBLIC,
    GLOBAL_BATCH_SIZE_FLAG,
    LOAD_FLAG,
    LR_FLAG,
    N_SAMPLES_PER_PROMPT_FLAG,
    NO_LOAD_OPTIM_FLAG,
    NO_LOAD_RNG_FLAG,
    NO_SAVE_OPTIM_FLAG,
    NUM_ROLLOUT_FLAG,
    OVER_SAMPLING_BATCH_SIZE_FLAG,
    PARTIAL_ROLLOUT_FLAG,
    RAW_REWARD_UNFILTERED,
    ROLLOUT_BATCH_SIZE_FLAG,
    ROLLOUT_GLOBAL_DATASET_FLAG,
    ROLLOUT_MAX_RESPONSE_LEN_FLAG,
    ROLLOUT_SEED_FLAG,
    SAVE_FLAG,
    SAVE_INTERVAL_FLAG,
    SAVE_TRIGGER_SENTINEL_FLAG,
    SEED_FLAG,
    SIM_MILES_FLAG,
    START_ROLLOUT_ID_FLAG,
    TIME_SCALE_FLAG,
    TRAIN_BACKEND_FLAG,
    WRITE_UP_MILES,
    ZERO_STD_FILTER_PATHS,
    arg_name,
)
from harness.sim.timescale import TIME_SCALE_RANGE, time_scale_problem

TIME_SCALE_ENV = "HARNESS_SIM_TIME_SCALE"
MILES_ENV = "HARNESS_SIM_MILES"
PUBLIC_MILES = "public-2026-08"
MILES_VERSIONS = (WRITE_UP_MILES, PUBLIC_MILES)
RESUME_FAULT_ENV = "HARNESS_SIM_RESUME_FAULT"
CRASH_AT_ENV = "HARNESS_SIM_CRASH_AT"
# The upstream failures of a resume the simulator imitates (docs/simulator.md, "Checkpoints").
RESUME_FAULTS = (
    "silent-no-load",  # the argument check drops --load: no line, start at 0
    "no-dir",  # the loader's "Checkpoint directory ... not found; skipping load."
    "no-tracker",  # "No tracker file at ...; skipping load."
    "no-model",  # "Model checkpoint ... not found; skipping load."
    "load-fails",  # "Failed to load model from ...: RuntimeError: ..."
    "no-data-state",  # the data source's "Checkpoint ... does not exist."
    "loop-at-zero",  # THUDM/slime#1558: loaded, but the rollout loop starts at 0
    "zero-rollouts",  # modal-projects/training-gym#492: needs no setting (a --num-rollout at or below the load)
    "reward-collapse",  # THUDM/slime#1695: very low reward for a few rollouts after a load
)
# The moments of a save at which HARNESS_SIM_CRASH_AT cuts the power, in the order a save passes them.
SAVE_MOMENTS = ("model-write", "after-meta", "tracker-write", "after-tracker")

# Flags the lab always sets: where Miles has no default (or a useless one, like one answer
# per prompt), the simulator takes the lab's base run, so `harness sim` alone runs it.
LAB_DEFAULTS = {
    "rollout_batch_size": 32,
    "n_samples_per_prompt": 8,
    "num_rollout": 12,
    "rollout_max_response_len": 1024,
}
# Miles's own defaults for the flags the simulator reads.
MILES_SEED = 1234
MILES_ROLLOUT_SEED = 42
MILES_LR = 1e-6
MILES_TRAIN_BACKEND = "megatron"

_NUMBER = re.compile(r"^-\d|^-\.\d")

# The sizes no GB10 run could have, refused before anything runs, so the work of one simulated rollout is bounded
# (and a signal is always answered within a bounded piece of it). The lab's runs generate 256 to 384 answers a
# rollout; a GB10 generating a few thousand tokens a second would take days over a rollout of 2^20 answers.
MAX_SAMPLES_PER_PROMPT = 1024  # --n-samples-per-prompt: answers of one group, drawn without a stop check
MAX_ROLLOUT_ANSWERS = 2**20  # --over-sampling-batch-size x --n-samples-per-prompt: answers one submission asks for
MAX_OPTIMIZER_STEPS = 4096  # B x n / --global-batch-size: optimizer steps (and their log lines) of one rollout
MAX_NUM_ROLLOUT = 1_000_000  # --num-rollout


class SimUsageError(Exception):
    """A command line the simulator cannot run (exit 2, like argparse)."""


class MilesRefusal(Exception):
    """A command line Miles itself refuses while parsing its arguments (an AssertionError there)."""

    kind = "AssertionError"
    source = "assert args.over_sampling_batch_size >= args.rollout_batch_size, ("  # Miles's line that refuses it


class UnfillableBatch(MilesRefusal):
    """A command line no batch can fill: refused where Miles would generate forever (the simulator's own check)."""

    kind = "ValueError"
    source = f'raise ValueError(f"{N_SAMPLES_PER_PROMPT_FLAG} 1 with the zero-variance filter: ...")'


@dataclass(frozen=True)
class CrashAt:
    """HARNESS_SIM_CRASH_AT: cut the power at `moment` of the save of `iteration` (None: of the first save)."""

    moment: str
    iteration: int | None = None

    def hits(self, moment: str, iteration: int) -> bool:
        return moment == self.moment and self.iteration in (None, iteration)


@dataclass(frozen=True)
class CheckpointFlags:
    """Miles's checkpoint flags (FSDP backend), and the tests' settings for a load's fault and a save's crash."""

    save: str | None = None
    save_interval: int | None = None
    load: str | None = None
    start_rollout_id: int | None = None
    save_optim: bool = True
    load_optim: bool = True
    load_rng: bool = True
    save_trigger_sentinel: str | None = None
    rollout_global_dataset: bool = False
    resume_fault: str | None = None  # RESUME_FAULTS
    crash_at: CrashAt | None = None


@dataclass(frozen=True)
class SimConfig:
    """What one simulated training run does, read from Miles's flags (fields named as Miles names them)."""

    rollout_batch_size: int
    n_samples_per_prompt: int
    over_sampling_batch_size: int
    dynamic_sampling_filter_path: str | None
    num_rollout: int
    seed: int
    rollout_seed: int
    rollout_max_response_len: int
    partial_rollout: bool
    global_batch_size: int
    lr: float
    train_backend: str
    time_scale: float
    miles_argv: tuple[str, ...]  # the argv as Miles gets it (no --time-scale, no --miles)
    dump: tuple[tuple[str, object], ...]  # the argument dump: (name, value as printed with str()), Miles's names
    miles: str = WRITE_UP_MILES  # which Miles it stands in for (MILES_VERSIONS)
    eval_interval: int | None = None
    eval_prompt_data: str | None = None
    checkpoint: CheckpointFlags = CheckpointFlags()

    @property
    def uses_filter(self) -> bool:
        return self.dynamic_sampling_filter_path is not None

    @property
    def prints_unfiltered_reward(self) -> bool:
        """Only the write-up's Miles prints `rollout/raw_reward_unfiltered`."""
        return self.miles == WRITE_UP_MILES

    @property
    def missing_filter_module(self) -> str | None:
        """The module Miles fails to import at the first rollout: the filter path's, where this Miles lacks it."""
        path = self.dynamic_sampling_filter_path
        if path is None or self.miles != PUBLIC_MILES or path == FILTER_PATH_PUBLIC:
            return None
        return path.rpartition(".")[0]

    @property
    def prints_argument_dump(self) -> bool:
        """Megatron's argument check prints the dump; the FSDP backend has none."""
        return self.train_backend != "fsdp"

    @property
    def optimizer_steps_per_rollout(self) -> int:
        """Miles's num_steps_per_rollout: the answers of a rollout over the global batch size."""
        return max(1, self.rollout_batch_size * self.n_samples_per_prompt // self.global_batch_size)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _rollout_id(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {value}")
    return value


class _ArgparseError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise _ArgparseError(message)


def _flag_parser() -> _Parser:
    parser = _Parser(
        prog="train.py",
        description="The simulated Miles trainer: Miles's flags in, a Miles-shaped log out.",
        allow_abbrev=False,
        add_help=False,
    )
    add = parser.add_argument
    add(ROLLOUT_BATCH_SIZE_FLAG, type=_positive_int, default=LAB_DEFAULTS["rollout_batch_size"])
    add(N_SAMPLES_PER_PROMPT_FLAG, type=_positive_int, default=LAB_DEFAULTS["n_samples_per_prompt"])
    add(OVER_SAMPLING_BATCH_SIZE_FLAG, type=_positive_int, default=None)
    add(FILTER_FLAG, default=None)
    add(NUM_ROLLOUT_FLAG, type=int, default=LAB_DEFAULTS["num_rollout"])
    add(SEED_FLAG, type=int, default=MILES_SEED)
    add(ROLLOUT_SEED_FLAG, type=int, default=MILES_ROLLOUT_SEED)
    add(ROLLOUT_MAX_RESPONSE_LEN_FLAG, type=_positive_int, default=LAB_DEFAULTS["rollout_max_response_len"])
    add(PARTIAL_ROLLOUT_FLAG, action="store_true", default=False)
    add(GLOBAL_BATCH_SIZE_FLAG, type=_positive_int, default=None)
    add(LR_FLAG, type=float, default=MILES_LR)
    add(TRAIN_BACKEND_FLAG, default=MILES_TRAIN_BACKEND)
    add(EVAL_INTERVAL_FLAG, type=_positive_int, default=None)
    add(EVAL_PROMPT_DATA_FLAG, nargs="+", default=None)
    # Checkpoints, as Miles's FSDP backend takes them (`--ckpt-step` is read and ignored: FSDP loads what the
    # tracker names).
    add(SAVE_FLAG, default=None)
    add(SAVE_INTERVAL_FLAG, type=_positive_int, default=None)
    add(LOAD_FLAG, default=None)
    add(START_ROLLOUT_ID_FLAG, type=_rollout_id, default=None)
    add(NO_SAVE_OPTIM_FLAG, action="store_true", default=False)
    add(NO_LOAD_OPTIM_FLAG, action="store_true", default=False)
    add(NO_LOAD_RNG_FLAG, action="store_true", default=False)
    add(SAVE_TRIGGER_SENTINEL_FLAG, default=None)
    add(CKPT_STEP_FLAG, type=int, default=None)
    add(ROLLOUT_GLOBAL_DATASET_FLAG, action="store_true", default=False)
    return parser


def split_time_scale(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, list[str]]:
    """(time scale, Miles's argv): `--time-scale X` / `--time-scale=X` taken out, last one wins.

    Without the flag, the environment's HARNESS_SIM_TIME_SCALE, else 0.
    """
    given, source, miles = _take_own_flag(
        argv, TIME_SCALE_FLAG, TIME_SCALE_ENV, env, " (seconds of wall time per simulated second)"
    )
    if given is None:
        return 0.0, miles
    try:
        scale = float(given)
    except ValueError:
        raise SimUsageError(f"{source} must be a number of wall seconds per simulated second, not {given!r}") from None
    problem = time_scale_problem(scale, zero_allowed=True)
    if problem is not None:
        raise SimUsageError(f"{source} {problem}, not {given!r}")
    return scale, miles


def split_miles(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """(the Miles stood in for, the rest of the argv): `--miles V` / `--miles=V` taken out, last one wins.

    Without the flag, the environment's HARNESS_SIM_MILES, else the write-up's 08752a12.
    """
    given, source, rest = _take_own_flag(argv, SIM_MILES_FLAG, MILES_ENV, env, f": one of {', '.join(MILES_VERSIONS)}")
    if given is None:
        return WRITE_UP_MILES, rest
    if given not in MILES_VERSIONS:
        raise SimUsageError(f"{source} must be one of {', '.join(MILES_VERSIONS)}, not {given!r}")
    return given, rest


def _take_own_flag(
    argv: Sequence[str], flag: str, env_name: str, env: dict[str, str] | None, what: str
) -> tuple[str | None, str, list[str]]:
    """(the value, where it came from, the rest of the argv): one of the simulator's own flags, `flag X` or
    `flag=X`, taken out of Miles's argv (the last one wins); without it, the environment's `env_name`; else None.

    `what` ends the error for a flag without its value.
    """
    words = list(argv)
    rest: list[str] = []
    given: str | None = None
    i = 0
    while i < len(words):
        word = words[i]
        if word == flag:
            if i + 1 >= len(words):
                raise SimUsageError(f"{flag} needs a value{what}")
            given = words[i + 1]
            i += 2
            continue
        if word.startswith(flag + "="):
            given = word.split("=", 1)[1]
        else:
            rest.append(word)
        i += 1
    if given is None and env and env.get(env_name, "").strip():
        return env[env_name].strip(), env_name, rest
    return given, flag, rest


def parse_argv(argv: Sequence[str], env: dict[str, str] | None = None) -> SimConfig:
    """Miles's argv (plus --time-scale and --miles) -> SimConfig.

    Raises SimUsageError for what argparse would reject, MilesRefusal for what
    Miles's argument checks reject (UnfillableBatch for what Miles would run forever).
    """
    miles, argv = split_miles(argv, env)
    time_scale, miles_argv = split_time_scale(argv, env)
    try:
        known, _rest = _flag_parser().parse_known_args(miles_argv)
    except _ArgparseError as err:
        raise SimUsageError(err.message) from None

    batch, over_sampling, global_batch = _sizes(known)
    if over_sampling < batch:
        # Miles's own words (miles/utils/arguments.py), raised as an AssertionError.
        raise MilesRefusal(
            f"over_sampling_batch_size {over_sampling} should be greater than or equal to rollout_batch_size {batch}"
        )
    if known.num_rollout < 0:
        raise SimUsageError(f"argument {NUM_ROLLOUT_FLAG}: must be at least 0, not {known.num_rollout}")
    filter_path = known.dynamic_sampling_filter_path
    if filter_path in ("", "None"):
        filter_path = None
    if filter_path is not None and filter_path not in ZERO_STD_FILTER_PATHS:
        raise SimUsageError(
            f"argument {FILTER_FLAG}: the simulator models only the zero-variance filter "
            f"({FILTER_PATH} or its deprecated alias {FILTER_PATH_PUBLIC}), not {filter_path}"
        )
    if filter_path is not None and known.n_samples_per_prompt == 1:
        # Miles would generate forever: its data source starts the data set again when it runs out.
        raise UnfillableBatch(
            f"{N_SAMPLES_PER_PROMPT_FLAG} 1 with the zero-variance filter: a group of one answer has no variance, so "
            "the filter drops every group and no batch can fill; give 2 or more answers per prompt, or no filter"
        )
    problem = size_problem(batch, over_sampling, known.n_samples_per_prompt, global_batch, known.num_rollout)
    if problem is not None:
        raise SimUsageError(problem)

    resolved = {
        "rollout_batch_size": batch,
        "n_samples_per_prompt": known.n_samples_per_prompt,
        "over_sampling_batch_size": over_sampling,
        "dynamic_sampling_filter_path": filter_path,
        "num_rollout": known.num_rollout,
        "seed": known.seed,
        "rollout_seed": known.rollout_seed,
        "rollout_max_response_len": known.rollout_max_response_len,
        "partial_rollout": known.partial_rollout,
        "global_batch_size": global_batch,
        "lr": known.lr,
        "train_backend": known.train_backend,
    }
    checkpoint = checkpoint_flags(known, env or {})
    if (checkpoint.save or checkpoint.load or checkpoint.save_trigger_sentinel) and known.train_backend != "fsdp":
        raise SimUsageError(
            f"{SAVE_FLAG}, {LOAD_FLAG} and {SAVE_TRIGGER_SENTINEL_FLAG}: the simulator models the checkpoints of "
            f"Miles's FSDP backend only, not {known.train_backend}'s; give {TRAIN_BACKEND_FLAG} fsdp (the lab's base "
            "run has it)"
        )
    # Not in `resolved`: the argument dump shows them only as given, as it did before the simulator read them.
    return SimConfig(
        **resolved,
        time_scale=time_scale,
        miles_argv=tuple(miles_argv),
        dump=tuple(sorted(argument_dump(miles_argv, resolved).items(), key=lambda item: item[0].lower())),
        miles=miles,
        eval_interval=known.eval_interval,
        eval_prompt_data=" ".join(known.eval_prompt_data) if known.eval_prompt_data else None,
        checkpoint=checkpoint,
    )


def checkpoint_flags(known: argparse.Namespace, env: dict[str, str]) -> CheckpointFlags:
    """The checkpoint flags argparse read, with the fault and crash settings of the environment."""
    for flag in ("save", "load", "save_trigger_sentinel"):
        if getattr(known, flag) == "":
            raise SimUsageError(f"argument --{flag.replace('_', '-')}: needs a path, not an empty word")
    fault = env.get(RESUME_FAULT_ENV, "").strip() or None
    if fault is not None and fault not in RESUME_FAULTS:
        raise SimUsageError(f"{RESUME_FAULT_ENV} must be one of {', '.join(RESUME_FAULTS)}, not {fault!r}")
    crash = env.get(CRASH_AT_ENV, "").strip()
    return CheckpointFlags(
        save=known.save,
        save_interval=known.save_interval,
        load=known.load,
        start_rollout_id=known.start_rollout_id,
        save_optim=not known.no_save_optim,
        load_optim=not known.no_load_optim,
        load_rng=not known.no_load_rng,
        save_trigger_sentinel=known.save_trigger_sentinel,
        rollout_global_dataset=known.rollout_global_dataset,
        resume_fault=fault,
        crash_at=parse_crash_at(crash) if crash else None,
    )


def parse_crash_at(text: str) -> CrashAt:
    """`MOMENT` or `MOMENT:ITERATION` (HARNESS_SIM_CRASH_AT) -> CrashAt; SimUsageError naming the variable."""
    moment, colon, iteration = text.partition(":")
    if moment not in SAVE_MOMENTS or (colon and not (iteration.isdigit() and int(iteration) >= 1)):
        raise SimUsageError(
            f"{CRASH_AT_ENV} must be MOMENT or MOMENT:ITERATION, MOMENT one of {', '.join(SAVE_MOMENTS)} and "
            f"ITERATION a checkpoint's iteration (1 or more), not {text!r}"
        )
    return CrashAt(moment, int(iteration) if colon else None)


def size_problem(
    rollout_batch_size: int,
    over_sampling_batch_size: int,
    n_samples_per_prompt: int,
    global_batch_size: int,
    num_rollout: int,
) -> str | None:
    """Why these sizes are more than any GB10 run could have (None when they are not); each names its limit."""
    if n_samples_per_prompt > MAX_SAMPLES_PER_PROMPT:
        return (
            f"{N_SAMPLES_PER_PROMPT_FLAG} {n_samples_per_prompt} is more than any GB10 run could have "
            f"(at most {MAX_SAMPLES_PER_PROMPT} answers per prompt)"
        )
    if over_sampling_batch_size * n_samples_per_prompt > MAX_ROLLOUT_ANSWERS:
        return (
            f"{OVER_SAMPLING_BATCH_SIZE_FLAG} {over_sampling_batch_size} (or {ROLLOUT_BATCH_SIZE_FLAG} {rollout_batch_size}) x "
            f"{N_SAMPLES_PER_PROMPT_FLAG} {n_samples_per_prompt} answers in one rollout is more than any GB10 run could "
            f"have (at most {MAX_ROLLOUT_ANSWERS:,})"
        )
    if rollout_batch_size * n_samples_per_prompt // global_batch_size > MAX_OPTIMIZER_STEPS:
        return (
            f"{GLOBAL_BATCH_SIZE_FLAG} {global_batch_size} gives {rollout_batch_size * n_samples_per_prompt // global_batch_size:,} "
            f"optimizer steps a rollout, more than any GB10 run could have (at most {MAX_OPTIMIZER_STEPS:,})"
        )
    if num_rollout > MAX_NUM_ROLLOUT:
        return f"{NUM_ROLLOUT_FLAG} {num_rollout} is more than any GB10 run could have (at most {MAX_NUM_ROLLOUT:,})"
    return None


def sizes_problem(miles_argv: Sequence[str]) -> str | None:
    """`size_problem` of a trainer argv (the flags as the simulator reads them; None where it cannot read them)."""
    try:
        known, _rest = _flag_parser().parse_known_args(list(miles_argv))
    except _ArgparseError:
        return None  # the simulator says what is wrong with it when it runs
    batch, over_sampling, global_batch = _sizes(known)
    return size_problem(batch, max(batch, over_sampling), known.n_samples_per_prompt, global_batch, known.num_rollout)


def _sizes(known: argparse.Namespace) -> tuple[int, int, int]:
    """(B, O, the global batch size) as Miles reads them: O is B where not given, the global batch every answer."""
    batch: int = known.rollout_batch_size
    over_sampling: int = known.over_sampling_batch_size if known.over_sampling_batch_size is not None else batch
    given: int | None = known.global_batch_size
    return batch, over_sampling, given if given is not None else batch * known.n_samples_per_prompt


def help_text() -> str:
    """argparse's usage and help for the flags the simulator models."""
    text = _flag_parser().format_help()
    return text + (
        f"\n  {TIME_SCALE_FLAG} X    wall seconds per simulated second, {TIME_SCALE_RANGE} (0: as fast "
        "as possible; default 0)\n"
        f"  {SIM_MILES_FLAG} V         the Miles it stands in for: {WRITE_UP_MILES} (default: prints "
        f"{RAW_REWARD_UNFILTERED}) or {PUBLIC_MILES} (does not; only its own filter path)\n"
        f"\n  {RESUME_FAULT_ENV}=NAME  imitate an upstream failure of a load: {', '.join(RESUME_FAULTS)}\n"
        f"  {CRASH_AT_ENV}=MOMENT[:ITERATION]  SIGKILL itself at a moment of a save: {', '.join(SAVE_MOMENTS)}\n"
    )


def _is_flag(word: str) -> bool:
    return word.startswith("--") and not _NUMBER.match(word) and len(word) > 2


def _typed(word: str) -> Union[int, float, str]:
    """A flag value as Miles's argparse types would make it: a number where it reads as one."""
    for kind in (int, float):
        try:
            value = kind(word)
        except ValueError:
            continue
        return value if not isinstance(value, float) or math.isfinite(value) else word
    return word


def argument_dump(miles_argv: Sequence[str], resolved: dict[str, object]) -> dict[str, object]:
    """Every flag given (its value typed, a list of values, or True when bare), then the resolved ones.

    The resolved values of the modelled flags win: they are what the trainer ran with.
    """
    dump: dict[str, object] = {}
    flag: str | None = None
    values: list[str] = []

    def close() -> None:
        if flag is not None:
            typed = [_typed(value) for value in values]
            dump[arg_name(flag)] = True if not typed else typed[0] if len(typed) == 1 else typed

    for word in miles_argv:
        if _is_flag(word):
            close()
            name, eq, value = word.partition("=")
            flag, values = name, ([value] if eq else [])
        elif flag is not None:
            values.append(word)
    close()
    dump.update(resolved)
    return dump
