"""Where a power loss may cut a file of lines: every line's edges, and a sample of the bytes between them.

A reader of a JSONL record can go wrong only where a cut meets a line's edge: the
newline kept or lost, the next line begun by one byte. `edge_cuts` lists those
offsets for every line, so each is tried; `inner_cuts` is a Hypothesis strategy
over every offset, which the property tests draw the rest from.
"""

from __future__ import annotations

from hypothesis import strategies as st


def edge_cuts(data: bytes) -> list[int]:
    """0, 1 and the whole file, and around each newline: the byte before it, the newline kept, one byte after it."""
    edges = {0, 1, len(data)}
    for at, byte in enumerate(data):
        if byte == ord("\n"):
            edges.update((at, at + 1, at + 2))
    return sorted(keep for keep in edges if 0 <= keep <= len(data))


def inner_cuts(data: bytes) -> st.SearchStrategy[int]:
    """Any offset from 0 to the whole file (Hypothesis shrinks a failure to the smallest)."""
    return st.integers(min_value=0, max_value=len(data))
