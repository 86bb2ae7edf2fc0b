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

from harness.engines.logstream import RESUME_MAX_LINES, LogPosition, stamp_to_ns
from harness.run.settle import log_position
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
    position = log_position(log)
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


@pytest.mark.docker
def test_a_paused_then_stopped_container_gives_every_line_once(busybox_image: str) -> None:
    from harness.engines.docker import DockerRun
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
