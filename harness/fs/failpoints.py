"""Named points in a run where the crash tests kill the harness (HARNESS_FAILPOINT), as etcd's gofail does.

`HARNESS_FAILPOINT=before-container harness run x` SIGKILLs the harness
right before it starts the container; `mid-stream:25` after the 25th log
line is parsed (container.log holds the rest of its burst). Unset (always,
outside the tests) it costs one comparison: the variable is read once, at
import.

Points, in the order a run passes them: before-capture, before-container,
after-create (inside the engine: created, not started), after-start,
mid-stream:N, at-exit, before-remove; and `decide-interim:N`, once
`harness decide` has recorded its interim N.
"""

from __future__ import annotations

import os
import signal
from typing import Optional

ENV = "HARNESS_FAILPOINT"
_POINT, _, _AT = (os.environ.get(ENV) or "").partition(":")


def failpoint(name: str, count: Optional[int] = None) -> None:
    """SIGKILL this process if HARNESS_FAILPOINT names this point (and, for counted points, this count)."""
    if _POINT != name:
        return
    if _AT and count != int(_AT):
        return
    os.kill(os.getpid(), signal.SIGKILL)
