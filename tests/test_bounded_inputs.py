"""Hangs and unbounded reads: what the harness reads that it did not write itself is read bounded, never blocking.

- the image-check cache (a FIFO, a file of a GB, a hand-written or broken entry);
- the probe's answer (the first one only; a path it leaves out does not load);
- the kernel's thermal zones (a FIFO, a 400-digit value, a read that never answers);
- a log whose tail a power loss left as NUL bytes (`parse-log`, `logs`): one rule, the reader's `WholeLines`;
- SIGTERM, which ends a command blocked before any run has started.

FIFOs are real (os.mkfifo) and the huge files real sparse files; the memory a
command takes is the kernel's count for a harness process of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.engines import milesimage
from harness.engines.milesimage import ImageCheck, PathFlag, judge, probe_image, read_probe_output
from harness.lab.milesnames import FILTER_FLAG, FILTER_PATH, FILTER_PATH_PUBLIC
from support.memory import measured

REPO = Path(__file__).resolve().parent.parent
HARNESS = [sys.executable, "-m", "harness"]
GB = 1 << 30


def sparse(path: Path, text: bytes, size: int) -> Path:
    """`text`, then NUL bytes to `size` that take no disk: the blocks a power loss left allocated, never written."""
    path.write_bytes(text)
    with path.open("r+b") as handle:
        handle.truncate(size)
    return path


class Releaser:
    """Opens each FIFO for writing after `after_s`, again and again, so a reader blocked in open() comes back:
    a test of something that must never block then fails in seconds instead of hanging the suite."""

    def __init__(self, fifos: Sequence[Path], after_s: float = 10.0) -> None:
        self.fifos, self.after_s = list(fifos), after_s
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._release, daemon=True)

    def _release(self) -> None:
        if self.done.wait(self.after_s):
            return
        while not self.done.is_set():
            for fifo in self.fifos:
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass  # no reader now
            time.sleep(0.05)

    def __enter__(self) -> "Releaser":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(5)


# --------------------------------------------------------------------------- the image-check cache

PUBLIC = ImageCheck(
    "sha256:public",
    version="0.2.0",
    found=True,
    prints_unfiltered_reward=False,
    paths={FILTER_PATH: "ModuleNotFoundError: No module named 'miles.rollout.filter_hub.common_filters'"},
)
PATHS = [FILTER_PATH, FILTER_PATH_PUBLIC]
FLAGS = [PathFlag(FILTER_FLAG, FILTER_PATH)]


class Prober:
    """The probe's container, the lowest layer: answers as the probe prints, counting its calls."""

    def __init__(self, check: ImageCheck = PUBLIC) -> None:
        self.check, self.calls = check, 0

    def __call__(self, image: str, argv: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
        self.calls += 1
        paths = {path: self.check.paths.get(path) for path in argv[1:]}
        answer = {**self.check.to_json(), "paths": paths}
        return 0, milesimage.PROBE_MARKER + json.dumps(answer) + "\n", ""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_PREFLIGHT_DIR", str(tmp_path / "image-checks"))
    return tmp_path / "image-checks"


def first_entry(cache: Path) -> Path:
    """The entry the first probe of the image kept (whatever its name)."""
    prober = Prober()
    assert probe_image("lab", PUBLIC.image_id, PATHS, prober).cached is False
    (entry,) = [path for path in cache.iterdir() if not path.name.startswith(".")]
    assert probe_image("lab", PUBLIC.image_id, PATHS, prober).cached is True and prober.calls == 1
    return entry


def test_a_fifo_where_the_cache_entry_is_is_absent_and_never_blocks(cache: Path) -> None:
    entry = first_entry(cache)
    entry.unlink()
    os.mkfifo(entry)
    prober = Prober()
    started = time.monotonic()
    with Releaser([entry]):
        outcome = probe_image("lab", PUBLIC.image_id, PATHS, prober)
    assert time.monotonic() - started < 5
    assert outcome.cached is False and prober.calls == 1 and outcome.check is not None
    assert judge("lab", outcome.check, FLAGS)  # the fresh answer: the path is missing


@pytest.mark.parametrize(
    "broken",
    [
        b"{",  # cut short
        b"\0" * 300,  # a power loss
        b"[1, 2]",
        b"not json at all",
    ],
)
def test_a_cache_entry_that_does_not_parse_is_absent(cache: Path, broken: bytes) -> None:
    entry = first_entry(cache)
    entry.write_bytes(broken)
    prober = Prober()
    outcome = probe_image("lab", PUBLIC.image_id, PATHS, prober)
    assert outcome.cached is False and prober.calls == 1
    again = probe_image("lab", PUBLIC.image_id, PATHS, prober)
    assert again.cached is True and prober.calls == 1  # the entry was written again, whole


@pytest.mark.parametrize(
    "change",
    [
        {"paths": {FILTER_PATH: 5, FILTER_PATH_PUBLIC: None}},  # an answer that is neither "loads" nor an error
        {"found": "yes"},
        {"paths": [FILTER_PATH]},
    ],
)
def test_a_cache_entry_of_the_wrong_shape_is_absent_never_read_as_loading(cache: Path, change: dict) -> None:
    entry = first_entry(cache)
    entry.write_text(json.dumps({**json.loads(entry.read_text()), **change}))
    prober = Prober()
    outcome = probe_image("lab", PUBLIC.image_id, PATHS, prober)
    assert outcome.cached is False and prober.calls == 1
    assert outcome.check is not None and judge("lab", outcome.check, FLAGS)


def test_a_hand_written_entry_for_the_image_id_does_not_pass_the_preflight(cache: Path) -> None:
    entry = first_entry(cache)
    # What the cache once held, every path loading: written by hand for the image id, it named nothing it checked.
    entry.write_text(
        json.dumps(
            {
                "version": 1,
                "image_id": PUBLIC.image_id,
                "commit": None,
                "miles_version": "0.2.0",
                "found": True,
                "prints_unfiltered_reward": False,
                "paths": {path: None for path in PATHS},
            }
        )
    )
    prober = Prober()
    outcome = probe_image("lab", PUBLIC.image_id, PATHS, prober)
    assert outcome.cached is False and prober.calls == 1
    assert outcome.check is not None and judge("lab", outcome.check, FLAGS)


def test_an_entry_is_keyed_to_the_image_the_probe_and_the_paths_it_asked(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = first_entry(cache)
    kept = json.loads(entry.read_text())
    assert kept["image_id"] == PUBLIC.image_id and sorted(kept["asked"]) == sorted(PATHS)
    prober = Prober()
    # another image's entry copied over this one's
    entry.write_text(json.dumps({**kept, "image_id": "sha256:other"}))
    assert probe_image("lab", PUBLIC.image_id, PATHS, prober).cached is False and prober.calls == 1
    # an entry that says it asked about a path it has no answer for
    entry.write_text(json.dumps({**kept, "asked": sorted([*PATHS, "m.f"])}))
    assert probe_image("lab", PUBLIC.image_id, PATHS, prober).cached is False and prober.calls == 2
    # another probe: every entry before it is stale
    assert probe_image("lab", PUBLIC.image_id, PATHS, prober).cached is True and prober.calls == 2
    monkeypatch.setattr(milesimage, "PROBE", milesimage.PROBE + "\n# a new probe\n")
    assert probe_image("lab", PUBLIC.image_id, PATHS, prober).cached is False and prober.calls == 3
    assert probe_image("lab", PUBLIC.image_id, PATHS, prober).cached is True and prober.calls == 3


@pytest.mark.integration
def test_a_cache_entry_of_a_gigabyte_is_absent_and_read_no_further_than_its_size(cache: Path, tmp_path: Path) -> None:
    entry = first_entry(cache)
    sparse(entry, entry.read_bytes(), GB)
    script = (
        "from harness.engines import milesimage\n"
        "from harness.lab.milesnames import FILTER_PATH, FILTER_PATH_PUBLIC\n"
        "calls = []\n"
        "def prober(image, argv, timeout_s):\n"
        "    calls.append(argv)\n"
        "    return 0, milesimage.PROBE_MARKER + '{\"found\": false, \"paths\": {}}', ''\n"
        f"outcome = milesimage.probe_image('lab', {PUBLIC.image_id!r}, [FILTER_PATH, FILTER_PATH_PUBLIC], prober)\n"
        "print(outcome.cached, len(calls))\n"
    )
    run = measured(
        [sys.executable, "-c", script], env={**os.environ, "HARNESS_PREFLIGHT_DIR": str(cache)}, cwd=str(REPO)
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "1"]  # absent: the probe was asked
    assert run.peak_mb < 150, f"peak {run.peak_mb:.0f} MB for a 1 GB cache entry"


# --------------------------------------------------------------------------- the probe's answer


def answer(paths: dict[str, Any], **more: Any) -> str:
    data = {"commit": None, "miles_version": "0.2.0", "found": True, "prints_unfiltered_reward": False, "paths": paths}
    return milesimage.PROBE_MARKER + json.dumps({**data, **more})


def test_only_the_first_answer_counts_a_second_one_is_never_read() -> None:
    honest = answer({FILTER_PATH: "ModuleNotFoundError: no", FILTER_PATH_PUBLIC: None})
    forged = answer({}, commit="forged")
    check = read_probe_output("sha256:x", f"noise\n{honest}\n{forged}\n")
    assert check is not None and check.commit is None
    assert check.paths[FILTER_PATH] == "ModuleNotFoundError: no"
    assert judge("lab", check, FLAGS)  # refused: what the probe itself said


def test_a_path_the_answer_leaves_out_does_not_load() -> None:
    check = read_probe_output("sha256:x", answer({FILTER_PATH_PUBLIC: None}) + "\n")
    assert check is not None
    (problem,) = judge("lab", check, FLAGS)
    assert "\n" not in problem.message and problem.exit_code == 2
    assert f"which has no {FILTER_PATH} ({FILTER_FLAG}; the probe's answer does not mention it)" in problem.message
    check = read_probe_output("sha256:x", answer({}) + "\n")
    assert check is not None
    (problem,) = judge("lab", check, [PathFlag("--custom-rm-path", "m.f")])
    assert "cannot load m.f (--custom-rm-path; the probe's answer does not mention it)" in problem.message


def test_an_answer_that_is_not_one_is_no_answer() -> None:
    assert read_probe_output("sha256:x", answer({FILTER_PATH: 7}) + "\n") is None
    assert read_probe_output("sha256:x", milesimage.PROBE_MARKER + "[1]\n") is None


def test_an_image_that_prints_more_than_the_probe_ever_does_is_refused_in_one_line(cache: Path) -> None:
    def flood(image: str, argv: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
        raise milesimage.ProbeFlood("stdout", 300_000_000, b"x" * 100, b"y" * 100)

    outcome = probe_image("lab:flood", "sha256:flood", PATHS, flood)
    assert outcome.check is None and outcome.problem is not None
    message = outcome.problem.message
    assert "\n" not in message and outcome.problem.exit_code == 2
    assert message.startswith("the image lab:flood printed 300,000,000 bytes on stdout to the preflight")
    assert "xxxx" in message and "yyyy" in message and len(message) < 600
    assert not any(cache.iterdir()) if cache.exists() else True  # nothing kept


# --------------------------------------------------------------------------- thermal zones


def zone(root: Path, index: int, kind: str = "acpitz", temp: str = "45000", trips: Sequence[tuple] = ()) -> Path:
    path = root / f"thermal_zone{index}"
    path.mkdir(parents=True)
    (path / "type").write_text(kind + "\n")
    (path / "temp").write_text(temp + "\n")
    for i, (trip_kind, trip_temp) in enumerate(trips):
        (path / f"trip_point_{i}_type").write_text(trip_kind + "\n")
        (path / f"trip_point_{i}_temp").write_text(trip_temp + "\n")
    return path


def fifo(path: Path) -> Path:
    path.unlink()
    os.mkfifo(path)
    return path


@pytest.fixture
def hostile_zones(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A good zone, then zones whose type, temp and trip point files are FIFOs nobody writes."""
    root = tmp_path / "thermal"
    zone(root, 0, temp="45000", trips=[("critical", "104500")])
    fifos = [
        fifo(zone(root, 1) / "temp"),
        fifo(zone(root, 2) / "type"),
        fifo(zone(root, 3, trips=[("hot", "90000")]) / "trip_point_0_temp"),
        fifo(zone(root, 4, trips=[("hot", "90000")]) / "trip_point_0_type"),
    ]
    return root, fifos


def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.guard import probe
    from harness.guard.samples import SensorUnavailable

    def none() -> object:
        raise SensorUnavailable("NVML: no NVIDIA driver (libnvidia-ml.so.1 not found)")

    monkeypatch.setattr(probe, "probe_nvml", none)


def test_fifos_in_thermal_zones_never_block_the_probe(hostile_zones: tuple[Path, list[Path]]) -> None:
    from harness.guard.sensors import probe_thermal_zones

    root, fifos = hostile_zones
    started = time.monotonic()
    with Releaser(fifos):
        zones = {z.zone: z for z in probe_thermal_zones(root)}
    assert time.monotonic() - started < 5
    assert zones["thermal_zone0"].temp_c == 45.0
    assert zones["thermal_zone1"].temp_c is None and "not a regular file (it is a FIFO)" in str(
        zones["thermal_zone1"].error
    )
    assert zones["thermal_zone2"].type == "?" and zones["thermal_zone2"].temp_c == 45.0
    assert zones["thermal_zone3"].trips[0].temp_c is None
    assert zones["thermal_zone4"].trips[0].type == "?"


def test_guard_probe_with_fifo_zones_answers_at_once(
    hostile_zones: tuple[Path, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, fifos = hostile_zones
    no_nvml(monkeypatch)
    started = time.monotonic()
    with Releaser(fifos):
        shown = CliRunner().invoke(app, ["guard", "probe", "--thermal-root", str(root)], env={"COLUMNS": "250"})
    assert time.monotonic() - started < 5
    assert shown.exit_code == 0, shown.output
    assert "sensor auto reads: sysfs" in shown.output


def four_hundred_digits() -> str:
    return "9" * 400


def test_values_that_are_not_temperatures_are_skipped_with_one_note(tmp_path: Path) -> None:
    from harness.guard.config import GuardConfig
    from harness.guard.sensors import SysfsSensor, probe_thermal_zones

    root = tmp_path / "thermal"
    zone(root, 0, temp="45000", trips=[("critical", four_hundred_digits()), ("hot", "90000")])
    zone(root, 1, temp=four_hundred_digits())
    zone(root, 2, temp="-" + four_hundred_digits())
    zone(root, 3, temp="1e400")
    zones = {z.zone: z for z in probe_thermal_zones(root)}
    assert zones["thermal_zone0"].trips[0].temp_c is None and zones["thermal_zone0"].trips[1].temp_c == 90.0
    for name in ("thermal_zone1", "thermal_zone2", "thermal_zone3"):
        assert zones[name].temp_c is None and "not a temperature" in str(zones[name].error), zones[name]
    sensor = SysfsSensor(root, config=GuardConfig())
    assert [z.zone for z in sensor.watched] == ["thermal_zone0"]
    notes = [w for w in sensor.warnings() if "not a plausible temperature" in w]
    assert len(notes) == 1, sensor.warnings()
    assert "thermal_zone0 (acpitz) trip_point_0_temp" in notes[0] and "thermal_zone1 (acpitz) temp" in notes[0]
    assert len(notes[0]) < 500  # the values cut short, not 400 digits each
    reading = sensor.read()
    assert reading is not None and [z.temp_c for z in reading.zones] == [45.0]
    (root / "thermal_zone0" / "temp").write_text(four_hundred_digits() + "\n")  # later reads too
    assert sensor.read() is None


def test_guard_probe_with_a_400_digit_zone_is_no_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_nvml(monkeypatch)
    root = tmp_path / "thermal"
    zone(root, 0, temp="45000", trips=[("critical", four_hundred_digits())])
    zone(root, 1, temp=four_hundred_digits())
    shown = CliRunner().invoke(app, ["guard", "probe", "--thermal-root", str(root)], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    assert "internal error" not in shown.output
    as_json = CliRunner().invoke(app, ["guard", "probe", "--json", "--thermal-root", str(root)])
    assert as_json.exit_code == 0, as_json.output
    json.loads(as_json.stdout)


def test_a_zone_file_of_a_gigabyte_or_a_link_is_unreadable_and_never_read(tmp_path: Path) -> None:
    from harness.guard.sensors import probe_thermal_zones

    root = tmp_path / "thermal"
    sparse(zone(root, 0) / "temp", b"45000\n", GB)
    (zone(root, 1) / "temp").unlink()
    os.symlink("/dev/zero", root / "thermal_zone1" / "temp")
    zone(root, 2, temp="45000")
    started = time.monotonic()
    zones = probe_thermal_zones(root)
    assert time.monotonic() - started < 5
    assert [z.temp_c for z in zones] == [None, None, 45.0]
    assert "too large" in str(zones[0].error) and "symbolic link" in str(zones[1].error)


def test_a_zone_read_that_never_answers_is_given_up_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.guard import sensors

    root = tmp_path / "thermal"
    zone(root, 0, temp="45000")
    zone(root, 1, temp="50000")
    stuck = threading.Event()
    read = sensors.read_attribute

    def hung_driver(path: Path) -> str:  # the lowest layer: the kernel's read of one file
        if path.parent.name == "thermal_zone1" and path.name == "temp":
            stuck.wait(30)
        return read(path)

    monkeypatch.setattr(sensors, "read_attribute", hung_driver)
    monkeypatch.setattr(sensors, "ZONE_PROBE_TIMEOUT_S", 1.0)
    started = time.monotonic()
    try:
        zones = sensors.probe_thermal_zones(root)
    finally:
        stuck.set()
    assert time.monotonic() - started < 5
    assert [(z.zone, z.temp_c) for z in zones][0] == ("thermal_zone0", 45.0)
    assert zones[1].temp_c is None and "no answer within 1 s" in str(zones[1].error)


@pytest.mark.integration
def test_run_with_a_400_digit_zone_runs_guarded_by_the_others(process_lab: Any, tmp_path: Path) -> None:
    root = tmp_path / "thermal"
    zone(root, 0, temp="45000", trips=[("critical", "104500")])
    zone(root, 1, temp=four_hundred_digits(), trips=[("hot", four_hundred_digits())])
    process_lab.env["HARNESS_THERMAL_ROOT"] = str(root)
    run = process_lab.experiment("zones", guard={"sensor": "sysfs", "poll_s": 0.05})
    result = process_lab.cli("run", run)
    assert result.exit_code == 0, result.output
    assert "internal error" not in result.output
    guard = json.loads((process_lab.captures / run / "manifest.json").read_text())["guard"]
    assert [z["zone"] for z in guard["zones"] if z["readable"]] == ["thermal_zone0"]


# --------------------------------------------------------------------------- torn tails


STEP_LINES = (
    "x.py:1 - perf 0: {'perf/rollout_time': 50.0, 'rollout/raw_reward': 0.5}\n"
    "x.py:1 - perf 0: {'perf/step_time': 60.0}\n"
)


@pytest.mark.parametrize("size", [-1, 7, 4096, 1 << 20])
def test_a_hole_skipped_unread_gives_what_reading_every_nul_gives(tmp_path: Path, size: int) -> None:
    import io

    from harness.fs.bounded import WholeLines

    path = tmp_path / "holed.log"
    with path.open("wb") as handle:
        handle.write(b"a\nb\npartial")
        handle.seek(256 << 10)  # a hole of 256 KiB inside the third line
        handle.write(b"rest of it\nc\nd\ncut")
    data = path.read_bytes()

    def read_all(handle: Any) -> tuple[bytes, list]:
        lines = WholeLines(handle)
        got = b""
        while chunk := lines.read(size):
            got += chunk
        return got, lines.finish()

    with path.open("rb") as handle:
        from_file = read_all(handle)
    assert from_file == read_all(io.BytesIO(data))
    assert from_file[0] == b"a\nb\n\nc\nd\n"
    assert from_file[1] == [
        (3, f"torn ({data.count(0):,} NUL bytes: a power loss?): skipped"),
        (6, "cut short (no newline at the end: the writer stopped mid-line): skipped"),
    ]


def test_parse_log_never_reads_a_torn_line_and_says_which(tmp_path: Path) -> None:
    log = tmp_path / "container.log"
    torn = b"x.py:1 - perf 1: {'perf/rollout_ti" + b"\0" * 4096
    log.write_bytes(STEP_LINES.encode() + torn + b"\n" + b"noise\n" + torn)
    result = CliRunner().invoke(app, ["parse-log", str(log), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(s["step"], s["complete"]) for s in doc["steps"]] == [(0, True)]  # the torn step is not read
    torn_lines = [p for p in doc["problems"] if "torn" in p["reason"]]
    assert torn_lines == [
        {"line": 3, "reason": "torn (4,096 NUL bytes: a power loss?): skipped"},
        {"line": 5, "reason": "torn (4,096 NUL bytes: a power loss?): skipped"},
    ]


def test_parse_log_never_reads_a_last_line_cut_short(tmp_path: Path) -> None:
    log = tmp_path / "cut.log"
    log.write_bytes(STEP_LINES.encode() + b"x.py:1 - perf 1: {'perf/rollout_time': 5")
    doc = json.loads(CliRunner().invoke(app, ["parse-log", str(log), "--json"]).stdout)
    assert [s["step"] for s in doc["steps"]] == [0]
    assert any(p["line"] == 3 and "cut short" in p["reason"] for p in doc["problems"]), doc["problems"]


@pytest.mark.integration
def test_parse_log_of_a_log_with_a_3_gb_nul_tail_is_quick_and_small(tmp_path: Path) -> None:
    log = sparse(tmp_path / "container.log", STEP_LINES.encode(), 3 * GB)
    started = time.monotonic()
    run = measured([*HARNESS, "parse-log", str(log), "--json"], cwd=str(REPO), timeout_s=60)
    took = time.monotonic() - started
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert [s["step"] for s in doc["steps"]] == [0]
    assert {"line": 3, "reason": f"torn ({3 * GB - len(STEP_LINES):,} NUL bytes: a power loss?): skipped"} in doc[
        "problems"
    ]
    assert took < 20, f"{took:.1f} s"
    assert run.peak_mb < 200, f"peak {run.peak_mb:.0f} MB"


def log_capture(root: Path, run: str, lines: int, tail: int) -> Path:
    """A succeeded capture whose container.log has `lines` stamped lines, then `tail` NUL bytes (sparse)."""
    from harness.capture import Capture, RunState, RunStatus

    capture = Capture(root / run)
    capture.directory.mkdir(parents=True)
    capture.write_status(
        RunStatus(
            run=run,
            run_id=f"{run}-1",
            state=RunState.SUCCEEDED,
            exit_code=0,
            started_at="2026-03-01T12:00:00Z",
            ended_at="2026-03-01T13:00:00Z",
            steps_expected=1,
            steps_complete=1,
            error=None,
        )
    )
    text = "".join(f"2026-03-01T12:00:{i % 60:02d}.000000000Z line {i}\n" for i in range(lines)).encode()
    sparse(capture.log_path, text, len(text) + tail)
    return capture.log_path


def test_logs_shows_the_whole_lines_before_a_nul_tail_and_says_what_it_left(tmp_path: Path) -> None:
    log_capture(tmp_path, "torn", lines=3, tail=4096)
    result = CliRunner().invoke(app, ["logs", "torn", "--capture-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "line 0\nline 1\nline 2\n"
    assert "\0" not in result.output
    assert result.stderr.strip() == "container.log line 4: torn (4,096 NUL bytes: a power loss?): skipped"


@pytest.mark.integration
def test_logs_of_a_3_gb_nul_tail_ends_when_its_reader_has_gone(tmp_path: Path) -> None:
    log_capture(tmp_path, "torn", lines=50, tail=3 * GB)
    process = subprocess.Popen(
        [*HARNESS, "logs", "torn", "--capture-dir", str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    shown = [process.stdout.readline() for _ in range(40)]  # `| head -40`
    process.stdout.close()
    started = time.monotonic()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    assert time.monotonic() - started < 5
    assert shown[-1] == b"line 39\n"
    whole = measured([*HARNESS, "logs", "torn", "--capture-dir", str(tmp_path)], cwd=str(REPO), timeout_s=60)
    assert whole.returncode == 0 and whole.stdout.count("\n") == 50, whole.stderr
    assert whole.peak_mb < 200, f"peak {whole.peak_mb:.0f} MB"


# --------------------------------------------------------------------------- SIGTERM


def test_sigterm_ends_a_command_blocked_in_open_of_a_fifo_before_any_run(tmp_path: Path) -> None:
    from harness.run.context import StopControl
    from harness.run.lifecycle import stop_on_signals

    blocked = tmp_path / "fifo"
    os.mkfifo(blocked)
    stop, said = StopControl(), []
    before = signal.getsignal(signal.SIGTERM)  # an earlier test's library may have set one: it must come back
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
    started = time.monotonic()
    with Releaser([blocked]):
        with pytest.raises(KeyboardInterrupt):
            with stop_on_signals(stop, said.append):
                with open(blocked, "rb"):  # noqa: PTH123 - the blocking open() itself is what is tested
                    pass
    assert time.monotonic() - started < 5
    assert stop.requested and said == ["SIGTERM: no trainer is running: ending now"]
    assert signal.getsignal(signal.SIGTERM) == before  # put back


def test_sigterm_while_a_trainer_runs_asks_for_the_graceful_stop(tmp_path: Path) -> None:
    from harness.run.context import StopControl
    from harness.run.lifecycle import stop_on_signals

    stop, said = StopControl(), []
    with stop_on_signals(stop, said.append), stop.acted_on():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # the handler runs between two bytecodes: nothing raised
    assert stop.state == "interrupted" and said[0].startswith("SIGTERM: stopping gracefully")


# --------------------------------------------------------------------------- the rest of each class


def test_a_fifo_as_a_captures_lock_file_never_blocks_status(tmp_path: Path) -> None:
    from harness.capture.lock import holder, in_use, lock_path

    log_capture(tmp_path, "locked", lines=1, tail=0)
    lock = lock_path(tmp_path / "locked")
    lock.parent.mkdir(exist_ok=True)
    os.mkfifo(lock)
    started = time.monotonic()
    with Releaser([lock]):
        assert in_use(tmp_path / "locked") is False
        holder(tmp_path / "locked")
        shown = CliRunner().invoke(app, ["status", "--capture-dir", str(tmp_path)])
    assert time.monotonic() - started < 5
    assert shown.exit_code == 0, shown.output


def test_a_fifo_as_a_stop_request_never_blocks_the_supervisor(tmp_path: Path) -> None:
    from harness.capture import Capture
    from harness.run.execute import stop_request_reason

    capture = Capture(tmp_path / "run")
    capture.directory.mkdir()
    os.mkfifo(capture.stop_request_path)
    started = time.monotonic()
    with Releaser([capture.stop_request_path]):
        assert stop_request_reason(capture) == "stopped by harness stop"
    assert time.monotonic() - started < 5
    capture.stop_request_path.unlink()
    capture.stop_request_path.write_text(json.dumps({"reason": "enough"}))
    assert stop_request_reason(capture) == "enough"


def test_fifos_among_a_process_runs_state_files_never_block_listing_it(tmp_path: Path) -> None:
    from harness.engines.process import ProcessEngine

    run = tmp_path / "processes" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"id": "r1", "labels": {"a": "b"}, "command": ["true"]}))
    fifos = [run / "state.json", run / "exit.json", run / "start-error.json"]
    for path in fifos:
        os.mkfifo(path)
    started = time.monotonic()
    with Releaser(fifos):
        (found,) = ProcessEngine(tmp_path / "processes").list({"a": None})
        found.describe()
    assert time.monotonic() - started < 5


def test_recover_reads_past_a_3_gb_nul_tail_without_reading_it(tmp_path: Path) -> None:
    from harness.fs.files import cut_torn_tail

    text = b"".join(b"line %d\n" % i for i in range(1000)) + b"torn line"
    path = sparse(tmp_path / "container.log", text, 3 * GB)
    started = time.monotonic()
    assert cut_torn_tail(path) == 3 * GB - len(text) + len(b"torn line")
    assert time.monotonic() - started < 5
    assert path.read_bytes().endswith(b"line 999\n")


def test_recover_never_waits_on_a_fifo_as_container_log(tmp_path: Path) -> None:
    from harness.capture import Capture
    from harness.capture.repair import log_tail, started_by_evidence

    capture = Capture(tmp_path / "run")
    capture.directory.mkdir()
    os.mkfifo(capture.log_path)
    started = time.monotonic()
    with Releaser([capture.log_path]):
        assert started_by_evidence(capture) is False
        log_tail(capture.log_path)
    assert time.monotonic() - started < 5


# --------------------------------------------------------------------------- JSONL lines past a sparse hole


def _written(path: Path, parts: Sequence[tuple[str, Any]], *, holes: bool) -> Path:
    """`parts` ("data", bytes) or ("nuls", n) as one file: the NUL runs as holes (never written) or written out."""
    with path.open("wb") as out:
        for kind, value in parts:
            if kind == "data":
                out.write(value)
            elif holes:
                out.seek(value, os.SEEK_CUR)
            else:
                out.write(b"\0" * value)
        out.truncate(out.tell())
    return path


@pytest.mark.parametrize(
    "parts",
    [
        [("data", b'{"a": 1}\n{"b": 2}\n{"c'), ("nuls", 1 << 20), ("data", b'x\n{"d": 3}\n')],
        [("data", b'{"a": 1}\n'), ("nuls", 8192)],
        [("data", b'{"a": 1}\n{"b'), ("nuls", 40 << 20), ("data", b'\n{"e": 5}\n')],
        [("nuls", 3 << 20), ("data", b'{"a": 1}\n')],
    ],
    ids=["hole-mid-line", "hole-at-the-end", "hole-longer-than-a-line", "hole-first"],
)
def test_a_jsonl_file_reads_alike_with_its_nuls_as_holes_or_written_out(tmp_path: Path, parts: Any) -> None:
    from harness.fs.bounded import iter_jsonl, iter_lines

    def read(path: Path) -> tuple[list[Any], list[Any], list[str]]:
        notes: list[str] = []
        lines = [(n, None if raw is None else (len(raw), raw.count(b"\0")), torn) for n, raw, torn in iter_lines(path)]
        return lines, list(iter_jsonl(path, notes)), [note.split(": ", 1)[1] for note in notes]

    assert read(_written(tmp_path / "sparse", parts, holes=True)) == read(
        _written(tmp_path / "dense", parts, holes=False)
    )


def test_a_terabyte_hole_in_metrics_jsonl_is_passed_not_read(tmp_path: Path) -> None:
    """The summary's reader of JSONL (metrics, pauses, guard) skips a power loss's sparse tail as `logs` does."""
    from harness.fs.bounded import iter_jsonl

    path = sparse(tmp_path / "metrics.jsonl", b'{"step": 0}\n{"step": 1', 1 << 40)
    before = int(Path("/proc/self/io").read_text().split("rchar: ")[1].split()[0])
    notes: list[str] = []
    assert [obj for _, obj in iter_jsonl(path, notes)] == [{"step": 0}]
    read_bytes = int(Path("/proc/self/io").read_text().split("rchar: ")[1].split()[0]) - before
    assert read_bytes < 16 << 20, f"{read_bytes:,} bytes read"
    assert notes == ["metrics.jsonl: over 1,073,741,824 bytes: the rest is not read"]
