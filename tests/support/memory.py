"""A command's peak memory, measured by the kernel: `measured(argv)` runs it and says its peak resident set.

Not `wait4` on a child of the test process: Linux carries a process's peak
across exec, and a child the test process starts (vfork, or fork) begins
with the test process's own size, hundreds of MB. So a small Python starts
first and forks (a real fork, of a process of a few MB) the command, whose
peak is then its own; the small Python reports it on its last line of stderr.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Optional, Sequence

from support.timing import scaled

PEAK_MARK = "peak-rss-kb "

# Forks the command, waits for it, says its peak, exits with its status.
_FORKER = f"""
import os, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
sys.stderr.write("\\n{PEAK_MARK}%d\\n" % usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


@dataclass
class Measured:
    """What a command printed, how it ended, and its peak resident set in MB."""

    returncode: int
    stdout: str
    stderr: str
    peak_mb: float


def measured(
    argv: Sequence[str], *, env: Optional[dict[str, str]] = None, timeout_s: float = 120, cwd: Optional[str] = None
) -> Measured:
    """Run `argv` to its end (killed, with its group, after `timeout_s` scaled: an AssertionError) and measure it."""
    process = subprocess.Popen(
        [sys.executable, "-c", _FORKER, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=scaled(timeout_s))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        raise AssertionError(
            f"{' '.join(argv)} did not end within {timeout_s:g} s:\n{out[-2000:]}{err[-2000:]}"
        ) from None
    head, _, last = err.rstrip("\n").rpartition("\n")
    assert last.startswith(PEAK_MARK), err[-2000:]
    return Measured(process.returncode, out, head, int(last[len(PEAK_MARK) :]) / 1024)
