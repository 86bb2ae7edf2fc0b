"""Piped output written straight to the file is exactly what rich would have printed.

The stdout console skips rich for text rich would print unchanged (no
colour, not wrapped by rich): these tests print the same things both ways
and compare the bytes.
"""

from __future__ import annotations

import io
import sys
from typing import Any, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.text import Text

from harness.cli.app import print_messages, stdout
from harness.cli.messages import message_lines

# Characters where a plain writer could part from rich: tabs, control characters, markup, wide and combining ones.
CHARACTERS = st.sampled_from(list("ab :;,()[]  \t\n\x1b\x07\x7f\u00e9\u4e2d\u0301-/"))
TEXTS = st.text(CHARACTERS, max_size=60)
OPTIONS = st.sampled_from(
    [
        {"soft_wrap": True},
        {"no_wrap": True},
        {"no_wrap": True, "overflow": "ignore", "crop": False},
        {"soft_wrap": True, "end": ""},
        {"soft_wrap": True, "sep": " | "},
        {"soft_wrap": True, "sep": "\n"},
        {"no_wrap": True, "sep": "\n", "overflow": "ignore", "crop": False, "highlight": False},
        {"no_wrap": True, "style": None, "highlight": False, "emoji": False, "markup": False},
        # rich's own work: the console must hand these to rich
        {"no_wrap": True, "crop": True},
        {"no_wrap": True, "overflow": "ellipsis"},
        {"soft_wrap": True, "style": "bold"},
        {"soft_wrap": True, "justify": "right"},
        {},
    ]
)


def printed(fast: bool, act: Callable[[Any], None]) -> str:
    """What `act(console)` prints on the stdout console piped at 30 columns, by the plain path or by rich alone."""
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdout", out)
        patch.setenv("COLUMNS", "30")
        console = stdout()
        if not fast:
            patch.setattr(console, "_plain_print", lambda objects, options: False)
        act(console)
    return out.getvalue()


@given(texts=st.lists(TEXTS, min_size=1, max_size=3), styled=st.booleans(), options=OPTIONS)
def test_the_plain_path_prints_what_rich_prints(texts, styled, options):
    objects: list[Any] = [Text(t, style="bold") if styled and i == 0 else t for i, t in enumerate(texts)]

    def act(console: Any) -> None:
        console.print(*objects, **options)
        console.out("out:", *texts, highlight=False)

    assert printed(True, act) == printed(False, act)


@given(messages=st.lists(st.tuples(TEXTS, st.integers(0, 5)), max_size=4))
def test_messages_print_the_same_either_way(messages):
    def act(console: Any) -> None:
        print_messages(console, messages)

    assert printed(True, act) == printed(False, act)


def test_messages_are_the_renderer_s_lines_each_on_its_own_line():
    """Printed together, the messages are still their lines: a line break between them is not escaped."""
    messages = [
        ("run-001 against run-000: 0.456 with the filter against 0.239; inside the spread of the baselines", 7),
        ("short one", 0),
    ]
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdout", out)
        patch.setenv("COLUMNS", "40")
        print_messages(stdout(), messages)
    expected = [line for text, _ in messages for line in message_lines("", text, 40)]
    assert out.getvalue().splitlines() == expected
    assert len(expected) > len(messages)  # the first message wrapped


def test_a_reader_that_left_makes_the_console_quiet_not_fail(monkeypatch):
    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

    left: list[bool] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdout", Gone())
        console = stdout()
        patch.setattr(console, "on_broken_pipe", lambda: left.append(True))
        console.print("a line", soft_wrap=True)
    assert left == [True]
