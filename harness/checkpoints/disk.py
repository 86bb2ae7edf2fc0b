"""The disk rule: before a checkpointed attempt starts, the checkpoint root must have room for `keep + 1` checkpoints.

One checkpoint's size is, in this order (the first that is known):
- measured: the largest complete checkpoint of this run's lineage on disk (its files' sizes);
- the simulator's: a simulated run's checkpoints hold a few numbers (about 1 MiB is allowed for one);
- from the model's parameter count: 16 bytes a parameter (weights, Adam's two moments and the fp32 master
  copy: MILES-LOGS gives 12 to 16), the count from the model directory's weight files (bf16: 2 bytes each) or,
  where they cannot be seen, from the model's name (`Qwen3-0.6B`: 0.6e9).

Room: the root's free space plus what the lineage's checkpoints already hold (retention frees them as new ones
come) must be at least `keep + 1` checkpoints: `keep` kept, and one being written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional, Sequence

BYTES_PER_PARAMETER = 16
WEIGHT_BYTES_PER_PARAMETER = 2  # bf16 weight files
SIM_CHECKPOINT_BYTES = 1 << 20
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_BILLIONS = re.compile(r"(?<![0-9.])([0-9]+(?:\.[0-9]+)?)[Bb](?![A-Za-z0-9])")
_MILLIONS = re.compile(r"(?<![0-9.])([0-9]+(?:\.[0-9]+)?)[Mm](?![A-Za-z0-9])")


@dataclass(frozen=True)
class SizeEstimate:
    """One checkpoint's size, and where the figure came from (said with a refusal, and in the manifest)."""

    bytes: int
    source: str


def estimate_size(
    measured: Sequence[int], *, simulated: bool, model_dir: Optional[str], model_name: Optional[str]
) -> Optional[SizeEstimate]:
    """One checkpoint's size by the module's order; None when nothing tells it."""
    if measured:
        largest = max(measured)
        return SizeEstimate(largest, f"measured: the largest of this run's {len(measured)} complete checkpoint(s)")
    if simulated:
        return SizeEstimate(SIM_CHECKPOINT_BYTES, "the simulator's (its model is a few numbers)")
    weights = weight_bytes(model_dir) if model_dir else None
    if weights:
        params = weights / WEIGHT_BYTES_PER_PARAMETER
        return SizeEstimate(
            int(params * BYTES_PER_PARAMETER),
            f"from the model's parameter count ({params / 1e9:.2f}e9, from {_size(weights)} of bf16 weights in "
            f"{model_dir}) at {BYTES_PER_PARAMETER} bytes each",
        )
    named = parameters_in_name(model_name or "")
    if named:
        return SizeEstimate(
            int(named * BYTES_PER_PARAMETER),
            f"from the model's parameter count ({named / 1e9:g}e9, from its name {model_name}) at "
            f"{BYTES_PER_PARAMETER} bytes each",
        )
    return None


def parameters_in_name(name: str) -> Optional[float]:
    """`Qwen3-0.6B` -> 0.6e9, `SmolLM-135M` -> 1.35e8; None when the name says no size."""
    base = os.path.basename(name.rstrip("/"))
    found = _BILLIONS.findall(base)
    if found:
        return float(found[-1]) * 1e9
    found = _MILLIONS.findall(base)
    return float(found[-1]) * 1e6 if found else None


def weight_bytes(model_dir: str) -> Optional[int]:
    """The sizes of the weight files directly in a model directory (stat only); None when it holds none."""
    try:
        entries = list(os.scandir(model_dir))
    except OSError:
        return None
    total = sum(
        entry.stat().st_size
        for entry in entries
        if entry.name.endswith(WEIGHT_SUFFIXES) and entry.is_file(follow_symlinks=True)
    )
    return total or None


def room_problem(
    *, free: int, held: int, keep: int, estimate: Optional[SizeEstimate], root: str, run: str
) -> Optional[str]:
    """Why the root has no room for `keep + 1` checkpoints (one line with the numbers); None when it has, or when
    no size is known (the caller says so)."""
    if estimate is None:
        return None
    needed = (keep + 1) * estimate.bytes
    if free + held >= needed:
        return None
    return (
        f"run {run} not started: the checkpoint root {root} has {_size(free)} free"
        + (f" (and {_size(held)} in this run's checkpoints)" if held else "")
        + f", and keep: {keep} needs room for {keep + 1} checkpoints of {_size(estimate.bytes)} ({_size(needed)}; "
        f"size {estimate.source}); free space, lower keep, or set HARNESS_CHECKPOINT_DIR to a larger disk"
    )


def free_bytes(path: str) -> int:
    """The bytes an unprivileged writer may still use on `path`'s file system."""
    found = os.statvfs(path)
    return found.f_bavail * found.f_frsize


def _size(count: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{int(count)} bytes"
