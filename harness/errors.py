"""The one error type the CLI catches, and the exit codes it maps to."""

from __future__ import annotations

from enum import IntEnum


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
