"""The one error type the CLI catches, and the exit codes it maps to."""

from __future__ import annotations

import difflib
from enum import IntEnum
from typing import Sequence


class ExitCode(IntEnum):
    """Process exit codes; scripts may rely on them."""

    OK = 0
    RUN_FAILED = 1  # the trainer ran and did not succeed
    BAD_INPUT = 2  # a bad experiment file, option, capture or log
    ENGINE_UNAVAILABLE = 3  # Docker (or the trainer command) cannot be reached
    BUSY = 4  # the GPU lock is held and --no-wait was given
    NOT_FOUND = 5  # a run, capture or container that does not exist
    INTERNAL = 70  # a bug in the harness (EX_SOFTWARE): one line, HARNESS_DEBUG=1 shows the traceback
    INTERRUPTED = 130  # Ctrl-C / SIGTERM


class HarnessError(Exception):
    """A failure explained in one line, with the exit code the CLI should return."""

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.BAD_INPUT) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


def did_you_mean(name: str, known: Sequence[str], *, listed: int = 4) -> str:
    """What to say after an unknown `name`: `did you mean X?` for a close one, else the `known` ones where they are
    few (`known: a, b`), else "": an error stays one line however many there are."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}?"
    if len(known) <= listed:
        return f"known: {', '.join(known) or 'none'}"
    return ""
