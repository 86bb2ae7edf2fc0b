"""The message renderer's wrap is textwrap's: whole words, greedy, continuation lines indented.

Single-spaced text is wrapped a line at a time (`_wrapped_single_spaced`,
one search back from the width per line); these tests hold it to textwrap's
own wrap, the rule it stands in for, on any text.
"""

from __future__ import annotations

import textwrap

from hypothesis import example, given
from hypothesis import strategies as st

from harness.cli.messages import _wrapped, message_lines, whole_message

# Words of any length (some longer than any width), single and double spaces, tabs, a wide character.
WORDS = st.text(st.sampled_from(list("abcdefghij:;,()-/\u4e2d\u00e9")), min_size=1, max_size=30)
SEPARATORS = st.sampled_from([" ", " ", " ", " ", "  ", "\t"])


@st.composite
def lines(draw: st.DrawFn) -> str:
    words = draw(st.lists(WORDS, min_size=0, max_size=25))
    single_spaced = draw(st.booleans())  # the line-at-a-time path; else textwrap's own, on odd spacing
    text = words[0] if words else ""
    for word in words[1:]:
        text += (" " if single_spaced else draw(SEPARATORS)) + word
    return draw(st.sampled_from(["", "  ", "    "])) + text + draw(st.sampled_from(["", "", " "]))


def textwrap_reference(line: str, width: int, indent: str) -> list[str]:
    """The rule, as textwrap states it (what `_wrapped` did before it wrapped a line at a time)."""
    first_indent = line[: len(line) - len(line.lstrip(" "))]
    return textwrap.wrap(
        line.lstrip(" "),
        width=max(width, len(indent) + 20),
        initial_indent=first_indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [line]


@given(line=lines(), width=st.integers(min_value=1, max_value=90), indent=st.sampled_from(["", "  ", "    "]))
@example(line="a" * 30 + " b", width=20, indent="  ")  # a first word longer than the width, then more
@example(line="abc def", width=22, indent="  ")  # fits exactly
@example(line="  " + "x" * 19 + " y", width=22, indent="    ")  # the first line's indent counts against it
@example(line="", width=30, indent="  ")
@example(line="    ", width=30, indent="  ")
def test_the_wrap_is_textwrap_s(line, width, indent):
    assert _wrapped(line, width, indent) == textwrap_reference(line, width, indent)


@given(
    words=st.lists(st.text(st.sampled_from(list("abcxyz.,")), min_size=1, max_size=40), min_size=1, max_size=40),
    width=st.integers(min_value=24, max_value=120),  # narrower, the renderer keeps 20 columns past an indent
)
def test_a_single_spaced_message_loses_nothing_and_keeps_every_line_in_the_width(words, width):
    message = " ".join(words)
    rendered = message_lines("", message, width)
    assert whole_message(rendered) == " ".join(message.split())
    for line in rendered:
        assert len(line) <= width or " " not in line.strip(), line  # only a single word may be wider
