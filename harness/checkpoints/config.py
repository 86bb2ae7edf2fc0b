"""The experiment file's `checkpoint:` and `resume:` blocks (docs/checkpoints.md): typed, strict, validated once.

    checkpoint:
      every: 10        # a checkpoint after every 10th rollout (and always after the last)
      keep: 2          # the newest 2 verified checkpoints are kept; older ones are deleted
      dir: my/place    # under the checkpoint root (default <run>/<run id>)
    resume:
      auto: 3          # resume by itself up to 3 times when an attempt fails with a checkpoint behind it

Neither block is part of the run id: saving a checkpoint does not change what a run measures.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_ROLLOUTS = 1_000_000  # the schema's MAX_STEPS: an interval past it never saves before the last rollout
MAX_KEEP = 1_000
MAX_AUTO_RESUMES = 100
DEFAULT_KEEP = 2


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class CheckpointConfig(_Strict):
    """When the trainer saves (`every` rollouts), how many verified checkpoints stay (`keep`), and where (`dir`)."""

    every: int = Field(ge=1, le=MAX_ROLLOUTS)
    keep: int = Field(default=DEFAULT_KEEP, ge=1, le=MAX_KEEP)
    dir: Optional[str] = None  # relative to the checkpoint root; default <run>/<run id>

    @field_validator("dir")
    @classmethod
    def _inside_the_root(cls, directory: Optional[str]) -> Optional[str]:
        if directory is None:
            return None
        if not directory or "\x00" in directory or "\n" in directory:
            raise ValueError("a directory is a non-empty path without NUL or line breaks")
        path = PurePosixPath(directory)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(
                f"{directory!r} must be a path inside the checkpoint root (relative, without '..'): the root is "
                "what the container sees"
            )
        if any(part.startswith(".") for part in path.parts):
            raise ValueError(f"{directory!r}: a part starting with '.' is the harness's own (a lock, a marker)")
        return directory


class ResumeConfig(_Strict):
    """`auto`: how many times a failed or interrupted attempt with a checkpoint behind it is resumed by itself."""

    auto: int = Field(default=0, ge=0, le=MAX_AUTO_RESUMES)
