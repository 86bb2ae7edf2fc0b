"""The heat guard's figure of one run: what it watched, where it would act, and when it held the run.

Drawn from the capture's guard.jsonl and pauses.jsonl alone (so it can be
redrawn from a capture, on any machine), as `guard-<run>.svg`:

- every watched temperature over wall time (`guard-temp-gpu`,
  `guard-temp-<zone>`; `guard-temp` for a capture from before zones were
  watched), since the first sample (seconds under 3 minutes, else minutes);
- the pause and resume thresholds as lines (`guard-pause-at`,
  `guard-resume-at`), and each zone's own pause point and trip point
  (`guard-limit-<zone>`, `guard-trip-<zone>`);
- each pause window shaded (`guard-pause-<i>`; one still open at the end of
  the record runs to it), their count and total in the title, counted as
  `harness status` and the summary count them (capture.records.tally_pauses);
- each pause the engine could not make marked by a line at its time
  (`guard-pause-failed-<i>`), their count in the title;
- samples whose clock-event reasons show a thermal slowdown marked
  (`guard-throttle`);
- the run's first line (`guard-run-start`, from the capture's container.log)
  when the guard's first sample came after it, and by how much in the caption.

A record of the `sim` sensor (its watch line says so) is the simulated GB10's:
its title starts with SIMULATED, as every figure of a simulated run does.

Like the summary's figures (harness.summary.figures) it is SVG with text as
text and no date, and it carries a fingerprint of its inputs (both files, the
run's first line and this module's code) as its Dublin Core identifier, so an
unchanged figure is not drawn again.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence

from harness.capture.columns import read_pause_windows
from harness.capture.guardlog import GUARD_LOG, GuardLog, read_guard_log
from harness.capture.reader import ATTEMPTS_DIR, LOG_NAME, first_line_us
from harness.capture.records import PauseTally, tally_pauses
from harness.fs.bounded import MAX_JSONL_BYTES, Unreadable, read_bounded
from harness.guard.samples import THERMAL_REASONS
from harness.summary import palette
from harness.summary.svg import SIMULATED, code_stamp, fit_to_width, save_svg, svg_head, use_agg
from harness.times import format_time_us

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PAUSES_LOG = "pauses.jsonl"
SIM_SENSOR = "sim"  # the simulated GB10's sensor (harness.guard.sensors.SimSensor.name)
US_PER_MIN = 60_000_000
SECONDS_UP_TO_US = 180_000_000  # a record shorter than this is drawn in seconds, a longer one in minutes
THERMAL_MASK = sum(THERMAL_REASONS.values())


def guard_figure_path(out_dir: Path, run: str) -> Path:
    """Where the guard's figure of `run` goes."""
    return Path(out_dir) / f"guard-{run}.svg"


@dataclass(frozen=True)
class Window:
    """A pause window on the figure's clock: microseconds, `open` when the record never saw it close."""

    start_us: int
    end_us: int
    open: bool
    reason: str


@dataclass(frozen=True)
class FailedPause:
    """A pause the engine could not make: when, at what temperature, and what it said."""

    t_us: int
    peak_c: Optional[float]
    words: str


@dataclass
class GuardTrace:
    """What the figure shows of one run, read from its two files (`read_guard_trace`)."""

    log: GuardLog
    windows: list[Window]
    notes: list[str] = field(default_factory=list)
    failed: list[FailedPause] = field(default_factory=list)
    tally: PauseTally = PauseTally(0, 0)
    run_start_us: Optional[int] = None  # the run's first line (container.log), where the capture has one

    @property
    def simulated(self) -> bool:
        """Whether the temperatures are the simulated GB10's (the `sim` sensor's)."""
        return self.log.sensor == SIM_SENSOR

    @property
    def first_sample_late_us(self) -> Optional[int]:
        """How long after the run's first line the guard's first sample came; None when it did not come after."""
        if self.run_start_us is None or not self.log.samples:
            return None
        late = self.log.samples[0].t_us - self.run_start_us
        return late if late > 0 else None

    @property
    def t0_us(self) -> Optional[int]:
        """The figure's zero: the first sample (or the run's first line, when earlier), or the first window where
        there is no sample."""
        times = [s.t_us for s in self.log.samples] + [w.start_us for w in self.windows] + [f.t_us for f in self.failed]
        if self.first_sample_late_us is not None and self.run_start_us is not None:
            times.append(self.run_start_us)
        return min(times) if times else None

    @property
    def paused_us(self) -> int:
        """The length of the union of the pause windows."""
        total, reach = 0, None
        for window in sorted(self.windows, key=lambda w: w.start_us):
            start = window.start_us if reach is None else max(window.start_us, reach)
            if window.end_us > start:
                total += window.end_us - start
            reach = window.end_us if reach is None else max(reach, window.end_us)
        return total

    def throttled(self) -> list[tuple[int, Optional[float]]]:
        """(time, the GPU's temperature) of each sample that shows a thermal slowdown clock event (the GPU's)."""
        return [
            (s.t_us, s.gpu_c if s.gpu_c is not None else s.temp_c)
            for s in self.log.samples
            if s.reasons and s.reasons & THERMAL_MASK
        ]

    @property
    def span_us(self) -> int:
        """From the first sample (or window) to the last."""
        t0 = self.t0_us
        ends = [s.t_us for s in self.log.samples] + [w.end_us for w in self.windows]
        return max(ends) - t0 if ends and t0 is not None else 0


def read_guard_trace(directory: Path) -> GuardTrace:
    """guard.jsonl and pauses.jsonl of a capture (or of a `harness guard --record` directory), tolerantly read."""
    directory = Path(directory)
    notes: list[str] = []
    log = read_guard_log(directory / GUARD_LOG, notes)
    found = read_pause_windows(directory / PAUSES_LOG, notes)
    ends = [s.t_us for s in log.samples] + [w.end_us or w.start_us for w in found]
    last_us = max(ends) if ends else 0
    windows = [
        Window(w.start_us, w.end_us if w.end_us is not None else max(last_us, w.start_us), w.end_us is None, w.reason)
        for w in found
        if w.froze  # a freeze that failed, or found the run ended, is closed at its own start: no window
    ]
    failed = [FailedPause(w.start_us, w.peak_c, w.failed) for w in found if w.failed is not None]
    run_start = first_line_us(directory / LOG_NAME, notes)
    return GuardTrace(log, windows, notes, failed, tally_pauses(found), run_start)


def _duration(us: int) -> str:
    seconds = round(us / 1e6)
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def guard_text(run: str, trace: GuardTrace) -> tuple[str, str]:
    """(title, caption): the pauses' count and total, the hottest reading; what is plotted and from where."""
    count = trace.tally.pauses
    temps = [s.temp_c for s in trace.log.samples if s.temp_c is not None]
    hottest = f"; hottest {max(temps):.1f} C" if temps else ""
    failed = trace.tally.failed_text()
    if count:
        still = sum(window.open for window in trace.windows)
        open_text = f" ({still} still open at the end of the record)" if still else ""
        what = "pause" if count == 1 else "pauses"
        failed_text = f", {failed}" if failed else ""
        title = f"{run}: {count} heat-guard {what}{open_text}{failed_text}, {_duration(trace.paused_us)} paused in all"
    elif failed:
        title = f"{run}: {failed}, and the heat guard never paused the run"
    else:
        title = f"{run}: the heat guard never paused the run"
    title += hottest
    if trace.simulated:
        title = f"{SIMULATED}: {title}"
    t0 = trace.t0_us
    since = f" since {format_time_us(t0)[:19].replace('T', ' ')} UTC" if t0 is not None else ""
    log = trace.log
    gpu = "the temperature" if _legacy(log) else "the GPU"
    watched = [gpu] if any(s.gpu_c is not None for s in log.samples) else []
    watched += [log.zones[n].label if n in log.zones else n for n in log.zone_names()]
    if log.pause_at_c is not None:
        limits = "with the pause and resume thresholds" + (
            " and each zone's pause point (dashed) and trip point (dotted)" if log.zones else ""
        )
    else:
        limits = "(this record predates the guard writing its thresholds)"
    samples = len(log.samples)
    late = trace.first_sample_late_us
    caption = (
        (
            f"The guard's first sample came {_late(late)} after the run's first line (the dotted line): what the "
            "machine did before it is not recorded. "
            if late is not None
            else ""
        )
        + f"Every temperature the guard watched ({', '.join(watched) or 'none recorded'}) over wall time{since}, "
        + ("read from the simulated GB10 (sensor sim), not a GPU, " if trace.simulated else "")
        + f"{limits}; pause windows shaded; thermal slowdown clock events marked x"
        + ("; each pause the engine could not make a dashed line" if trace.failed else "")
        + f". Drawn from {GUARD_LOG} ({samples} sample{'' if samples == 1 else 's'}: one per poll while hot or "
        + "paused, sparser while cool)"
        + (f", {PAUSES_LOG} and the first line of {LOG_NAME}." if late is not None else f" and {PAUSES_LOG}.")
    )
    return title, caption


def _late(us: int) -> str:
    """`4.2 s` under a minute, else as `_duration` says it."""
    return f"{us / 1e6:.1f} s" if us < 60_000_000 else _duration(us)


def _legacy(log: GuardLog) -> bool:
    """A record from before zones were watched: no watch line, one temperature per sample."""
    return not log.zones and log.sensor is None


def draw_guard(run: str, trace: GuardTrace) -> Figure:
    """The guard's figure of one run (a matplotlib Figure)."""
    from matplotlib.figure import Figure

    title, caption = guard_text(run, trace)
    figure = Figure(figsize=(9.0, 5.6))
    figure.subplots_adjust(left=0.09, right=0.98, top=0.88, bottom=0.22)
    axes = figure.add_subplot()
    fit_to_width(figure.suptitle(title, fontsize=11.5, gid="title"))
    fit_to_width(figure.text(0.01, 0.015, caption, fontsize=8.0, va="bottom", gid="caption"))
    axes.grid(True, alpha=0.3)
    t0 = trace.t0_us or 0
    log = trace.log
    unit_us, unit = (1_000_000, "s") if trace.span_us < SECONDS_UP_TO_US else (US_PER_MIN, "min")

    def minutes(t_us: int) -> float:  # on the axis's unit: seconds for a short record, else minutes
        return (t_us - t0) / unit_us

    for i, window in enumerate(trace.windows):
        axes.axvspan(
            minutes(window.start_us),
            minutes(window.end_us),
            color=palette.PAUSED,
            alpha=0.15 if not window.open else 0.08,
            lw=0,
            label="paused by the heat guard" if i == 0 else None,
            gid=f"guard-pause-{i}",
        )
    _temperatures(axes, log, minutes)
    _thresholds(axes, log)
    _events(axes, trace, minutes)
    axes.set_xlabel(f"wall time since the first sample ({unit})")
    axes.set_ylabel("temperature (C)")
    if axes.has_data():
        axes.legend(loc="best", fontsize=7.5)
    return figure


def _temperatures(axes: Axes, log: GuardLog, minutes: Callable[[int], float]) -> None:
    """The GPU's line and each zone's, with the zone's pause point (dashed) and trip point (dotted)."""
    legacy = _legacy(log)
    gpu = [(minutes(s.t_us), s.gpu_c) for s in log.samples if s.gpu_c is not None]
    if gpu:
        axes.plot(
            [x for x, _ in gpu],
            [y for _, y in gpu],
            "-",
            color=palette.GPU_TEMPERATURE,
            lw=1.2,
            label="temperature" if legacy else "GPU",
            gid="guard-temp" if legacy else "guard-temp-gpu",
        )
    for i, name in enumerate(log.zone_names()):
        color = palette.zone_color(i)
        zone = log.zones.get(name)
        label = zone.label if zone is not None else name
        points = [(minutes(s.t_us), s.zones.get(name)) for s in log.samples]
        shown = [(x, y) for x, y in points if y is not None]
        if shown:
            axes.plot(
                [x for x, _ in shown],
                [y for _, y in shown],
                "-",
                color=color,
                lw=1.2,
                label=label,
                gid=f"guard-temp-{name}",
            )
        if zone is not None and zone.pause_at_c is not None:
            axes.axhline(
                zone.pause_at_c,
                color=color,
                ls="--",
                lw=0.9,
                label=f"{label}: pauses at {zone.pause_at_c:g} C",
                gid=f"guard-limit-{name}",
            )
        if zone is not None and zone.trip_c is not None:
            axes.axhline(
                zone.trip_c,
                color=color,
                ls=":",
                lw=0.9,
                label=f"{label}: {zone.trip_type or 'trip'} point {zone.trip_c:g} C",
                gid=f"guard-trip-{name}",
            )


def _thresholds(axes: Axes, log: GuardLog) -> None:
    """The guard's pause and resume thresholds, where the record has them."""
    if log.pause_at_c is not None:
        axes.axhline(
            log.pause_at_c,
            color=palette.PAUSED,
            ls="--",
            lw=1,
            label=f"pause_at_c {log.pause_at_c:g} C",
            gid="guard-pause-at",
        )
    if log.resume_at_c is not None:
        axes.axhline(
            log.resume_at_c,
            color=palette.RESUMED,
            ls="--",
            lw=1,
            label=f"resume_at_c {log.resume_at_c:g} C",
            gid="guard-resume-at",
        )


def _events(axes: Axes, trace: GuardTrace, minutes: Callable[[int], float]) -> None:
    """The pauses the engine could not make, the run's first line when it came before the first sample, and the
    thermal slowdown clock events."""
    for i, failure in enumerate(trace.failed):
        axes.axvline(
            minutes(failure.t_us),
            color=palette.PAUSED,
            ls="--",
            lw=1.4,
            label=f"a pause the engine could not make ({len(trace.failed)})" if i == 0 else None,
            gid=f"guard-pause-failed-{i}",
        )
    late = trace.first_sample_late_us
    if late is not None and trace.run_start_us is not None:
        axes.axvline(
            minutes(trace.run_start_us),
            color=palette.RESUMED,
            ls=":",
            lw=1.2,
            label=f"the run's first line ({_late(late)} before the first sample)",
            gid="guard-run-start",
        )
    throttled = [(minutes(t), temp) for t, temp in trace.throttled() if temp is not None]
    if throttled:
        axes.plot(
            [x for x, _ in throttled],
            [y for _, y in throttled],
            ls="none",
            marker=palette.THROTTLED.marker,
            ms=6,
            color=palette.THROTTLED.color,
            label=f"thermal slowdown clock event ({len(throttled)} samples)",
            gid="guard-throttle",
        )


def _code_stamp() -> str:
    return code_stamp(Path(__file__))


def guard_fingerprint(directory: Path, run: str) -> str:
    """A hash of what the figure shows: both files as they are, the run's first line, the run's name and this
    module's code."""
    run_start = first_line_us(Path(directory) / LOG_NAME, [])
    digest = hashlib.sha256(f"{_code_stamp()}\0{run}\0{run_start}\0".encode())
    for name in (GUARD_LOG, PAUSES_LOG):
        try:
            digest.update(read_bounded(Path(directory) / name, MAX_JSONL_BYTES))
        except (FileNotFoundError, Unreadable):
            digest.update(b"-")
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()


_IDENTIFIER = re.compile(rb"<dc:identifier>([^<]*)</dc:identifier>")
_TITLE = re.compile(rb"<dc:title>([^<]*)</dc:title>")
_DESCRIPTION = re.compile(rb"<dc:description>([^<]*)</dc:description>")


def _head(path: Path) -> bytes:
    return svg_head(path)


def figure_text(path: Path) -> Optional[tuple[str, str]]:
    """(title, caption) an SVG figure carries, for the report; None when it has none."""
    import html

    head = _head(path)
    title, caption = _TITLE.search(head), _DESCRIPTION.search(head)
    if title is None:
        return None
    text = html.unescape(title.group(1).decode("utf-8", "replace"))
    return text, html.unescape(caption.group(1).decode("utf-8", "replace")) if caption else ""


def render_guard_figure(directory: Path, run: str, path: Path, *, force: bool = False) -> bool:
    """Draw the guard's figure of the capture in `directory` to `path`, unless it is already there with the same
    inputs (`force`: always). Whether it was drawn."""
    stamp = guard_fingerprint(directory, run)
    match = _IDENTIFIER.search(_head(path))
    if not force and match is not None and match.group(1) == stamp.encode():
        return False
    use_agg()
    trace = read_guard_trace(directory)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_svg(lambda: draw_guard(run, trace), Path(path), *guard_text(run, trace), stamp)
    return True


def has_guard_record(directory: Path) -> bool:
    """Whether a capture has anything for the figure to show (guard.jsonl or pauses.jsonl)."""
    return any((Path(directory) / name).is_file() for name in (GUARD_LOG, PAUSES_LOG))


@dataclass
class GuardFigures:
    """The guard figures of a capture root: those drawn now and those already up to date."""

    drawn: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)


def render_guard_figures(
    capture_dir: Path, runs: Sequence[str], out_dir: Path, attempts: Optional[Mapping[str, Optional[int]]] = None
) -> GuardFigures:
    """`guard-<run>.svg` in `out_dir` for each of `runs` under `capture_dir` that has a guard record.

    `attempts`: the attempt of each run to draw (the one its summary read), so that a figure is never of another
    attempt than the tables beside it; a run without one is drawn from its current capture."""
    rendered = GuardFigures()
    for run in runs:
        number = (attempts or {}).get(run)
        directory = Path(capture_dir) / (os.path.join(ATTEMPTS_DIR, run, str(number)) if number else run)
        if not has_guard_record(directory):
            continue
        path = guard_figure_path(out_dir, run)
        (rendered.drawn if render_guard_figure(directory, run, path) else rendered.unchanged).append(path)
    return rendered
