"""guard.jsonl after a power-off: cut and padded with NUL bytes, at every byte offset for the readers, at every
line's edges and a sample of the rest for `harness recover`.

A GB10 under sustained load has been seen to power off hard, leaving a file's
last blocks allocated but never written. Each guard sample is one whole line,
fsynced before the guard acts on it; whatever the cut, the reader, `harness
status`, `harness recover` and the guard's figure keep every complete sample
(a line ended by its newline) and never parse the torn tail.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.capture import Capture, RunState, RunStatus, this_host
from harness.capture.guardlog import read_guard_log
from harness.guard.config import GuardConfig
from harness.guard.loop import GuardLoop
from harness.guard.samples import Limit, Sample, ZoneTemp
from harness.run.capture_ops import capture_rows
from harness.run.settle import carry_out, plan_all
from harness.summary.guard_figure import read_guard_trace, render_guard_figure
from support.cuts import edge_cuts, inner_cuts
from support.fakes import FakeClock
from support.properties import examples

pytestmark = pytest.mark.integration  # thousands of cuts: seconds
SOC = Limit(94.5, 87.5, "94.5 C, 10 C below its critical point 104.5 C", 104.5, "critical")
SCRIPT = [(60.0, 70.0), (84.0, 80.0), (86.5, 81.0), (83.0, 95.5), (79.0, 90.0), (77.0, 86.0), (70.0, 80.0)]


class Scripted:
    name = "scripted"

    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.script = clock, list(SCRIPT)

    def read(self) -> Optional[Sample]:
        gpu, soc = self.script.pop(0)
        zone = ZoneTemp("thermal_zone3", "thermal_zone3 (soc)", soc, SOC)
        return Sample(self.clock.wall_us(), temp_c=gpu, reasons=0, power_w=41.5, zones=(zone,))

    def facts(self) -> dict:
        return {}

    def close(self) -> None:
        pass


class Frozen:
    paused = False

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def is_paused(self) -> bool:
        return self.paused


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """guard.jsonl as the guard loop writes it: a watch line, then a sample a poll (every one kept while hot)."""
    where = tmp_path_factory.mktemp("record")
    clock = FakeClock()
    loop = GuardLoop(
        Frozen(),
        Scripted(clock),
        GuardConfig(min_pause_s=0.0, record_every_s=1.0),
        pauses_path=where / "pauses.jsonl",
        samples_path=where / "guard.jsonl",
        clock=clock,
        wall_us=clock.wall_us,
    )
    for second in range(len(SCRIPT)):
        clock.now = float(second)
        loop.poll()
    data = (where / "guard.jsonl").read_bytes()
    lines = [json.loads(line) for line in data.splitlines()]
    assert "watch" in lines[0] and [line["gpu_c"] for line in lines[1:]] == [gpu for gpu, _ in SCRIPT]
    return data


def complete_samples(data: bytes) -> list[float]:
    """The GPU temperature of every sample line ended by its newline in `data`."""
    whole = data[: data.rfind(b"\n") + 1]
    return [json.loads(line)["gpu_c"] for line in whole.splitlines() if b'"temp_c"' in line]


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture(scope="module")
def gone() -> int:
    """One harness that is gone for every cut: a process per cut would take most of the time."""
    return dead_pid()


def capture(root: Path, state: RunState, harness_pid: Optional[int] = None) -> Capture:
    """A capture of run `hot` in `state` whose harness is gone (`harness_pid`: a process that has exited)."""
    found = Capture(root / "hot")
    found.directory.mkdir(parents=True)
    found.write_status(
        RunStatus(
            run="hot",
            run_id="hot-1",
            state=state,
            exit_code=0 if state.is_final else None,
            started_at="2026-03-01T12:00:00Z",
            ended_at="2026-03-01T13:00:00Z" if state.is_final else None,
            steps_expected=1,
            steps_complete=0,
            error=None,
            harness_pid=harness_pid or dead_pid(),
            harness_host=this_host(),
            engine="process",
        )
    )
    return found


def cut(path: Path, data: bytes, keep: int, nuls: int = 4096) -> None:
    path.write_bytes(data[:keep] + b"\0" * nuls)


def test_the_reader_the_figure_and_status_keep_every_complete_sample_at_every_cut(
    record: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_PROCESS_DIR", str(tmp_path / "processes"))
    run = capture(tmp_path, RunState.SUCCEEDED)
    for keep in range(len(record) + 1):
        cut(run.guard_path, record, keep)
        expected = complete_samples(record[:keep])
        notes: list[str] = []
        log = read_guard_log(run.guard_path, notes)
        assert [s.gpu_c for s in log.samples] == expected, keep
        assert all("NUL bytes: a power loss?" in note for note in notes), (keep, notes)
        assert [s.gpu_c for s in read_guard_trace(run.directory).log.samples] == expected, keep
        (row,) = capture_rows([run])
        last = json.loads(record[: record.rfind(b"\n", 0, keep) + 1].splitlines()[-1]) if expected else None
        assert row.guard == (f"{last['temp_c']:.1f} C" if last else "-"), keep


def recovered(record: bytes, root: Path, keep: int, gone: int) -> Capture:
    """A running capture whose harness is gone, its guard.jsonl cut at `keep`, after `harness recover` settled it."""
    from harness.engines.process import ProcessEngine

    run = capture(root, RunState.RUNNING, gone)
    cut(run.guard_path, record, keep)
    (plan,) = plan_all(root, [ProcessEngine()], [])
    carry_out(plan)
    assert run.status_read().status.state != RunState.RUNNING
    assert [s.gpu_c for s in read_guard_log(run.guard_path, []).samples] == complete_samples(record[:keep]), keep
    return run


def test_recover_keeps_every_complete_sample_at_each_line_s_edges_and_the_figure_draws_them(
    record: bytes, gone: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_PROCESS_DIR", str(tmp_path / "processes"))
    ends = [i + 1 for i, byte in enumerate(record) if byte == ord("\n")]
    drawn = (ends[1] + 1, ends[len(ends) // 2] - 1, len(record))  # a line begun, a line short of its newline, all
    assert set(drawn) <= set(edge_cuts(record))
    for keep in edge_cuts(record):
        root = tmp_path / str(keep)
        run = recovered(record, root, keep, gone)
        if keep in drawn:  # drawn at a few cuts: 1 s each
            figure = root / "guard-hot.svg"
            assert render_guard_figure(run.directory, "hot", figure)
            count = len(complete_samples(record[:keep]))
            assert f"guard.jsonl ({count} sample{'' if count == 1 else 's'}: " in figure.read_text(), keep


@settings(max_examples=examples(100), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_recover_keeps_every_complete_sample_at_any_cut(
    record: bytes, gone: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    monkeypatch.setenv("HARNESS_PROCESS_DIR", str(tmp_path / "processes"))
    keep = data.draw(inner_cuts(record), label="keep")
    recovered(record, Path(tempfile.mkdtemp(dir=tmp_path)), keep, gone)
