"""A full capture disk loses nothing: the run ends failed with the reason, and recover saves the rest.

The capture directory is a small tmpfs (root only; CI runs the suite as
root). A 20,000-line burst fills it mid-run: the harness stops writing at
the last whole line, records `failed` with "no space left on device" (a
space reserve keeps status.json writable), says to free space and run
`harness recover`, and leaves the trainer's log with the engine. Once the
filesystem is grown, recover saves every remaining line and step once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from support.lab import Lab
from support.smalldisk import SmallDisk, small_disk_at


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disk_at(tmp_path / "capture", "1m") as disk:
        yield disk


def test_a_full_disk_mid_run_loses_nothing(lab: Lab, small_disk: SmallDisk) -> None:
    run = lab.experiment("burst", scenario="burst", steps=2, env={"FAKE_BURST_LINES": "20000"})
    result = lab.cli("run", run)
    assert result.exit_code == 1, result.output  # failed, not an internal error
    assert "internal error" not in result.output
    status = lab.status(run)
    assert status["state"] == "failed" and status["capture_complete"] is False
    assert status["error"].startswith("no space left on device writing container.log")
    final_line = [line for line in result.stderr.splitlines() if line.startswith("warning: run burst failed")]
    assert len(final_line) == 1 and "free space, then run `harness recover`" in final_line[0]
    raw = (lab.captures / run / "container.log").read_bytes()
    assert raw.endswith(b"\n")  # no torn line

    (handle,) = lab.objects()  # left with the engine, its log whole
    held = lab.engine_lines(handle)
    saved = lab.log(run)
    assert 0 < len(saved) < len(held) and saved == held[: len(saved)]

    small_disk.resize("64m")
    recovered = lab.capture_cli("recover")
    assert recovered.exit_code == 0, recovered.output
    assert lab.log(run) == held  # every line, once
    after = lab.status(run)
    assert after["state"] == "failed" and after["error"] == status["error"]  # the recorded reason is kept
    assert after["capture_complete"] is True and after["exit_code"] == 0
    assert after["steps_complete"] == 2 and any("harness recover saved" in note for note in after["notes"])
    assert [(r["step"], r["complete"]) for r in lab.metrics(run)] == [(0, True), (1, True)]
    assert (lab.captures / run / "args.json").exists()
    assert lab.objects() == []  # removed once everything was saved


def test_a_disk_full_before_the_run_starts_nothing(lab: Lab, small_disk: SmallDisk) -> None:
    (small_disk.path / "filler").write_bytes(b"\0" * (1024 * 1024 - 64 * 1024))
    run = lab.experiment("tight", steps=1)
    result = lab.cli("run", run)
    assert result.exit_code == 2
    assert "no space left on device for the capture" in result.stderr and result.stderr.count("\n") == 1
    assert not (lab.captures / run).exists() and lab.objects() == []
