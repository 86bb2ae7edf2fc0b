"""What a person sees of the heat guard: live progress (plain lines, the rich panel) and `harness status`;
and the records `harness recover` completes."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from harness.capture import Capture, RunState, RunStatus
from harness.capture.reader import read_pauses
from harness.capture.repair import close_open_windows
from harness.cli import app
from harness.cli.progress import PlainReporter, RichReporter, describe_guard
from harness.engines.spec import LaunchSpec
from harness.fs.bounded import last_jsonl
from harness.guard import GuardReading
from harness.times import parse_time_us

SPEC = LaunchSpec(
    run="e2b",
    run_id="e2b-1234",
    experiment="e2b",
    seed=1,
    engine="docker",
    image="i",
    command=None,
    container_name="c",
    trainer_argv=(),
    env={},
    labels={},
    mounts=(),
    device_requests=(),
    shm_size="1g",
    ipc_mode="host",
    init=True,
    ulimits={},
    capture_dir="/c",
    steps_expected=12,
    max_minutes=None,
)
SINCE = "2026-03-01T12:03:04.000000Z"
HOT = GuardReading(
    temp_c=86.5,
    paused=True,
    paused_since=SINCE,
    reason="GPU 86.5 C >= pause_at_c 85 C",
    pauses=3,
    paused_s=60.0,
)


def record():
    """One complete step record, as the parser makes it."""
    from harness.mileslog import LogParser

    parser = LogParser()
    lines = [
        "x.py:1 - perf 0: {'perf/rollout_time': 88.74}",
        "x.py:2 - rollout 0: {'rollout/raw_reward': 0.7}",
        "x.py:3 - perf 0: {'perf/step_time': 100.0}",
    ]
    return [r for line in lines for r in parser.feed(line)][0]


def test_describe_guard_shows_the_temperature_and_while_paused_since_when_why_and_the_time_so_far() -> None:
    assert describe_guard(GuardReading(temp_c=71.25)) == "71.2 C"
    assert describe_guard(GuardReading()) == "- C"
    now = parse_time_us(SINCE) + 30_000_000
    assert describe_guard(HOT, now) == (
        "PAUSED since 12:03:04 (GPU 86.5 C >= pause_at_c 85 C), 86.5 C; 3 pauses, 90 wall s paused"
    )
    assert describe_guard(GuardReading(temp_c=70.0, pauses=1, paused_s=31.4)) == "70.0 C; 1 pause, 31 wall s paused"
    refused = GuardReading(temp_c=95.1, pauses=1, paused_s=31.4, pause_failures=2)
    assert describe_guard(refused) == "95.1 C; 1 pause, 31 wall s paused; 2 pauses failed"


def feed_a_pause(progress: PlainReporter) -> None:
    progress.started(SPEC)
    progress.guard(SPEC.run, GuardReading(temp_c=80.0))
    progress.guard(SPEC.run, GuardReading(temp_c=84.0))
    progress.guard(SPEC.run, HOT)
    progress.guard(
        SPEC.run, GuardReading(temp_c=88.0, paused=True, paused_since=SINCE, reason=HOT.reason, pauses=3, paused_s=60.0)
    )
    progress.guard(SPEC.run, GuardReading(temp_c=77.0, pauses=3, paused_s=95.0))
    progress.step(SPEC.run, record(), 1)


def test_piped_step_lines_sum_the_pauses_up_and_say_no_pause_on_its_own() -> None:
    """Was: 86 of 103 lines of a piped run were PAUSED / resumed lines."""
    out = io.StringIO()
    feed_a_pause(PlainReporter(out, width=200))
    lines = out.getvalue().splitlines()[1:]
    assert len(lines) == 1
    assert lines[0].startswith("e2b: step 0 (1/12 complete) | rollout 88.7 trainer s | ")
    assert " | 77.0 C, 3 pauses, 95 wall s | " in lines[0] and " elapsed, " in lines[0]


def test_verbose_says_each_pause_and_resume_once() -> None:
    out = io.StringIO()
    feed_a_pause(PlainReporter(out, verbose=True, width=200))
    lines = out.getvalue().splitlines()[1:]
    assert lines[:2] == [
        "e2b: PAUSED by the heat guard: GPU 86.5 C >= pause_at_c 85 C",
        "e2b: resumed by the heat guard: 77.0 C; 3 pauses, 95 wall s paused",
    ]
    assert len(lines) == 3


def test_step_lines_of_an_unguarded_run_say_no_temperature_nor_pauses() -> None:
    out = io.StringIO()
    progress = PlainReporter(out, width=200)
    progress.started(SPEC)
    progress.step(SPEC.run, record(), 1)
    last = out.getvalue().splitlines()[-1]
    assert " C" not in last and "pause" not in last and " elapsed, " in last


def test_the_live_table_says_paused_and_for_how_long_while_the_guard_holds_the_run() -> None:
    progress = RichReporter(Console(file=io.StringIO(), force_terminal=True, width=160))
    progress.started(SPEC)
    rendered = io.StringIO()
    Console(file=rendered, width=160).print(progress._render())
    row = next(line for line in rendered.getvalue().splitlines() if line.startswith("e2b "))
    assert row.split()[1] == "running" and " - " in row  # nothing read yet (or unguarded)
    progress.guard(SPEC.run, HOT)
    rendered = io.StringIO()
    Console(file=rendered, width=160).print(progress._render())
    row = next(line for line in rendered.getvalue().splitlines() if line.startswith("e2b "))
    assert row.split()[1] == "paused" and "paused " in row and ", at 86.5 C" in row


def test_the_live_table_says_a_run_waits_to_cool_and_the_line_of_how_the_wait_ended_stays() -> None:
    from harness.guard.start import CoolingReading

    out = io.StringIO()
    progress = RichReporter(Console(file=out, force_terminal=True, width=160), specs=[SPEC])
    waiting = CoolingReading(below_c=55.0, timeout_s=600.0, waited_s=12.4, temps=(("GPU", 44.1), ("CPU (sim)", 57.3)))
    progress.cooling(SPEC.run, waiting)
    assert progress.live is not None  # the table shows the wait before the run starts
    rendered = io.StringIO()
    Console(file=rendered, width=160).print(progress._render())
    row = next(line for line in rendered.getvalue().splitlines() if line.startswith("e2b "))
    assert "cooling below 55 C" in row and "57.3 C (CPU (sim)), waited 12 s" in row
    cooled = CoolingReading(55.0, 600.0, 41.0, (("GPU", 44.0), ("CPU (sim)", 54.8)), outcome="cool")
    progress.cooling(SPEC.run, cooled)
    progress.started(SPEC)
    rendered = io.StringIO()
    Console(file=rendered, width=160).print(progress._render())
    row = next(line for line in rendered.getvalue().splitlines() if line.startswith("e2b "))
    assert row.split()[1] == "running" and "cooling" not in row
    progress.stop_live()
    assert "e2b: heat guard: cooled below 55 C: GPU 44.0 C, CPU (sim) 54.8 C; waited 41 s of 600 s" in out.getvalue()


def test_a_wait_to_cool_too_wide_for_a_pipe_says_the_time_waited_on_a_line_of_its_own() -> None:
    from harness.guard.start import CoolingReading

    out = io.StringIO()
    waiting = CoolingReading(55.0, 1.2, 0.0, (("GPU", 45.0), ("CPU (sim)", 60.0)))
    PlainReporter(out, width=100).cooling("e2b-dapo-filter", waiting)
    PlainReporter(out, width=200).cooling("e2b-dapo-filter", waiting)
    assert out.getvalue().splitlines() == [
        "e2b-dapo-filter: heat guard: waiting to cool below 55 C: GPU 45.0 C, CPU (sim) 60.0 C",
        "  waited 0.0 s of 1.2 s",
        "e2b-dapo-filter: heat guard: waiting to cool below 55 C: GPU 45.0 C, CPU (sim) 60.0 C; waited 0.0 s of 1.2 s",
    ]


def test_a_run_its_wait_to_cool_does_not_start_ends_the_live_table() -> None:
    """Else a refused run's table would stay live over the error line, the terminal's cursor hidden."""
    from harness.guard.start import CoolingReading

    progress = RichReporter(Console(file=io.StringIO(), force_terminal=True, width=160), specs=[SPEC])
    progress.cooling(SPEC.run, CoolingReading(55.0, 1.0, 0.2, (("GPU", 70.0),)))
    assert progress.live is not None
    progress.cooling(SPEC.run, CoolingReading(55.0, 1.0, 1.0, (("GPU", 69.0),), outcome="refused"))
    assert progress.live is None and progress.runs[SPEC.run].state == "not started"


# --------------------------------------------------------------------------- harness status


def capture_with(root: Path, run: str, state: RunState = RunState.SUCCEEDED, **files: str) -> Capture:
    capture = Capture(root / run)
    capture.directory.mkdir(parents=True)
    capture.write_status(
        RunStatus(
            run=run,
            run_id=f"{run}-1",
            state=state,
            exit_code=0,
            started_at=SINCE,
            ended_at=None if state == RunState.RUNNING else "2026-03-01T13:00:00Z",
            steps_expected=1,
            steps_complete=1,
            error=None,
            harness_host="elsewhere",
        )
    )
    for name, text in files.items():
        (capture.directory / name.replace("_", ".")).write_text(text)
    return capture


def guard_column(root: Path) -> dict[str, str]:
    """Run name -> the guard cell of `harness status` (piped: plain lines, columns two spaces apart)."""
    shown = CliRunner().invoke(app, ["status", "--capture-dir", str(root)])
    assert shown.exit_code == 0, shown.output
    title, header, *rows = shown.output.splitlines()
    assert re.split(r"\s{2,}", header)[-1] == "guard"
    return {cells[0]: cells[-1] for cells in (re.split(r"\s{2,}", row) for row in rows)}


def sample(temp: float, paused: bool = False) -> str:
    return json.dumps({"t": SINCE, "temp_c": temp, "reasons": 0, "power_w": None, "paused": paused}) + "\n"


def test_status_shows_the_last_temperature_and_an_open_window_as_paused_now(tmp_path: Path) -> None:
    opened = json.dumps({"start": SINCE, "end": None, "reason": "hot", "peak_c": 88.0}) + "\n"
    closed = json.dumps({"start": SINCE, "end": "2026-03-01T12:04:00Z", "reason": "hot", "peak_c": 88.0}) + "\n"
    capture_with(tmp_path, "cool", guard_jsonl=sample(80.0) + sample(72.5) + '{"t": "torn')
    capture_with(tmp_path, "frozen", RunState.RUNNING, guard_jsonl=sample(88.0, True), pauses_jsonl=opened)
    capture_with(tmp_path, "thawed", guard_jsonl=sample(76.0), pauses_jsonl=opened + closed)
    capture_with(tmp_path, "left", RunState.FAILED, pauses_jsonl=opened)
    capture_with(tmp_path, "bare", manifest_json=json.dumps({"guard": {"guarded": False, "requested": "none"}}))
    capture_with(tmp_path, "old")
    column = guard_column(tmp_path)
    assert column["cool"] == "72.5 C"  # the last whole line; the torn one is passed over
    assert column["frozen"] == "PAUSED since 12:03:04, 88.0 C"
    assert column["thawed"] == "76.0 C"
    assert column["left"] == "PAUSED since 12:03:04, 88.0 C (left frozen? harness recover thaws it)"  # its peak
    assert column["bare"] == "off" and column["old"] == "-"


def test_status_reads_only_the_tail_of_a_huge_guard_record(tmp_path: Path) -> None:
    capture = capture_with(tmp_path, "long")
    path = capture.guard_path
    with path.open("wb") as handle:  # 2 GiB of nothing (sparse), over the whole-file reader's 1 GiB cap
        handle.truncate(2 << 30)
    with path.open("a") as handle:
        handle.write("\n" + sample(83.25))
    assert os.path.getsize(path) > 2 << 30
    assert last_jsonl(path, []) == json.loads(sample(83.25))
    assert guard_column(tmp_path)["long"] == "83.2 C"


def test_last_jsonl_of_nothing_useful_is_none(tmp_path: Path) -> None:
    notes: list[str] = []
    assert last_jsonl(tmp_path / "absent", notes) is None and notes == []
    (tmp_path / "junk").write_text("not json\n[1, 2]\n")
    assert last_jsonl(tmp_path / "junk", notes) is None
    os.mkfifo(tmp_path / "fifo")
    assert last_jsonl(tmp_path / "fifo", notes) is None and notes == ["fifo is not a regular file (it is a FIFO)"]


# --------------------------------------------------------------------------- recover's closing lines


def test_close_open_windows_appends_a_closing_line_with_the_same_start_for_each_open_one(tmp_path: Path) -> None:
    path = tmp_path / "pauses.jsonl"
    lines = [
        {"start": "2026-03-01T12:00:00.000000Z", "end": None, "reason": "a", "peak_c": 86.0},
        {"start": "2026-03-01T12:00:00.000000Z", "end": "2026-03-01T12:00:40.000000Z", "reason": "a", "peak_c": 87.0},
        {
            "start": "2026-03-01T12:05:00.000000Z",
            "end": None,
            "reason": "clock event SwThermalSlowdown",
            "peak_c": 84.0,
        },
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"start": "2026-03-01T12:09')  # torn
    assert close_open_windows(path, "2026-03-01T12:10:00.000000Z") == 1
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert written == lines + [{**lines[2], "end": "2026-03-01T12:10:00.000000Z"}]
    windows = read_pauses(path, [])
    assert [(w.end_us is not None) for w in windows] == [True, True]
    assert close_open_windows(path, "2026-03-01T12:11:00.000000Z") == 0  # nothing open: nothing written
    assert len(path.read_text().splitlines()) == 4
    assert close_open_windows(tmp_path / "none.jsonl", "2026-03-01T12:10:00Z") == 0
    assert not (tmp_path / "none.jsonl").exists()


def status_table(root: Path) -> tuple[list[str], dict[str, list[str]]]:
    """`harness status` piped: the header's cells and each run's cells."""
    shown = CliRunner().invoke(app, ["status", "--capture-dir", str(root)])
    assert shown.exit_code == 0, shown.output
    title, header, *rows = shown.output.splitlines()
    return re.split(r"\s{2,}", header), {cells[0]: cells for cells in (re.split(r"\s{2,}", row) for row in rows)}


def test_status_says_its_pauses_are_wall_seconds(tmp_path: Path) -> None:
    opened = json.dumps({"start": SINCE, "end": None, "reason": "hot", "peak_c": 88.0}) + "\n"
    closed = json.dumps({"start": SINCE, "end": "2026-03-01T12:04:00Z", "reason": "hot", "peak_c": 88.0}) + "\n"
    capture_with(tmp_path, "thawed", pauses_jsonl=opened + closed)
    header, rows = status_table(tmp_path)
    assert header[3] == "pauses (wall s)" and rows["thawed"][3] == "1 (56 s)"


def test_status_names_every_runs_host_the_same_way_ray_placed_or_not(tmp_path: Path) -> None:
    capture_with(
        tmp_path,
        "placed",
        manifest_json=json.dumps({"ray": {"hostname": "spark-2", "node_ip": "10.0.0.2", "node_id": "5f3a"}}),
    )
    capture_with(tmp_path, "local")  # its harness ran on the host `elsewhere`
    header, rows = status_table(tmp_path)
    assert header[-1] == "host"
    assert rows["placed"][-1] == "spark-2" and rows["local"][-1] == "elsewhere"


def test_with_zones_watched_progress_names_each_temperature() -> None:
    both = GuardReading(temp_c=84.4, temps=(("GPU", 70.2), ("CPU (sim)", 84.4)), pauses=2, paused_s=61.0)
    assert describe_guard(both) == "GPU 70.2 C, CPU (sim) 84.4 C; 2 pauses, 61 wall s paused"
    one = GuardReading(temp_c=72.0, temps=(("GPU", 72.0),))
    assert describe_guard(one) == "72.0 C"  # one temperature: as it always read
