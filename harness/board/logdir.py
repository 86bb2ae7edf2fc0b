"""The board's own log directory: a link the harness made to each event file the capture root holds, nothing else.

TensorBoard follows links: pointed at `<root>/tensorboard` itself, it would
serve a link there to another root's runs (or to any file) as runs of this
root. So `harness board` points it at a private directory instead, where
`served_files` finds every event file under `<root>/tensorboard` reached
without following a link (a link, at any depth, is refused and said once),
and `sync` keeps a link to each at the same relative path, to its real path.
The board syncs again every few seconds while it serves, so runs that start
meanwhile appear, and a link made meanwhile is refused as the first ones
were.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from harness.board.eventfile import FILE_PREFIX
from harness.fs.paths import outside_root


@dataclass
class Served:
    """The event files to serve (relative path -> real path) and what was refused, one line each."""

    files: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # relative path -> why


def served_files(logdir: Path, root: Path) -> Served:
    """Every event file under `logdir` reached without following a link; `logdir` itself must lie inside `root`."""
    served = Served()
    if not os.path.lexists(logdir):
        return served
    why = outside_root(root, logdir)
    if why is not None:
        served.refused["."] = f"{logdir}: {why}; nothing under it is served"
        return served
    base = os.path.realpath(logdir)
    _walk(base, "", served, logdir)
    return served


def _walk(base: str, relative: str, served: Served, shown: Path) -> None:
    directory = os.path.join(base, relative)
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError as err:
        served.refused[relative or "."] = f"{shown / relative}: not read ({err.strerror or err})"
        return
    for entry in entries:
        path = os.path.join(relative, entry.name)
        if entry.is_symlink():
            target = os.readlink(entry.path)
            served.refused[path] = (
                f"{shown / path} is a link (to {target}): not served; the board serves only what the capture root "
                "holds (move the link aside)"
            )
        elif entry.is_dir(follow_symlinks=False):
            _walk(base, path, served, shown)
        elif entry.name.startswith(FILE_PREFIX) and entry.is_file(follow_symlinks=False):
            served.files[path] = entry.path


def sync(farm: Path, served: Served) -> None:
    """Make `farm` hold exactly a link to each served file, at its relative path (links to others removed)."""
    farm = Path(farm)
    for directory, _, names in os.walk(farm):
        for name in names:
            link = os.path.join(directory, name)
            relative = os.path.relpath(link, farm)
            if not os.path.islink(link) or served.files.get(relative) != os.readlink(link):
                os.unlink(link)
    for relative, real in served.files.items():
        path = farm / relative
        if os.path.islink(path):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(real, path)
