"""Docker's multiplexed log stream split into its payload, whatever size the pieces arrive in."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from harness.engines.logstream import DockerFrames, split_lines


def frame(stream: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def test_whole_frames_in_one_piece_give_their_payloads_in_order():
    data = frame(1, b"a 1\n") + frame(2, b"err\n") + frame(1, b"b 2\n")
    assert DockerFrames().feed(data) == b"a 1\nerr\nb 2\n"


def test_a_frame_cut_in_its_header_or_payload_waits_for_the_rest():
    data = frame(1, b"first line\n") + frame(1, b"second line\n")
    frames = DockerFrames()
    assert frames.feed(data[:3]) == b""  # inside the first header
    assert frames.feed(data[3:15]) == b""  # inside the first payload
    assert frames.pending == 15
    assert frames.feed(data[15:20]) == b"first line\n"
    assert frames.feed(data[20:]) == b"second line\n"
    assert frames.pending == 0


def test_an_empty_frame_gives_nothing():
    assert DockerFrames().feed(frame(1, b"") + frame(1, b"x\n")) == b"x\n"


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
)
def test_any_split_of_the_stream_gives_the_same_bytes_and_lines(payloads: list[bytes], cuts: list[int]) -> None:
    data = b"".join(frame(1 + i % 2, p) for i, p in enumerate(payloads))
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    frames = DockerFrames()
    pieces = [frames.feed(data[a:b]) for a, b in zip(bounds, bounds[1:])]
    assert b"".join(pieces) == b"".join(payloads)
    assert frames.pending == 0
    whole = b"".join(payloads)
    assert list(split_lines(p for p in pieces if p)) == list(split_lines([whole] if whole else []))
