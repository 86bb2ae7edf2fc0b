"""A reopened log resumes without losing or repeating a line, also when Docker wrote lines out of stamp order.

Docker stamps each line in the copier of its stream (stdout, stderr) before
the logger writes it, so on a busy machine container.log's order is not
timestamp order near lines printed on both streams at once, as a trainer
does when it is stopped. Resuming at the last line's stamp then read again
the lines written just before it with later stamps.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capture.repair import log_tail
from harness.engines import logstream
from harness.engines.logstream import RESUME_MAX_LINES, LogPosition, split_bursts, split_lines, stamp_to_ns
from support.properties import examples
from support.timing import scaled

T = "2026-01-01T00:00:00."


def stamped(*pairs: tuple[str, str]) -> list[str]:
    return [f"{T}{fraction}Z {text}" for fraction, text in pairs]


# As Docker wrote them under load: `err2` stamped before `out3` but written after it.
WRITTEN = stamped(("100", "out1"), ("200", "err1"), ("300", "out2"), ("450", "out3"), ("400", "err2"))


def test_a_resume_after_lines_written_out_of_stamp_order_repeats_none() -> None:
    position = LogPosition()
    assert list(position.new_lines(WRITTEN)) == WRITTEN
    since_ns = position.since() * 1e9
    assert since_ns < stamp_to_ns(WRITTEN[-1].split()[0])  # before err2, which is not the newest stamp
    later = stamped(("500", "out4"))
    reopened = [line for line in WRITTEN + later if stamp_to_ns(line.split()[0]) >= since_ns]  # Docker's since
    assert list(position.new_lines(reopened)) == later


def test_a_resume_that_docker_answers_from_before_the_floor_skips_those_lines() -> None:
    position = LogPosition()
    list(position.new_lines(WRITTEN))
    assert list(position.new_lines(WRITTEN + stamped(("600", "out5")))) == stamped(("600", "out5"))


def test_a_position_travels_as_its_stamp_and_lines() -> None:
    position = LogPosition()
    list(position.new_lines(WRITTEN))
    copy = LogPosition(position.last_stamp, position.lines_at_last)
    assert copy.since() == pytest.approx(position.since())
    assert list(copy.new_lines(WRITTEN + stamped(("700", "out6")))) == stamped(("700", "out6"))


def test_the_old_form_last_stamp_and_its_lines_still_resumes() -> None:
    position = LogPosition(f"{T}450Z", [f"{T}450Z out3"])
    assert list(position.new_lines(stamped(("450", "out3"), ("460", "out7")))) == stamped(("460", "out7"))


def test_identical_lines_are_told_apart_by_count() -> None:
    position = LogPosition()
    lines = stamped(("100", "-----"), ("100", "-----"))
    list(position.new_lines(lines))
    assert list(position.new_lines(lines + lines[:1])) == lines[:1]


def test_what_a_position_remembers_is_bounded() -> None:
    position = LogPosition()
    for i in range(RESUME_MAX_LINES * 2):
        position.advance(f"{T}{i:09d}Z line {i}")
    kept = position.lines_at_last
    assert len(kept) <= RESUME_MAX_LINES
    assert kept[-1].endswith(f"line {RESUME_MAX_LINES * 2 - 1}")
    more = f"{T}{RESUME_MAX_LINES * 2:09d}Z line new"
    assert list(position.new_lines([*kept, more])) == [more]


def test_recover_resumes_after_a_saved_log_whose_tail_is_out_of_stamp_order(tmp_path: Path) -> None:
    log = tmp_path / "container.log"
    log.write_text("\n".join(WRITTEN) + "\n")
    position = LogPosition.after(log_tail(log))  # where recover reopens the engine's log
    since_ns = position.since() * 1e9
    later = stamped(("800", "out8"))
    reopened = [line for line in WRITTEN + later if stamp_to_ns(line.split()[0]) >= since_ns]
    assert list(position.new_lines(reopened)) == later


# A known sequence; on SIGTERM a burst on stdout and stderr at once, as a trainer's last words.
SCRIPT = """
i=0; while [ $i -lt 40 ]; do echo "before $i"; i=$((i+1)); done
trap '(j=0; while [ $j -lt 30 ]; do echo "err $j" >&2; j=$((j+1)); done) &
      k=0; while [ $k -lt 30 ]; do echo "out $k"; k=$((k+1)); done; wait; echo last; exit 0' TERM
echo ready; while true; do sleep 0.05; done
"""


def test_a_position_resumes_no_later_than_a_line_the_stream_holds_unfinished() -> None:
    # A long line began at 0.5 s and is not ended; 3 s of other lines came since (beyond the 2 s window).
    later = [f"2026-01-01T00:00:{s:02d}.000000000Z out {s}" for s in range(1, 4)]
    position = LogPosition()
    held = stamp_to_ns("2026-01-01T00:00:00.5Z")
    assert [line for burst in position.new_bursts([later], lambda: held) for line in burst] == later
    assert position.floor_ns() == held and position.lines_at_last == later  # all kept: a reopen repeats none
    # Reopened at the floor: the held line comes whole, the lines since are not repeated.
    again = ["2026-01-01T00:00:00.5Z " + "e" * 50, *later, "2026-01-01T00:00:04Z out 4"]
    assert list(position.new_lines(again)) == [again[0], again[-1]]


def test_an_unfinished_line_is_given_up_rather_than_lines_repeated_past_the_count_bound() -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logstream, "RESUME_MAX_LINES", 3)
        later = [f"2026-01-01T00:00:{s:02d}Z out {s}" for s in range(1, 6)]
        position = LogPosition()
        held = stamp_to_ns("2026-01-01T00:00:00.5Z")
        list(position.new_bursts([later], lambda: held))
        # Two lines had to be forgotten: resuming before them would send them again.
        assert position.floor_ns() == stamp_to_ns("2026-01-01T00:00:02Z") + 1
        assert list(position.new_lines(later)) == []


# --- a burst at a time (the log pump's path) is the same as a line at a time ---------------------------

LINE_BYTES = st.one_of(
    st.binary(max_size=40),  # any bytes: broken UTF-8, lone continuation bytes, newlines
    st.sampled_from([b"\xe2\x82", b"\xf0\x9f\x98", b"\xc3", "é€😀".encode(), b"\n", b"\r\n"]),
    st.integers(16_000, 40_000).map(lambda n: b"2026-01-01T00:00:00.1Z " + b"y" * n),  # beyond Docker's 16 KiB
    st.integers(1, 20_000).map(  # a live line Docker cut into stamped 16 KiB pieces
        lambda n: b"2026-01-01T00:00:00.1Z " + b"y" * 16_384 + b"2026-01-01T00:00:00.2Z " + b"z" * n
    ),
)


def cut_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


def lines_one_by_one(data: bytes) -> list[str]:
    """The reference: split the bytes on newlines, then decode each line on its own (Docker's partials joined)."""
    *lines, last = data.split(b"\n")
    return [logstream._decode(line) for line in lines] + ([logstream._decode(last)] if last else [])


@settings(max_examples=examples(300))
@given(st.lists(LINE_BYTES, max_size=30), st.lists(st.integers(0, 200_000), max_size=12))
def test_bursts_hold_the_lines_a_line_by_line_decode_gives(pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    bursts = list(split_bursts(cut_at(data, cuts)))
    assert [line for burst in bursts for line in burst] == lines_one_by_one(data) == list(split_lines([data]))
    assert all(bursts)  # never an empty burst


STAMPED = st.one_of(
    st.tuples(st.integers(0, 6_000_000_000), st.sampled_from(["a", "b", "c"])).map(
        lambda pair: f"{logstream.format_stamp(1_767_225_600_000_000_000 + pair[0])} {pair[1]}"
    ),
    st.sampled_from(["no stamp", "2026-13-99T00:00:00Z odd"]),
)


def position_state(position: LogPosition) -> tuple:
    return position.floor_ns(), position.lines_at_last, position.since()


def remembered_line_by_line(lines: list[str], most: int) -> tuple:
    """The test's own reading of the rule, a line at a time: each line is remembered at its stamp (one without
    a stamp at the newest so far); after each, the lines older than the window before the newest, or beyond
    `most`, are forgotten, oldest first. (floor, the lines remembered at or after it.)"""
    recent: list[tuple[int, str]] = []
    newest = forgotten = None
    for line in lines:
        ns = logstream._stamp_ns_or_none(line)
        ns = newest if ns is None else ns
        if ns is None:
            continue
        recent.append((ns, line))
        newest = ns if newest is None else max(newest, ns)
        while recent and (recent[0][0] < newest - logstream.RESUME_WINDOW_NS or len(recent) > most):
            gone = recent.pop(0)[0] + 1
            forgotten = gone if forgotten is None else max(forgotten, gone)
    low = min((ns for ns, _ in recent), default=None)
    floor = forgotten if low is None else low if forgotten is None else max(forgotten, low)
    return floor, [line for ns, line in recent if floor is not None and ns >= floor]


@settings(max_examples=examples(300))
@given(
    st.lists(STAMPED, max_size=60),
    st.lists(st.integers(0, 60), max_size=10),
    st.lists(STAMPED, max_size=60),
    st.integers(3, 50),
)
def test_a_position_moved_a_burst_at_a_time_is_the_one_moved_a_line_at_a_time(
    delivered: list[str], cuts: list[int], reopened: list[str], most: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logstream, "RESUME_MAX_LINES", most)  # what is forgotten for the count, too
        points = sorted({min(c, len(delivered)) for c in cuts})
        groups = [delivered[a:b] for a, b in zip([0, *points], [*points, len(delivered)])]
        by_burst, by_line = LogPosition(), LogPosition()
        for group in groups:
            by_burst.advance_all(group)
        for line in delivered:
            by_line.advance(line)
        assert position_state(by_burst) == position_state(by_line)
        assert position_state(by_burst)[:2] == remembered_line_by_line(delivered, most)
        # Reopened: the same lines not delivered before, in the same order, and the same position after.
        again = [reopened[a:b] for a, b in zip([0, *points], [*points, len(reopened)])]
        fresh_bursts = [line for burst in by_burst.new_bursts(again) for line in burst]
        assert fresh_bursts == list(by_line.new_lines(reopened))
        assert position_state(by_burst) == position_state(by_line)


@pytest.mark.docker
def test_a_paused_then_stopped_container_gives_every_line_once(busybox_image: str) -> None:
    from harness.engines.dockerrun import DockerRun
    from support.lab import docker_client

    client = docker_client()
    expected = (
        [f"before {i}" for i in range(40)]
        + ["ready"]
        + [f"out {k}" for k in range(30)]
        + [f"err {j}" for j in range(30)]
        + ["last"]
    )
    for attempt in range(3):  # the out-of-order writes come by chance: a few tries
        container = client.containers.run(busybox_image, ["sh", "-c", SCRIPT], detach=True, init=True)
        run = DockerRun(client, container)
        try:
            lines: list[str] = []
            pump = threading.Thread(target=lambda: lines.extend(run.logs(follow=True)), daemon=True)
            pump.start()
            deadline = time.monotonic() + scaled(20)
            while not any(line.endswith(" ready") for line in lines) and time.monotonic() < deadline:
                time.sleep(0.05)
            run.pause()
            time.sleep(0.3)
            run.stop(10)  # thaws, then SIGTERM
            pump.join(30)
            assert not pump.is_alive()
            texts = [line.split(" ", 1)[1] for line in lines]
            assert sorted(texts) == sorted(expected), attempt  # every line, each once
            recorded = client.api.logs(container.id, timestamps=True).decode().splitlines()
            assert lines == recorded  # as received: Docker's own order
        finally:
            container.remove(force=True)
