"""Running the real `harness` command as a person sees it: in a pseudo-terminal of a given width, or piped."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import shlex
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Optional

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
BOX = re.compile("[\u2500-\u257f]")  # box-drawing characters
PIPED_WIDTH = 100
LONG_TOKEN = 30  # a word this long may stand past the width on its own (a path, a command to copy)


def harness_env(extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    """This environment without width or colour settings (the command decides as it would for a person)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR")}
    return {**env, "PYTHONPATH": str(REPO_ROOT), "TERM": "xterm-256color", **(extra or {})}


def in_terminal(
    argv: list[str], columns: int = 80, cwd: Path = REPO_ROOT, env: Optional[dict[str, str]] = None, code: int = 0
) -> str:
    """The command's output (stdout and stderr) in a pseudo-terminal `columns` wide, escape sequences removed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "harness", *argv],
        cwd=cwd,
        env=harness_env(env),
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the command has ended and closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    returned = process.wait(timeout=120)
    output = ANSI.sub("", b"".join(chunks).decode(errors="replace").replace("\r\n", "\n"))
    assert returned == code, (returned, output)
    return output


def piped(
    argv: list[str], cwd: Path = REPO_ROOT, env: Optional[dict[str, str]] = None, code: int = 0, stderr: bool = False
) -> str:
    """The command's stdout through a pipe (its stderr too with `stderr`)."""
    done = subprocess.run(
        [sys.executable, "-m", "harness", *argv],
        cwd=cwd,
        env=harness_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return done.stdout + (done.stderr if stderr else "")


def too_wide(output: str, width: int) -> list[str]:
    """The lines wider than `width`, but for one whose excess is a single long word (a path, a quoted value)."""
    wide = []
    for line in output.splitlines():
        line = line.replace("\r", "").rstrip()
        if len(line) <= width:
            continue
        try:
            words = shlex.split(line.rstrip("\\"))
        except ValueError:
            words = line.split()
        longest = max(words, key=len, default="")
        if len(longest) >= LONG_TOKEN and len(line) - len(longest) <= width:
            continue
        wide.append(line)
    return wide
