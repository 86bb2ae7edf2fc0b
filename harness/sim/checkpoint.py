"""Checkpoints as Miles's FSDP backend writes and loads them (MILES-LOGS section 7), holding the simulator's state.

Layout after rollout r (iteration r + 1), under `--save DIR`:

    DIR/iter_{r+1:07d}/model/__0_0.distcp, model/.metadata      the policy
    DIR/iter_{r+1:07d}/optimizer/..., lr_scheduler/...           (not with --no-save-optim)
    DIR/iter_{r+1:07d}/rng.pt                                    the seed of the train side's random streams
    DIR/rollout/global_dataset_state_dict_{r}.pt                 the data source (--rollout-global-dataset)
    DIR/iter_{r+1:07d}/meta.json                                 written to a temporary file and renamed
    DIR/latest_checkpointed_iteration.txt                        the text r+1, written in place

written in that order, then the `[FSDP] Saved checkpoint to ...` line. A
directory is finished by its `.metadata`, written last, as
torch.distributed.checkpoint finishes one. The files are the simulator's own
JSON texts under Miles's names; their nominal size (ModelParams) is what
sets how long a save or a load takes on the clock.

That is the simulator's whole state between rollouts: every other draw is
seeded by the flags and the rollout id, so a run loaded from iteration r + 1
continues exactly as the run that saved it did, given the data source's state
(`--rollout-global-dataset`; without it the data source starts again from
the first prompt, as Miles's does).

Deciding is pure (`save_due`, what a load finds is read in `load`); the
save and the load act through the callables they are given: `advance` lets
simulated time pass, `power_cut(moment)` is where HARNESS_SIM_CRASH_AT may
kill the process, `say(where, message)` prints a line of the train actor.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Callable, Optional

from harness.sim.config import CheckpointFlags
from harness.sim.model import Answer, Group, Policy, PromptSource
from harness.sim.params import ModelParams

FORMAT = "harness-sim-checkpoint/1"
TRACKER_FILE = "latest_checkpointed_iteration.txt"
SHARD_FILE = "__0_0.distcp"  # torch.distributed.checkpoint's file of rank 0
METADATA_FILE = ".metadata"
META_FILE = "meta.json"
RNG_FILE = "rng.pt"

# Where Miles's lines come from (`checkpoint.py:NNN` of miles/backends/fsdp_utils; data_source.py of the rollout).
SAVED_AT = "checkpoint.py:248"
LOADED_MODEL_AT = "checkpoint.py:117"
LOADED_OPTIMIZER_AT = "checkpoint.py:131"
NO_DIRECTORY_AT = "checkpoint.py:84"
NO_TRACKER_AT = "checkpoint.py:90"
NO_MODEL_AT = "checkpoint.py:99"
LOAD_FAILED_AT = "checkpoint.py:121"
NO_DATA_STATE_AT = "data_source.py:93"

# What HARNESS_SIM_RESUME_FAULT=load-fails makes the model's load raise.
FAULT_LOAD_ERROR = (
    "RuntimeError: Error(s) in loading state_dict for FSDPModule: size mismatch for model.embed_tokens.weight"
)

Say = Callable[[str, str], None]  # (where, message): a line of the train actor
Advance = Callable[[float], None]  # simulated seconds pass
PowerCutHook = Callable[[str], None]  # a moment of the save (config.SAVE_MOMENTS)


class PowerCut(Exception):
    """HARNESS_SIM_CRASH_AT's moment, where the process is not to be SIGKILLed (simulate(), in tests)."""

    def __init__(self, moment: str, iteration: int) -> None:
        super().__init__(f"power cut at {moment} of the save of iteration {iteration}")
        self.moment, self.iteration = moment, iteration


class CheckpointUnreadable(Exception):
    """A checkpoint file Miles fails on (not one its loader catches): the job dies with a traceback."""

    def __init__(self, exception: str, source: str) -> None:
        super().__init__(exception)
        self.exception = exception  # `Type: message`, Python's last traceback line
        self.source = source  # Miles's line that raised it


class CheckpointUnwritable(Exception):
    """A save the file system refused (no permission, no space): Miles's save raises and the job dies."""

    def __init__(self, exception: str) -> None:
        super().__init__(exception)
        self.exception = exception


# Every file of a checkpoint the simulator writes is a few hundred bytes (a partial-rollout buffer a few MB at
# most): a larger one is not one of them, and is not read whole.
MAX_FILE_BYTES = 64 * 1024 * 1024


def iteration_dir(root: str, iteration: int) -> str:
    return os.path.join(root, f"iter_{iteration:07d}")


def data_state_path(root: str, rollout_id: int) -> str:
    return os.path.join(root, "rollout", f"global_dataset_state_dict_{rollout_id}.pt")


def save_due(rollout_id: int, num_rollout: int, save_interval: Optional[int], sentinel_present: bool) -> bool:
    """Miles's save point after rollout `rollout_id`: every save_interval-th rollout, the last one, or on request."""
    periodic = save_interval is not None and (rollout_id + 1) % save_interval == 0
    return periodic or rollout_id == num_rollout - 1 or sentinel_present


@dataclass
class TrainState:
    """What the train actor saves and loads: the policy, the optimizer's and scheduler's step, the rng's seed."""

    policy: Policy
    global_step: int
    lr: float
    train_seed: int


# ---- the data source's state -------------------------------------------------------------------------------------


def data_state(source: PromptSource) -> dict[str, object]:
    """The data source's state as Miles names it, with the buffer of --partial-rollout's aborted groups."""
    return {
        "format": FORMAT,
        "sample_offset": source.cursor,
        "epoch_id": 0,
        "sample_group_index": source.cursor,
        "sample_index": source.cursor * source.n_samples,
        "partial_rollout_buffer": [_group_fields(group) for group in source.buffer],
    }


def restore_data_state(source: PromptSource, state: dict[str, object]) -> None:
    """Put a saved data state back (raises KeyError/TypeError/ValueError on one that is not)."""
    cursor = state["sample_offset"]
    buffer = state["partial_rollout_buffer"]
    if not isinstance(cursor, int) or cursor < 0 or not isinstance(buffer, list):
        raise ValueError(f"not a data source state: sample_offset {cursor!r}")
    source.cursor = cursor
    source.buffer = [_group_from(fields) for fields in buffer]


def _group_fields(group: Group) -> dict[str, object]:
    return {
        "prompt": group.prompt,
        "pass_rate": group.pass_rate,
        "first_step": group.first_step,
        "submissions": group.submissions,
        "answers": [[a.tokens, a.reward, a.truncated, a.generated] for a in group.answers],
    }


def _group_from(fields: dict[str, object]) -> Group:
    answers = fields["answers"]
    if not isinstance(answers, list):
        raise ValueError("a buffered group without its answers")
    return Group(
        prompt=int(fields["prompt"]),  # type: ignore[call-overload]
        pass_rate=float(fields["pass_rate"]),  # type: ignore[arg-type]
        answers=[Answer(int(t), int(r), bool(c), int(g)) for t, r, c, g in answers],
        first_step=int(fields["first_step"]),  # type: ignore[call-overload]
        submissions=int(fields["submissions"]),  # type: ignore[call-overload]
    )


# ---- saving ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SaveOptions:
    """What a save writes beside the state: the optimizer or not (--no-save-optim), meta.json's counter and time."""

    save_optim: bool
    micro_step: int
    timestamp: float


def save(
    root: str,
    rollout_id: int,
    state: TrainState,
    data: Optional[dict[str, object]],
    options: SaveOptions,
    *,
    params: ModelParams,
    advance: Advance,
    power_cut: PowerCutHook,
) -> str:
    """Write the checkpoint of rollout `rollout_id` in Miles's order; its directory (for the `Saved` line).

    CheckpointUnwritable where the file system refuses a write.
    """
    try:
        return _save(root, rollout_id, state, data, options, params, advance, power_cut)
    except OSError as err:
        raise CheckpointUnwritable(f"{type(err).__name__}: {err}") from None


def _save(
    root: str,
    rollout_id: int,
    state: TrainState,
    data: Optional[dict[str, object]],
    options: SaveOptions,
    params: ModelParams,
    advance: Advance,
    power_cut: PowerCutHook,
) -> str:
    iteration = rollout_id + 1
    directory = iteration_dir(root, iteration)
    write_s = params.checkpoint_write_s_per_gb
    policy = {"shift": state.policy.shift}
    _write_part(
        directory, "model", {"policy": policy}, params.checkpoint_model_gb, write_s * params.checkpoint_model_gb,
        advance, lambda: power_cut("model-write"),
    )  # fmt: skip
    if options.save_optim:
        _write_part(
            directory, "optimizer", {"step": state.global_step}, params.checkpoint_optimizer_gb,
            write_s * params.checkpoint_optimizer_gb, advance,
        )  # fmt: skip
        _write_part(directory, "lr_scheduler", {"last_epoch": state.global_step, "base_lrs": [state.lr]}, 0.0, 0.0)
    _write_json(os.path.join(directory, RNG_FILE), {"format": FORMAT, "train_seed": state.train_seed})
    if data is not None:
        path = data_state_path(root, rollout_id)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _write_json(path, data)
    meta = {
        "iteration": iteration,
        "rollout_id": rollout_id,
        "next_rollout_id": iteration,
        "global_step": state.global_step,
        "micro_step": options.micro_step,
        "world_size": 1,
        "timestamp": options.timestamp,
    }
    temporary = os.path.join(directory, META_FILE + ".tmp")
    _write_json(temporary, meta)
    os.replace(temporary, os.path.join(directory, META_FILE))
    power_cut("after-meta")
    with open(os.path.join(root, TRACKER_FILE), "w", encoding="utf-8") as tracker:  # in place, as Miles writes it
        power_cut("tracker-write")
        tracker.write(str(iteration))
    power_cut("after-tracker")
    return directory


def _write_part(
    directory: str,
    part: str,
    fields: dict[str, object],
    nominal_gb: float,
    seconds: float,
    advance: Advance | None = None,
    midway: Callable[[], None] | None = None,
) -> None:
    """One torch.distributed.checkpoint directory: the shard (its time passing half-way through), then .metadata."""
    path = os.path.join(directory, part)
    os.makedirs(path, exist_ok=True)
    metadata = os.path.join(path, METADATA_FILE)
    if os.path.exists(metadata):  # an earlier save of this iteration: not finished until this one is
        os.remove(metadata)
    text = json.dumps({"format": FORMAT, **fields}, sort_keys=True, allow_nan=False)
    half = len(text) // 2
    with open(os.path.join(path, SHARD_FILE), "w", encoding="utf-8") as shard:
        shard.write(text[:half])
        shard.flush()
        if midway is not None:
            midway()
        if advance is not None:
            advance(seconds)
        shard.write(text[half:])
    _write_json(metadata, {"format": FORMAT, "storage": [SHARD_FILE], "nominal_bytes": int(nominal_gb * 1e9)})


def _write_json(path: str, value: object) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump(value, out, sort_keys=True, allow_nan=False)


# ---- loading -----------------------------------------------------------------------------------------------------


@dataclass
class Loaded:
    """What a load came to: the state (None: from scratch), where the loop starts, --load after the check."""

    load_dir: Optional[str]  # None where Miles's argument check dropped --load (silently)
    state: Optional[TrainState] = None
    next_rollout_id: int = 0


def load(
    load_dir: str,
    flags: CheckpointFlags,
    *,
    seed: int,
    lr: float,
    params: ModelParams,
    advance: Advance,
    say: Say,
) -> Loaded:
    """Miles's FSDP load of what the tracker names, with its argument check's and its loader's fallbacks.

    `flags`: --no-load-optim, --no-load-rng and the resume fault asked for (HARNESS_SIM_RESUME_FAULT).
    """
    fault, load_optim, load_rng = flags.resume_fault, flags.load_optim, flags.load_rng
    tracker = os.path.join(load_dir, TRACKER_FILE)
    if fault == "silent-no-load":
        return Loaded(None)
    if fault == "no-dir":
        say(NO_DIRECTORY_AT, f"[FSDP] Checkpoint directory {load_dir} not found; skipping load.")
        return Loaded(load_dir)
    if fault == "no-tracker":
        say(NO_TRACKER_AT, f"[FSDP] No tracker file at {tracker}; skipping load.")
        return Loaded(load_dir)
    if not os.path.isdir(load_dir) or not os.path.isfile(tracker):
        return Loaded(None)  # the argument check replaces --load with the HF checkpoint: no line at all
    text = _read_text(tracker, "iteration = int(f.read().strip())")
    try:
        iteration = int(text.strip())
    except ValueError as err:
        raise CheckpointUnreadable(f"ValueError: {err}", "iteration = int(f.read().strip())") from None
    directory = iteration_dir(load_dir, iteration)
    model = os.path.join(directory, "model")
    if fault == "no-model" or not os.path.isdir(model):
        say(NO_MODEL_AT, f"[FSDP] Model checkpoint {model} not found; skipping load.")
        return Loaded(load_dir)
    try:
        if fault == "load-fails":
            raise _FaultLoadError()
        fields = _read_part(model)
        shift = fields["policy"]["shift"]  # type: ignore[index]
        if not isinstance(shift, float) or not math.isfinite(shift):
            raise ValueError(f"not a policy: shift {shift!r}")
    except (OSError, ValueError, KeyError, TypeError, _FaultLoadError) as err:
        error = FAULT_LOAD_ERROR if isinstance(err, _FaultLoadError) else f"{type(err).__name__}: {err}"
        say(LOAD_FAILED_AT, f"[FSDP] Failed to load model from {model}: {error}")
        return Loaded(load_dir)
    advance(params.checkpoint_model_gb * params.checkpoint_read_s_per_gb)
    say(LOADED_MODEL_AT, f"[FSDP] Loaded model from {model}")
    policy = Policy(shift=shift)
    if fault == "reward-collapse":
        policy.collapse_logit = params.resume_collapse_logit
        policy.collapse_rollouts = params.resume_collapse_rollouts

    global_step = 0
    optimizer = os.path.join(directory, "optimizer")
    if load_optim and os.path.isdir(optimizer):  # saved with --no-save-optim: the optimizer starts afresh
        global_step = _int_field(_read_part_or_fail(optimizer), "step")
        _read_part_or_fail(os.path.join(directory, "lr_scheduler"))
        advance(params.checkpoint_optimizer_gb * params.checkpoint_read_s_per_gb)
        say(LOADED_OPTIMIZER_AT, f"[FSDP] Loaded optimizer from {optimizer}")
    train_seed = seed
    rng = os.path.join(directory, RNG_FILE)
    if load_rng and os.path.isfile(rng):
        train_seed = _int_field(_read_json_or_fail(rng, "torch.load(rng_path)"), "train_seed")

    meta_path = os.path.join(directory, META_FILE)
    next_rollout_id = iteration  # no meta.json: the tracker's iteration (the save order never leaves one so)
    if os.path.isfile(meta_path):
        next_rollout_id = _int_field(_read_json_or_fail(meta_path, "meta = json.load(f)"), "next_rollout_id")
    if fault == "loop-at-zero":
        next_rollout_id = 0
    return Loaded(load_dir, TrainState(policy, global_step, lr, train_seed), next_rollout_id)


def load_data_state(load_dir: str, rollout_id: int, source: PromptSource, fault: Optional[str], say: Say) -> None:
    """The rollout manager's data source: rollout `rollout_id`'s state, or `Checkpoint ... does not exist.`"""
    path = data_state_path(load_dir, rollout_id)
    if fault == "no-data-state" or not os.path.isfile(path):
        say(NO_DATA_STATE_AT, f"Checkpoint {path} does not exist.")
        return
    state = _read_json_or_fail(path, "state_dict = torch.load(path)")
    try:
        restore_data_state(source, state)
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointUnreadable(f"{type(err).__name__}: {err}", "self.load_state_dict(state_dict)") from None


class _FaultLoadError(Exception):
    pass


def _read_text(path: str, source: str) -> str:
    try:
        return _read_bounded(path)
    except (OSError, ValueError) as err:
        raise CheckpointUnreadable(f"{type(err).__name__}: {err}", source) from None


def _read_bounded(path: str) -> str:
    """A checkpoint file's text; ValueError (UnicodeDecodeError too) for one larger than any the simulator writes."""
    with open(path, "rb") as raw:
        data = raw.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_FILE_BYTES} bytes, not a checkpoint file of the simulator")
    return data.decode("utf-8")


def _read_json(path: str) -> dict[str, object]:
    value = json.loads(_read_bounded(path))
    if not isinstance(value, dict):
        raise ValueError(f"{path}: not the simulator's checkpoint format")
    return value


def _read_part(path: str) -> dict[str, object]:
    """A torch.distributed.checkpoint directory: its .metadata (what finishes it), then its shard."""
    _read_json(os.path.join(path, METADATA_FILE))
    return _read_json(os.path.join(path, SHARD_FILE))


def _read_part_or_fail(path: str) -> dict[str, object]:
    try:
        return _read_part(path)
    except (OSError, ValueError) as err:
        raise CheckpointUnreadable(f"{type(err).__name__}: {err}", "dcp.load(state_dict, checkpoint_id=path)") from None


def _read_json_or_fail(path: str, source: str) -> dict[str, object]:
    try:
        return _read_json(path)
    except (OSError, ValueError) as err:
        raise CheckpointUnreadable(f"{type(err).__name__}: {err}", source) from None


def _int_field(fields: dict[str, object], key: str) -> int:
    value = fields.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CheckpointUnreadable(f"KeyError: {key!r}", f"{key} = state[{key!r}]")
    return value
