"""Waiting in tests: one `eventually`, and one factor for every wait, HARNESS_TEST_SLOWDOWN.

A loaded machine (a second suite on the same cores, a slow CI runner) is given
room by raising the factor (`HARNESS_TEST_SLOWDOWN=3 make test`), never by
editing a test. The factor stretches how long a test waits for something to
happen; what a test asserts about the harness's own promptness stays as written.
"""

from __future__ import annotations

import os
import time
from typing import Callable

SLOWDOWN_ENV = "HARNESS_TEST_SLOWDOWN"
DEFAULT_TIMEOUT_S = 10.0


def slowdown() -> float:
    """The factor every wait is multiplied by: HARNESS_TEST_SLOWDOWN, a number >= 1 (default 1)."""
    raw = os.environ.get(SLOWDOWN_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        factor = float(raw)
    except ValueError:
        raise ValueError(f"{SLOWDOWN_ENV}={raw!r}: not a number (a factor such as 2 or 1.5)") from None
    if not factor >= 1.0:  # also refuses nan
        raise ValueError(f"{SLOWDOWN_ENV}={raw!r}: the factor must be at least 1")
    return factor


def scaled(seconds: float) -> float:
    """`seconds` of waiting, stretched by HARNESS_TEST_SLOWDOWN."""
    return seconds * slowdown()


def eventually(check: Callable[[], object], timeout_s: float = DEFAULT_TIMEOUT_S, poll_s: float = 0.01) -> bool:
    """Whether `check()` comes true within `timeout_s` (scaled); it is asked once more at the deadline."""
    deadline = time.monotonic() + scaled(timeout_s)
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(poll_s)
    return bool(check())


def wait_until(check: Callable[[], object], timeout_s: float = DEFAULT_TIMEOUT_S, what: str = "the condition") -> None:
    """Wait for `check()` to come true within `timeout_s` (scaled); an AssertionError naming `what` if it does not."""
    if not eventually(check, timeout_s):
        raise AssertionError(f"timed out after {scaled(timeout_s):g} s waiting for {what}")
