"""The board: capture events -> TensorBoard records and event files, read back as TensorBoard reads them.

The event files are read with tbparse (TensorBoard's own event reader under
it), and every value is checked against the capture file it came from.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.board.live import TENSORBOARD_LOST, LiveBoard
from harness.board.names import TagMapper, board_run_name, clean_tag
from harness.board.records import Hparams, Record, Scalar, SessionEnd, Text
from harness.board.replay import capture_events, rebuild, replay_records
from harness.board.translate import RunBoard
from harness.cli import app
from support.timing import eventually

REPO = Path(__file__).resolve().parent.parent
LAB = REPO / "tests" / "data" / "captures" / "lab"


def read_board(directory: Path) -> Any:
    from tbparse import SummaryReader

    return SummaryReader(str(directory), pivot=False, extra_columns={"wall_time", "dir_name"})


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def lab_root(tmp_path: Path) -> Path:
    """The hand-made lab captures, with a guard.jsonl for the filter run (a second temperature among them)."""
    root = tmp_path / "capture"
    shutil.copytree(LAB, root)
    samples = [
        {"t": "2026-11-29T10:00:10Z", "temp_c": 80.5, "reasons": 0, "power_w": 41.0, "paused": False},
        {"t": "2026-11-29T10:00:20Z", "temp_c": 86.1, "reasons": 0, "power_w": None, "paused": True},
        {"t": "2026-11-29T10:00:30Z", "temp_c": 77.0, "cpu_temp_c": 70.25, "reasons": 64, "paused": False},
        {"t": "2026-11-29T10:04:10Z", "temp_c": None, "temps": {"gpu": 87.0, "soc zone": 91.5}, "paused": True},
    ]
    (root / "e2b-dapo-filter" / "guard.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return root


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("run", "seed", "expected"),
    [
        ("plain-48", 1, "plain-48/s1"),
        ("plain-48-s2", 2, "plain-48/s2"),
        ("plain-48-s3", 3, "plain-48/s3"),
        ("plain-4-steps", 1, "plain-4-steps/s1"),  # a variant is a condition of its own
        ("odd", 2, "odd"),  # seed 2 without the suffix: its own name, never another run's
        ("x-s2", 1, "x-s2/s1"),
        ("plain", None, "plain"),
    ],
)
def test_run_names_group_seeds_under_their_condition(run: str, seed: Any, expected: str) -> None:
    assert board_run_name(run, seed) == expected


def test_one_regex_selects_every_seed_of_a_condition_and_nothing_else() -> None:
    import re

    names = [board_run_name(r, s) for r, s in [("plain-48", 1), ("plain-48-s2", 2), ("plain-48-s3", 3)]]
    others = [board_run_name(r, s) for r, s in [("plain-48x", 1), ("plain", 1), ("e2b-dapo-filter-s2", 2)]]
    pattern = re.compile(r"^plain-48/")
    assert all(pattern.search(name) for name in names)
    assert not any(pattern.search(name) for name in others)


def test_metric_names_tensorboard_would_reject_are_mapped_as_documented() -> None:
    mapper = TagMapper()
    assert mapper.tag("train/loss") == "train/loss"
    assert mapper.tag("rollout/zero_std/count_0.0") == "rollout/zero_std/count_0.0"
    assert mapper.tag("eval/acc @k=1 (gsm8k)") == "eval/acc__k_1__gsm8k_"
    assert mapper.tag("/perf//time/") == "perf/time"
    assert mapper.tag("température") == "temp_rature"
    assert mapper.tag("harness/reward") == "miles/harness/reward"  # the harness's own prefixes stay its own
    assert mapper.tag("a b") == "a_b"
    assert mapper.tag("a:b") == "a_b__2"  # two names, one tag: the second is told apart
    assert mapper.tag("a b") == "a_b"  # the same name, the same tag
    assert mapper.tag("") == "_"
    assert mapper.mapped["a:b"] == "a_b__2" and "train/loss" not in mapper.mapped
    assert clean_tag("guard/soc zone") == "guard/soc_zone"


# --------------------------------------------------------------------------- translation


def scalars_of(records: Sequence[Record], tag: str) -> dict[int, float]:
    return {r.step: r.value for r in records if isinstance(r, Scalar) and r.tag == tag}


def test_every_numeric_miles_metric_of_each_step_at_its_rollout_id(lab_root: Path) -> None:
    run_dir = lab_root / "e2b-dapo-filter"
    _, records = replay_records("e2b-dapo-filter", run_dir)
    for row in jsonl(run_dir / "metrics.jsonl"):
        for key, value in row["metrics"].items():
            assert scalars_of(records, key)[row["step"]] == float(value), (key, row["step"])


def test_the_summarys_step_values_are_the_summarys(lab_root: Path) -> None:
    from harness.summary.captures import read_capture
    from harness.summary.summarize import summarize_run

    run_dir = lab_root / "e2b-dapo-filter"
    _, records = replay_records("e2b-dapo-filter", run_dir)
    table = summarize_run(read_capture(run_dir)).summary.steps
    checked = 0
    for field in (
        "rollout_time_adjusted_s",
        "pause_overlap_s",
        "dropped_all_right",
        "dropped_all_wrong",
        "batches",
        "reward",
    ):
        shown = scalars_of(records, f"harness/{field}")
        for step, value in zip(table.step, getattr(table, field)):
            if value is None:
                assert step not in shown
            else:
                assert shown[step] == pytest.approx(value, rel=1e-9), (field, step)
                checked += 1
    assert checked >= 16
    sources = [r for r in records if isinstance(r, Text) and r.tag == "harness/reward_source"]
    assert [r.text.split(":")[0] for r in sources] == ["rollout/raw_reward_unfiltered"]


def test_guard_samples_on_wall_time_every_temperature_and_paused(lab_root: Path) -> None:
    run_dir = lab_root / "e2b-dapo-filter"
    _, records = replay_records("e2b-dapo-filter", run_dir)
    samples = jsonl(run_dir / "guard.jsonl")
    assert scalars_of(records, "guard/temp_c") == {0: 80.5, 1: 86.1, 2: 77.0}
    assert scalars_of(records, "guard/cpu_temp_c") == {2: 70.25}
    assert scalars_of(records, "guard/temps/gpu") == {3: 87.0}
    assert scalars_of(records, "guard/temps/soc_zone") == {3: 91.5}
    assert scalars_of(records, "guard/paused") == {i: float(s["paused"]) for i, s in enumerate(samples)}
    assert scalars_of(records, "guard/power_w") == {0: 41.0}
    walls = {r.step: r.wall_time for r in records if isinstance(r, Scalar) and r.tag == "guard/paused"}
    from datetime import datetime, timezone

    assert walls[0] == datetime(2026, 11, 29, 10, 0, 10, tzinfo=timezone.utc).timestamp()
    assert walls[3] - walls[0] == 240.0


def test_state_changes_pauses_and_session_as_records(lab_root: Path) -> None:
    _, records = replay_records("e2b-dapo-filter", lab_root / "e2b-dapo-filter")
    states = [r.text for r in records if isinstance(r, Text) and r.tag == "run/state"]
    assert states[0].startswith("running") and states[1].startswith("stopped: time limit reached")
    pauses = [r.text for r in records if isinstance(r, Text) and r.tag == "guard/pauses"]
    assert pauses[0].startswith("paused: temp 86.1 C") and pauses[1].startswith("resumed after 10.0 wall s")
    (end,) = [r for r in records if isinstance(r, SessionEnd)]
    assert end.state == "unknown"  # stopped: neither success nor failure
    (hparams,) = [r for r in records if isinstance(r, Hparams)]
    assert hparams.values["experiment"] == "e2b-dapo-filter" and hparams.values["filter"] is True
    assert hparams.values["over_sampling_batch_size"] == 48.0


def test_a_pause_that_failed_is_a_text_of_its_own_not_a_resume(lab_root: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "e2b-dapo-filter"
    shutil.copytree(lab_root / "e2b-dapo-filter", run_dir)
    opened = {"start": "2026-11-29T10:02:00Z", "end": None, "reason": "GPU 95.1 C >= pause_at_c 85 C", "peak_c": 95.1}
    failed = {**opened, "end": opened["start"], "failed": "unable to freeze", "on_pause_failure": "stop"}
    with (run_dir / "pauses.jsonl").open("a") as handle:
        handle.write(json.dumps(opened) + "\n" + json.dumps(failed) + "\n")
    _, records = replay_records("e2b-dapo-filter", run_dir)
    pauses = [r.text for r in records if isinstance(r, Text) and r.tag == "guard/pauses"]
    assert "pause failed at 95.1 C: unable to freeze (guard.on_pause_failure: stop)" in pauses


def test_non_finite_values_are_skipped_and_counted() -> None:
    board = RunBoard("r")
    board.feed(("status", "status.json", {"state": "running", "started_at": "2026-01-01T00:00:00Z"}))
    row = {
        "step": 3,
        "complete": True,
        "t_rollout_end": None,
        "t_step_end": "2026-01-01T00:01:00Z",
        "metrics": {"train/loss": None, "train/grad_norm": None, "ok": 1.5, "big": 10**400, "flag": True, "list": [1]},
        "non_finite": {"train/loss": "nan", "train/grad_norm": "inf"},
    }
    records = board.feed(("jsonl", "metrics.jsonl", row))
    assert {r.tag for r in records if isinstance(r, Scalar) and not r.tag.startswith("harness/")} == {"ok"}
    assert board.skipped == 3
    assert (
        "3 non-finite value(s) skipped" in board.skipped_text() and "train/loss (nan) at step 3" in board.skipped_text()
    )
    end = board.feed(("status", "status.json", {"state": "failed", "ended_at": "2026-01-01T00:02:00Z"}))
    assert any(isinstance(r, Text) and r.tag == "run/skipped" for r in end)


def test_the_records_do_not_depend_on_how_the_files_interleave(lab_root: Path) -> None:
    """Live, a window's closing line may land after the step that followed it, and guard samples anywhere: the
    guard writes a window's opening before it freezes the run, so only that order is certain."""
    run_dir = lab_root / "e2b-dapo-filter"
    windows = {row["start"]: row for row in jsonl(run_dir / "pauses.jsonl")}  # as the guard writes them:
    lines = [line for w in windows.values() for line in ({**w, "end": None}, w) if line is w or w["end"]]
    (run_dir / "pauses.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))  # open, then closed
    merged = list(capture_events(run_dir, []))
    shuffled: list = []
    late_closes: list = []
    opened: set = set()
    for event in merged:
        if event[1] == "guard.jsonl":
            continue  # all at the end
        if event[1] == "pauses.jsonl":
            shuffled += late_closes  # the guard writes its lines one after another: each file keeps its order
            late_closes = []
            if event[2].get("end") is None:
                opened.add(event[2]["start"])
            elif event[2]["start"] in opened:
                late_closes.append(event)  # a window whose opening is known: its closing after the next step
                continue
        if event[0] == "status" and event[2]["state"] != "running":
            shuffled += late_closes
            late_closes = []
            shuffled += [e for e in merged if e[1] == "guard.jsonl"]
        shuffled.append(event)
        if event[1] == "metrics.jsonl":
            shuffled += late_closes
            late_closes = []
    assert sorted(map(repr, shuffled)) == sorted(map(repr, merged)) and shuffled != merged

    def records(events: list) -> list:
        board = RunBoard("e2b-dapo-filter")
        out = [r for event in events for r in board.feed(event)] + board.finish()
        return sorted(map(repr, out))

    assert records(merged) == records(shuffled)


# --------------------------------------------------------------------------- event files


def test_rebuilt_event_files_read_back_equal_to_the_capture(lab_root: Path) -> None:
    rebuilt = rebuild(lab_root)
    assert rebuilt.runs["plain-48-s2"] == "plain-48/s2" and rebuilt.runs["plain"] == "plain/s1"
    board = read_board(lab_root / "tensorboard")
    scalars = board.scalars
    for run, name in rebuilt.runs.items():
        rows = jsonl(lab_root / run / "metrics.jsonl")
        mine = scalars[scalars.dir_name == name]
        for row in rows:
            for key, value in row["metrics"].items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    found = mine[(mine.tag == key) & (mine.step == row["step"])].value.tolist()
                    assert found == [pytest.approx(float(np.float32(value)), rel=1e-7)], (run, key, row["step"])
    guard = scalars[(scalars.dir_name == "e2b-dapo-filter/s1") & (scalars.tag == "guard/temp_c")]
    samples = [s for s in jsonl(lab_root / "e2b-dapo-filter" / "guard.jsonl") if s.get("temp_c") is not None]
    assert guard.value.tolist() == pytest.approx([s["temp_c"] for s in samples])
    hparams = board.hparams
    assert set(hparams.dir_name) == set(rebuilt.runs.values())
    lr = hparams[(hparams.dir_name == "plain/s1") & (hparams.tag == "--rollout-batch-size")].value.tolist()
    assert lr == [32.0]
    text = board.text
    assert set(text[text.tag == "run/state"].dir_name) == set(rebuilt.runs.values())


def test_rebuilding_again_replaces_the_events(lab_root: Path) -> None:
    rebuild(lab_root)
    rebuild(lab_root)
    files = list((lab_root / "tensorboard" / "plain" / "s1").glob("events.out.tfevents.*"))
    assert len(files) == 1


def test_export_format_tensorboard_rebuilds_from_captures(lab_root: Path) -> None:
    out = CliRunner().invoke(app, ["export", "--format", "tensorboard", "--capture-dir", str(lab_root)])
    assert out.exit_code == 0, out.output
    assert "records of 5 runs" in out.output
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    images = EventAccumulator(str(lab_root / "tensorboard" / "summary"), size_guidance={"images": 0})
    images.Reload()
    tags = images.Tags()["images"]
    assert any(tag.startswith("figures/reward-") for tag in tags) and any("rollout-time-" in tag for tag in tags)
    first = images.Images(tags[0])[0]
    assert first.encoded_image_string.startswith(b"\x89PNG") and first.width > 100


def test_export_format_tensorboard_with_nothing_to_show_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = CliRunner().invoke(app, ["export", "--format", "tensorboard", "--capture-dir", str(tmp_path / "empty")])
    assert out.exit_code == 5 and "nothing to export" in out.output and "Traceback" not in out.output


def test_the_board_directories_are_never_runs(lab_root: Path) -> None:
    from harness.capture.reader import find_runs
    from harness.experiments.naming import check_safe_name

    rebuild(lab_root)
    (lab_root / "wandb").mkdir()
    runs, skipped = find_runs(lab_root)
    assert {p.name for p in runs} == {"e2b-dapo-filter", "e6a-base", "plain", "plain-48", "plain-48-s2"}
    assert not skipped
    for name in ("tensorboard", "wandb"):
        with pytest.raises(ValueError, match="reserved"):
            check_safe_name(name)


# --------------------------------------------------------------------------- the live board's faults


class FullDisk:
    """A sink on a disk that is full (the lowest layer: the write itself fails as the kernel says)."""

    name = "tensorboard"
    lost = TENSORBOARD_LOST
    writes = 0

    def write(self, records: Sequence[Record]) -> None:
        FullDisk.writes += 1
        raise OSError(errno.ENOSPC, "No space left on device", "/captures/tensorboard/r/s1/events")

    def close(self) -> None:
        pass


def events_of_a_run(steps: int) -> list:
    events: list = [
        ("status", "status.json", {"state": "running", "started_at": "2026-01-01T00:00:00Z", "attempt": 1}),
        ("json", "manifest.json", {"experiment": {"name": "r", "seed": 1}, "created_at": "2026-01-01T00:00:00Z"}),
    ]
    for step in range(steps):
        row = {"step": step, "complete": True, "t_step_end": f"2026-01-01T00:0{step}:30Z", "metrics": {"x": step}}
        events.append(("jsonl", "metrics.jsonl", row))
        events.append(("log", "container.log", "a line"))
    events.append(("status", "status.json", {"state": "succeeded", "ended_at": "2026-01-01T00:09:00Z"}))
    return events


def test_a_full_disk_under_the_events_is_said_once_and_stops_nothing() -> None:
    warnings: list[str] = []
    board = LiveBoard("r", lambda name: [FullDisk()], warnings.append)
    board.start()
    for event in events_of_a_run(5):
        board.put(event)  # never raises, never blocks
    board.close()
    assert not board.is_alive()
    assert len(warnings) == 1 and "no space left on device" in warnings[0]
    assert "harness export --format tensorboard" in warnings[0]
    assert board.failed is not None and FullDisk.writes >= 1


def test_a_bug_in_the_board_is_said_once_and_stops_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    warnings: list[str] = []
    board = LiveBoard("r", lambda name: [], warnings.append)

    def broken(event: Any) -> list:
        raise RuntimeError("boom")

    monkeypatch.setattr(board.board, "feed", broken)
    board.start()
    for event in events_of_a_run(3):
        board.put(event)
    board.close()
    assert len(warnings) == 1 and "RuntimeError: boom" in warnings[0]


def test_harness_board_without_tensorboard_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    out = CliRunner().invoke(app, ["board", "--capture-dir", str(tmp_path)])
    assert out.exit_code == 2
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and "TensorBoard is not installed" in lines[0] and ".[board]" in lines[0]


def test_non_finite_lines_from_old_captures_never_reach_the_board(tmp_path: Path) -> None:
    root = tmp_path / "capture"
    shutil.copytree(LAB / "plain", root / "plain")
    with (root / "plain" / "metrics.jsonl").open("a") as handle:
        handle.write(
            '{"step": 9, "complete": true, "t_step_end": "2026-11-29T08:20:00Z", "metrics": {"x": NaN, "y": 2}}\n'
        )
    rebuilt = rebuild(root)
    assert "x (not finite) at step 9" in rebuilt.skipped_values["plain"]
    values = read_board(root / "tensorboard").scalars.value.tolist()
    assert all(math.isfinite(v) for v in values)


class Recorder:
    """A sink that keeps what it is given (a board's other sink, to see that it goes on)."""

    name = "tensorboard"
    lost = TENSORBOARD_LOST

    def __init__(self) -> None:
        self.records: list[Record] = []

    def write(self, records: Sequence[Record]) -> None:
        self.records += records

    def close(self) -> None:
        pass


def test_a_wandb_directory_that_leads_out_of_the_root_costs_the_wandb_run_only_and_says_what_to_do(
    tmp_path: Path,
) -> None:
    from harness.board.records import SessionEnd
    from harness.board.wandb import WandbSink

    root, elsewhere = tmp_path / "capture", tmp_path / "elsewhere"
    root.mkdir(), elsewhere.mkdir()
    os.symlink(elsewhere, root / "wandb")
    events = Recorder()
    warnings: list[str] = []
    board = LiveBoard("r", lambda name: [events, WandbSink(root, name)], warnings.append)
    board.start()
    for event in events_of_a_run(4):
        board.put(event)
    board.close()

    assert len(warnings) == 1, warnings
    said = warnings[0]
    assert "wandb" in said and "leads out of" in said and "no offline W&B run" in said
    assert "export --format tensorboard" not in said  # it rebuilds TensorBoard's events, never a W&B run
    assert "harness run" in said and "--wandb" in said  # what does write one
    assert board.failed is None  # the TensorBoard events are whole
    assert any(isinstance(r, SessionEnd) for r in events.records)
    assert not list(elsewhere.iterdir())  # nothing written out of the root


def test_a_bug_that_stops_the_board_says_what_each_sink_loses(monkeypatch: pytest.MonkeyPatch) -> None:
    other = Recorder()
    other.name, other.lost = "wandb", "no offline W&B run for it from here"
    warnings: list[str] = []
    board = LiveBoard("r", lambda name: [Recorder(), other], warnings.append)
    board.start()
    events = events_of_a_run(3)
    for event in events[:3]:
        board.put(event)
    assert eventually(lambda: board.written > 0)  # the sinks made (with the manifest) and written to

    def broken(event: Any) -> list:
        raise RuntimeError("boom")

    monkeypatch.setattr(board.board, "feed", broken)
    for event in events[3:]:
        board.put(event)
    board.close()
    assert [w.split(": ")[1] for w in warnings] == ["tensorboard", "wandb"]
    assert "export --format tensorboard" in warnings[0] and warnings[1].endswith("no offline W&B run for it from here")
