"""Does a node see the checkpoint root the driver sees? A token file the driver writes there, looked for by each node
before anything starts (docs/checkpoints.md, "Ray"): a resume runs only where its checkpoints are."""

from __future__ import annotations

import os
import secrets
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Sequence

from harness.fs.files import prepare_directory

if TYPE_CHECKING:
    from harness.engines.spec import LaunchSpec

TOKEN_PREFIX = ".harness-ray-check-"


@contextmanager
def root_tokens(specs: Sequence[LaunchSpec]) -> Iterator[dict[str, str]]:
    """For each checkpoint root of `specs`: the name of a token file made there for the nodes to find; removed after."""
    tokens: dict[str, str] = {}
    try:
        for spec in specs:
            if spec.checkpoint is None or spec.checkpoint.root in tokens:
                continue
            root = spec.checkpoint.root
            prepare_directory(root)
            name = TOKEN_PREFIX + secrets.token_hex(8)
            with open(os.path.join(root, name), "x") as handle:
                handle.write("the Ray driver's check that a node sees this checkpoint root\n")
            tokens[root] = name
        yield tokens
    finally:
        for root, name in tokens.items():
            try:
                os.unlink(os.path.join(root, name))
            except OSError:
                pass


def checkpoint_root_problems(root: str, token: str) -> list[str]:
    """Why this node does not see the checkpoint root the driver sees (its token file there), if it does not."""
    if os.path.isfile(os.path.join(root, token)):
        return []
    return [
        f"it cannot see the checkpoint root {root} (the driver's check file is not there): a run with checkpoints "
        "runs only on a node that sees the same root at the same path (docs/checkpoints.md, Ray)"
    ]
