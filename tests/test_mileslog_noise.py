"""The noise counts: what `lines.count_noise` and `count_noise_bytes` count is what the `ft` pattern found, searched
everywhere, always counted: a pattern kept here as the definition the fast counters must equal."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.mileslog.lines import count_noise, count_noise_bytes
from support.properties import examples

# The definition: `ft key=` at a line's start or after a space or a closing parenthesis, each match counted once.
FT = r"(?:^|[ )])ft [A-Za-z_][A-Za-z0-9_.]{0,80}="
FT_TEXT = re.compile(FT, re.MULTILINE)
FT_BYTES = re.compile(FT.encode(), re.MULTILINE)
COUNTED = {"First rollout sample": "first_rollout_sample", "Finish rollout": "finish_rollout", "%|": "progress"}


def reference(text: str) -> dict[str, int]:
    found = {kind: text.count(marker) for marker, kind in COUNTED.items()}
    found["ft"] = len(FT_TEXT.findall(text))
    return {kind: n for kind, n in found.items() if n}


def reference_bytes(buf: bytes, start: int, stop: int) -> dict[str, int]:
    found = {kind: buf.count(marker.encode(), start, stop) for marker, kind in COUNTED.items()}
    found["ft"] = len(FT_BYTES.findall(buf, start, stop))
    return {kind: n for kind, n in found.items() if n}


# Text made mostly of the pieces the pattern turns on, so that near misses are common: "ft" after a letter (left,
# soft, draft), after a space, a parenthesis, a newline or a carriage return, keys that run to 80 characters and past,
# keys with dots and digits, a missing `=`.
PIECES = [
    "ft ",
    " ft ",
    ")ft ",
    "\nft ",
    "\rft ",
    "left ",
    "soft ",
    "draft ",
    "ft",
    "f",
    "t",
    " ",
    ")",
    "(",
    "\n",
    "\r",
    "=",
    "a",
    "Z",
    "_",
    ".",
    "9",
    "-",
    "é",
    "\u2028",
    "event=",
    "rollout_id=3",
    "a" * 79,
    "a" * 80,
    "b" * 81,
    "%|",
    "First rollout sample",
    "Finish rollout",
]
texts = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)


@settings(max_examples=examples(1000), deadline=None)
@given(texts)
def test_count_noise_counts_what_the_pattern_finds(text: str) -> None:
    assert count_noise(text) == reference(text)


@settings(max_examples=examples(1000), deadline=None)
@given(texts, st.integers(min_value=0, max_value=400), st.integers(min_value=0, max_value=400))
def test_count_noise_bytes_counts_what_the_pattern_finds_between_any_bounds(text: str, start: int, stop: int) -> None:
    buf = text.encode()
    assert count_noise_bytes(buf, start, stop) == reference_bytes(buf, start, stop)
    assert count_noise_bytes(buf, 0, len(buf)) == reference(text)


def test_the_lines_miles_prints_and_the_words_that_hold_ft() -> None:
    text = (
        "ft event=gather_start rollout_id=0 rank=0\n"  # at a line's start
        "(RolloutManager pid=1) ft event=gather_end rollout_id=0 rank=0\n"
        "(RolloutManager pid=1)ft event=gather_end\n"  # after the prefix's parenthesis
        "x.py:1 - KV cache: 1200 tokens left after the prefill\n"  # an ordinary word: no `ft` line
        "x.py:1 - draft tokens: 4, soft limit=1024, left x=1\n"  # `ft key=` after a letter: none
        "x.py:1 - ft " + "k" * 81 + "=1\n"  # a key of 81 characters, the longest counted
        "x.py:1 - ft " + "k" * 82 + "=1\n"  # one longer: none
        "x.py:1 -\rft event=gather_start\n"  # after a carriage return: none
    )
    assert count_noise(text) == count_noise_bytes(text.encode(), 0, len(text)) == {"ft": 4}
