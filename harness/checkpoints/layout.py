"""Where a run's checkpoints live and what Miles's FSDP backend writes there (docs/checkpoints.md).

    <checkpoint root>/<run>/<run id>/                the run's checkpoint directory (or the block's `dir`)
        iter_0000010/model/.metadata               torch.distributed.checkpoint directories, each finished by
        iter_0000010/optimizer/.metadata           its .metadata; optimizer and lr_scheduler always (the harness
        iter_0000010/lr_scheduler/.metadata        never passes --no-save-optim: such a checkpoint cannot resume)
        iter_0000010/rng.pt
        iter_0000010/meta.json                     {"iteration": 10, "rollout_id": 9, "next_rollout_id": 10, ...}
        latest_checkpointed_iteration.txt          the tracker: "10", written in place by Miles
        rollout/global_dataset_state_dict_9.pt     the data source's position (--rollout-global-dataset)
        .harness-run.json                          the harness's: which run and run id the directory belongs to
        .harness-lock                              the harness's: one attempt at a time writes here
        .harness-save-now                          the save-trigger sentinel `harness stop --checkpoint` makes

The checkpoint root is `checkpoints/` in the project (beside `capture/`), or
HARNESS_CHECKPOINT_DIR; a container sees it at /checkpoints.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Mapping, Optional

from harness.lab.milesnames import LOAD_FLAG, SAVE_FLAG, SAVE_INTERVAL_FLAG, SAVE_TRIGGER_SENTINEL_FLAG

if TYPE_CHECKING:  # the layout stays standard library: the summary reads its names
    from harness.checkpoints.config import CheckpointConfig

ROOT_ENV = "HARNESS_CHECKPOINT_DIR"
DEFAULT_ROOT = "checkpoints"
CONTAINER_ROOT = "/checkpoints"

TRACKER_NAME = "latest_checkpointed_iteration.txt"
META_NAME = "meta.json"
RNG_NAME = "rng.pt"
DCP_METADATA = ".metadata"
MODEL_PART = "model"
STATE_PARTS = ("model", "optimizer", "lr_scheduler")  # each a torch.distributed.checkpoint directory
DATA_STATE_DIR = "rollout"
MARKER_NAME = ".harness-run.json"
LOCK_NAME = ".harness-lock"
SENTINEL_NAME = ".harness-save-now"
ITERATION_DIGITS = 7
_ITERATION = re.compile(r"iter_([0-9]{7,12})")


def iteration_name(iteration: int) -> str:
    """`iter_0000010`: the directory of the checkpoint saved after rollout `iteration - 1`."""
    return f"iter_{iteration:0{ITERATION_DIGITS}d}"


def iteration_of(name: str) -> Optional[int]:
    """The iteration an `iter_NNNNNNN` name says, None for any other name."""
    match = _ITERATION.fullmatch(name)
    return int(match.group(1)) if match else None


def data_state_name(rollout_id: int) -> str:
    """The data source's state file for the checkpoint after rollout `rollout_id`, under `rollout/`."""
    return f"global_dataset_state_dict_{rollout_id}.pt"


def checkpoint_root(project_root: str, environ: Mapping[str, str]) -> str:
    """The host's checkpoint root: HARNESS_CHECKPOINT_DIR (relative to the project), else `checkpoints/`."""
    configured = environ.get(ROOT_ENV, "").strip()
    return os.path.normpath(os.path.join(project_root, configured or DEFAULT_ROOT))


@dataclass(frozen=True)
class CheckpointSpec:
    """A run's checkpoints as the harness plans them: where (host and trainer paths), how often, how many kept."""

    root: str  # the host's checkpoint root
    directory: str  # the run's checkpoint directory on the host
    trainer_directory: str  # the same directory as the trainer sees it (/checkpoints/... in a container)
    every: int
    keep: int
    data_state: bool  # the run passes --rollout-global-dataset: each checkpoint has the data source's state

    @property
    def relative(self) -> str:
        """The directory relative to the root."""
        return os.path.relpath(self.directory, self.root)

    @property
    def sentinel(self) -> str:
        """The save-trigger sentinel on the host."""
        return os.path.join(self.directory, SENTINEL_NAME)

    @property
    def tracker(self) -> str:
        """The tracker file on the host."""
        return os.path.join(self.directory, TRACKER_NAME)

    def trainer_path(self, host_path: str) -> str:
        """A host path under the directory, as the trainer sees it."""
        return os.path.join(self.trainer_directory, os.path.relpath(host_path, self.directory))

    def host_path(self, trainer_path: str) -> Optional[str]:
        """A path the trainer printed, on the host (None: not under the run's directory as the trainer sees it)."""
        trainer = os.path.normpath(trainer_path)
        base = os.path.normpath(self.trainer_directory)
        if trainer == base:
            return self.directory
        if not trainer.startswith(base.rstrip("/") + "/"):
            return None
        return os.path.join(self.directory, os.path.relpath(trainer, base))

    def save_flags(self) -> list[str]:
        """What every checkpointed run passes: where to save, how often, and the sentinel `stop --checkpoint` makes."""
        return [
            SAVE_FLAG,
            self.trainer_directory,
            SAVE_INTERVAL_FLAG,
            str(self.every),
            SAVE_TRIGGER_SENTINEL_FLAG,
            self.trainer_path(self.sentinel),
        ]

    def load_flags(self) -> list[str]:
        """What a resumed attempt adds: load from the same directory (the tracker names what loads)."""
        return [LOAD_FLAG, self.trainer_directory]


def plan_checkpoints(
    config: "CheckpointConfig",
    *,
    run: str,
    run_id: str,
    in_container: bool,
    root: str,
    data_state: bool,
) -> CheckpointSpec:
    """The run's checkpoint spec (pure): `<root>/<run>/<run id>`, or the block's `dir`, under the root."""
    relative = config.dir if config.dir is not None else f"{run}/{run_id}"
    directory = os.path.join(root, relative)
    trainer = str(PurePosixPath(CONTAINER_ROOT) / relative) if in_container else directory
    return CheckpointSpec(root, directory, trainer, config.every, config.keep, data_state)
