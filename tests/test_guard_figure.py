"""The heat guard's figure: drawn from guard.jsonl and pauses.jsonl alone, checked for its elements (not pixels).

The records are written by the real guard loop (a scripted sensor, a handle
that only remembers whether it is frozen, a fake clock), then drawn, and the
SVG is read back as XML: each series by its id, the title, the caption.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Optional

from typer.testing import CliRunner

from harness.cli import app
from harness.errors import HarnessError
from harness.guard.config import GuardConfig
from harness.guard.loop import GuardLoop
from harness.guard.samples import Limit, Sample, ZoneTemp
from harness.summary import palette
from harness.summary.guard_figure import (
    draw_guard,
    guard_figure_path,
    read_guard_trace,
    render_guard_figure,
)
from harness.summary.publish import report_from_summary, summarize_to_files
from harness.times import format_time_us
from support.fakes import FakeClock

DATA = Path(__file__).resolve().parent / "data" / "captures"
SVG = "{http://www.w3.org/2000/svg}"
SOC = Limit(94.5, 87.5, "94.5 C, 10 C below its critical point 104.5 C", 104.5, "critical")


class Scripted:
    """A sensor that reads (GPU, soc zone, reasons) from a script, one entry per poll."""

    name = "scripted"

    def __init__(self, clock: FakeClock, script: list[tuple[Optional[float], Optional[float], int]]) -> None:
        self.clock, self.script = clock, list(script)

    def read(self) -> Optional[Sample]:
        gpu, soc, reasons = self.script.pop(0)
        zone = ZoneTemp("thermal_zone3", "thermal_zone3 (soc)", soc, SOC)
        return Sample(self.clock.wall_us(), temp_c=gpu, reasons=reasons, zones=(zone,))

    def facts(self) -> dict:
        return {}

    def close(self) -> None:
        pass


class Frozen:
    def __init__(self) -> None:
        self.paused = False

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def is_paused(self) -> bool:
        return self.paused


# A GPU pause (86 C), a thermal slowdown reported while cool (0x20: its own pause), a pause the soc zone alone
# caused (95 C against its 94.5 C), and a last one still open when the record ends.
SCRIPT = (
    [(60.0, 70.0, 0)] * 5
    + [(86.0, 75.0, 0), (80.0, 75.0, 0), (70.0, 75.0, 0)]
    + [(65.0, 80.0, 0)] * 5
    + [(70.0, 80.0, 0x20), (70.0, 80.0, 0)]
    + [(72.0, 90.0, 0)] * 3
    + [(72.0, 95.0, 0), (72.0, 92.0, 0), (70.0, 85.0, 0)]
    + [(75.0, 80.0, 0)] * 3
    + [(88.0, 80.0, 0), (90.0, 80.0, 0)]
)


class Refusing(Frozen):
    """A handle whose engine refuses the freezes numbered in `refuse` (from 1), in its own words."""

    def __init__(self, refuse: set[int]) -> None:
        super().__init__()
        self.refuse, self.asked = refuse, 0

    def pause(self) -> None:
        self.asked += 1
        if self.asked in self.refuse:
            raise HarnessError("Cannot pause container 3f2a: OCI runtime pause failed: unable to freeze: unknown")
        super().pause()


class SimScripted(Scripted):
    """SCRIPT, as the simulated GB10 (the `sim` sensor) would read it."""

    name = "sim"


def guarded_record(
    directory: Path, handle: Optional[Frozen] = None, sensor: type[Scripted] = Scripted, **config: object
) -> Path:
    """guard.jsonl and pauses.jsonl as the guard loop writes them for SCRIPT, one poll a second."""
    directory.mkdir(parents=True, exist_ok=True)
    clock = FakeClock()
    loop = GuardLoop(
        handle or Frozen(),
        sensor(clock, SCRIPT),
        GuardConfig(min_pause_s=0.0, record_every_s=5.0, **config),  # type: ignore[arg-type]
        pauses_path=directory / "pauses.jsonl",
        samples_path=directory / "guard.jsonl",
        clock=clock,
        wall_us=clock.wall_us,
    )
    for second in range(len(SCRIPT)):
        clock.now = float(second)
        loop.poll()
    return directory


def svg(path: Path) -> ET.Element:
    return ET.parse(path).getroot()


def ids(root: ET.Element) -> list[str]:
    return [g.get("id") or "" for g in root.iter(f"{SVG}g") if (g.get("id") or "").startswith("guard-")]


def text_of(root: ET.Element, gid: str) -> str:
    (found,) = [g for g in root.iter(f"{SVG}g") if g.get("id") == gid]
    return " ".join(t.text or "" for t in found.iter(f"{SVG}text"))


def test_the_figure_shows_every_temperature_the_limits_the_windows_and_the_throttle_events(tmp_path: Path) -> None:
    record = guarded_record(tmp_path / "run")
    windows = [json.loads(line) for line in (record / "pauses.jsonl").read_text().splitlines()]
    reasons = [w["reason"] for w in windows if w["end"] is None]
    assert reasons == [
        "GPU 86.0 C >= pause_at_c 85 C",
        "clock event SwThermalSlowdown",
        "thermal_zone3 (soc) 95.0 C >= 94.5 C, 10 C below its critical point 104.5 C",
        "GPU 88.0 C >= pause_at_c 85 C",
    ]
    path = tmp_path / "guard-run.svg"
    assert render_guard_figure(record, "run", path)

    root = svg(path)
    found = ids(root)
    for gid in (
        "guard-temp-gpu",
        "guard-temp-thermal_zone3",
        "guard-pause-at",
        "guard-resume-at",
        "guard-limit-thermal_zone3",
        "guard-trip-thermal_zone3",
        "guard-throttle",
    ):
        assert found.count(gid) == 1, gid
    assert sorted(g for g in found if g.startswith("guard-pause-") and g[-1].isdigit()) == [
        "guard-pause-0",
        "guard-pause-1",
        "guard-pause-2",
        "guard-pause-3",
    ]
    trace = read_guard_trace(record)
    title = root.find(f"{SVG}title").text
    assert (
        title == "run: 4 heat-guard pauses (1 still open at the end of the record), 6 s paused in all; hottest 95.0 C"
    )
    assert trace.paused_us == 6_000_000
    assert text_of(root, "title") == title
    caption = text_of(root, "caption")
    assert "(the GPU, thermal_zone3 (soc))" in caption and "guard.jsonl" in caption and "pauses.jsonl" in caption
    legend = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "pause_at_c 85 C" in legend and "resume_at_c 78 C" in legend
    assert "thermal_zone3 (soc): pauses at 94.5 C" in legend and "critical point 104.5 C" in legend
    assert "thermal slowdown clock event (1 samples)" in legend


def test_each_element_takes_its_role_s_colour_from_the_palette(tmp_path: Path) -> None:
    """Pauses red, resumes teal, the GPU and each zone its own sensor colour, slowdowns black crosses: as in every
    figure the harness draws."""
    from matplotlib.colors import to_hex

    figure = draw_guard("run", read_guard_trace(guarded_record(tmp_path / "run")))
    lines = {line.get_gid(): line for axes in figure.axes for line in axes.get_lines()}
    shaded = {patch.get_gid(): patch for axes in figure.axes for patch in axes.patches}
    colour = {gid: to_hex(line.get_color()) for gid, line in lines.items()}
    assert colour["guard-temp-gpu"] == palette.GPU_TEMPERATURE
    assert colour["guard-temp-thermal_zone3"] == palette.zone_color(0)
    assert colour["guard-limit-thermal_zone3"] == colour["guard-trip-thermal_zone3"] == palette.zone_color(0)
    assert colour["guard-pause-at"] == palette.PAUSED and colour["guard-resume-at"] == palette.RESUMED
    assert colour["guard-throttle"] == palette.THROTTLED.color and lines["guard-throttle"].get_marker() == "x"
    assert to_hex(shaded["guard-pause-0"].get_facecolor()) == palette.PAUSED


def test_it_is_drawn_again_only_when_its_records_change(tmp_path: Path) -> None:
    record = guarded_record(tmp_path / "run")
    path = tmp_path / "guard-run.svg"
    assert render_guard_figure(record, "run", path)
    first = path.read_bytes()
    assert not render_guard_figure(record, "run", path)  # the same inputs: left as it is
    assert render_guard_figure(record, "run", tmp_path / "again.svg") and (tmp_path / "again.svg").read_bytes() == first
    with (record / "guard.jsonl").open("a") as handle:
        handle.write(json.dumps({"t": "1970-01-01T00:10:00Z", "temp_c": 50.0, "paused": False}) + "\n")
    assert render_guard_figure(record, "run", path)


def test_a_capture_from_before_zones_were_watched_still_draws(tmp_path: Path) -> None:
    path = tmp_path / "guard-plain.svg"
    assert render_guard_figure(DATA / "lab" / "plain", "plain", path)
    found = ids(svg(path))
    assert "guard-temp" in found and "guard-temp-gpu" not in found
    assert "guard-pause-0" in found  # its pauses.jsonl


def test_harness_guard_plot_draws_one_run_from_its_capture_alone(tmp_path: Path) -> None:
    root = tmp_path / "capture"
    run = root / "hot"
    guarded_record(run)
    (run / "status.json").write_text(json.dumps({"run": "hot", "state": "succeeded"}))
    done = CliRunner().invoke(app, ["guard", "plot", "hot", "--capture-dir", str(root)])
    assert done.exit_code == 0, done.output
    path = guard_figure_path(root / "summary", "hot")
    assert done.output.splitlines() == [
        f"wrote {path}",
        "hot: 4 heat-guard pauses (1 still open at the end of the record), 6 s paused in all; hottest 95.0 C",
    ]
    assert "guard-temp-thermal_zone3" in ids(svg(path))

    record = tmp_path / "record"  # what `harness guard --record DIR` leaves
    guarded_record(record)
    done = CliRunner().invoke(app, ["guard", "plot", str(record), "--out", str(tmp_path / "mine.svg")])
    assert done.exit_code == 0 and (tmp_path / "mine.svg").is_file(), done.output

    done = CliRunner().invoke(app, ["guard", "plot", "absent", "--capture-dir", str(root)])
    assert (
        done.exit_code == 5
        and done.output.strip() == f"error: no capture of absent under {root}, and no directory absent"
    )
    (root / "bare").mkdir()
    (root / "bare" / "status.json").write_text(json.dumps({"run": "bare", "state": "succeeded"}))
    done = CliRunner().invoke(app, ["guard", "plot", "bare", "--capture-dir", str(root)])
    assert done.exit_code == 5 and "has neither guard.jsonl nor pauses.jsonl" in done.output


def test_the_report_shows_each_run_s_guard_figure_and_summarize_draws_it(tmp_path: Path) -> None:
    captures = tmp_path / "gpu"
    shutil.copytree(DATA / "lab", captures)
    published = summarize_to_files(captures)
    names = sorted(p.name for p in published.figures if p.name.startswith("guard-"))
    assert names == ["guard-e2b-dapo-filter.svg", "guard-plain.svg"]
    shutil.rmtree(captures / "summary" / "guard-plain.svg", ignore_errors=True)
    (captures / "summary" / "guard-plain.svg").unlink(missing_ok=True)
    reported = report_from_summary(published.summary_path, capture_dir=captures)
    assert [p.name for p in reported.figures] == ["guard-plain.svg"]  # drawn again from the capture
    text = (captures / "summary" / "report.md").read_text()
    section = text[text.index("## The heat guard") :]
    assert "](guard-plain.svg)" in section and "](guard-e2b-dapo-filter.svg)" in section
    assert "*plain: 3 heat-guard pauses, 1 min 24 s paused in all; hottest 70.0 C.* " in section


def test_a_figure_of_the_simulated_machine_says_simulated_in_its_title(tmp_path: Path) -> None:
    simulated = tmp_path / "guard-sim.svg"
    render_guard_figure(guarded_record(tmp_path / "sim", sensor=SimScripted), "sim", simulated)
    real = tmp_path / "guard-real.svg"
    render_guard_figure(guarded_record(tmp_path / "real"), "real", real)

    title = svg(simulated).find(f"{SVG}title").text
    assert title.startswith("SIMULATED: sim: 4 heat-guard pauses") and text_of(svg(simulated), "title") == title
    assert "the simulated GB10 (sensor sim)" in text_of(svg(simulated), "caption")
    assert not svg(real).find(f"{SVG}title").text.startswith("SIMULATED")


def test_a_pause_that_failed_is_marked_and_counted_as_every_output_counts_it(tmp_path: Path) -> None:
    handle = Refusing({2, 3})  # the second pause (the clock event) is refused, at once and on its retry
    record = guarded_record(tmp_path / "run", handle, on_pause_failure="continue")
    path = tmp_path / "guard-run.svg"
    render_guard_figure(record, "run", path)

    root = svg(path)
    title = root.find(f"{SVG}title").text
    assert title.startswith("run: 3 heat-guard pauses (1 still open at the end of the record), 1 pause failed, ")
    assert sorted(g for g in ids(root) if g.startswith("guard-pause-") and g[-1].isdigit()) == [
        "guard-pause-0",
        "guard-pause-1",
        "guard-pause-2",
        "guard-pause-failed-0",
    ]
    legend = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "a pause the engine could not make (1)" in legend


def test_a_first_sample_later_than_the_run_s_first_line_is_said_with_by_how_much(tmp_path: Path) -> None:
    record = guarded_record(tmp_path / "late")
    first_sample = FakeClock().wall_us()
    (record / "container.log").write_text(f"{format_time_us(first_sample - 4_200_000)} the trainer's first line\n")
    path = tmp_path / "guard-late.svg"
    render_guard_figure(record, "late", path)
    caption = text_of(svg(path), "caption")
    assert "The guard's first sample came 4.2 s after the run's first line (the dotted line)" in caption
    assert "guard-run-start" in ids(svg(path))
    assert caption.endswith("sparser while cool), pauses.jsonl and the first line of container.log.")

    (record / "container.log").write_text(f"{format_time_us(first_sample + 1000)} the trainer's first line\n")
    assert render_guard_figure(record, "late", path)  # the run's first line is one of its inputs
    assert "first sample came" not in text_of(svg(path), "caption") and "guard-run-start" not in ids(svg(path))
    assert text_of(svg(path), "caption").endswith("sparser while cool) and pauses.jsonl.")
