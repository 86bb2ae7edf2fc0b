"""Every name of Miles's that the harness writes or reads, once: its flags, filter paths and metric keys.

The rest of the harness imports them from here; what the names mean (when
the filter is on, which key is the reward, which flags an experiment may
set) is ruled where they are read (`harness.mileslog.keys`,
`harness.experiments.flags`). This file imports nothing: the lab image's
entry and the simulator image carry harness/lab/ as it is.

A new flag goes in its group below and in `FLAGS` (the loader then refuses
its abbreviations), its name in the argument dump is `arg_name(flag)`.
"""

from __future__ import annotations

# ---- flags ---------------------------------------------------------------------------------------------------

# Set by the harness from an experiment's `steps` and `seed` (harness.experiments.flags.OWNED_FLAGS).
NUM_ROLLOUT_FLAG = "--num-rollout"
SEED_FLAG = "--seed"
ROLLOUT_SEED_FLAG = "--rollout-seed"

# The batch and the filter: the loader's checks, `harness ls` and `harness plan`, the summary's run facts.
ROLLOUT_BATCH_SIZE_FLAG = "--rollout-batch-size"  # B, the groups a step keeps
OVER_SAMPLING_BATCH_SIZE_FLAG = "--over-sampling-batch-size"  # O, the prompts one submission asks for
N_SAMPLES_PER_PROMPT_FLAG = "--n-samples-per-prompt"  # n, the answers of a group
FILTER_FLAG = "--dynamic-sampling-filter-path"
RM_TYPE_FLAG = "--rm-type"

# The model, the data and the GPUs: the image's entry and the cluster's placement.
HF_CHECKPOINT_FLAG = "--hf-checkpoint"
PROMPT_DATA_FLAG = "--prompt-data"
ACTOR_NUM_NODES_FLAG = "--actor-num-nodes"
ACTOR_NUM_GPUS_PER_NODE_FLAG = "--actor-num-gpus-per-node"
COLOCATE_FLAG = "--colocate"
ROLLOUT_NUM_GPUS_FLAG = "--rollout-num-gpus"

# The rest of what the simulator models, the rollout's submission and the board's hyperparameters.
ROLLOUT_MAX_RESPONSE_LEN_FLAG = "--rollout-max-response-len"
PARTIAL_ROLLOUT_FLAG = "--partial-rollout"
GLOBAL_BATCH_SIZE_FLAG = "--global-batch-size"
LR_FLAG = "--lr"
TRAIN_BACKEND_FLAG = "--train-backend"
EVAL_INTERVAL_FLAG = "--eval-interval"
EVAL_PROMPT_DATA_FLAG = "--eval-prompt-data"
ROLLOUT_SUBMISSION_GRANULARITY_FLAG = "--rollout-submission-granularity"

# Checkpoints (Miles's FSDP backend, docs/checkpoints.md). The harness owns these seven: it sets them from an
# experiment's `checkpoint` block and `run --resume` (harness.experiments.flags.OWNED_FLAGS).
SAVE_FLAG = "--save"
LOAD_FLAG = "--load"
SAVE_INTERVAL_FLAG = "--save-interval"
START_ROLLOUT_ID_FLAG = "--start-rollout-id"
CKPT_STEP_FLAG = "--ckpt-step"
NO_SAVE_OPTIM_FLAG = "--no-save-optim"
SAVE_TRIGGER_SENTINEL_FLAG = "--save-trigger-sentinel"
CHECKPOINT_FLAGS = (
    SAVE_FLAG,
    LOAD_FLAG,
    SAVE_INTERVAL_FLAG,
    START_ROLLOUT_ID_FLAG,
    CKPT_STEP_FLAG,
    NO_SAVE_OPTIM_FLAG,
    SAVE_TRIGGER_SENTINEL_FLAG,
)
# What a load skips, and the data source's saved position (the harness passes it with a `checkpoint` block).
NO_LOAD_OPTIM_FLAG = "--no-load-optim"
NO_LOAD_RNG_FLAG = "--no-load-rng"
ROLLOUT_GLOBAL_DATASET_FLAG = "--rollout-global-dataset"

# The simulator's own flags, which the harness puts on a simulated trainer's command line beside Miles's.
TIME_SCALE_FLAG = "--time-scale"
SIM_MILES_FLAG = "--miles"

# Every flag above: the flags the harness reads or sets on the trainer's command line.
FLAGS = (
    NUM_ROLLOUT_FLAG,
    SEED_FLAG,
    ROLLOUT_SEED_FLAG,
    ROLLOUT_BATCH_SIZE_FLAG,
    OVER_SAMPLING_BATCH_SIZE_FLAG,
    N_SAMPLES_PER_PROMPT_FLAG,
    FILTER_FLAG,
    RM_TYPE_FLAG,
    HF_CHECKPOINT_FLAG,
    PROMPT_DATA_FLAG,
    ACTOR_NUM_NODES_FLAG,
    ACTOR_NUM_GPUS_PER_NODE_FLAG,
    COLOCATE_FLAG,
    ROLLOUT_NUM_GPUS_FLAG,
    ROLLOUT_MAX_RESPONSE_LEN_FLAG,
    PARTIAL_ROLLOUT_FLAG,
    GLOBAL_BATCH_SIZE_FLAG,
    LR_FLAG,
    TRAIN_BACKEND_FLAG,
    EVAL_INTERVAL_FLAG,
    EVAL_PROMPT_DATA_FLAG,
    ROLLOUT_SUBMISSION_GRANULARITY_FLAG,
    *CHECKPOINT_FLAGS,
    NO_LOAD_OPTIM_FLAG,
    NO_LOAD_RNG_FLAG,
    ROLLOUT_GLOBAL_DATASET_FLAG,
    TIME_SCALE_FLAG,
    SIM_MILES_FLAG,
)


def arg_name(flag: str) -> str:
    """A flag's name in Miles's argument dump, as argparse names it: `--rollout-batch-size` -> `rollout_batch_size`."""
    return flag.lstrip("-").replace("-", "_")


# ---- the zero-variance filter --------------------------------------------------------------------------------

# The write-up's Miles (main 08752a12) has both paths; public Miles up to August 2026 only FILTER_PATH_PUBLIC,
# which 08752a12 keeps as a deprecated alias of FILTER_PATH.
WRITE_UP_MILES = "08752a12"
FILTER_PATH = "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter"
FILTER_PATH_PUBLIC = "miles.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std"
ZERO_STD_FILTER_PATHS = (FILTER_PATH, FILTER_PATH_PUBLIC)
DEPRECATED_FILTER_PATHS = {FILTER_PATH_PUBLIC: FILTER_PATH}  # deprecated path -> the one to use

# ---- metric keys (the dicts of Miles's `perf N` and `rollout N` lines) ---------------------------------------

ROLLOUT_TIME = "perf/rollout_time"
STEP_TIME = "perf/step_time"
STEP_TIME_OLD = "perf/total_train_time"  # older slime's name for the same timer
TRAIN_TIME = "perf/train_time"
RAW_REWARD = "rollout/raw_reward"
RAW_REWARD_UNFILTERED = "rollout/raw_reward_unfiltered"  # printed by the write-up's Miles only
TRUNCATED_RATIO = "rollout/truncated_ratio"

ROLLOUT_PREFIX = "rollout/"
DYNAMIC_FILTER_PREFIX = "rollout/dynamic_filter/"
ZERO_STD_PREFIX = "rollout/zero_std/"
DROP_PREFIX = DYNAMIC_FILTER_PREFIX + "drop_"  # + the reason: the groups the filter dropped for it
ZERO_STD_DROP_PREFIX = DROP_PREFIX + "zero_std_"  # + the group's reward, as Python prints round(reward, 1)
ZERO_STD_COUNT_PREFIX = ZERO_STD_PREFIX + "count_"  # + the reward: the zero-variance groups kept
