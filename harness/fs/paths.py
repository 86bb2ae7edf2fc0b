"""Where the harness keeps its own files, and what kind of file a path is.

- `state_dir`: per-user state (process runs, a Ray node's captures), under
  `$XDG_STATE_HOME/miles-gb10-lab/`, each overridable by its own variable;
- `lock_dir`: the GPU locks, shared by every user of the machine;
- `not_regular` / `file_kind`: the harness opens only regular files, and says
  what a path is when it is not one;
- `outside_root`: the path rule. The harness reads and writes only inside its
  roots (the capture root, the experiments directory): a path is inside when,
  every link in it resolved, it lies in the root, every link in the root's own
  path resolved too. A link that stays inside (a run's link to its current
  attempt) is followed; one that leaves is refused or skipped with one line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional, Union

DEFAULT_LOCK_DIR = Path("/tmp/miles-gb10-lab-locks")


def state_dir(override_env: str, leaf: str) -> Path:
    """The harness's per-user state directory `leaf` ($XDG_STATE_HOME/miles-gb10-lab/LEAF), or `$override_env`."""
    configured = os.environ.get(override_env)
    if configured:
        return Path(configured)
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "miles-gb10-lab" / leaf


def lock_dir() -> Path:
    """Where the GPU lock files live (HARNESS_LOCK_DIR, else a directory under /tmp shared by all users)."""
    return Path(os.environ.get("HARNESS_LOCK_DIR") or DEFAULT_LOCK_DIR)


def not_regular(path: Path) -> Optional[str]:
    """Why `path` cannot be read or appended to as a file of the harness (None: a regular file, or absent)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"{path.name} unreadable: {err.strerror or err}"
    return None if stat.S_ISREG(mode) else f"{path.name} is not a regular file (it is {file_kind(mode)})"


def outside_root(root: Union[str, "os.PathLike[str]"], path: Union[str, "os.PathLike[str]"]) -> Optional[str]:
    """Why `path` is not inside `root` once every link is resolved (None: it is, or it is the root itself)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep):
        return None
    return f"refused: it leads out of {root} (to {real})"


def file_kind(mode: int) -> str:
    """What a non-regular file is, for messages: a directory, a FIFO, a device, a socket."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a file"
