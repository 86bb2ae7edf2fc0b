"""Where a run's TensorBoard events go, and what its values are called there (pure).

- A capture run is one TensorBoard run: `<capture root>/tensorboard/<condition>/s<seed>`, so that
  TensorBoard's run filter selects every seed of a condition with one regex (`^plain-48/`). The
  condition is the run name without its seed suffix: runs `plain-48`, `plain-48-s2` and `plain-48-s3`
  (seeds 1, 2, 3) are `plain-48/s1`, `plain-48/s2` and `plain-48/s3`; a variant (`--name v`) is a
  condition of its own (`v/s1`). A run whose name does not follow the seed rule, or whose seed is
  unknown, keeps its own name (`odd-name`), so no two runs ever share a TensorBoard run.
- Tags: TensorBoard takes letters, digits, `_`, `-`, `.` and `/` (its writers replace anything else,
  and its UI splits on `/`). A metric name with anything else is mapped (`TagMapper`), and the
  mapping is documented in docs/tensorboard.md:
    - any other character (a space, `:`, `@`, a non-ASCII letter) becomes `_`;
    - a leading `/` is dropped, `//` becomes `/`, a trailing `/` is dropped; nothing left is `_`;
    - Miles's metrics keep their own names (`train/loss`); one that starts with a prefix the harness
      writes itself (`harness/`, `guard/`, `run/`) is put under `miles/`;
    - two names that map to one tag: the first keeps it, the next gets `__2`, then `__3`.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Optional

from harness.experiments.naming import SAFE_NAME

TENSORBOARD_DIR_NAME = "tensorboard"  # <capture root>/tensorboard: one directory per TensorBoard run
SUMMARY_RUN = "summary"  # the TensorBoard run that holds the summary's figures (never a capture run's name)

HARNESS_PREFIX = "harness/"  # the summary's per-step values
GUARD_PREFIX = "guard/"  # the heat guard's samples, on wall time
RUN_PREFIX = "run/"  # the run's state changes, as text
OWN_PREFIXES = (HARNESS_PREFIX, GUARD_PREFIX, RUN_PREFIX)
MILES_PREFIX = "miles/"

_NOT_IN_TAG = re.compile(r"[^A-Za-z0-9_./-]")
_SLASHES = re.compile(r"/{2,}")


def board_run_name(run: str, seed: Optional[int]) -> str:
    """The TensorBoard run of a capture run: `<condition>/s<seed>`, or the run's own name (see the module doc)."""
    if seed is None or seed < 1 or not SAFE_NAME.match(run):
        return run
    if seed == 1:
        return f"{run}/s1"
    suffix = f"-s{seed}"
    if run.endswith(suffix) and len(run) > len(suffix):
        return f"{run[: -len(suffix)]}/s{seed}"
    return run


def board_run_path(run_name: str) -> PurePosixPath:
    """The TensorBoard run's directory below `<capture root>/tensorboard`."""
    return PurePosixPath(run_name)


def clean_tag(name: str) -> str:
    """A name as TensorBoard takes it (the module doc's first two rules)."""
    tag = _NOT_IN_TAG.sub("_", name)
    tag = _SLASHES.sub("/", tag).strip("/")
    return tag or "_"


class TagMapper:
    """Miles metric names -> tags, the same names always to the same tags (the module doc's rules).

    Deterministic in the order names are first seen, so a run replayed from its capture maps its
    names as it did live.
    """

    def __init__(self) -> None:
        self._tags: dict[str, str] = {}
        self._taken: set[str] = set()
        self.mapped: dict[str, str] = {}  # names that changed: name -> tag

    def tag(self, name: str) -> str:
        found = self._tags.get(name)
        if found is not None:
            return found
        tag = clean_tag(name)
        if tag.startswith(OWN_PREFIXES):
            tag = MILES_PREFIX + tag
        base, n = tag, 1
        while tag in self._taken:
            n += 1
            tag = f"{base}__{n}"
        self._tags[name] = tag
        self._taken.add(tag)
        if tag != name:
            self.mapped[name] = tag
        return tag
