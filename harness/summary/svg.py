"""What every figure of the summary shares: the SVG file and the parts of a figure.

A figure's title and caption fitted to its width as matplotlib's `wrap=True`
would break them (`fit_to_width`), its file name safe whatever a run is
called (`file_part`), SIMULATED in the title of a simulated run's figure
(`marked`), and the file: drawn with Agg, written atomically as SVG with text
as text and no date (`save_svg`), carrying a fingerprint of what it shows and
of the code that draws it (`code_stamp`) as its Dublin Core identifier, read
back so that an unchanged figure is not drawn again (`render_planned`).
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import re
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence, TypeVar

from harness.capture.files import write_text_atomic
from harness.fs.bounded import Unreadable, open_regular
from harness.fs.files import check_target
from harness.summary.document import SummaryDocument

if TYPE_CHECKING:  # matplotlib is loaded only when a figure is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties
    from matplotlib.text import Text

SIMULATED = "SIMULATED"


STEP_LABEL = "step (Miles rollout id)"


REWARD_LABEL = "mean reward per answer (score, 0 to 1)"


_UNSAFE_IN_FILE_NAME = re.compile(r"[^A-Za-z0-9._@+=-]")


def file_part(name: str) -> str:
    """A run or condition name as part of a figure's file name: as it is when every character is safe in one; else
    those that are not as `_`, and a short hash of the name, so that no name (an experiment named `../x` in a
    manifest) leaves the directory or takes another name's file."""
    if not _UNSAFE_IN_FILE_NAME.search(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{_UNSAFE_IN_FILE_NAME.sub('_', name)[:64]}-{digest}"


def marked(document: SummaryDocument, title: str, runs: Sequence[str]) -> str:
    """The title, with SIMULATED before it when any of `runs` was made by the simulator."""
    simulated = any(document.runs[name].made_by_simulator for name in runs if name in document.runs)
    return f"{SIMULATED}: {title}" if simulated else title


SVG_DPI = 72  # matplotlib writes an SVG at 72 dots per inch: a dot is a point


def fit_to_width(text: Text) -> Text:
    """Break a figure's `text` into the lines matplotlib's `wrap=True` gives it in an SVG, measuring each once.

    `wrap=True` measures a growing line word by word, each measure a text
    layout, and again at every layout of the figure: most of the time a figure
    takes to draw. Here the lines break where wrap=True breaks them (the
    first words too wide for the room between the text and the figure's edge,
    at the SVG's dots), found by halving, so a line of n words is measured
    about log2(n) times, and the rest of a paragraph that fits once; a wider
    prefix of words is never narrower.
    """
    figure = text.get_figure(root=True)
    if figure is None:  # on no figure: no edge to fit to
        return text
    x, _ = text.get_position()  # in figure fractions: a figure's title and caption
    figure_width = figure.get_figwidth() * SVG_DPI
    left_room, right_room = figure_width * (1 - x), figure_width * x
    alignment = text.get_horizontalalignment()
    room = left_room if alignment == "left" else right_room if alignment == "right" else 2 * min(left_room, right_room)
    font = text.get_fontproperties().copy()  # a key of the widths measured: never changed after

    def fits(words: list[str]) -> bool:
        return math.ceil(_line_width(" ".join(words), font)) <= room

    lines = []
    for paragraph in text.get_text().split("\n"):
        words = paragraph.split(" ")
        while words:
            if len(words) == 1 or fits(words):  # the last line of each paragraph, and most titles whole
                lines.append(" ".join(words))
                break
            # the first n >= 2 whose first n words are too wide; a line keeps at least one word
            low, high = 2, len(words)
            while low < high:
                middle = (low + high) // 2
                if fits(words[:middle]):
                    low = middle + 1
                else:
                    high = middle
            lines.append(" ".join(words[: low - 1]))
            words = words[low - 1 :]
    text.set_text("\n".join(lines))
    return text


@functools.lru_cache(maxsize=4096)
def _line_width(line: str, font: FontProperties) -> float:
    """The width of one line of text in `font` at the SVG's dots, as `wrap=True` measures it.

    Remembered: where TensorBoard's writer is installed, `harness summarize`
    draws each figure it changed twice (the SVG, then the board's image of
    it), and a line's width depends on its text and its font's properties
    alone (the harness never changes matplotlib's font settings).
    """
    from matplotlib import cbook
    from matplotlib.textpath import text_to_path

    width, _, _ = text_to_path.get_text_width_height_descent(line, font, ismath=cbook.is_math_text(line))
    return float(width)


def new_figure(title: str, caption: str) -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9.0, 5.6))
    figure.subplots_adjust(left=0.09, right=0.98, top=0.88, bottom=0.2)
    axes = figure.add_subplot()
    fit_to_width(figure.suptitle(title, fontsize=11.5, gid="title"))
    fit_to_width(figure.text(0.01, 0.015, caption, fontsize=8.5, va="bottom", gid="caption"))
    axes.grid(True, alpha=0.3)
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    return figure, axes


def save_svg(draw: Callable[[], Figure], path: Path, title: str, caption: str, fingerprint: str) -> Path:
    """Draw the figure and write it as SVG (text as text, no date), with its title, caption and fingerprint as
    metadata. A `path` that may not be written is refused before drawing, the costly part."""
    import matplotlib  # heavy: loaded only when a figure is drawn

    check_target(path)
    figure = draw()
    svg = io.BytesIO()
    metadata = {"Title": title, "Description": caption, "Identifier": fingerprint, "Date": None}
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "miles-gb10-lab"}):
        figure.savefig(svg, format="svg", metadata=metadata)
    write_text_atomic(path, svg.getvalue().decode("utf-8"))  # whole or not at all, and the umask's mode
    return path


@dataclass
class Rendered:
    """The figures of a document: those drawn now and those already up to date."""

    drawn: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)

    @property
    def paths(self) -> list[Path]:
        return self.drawn + self.unchanged


_IDENTIFIER = re.compile(rb"<dc:identifier>([^<]*)</dc:identifier>")


@functools.lru_cache(maxsize=4)
def code_stamp(*sources: Path) -> str:
    """What else decides a figure's look: the code of the modules `sources` that draw it and matplotlib's version."""
    try:
        matplotlib_version = version("matplotlib")
    except PackageNotFoundError:  # pragma: no cover - matplotlib is a dependency
        matplotlib_version = "?"
    code = b"\0".join(source.read_bytes() for source in sources)
    return hashlib.sha256(code).hexdigest()[:16] + "/" + matplotlib_version


def svg_head(path: Path) -> bytes:
    """The top of an existing SVG, where matplotlib writes the metadata (b"" when there is no regular file)."""
    try:  # a regular file only: a FIFO in a figure's place must not hang the read (the writer refuses it)
        with open_regular(path) as handle:
            head: bytes = handle.read(16384)
            return head
    except (OSError, Unreadable):
        return b""


def fingerprint_of(path: Path) -> Optional[bytes]:
    """The fingerprint an existing SVG carries (None when there is no such file or none in it)."""
    match = _IDENTIFIER.search(svg_head(path))
    return match.group(1) if match else None


@dataclass(frozen=True)
class PlannedFigure:
    """One figure of a document: its file, the fingerprint of what it shows, and how to draw it and word it."""

    path: Path
    stamp: str
    draw: Callable[[], Figure]
    text: Callable[[], tuple[str, str]]  # (title, caption)


_Shown = TypeVar("_Shown")


def planned_figure(
    path: Path,
    stamp: str,
    draw: Callable[[SummaryDocument, _Shown], Figure],
    text: Callable[[SummaryDocument, _Shown], tuple[str, str]],
    document: SummaryDocument,
    shown: _Shown,
) -> PlannedFigure:
    """The figure of what `shown` is (a comparison, a condition, a pair of conditions), drawn and worded when asked."""
    return PlannedFigure(
        path, stamp, functools.partial(draw, document, shown), functools.partial(text, document, shown)
    )


@functools.lru_cache(maxsize=1)
def use_agg() -> None:
    """matplotlib's Agg backend, once: figures are files, never windows."""
    import matplotlib  # heavy: loaded only when a figure is drawn

    matplotlib.use("Agg")


def shown_of_run(document: SummaryDocument, name: str) -> Optional[list[object]]:
    """What a figure shows of one run (None when it is not in the document)."""
    run = document.runs.get(name)
    if run is None:
        return None
    table = run.steps
    return [
        name,
        run.seed,
        run.filter,
        run.made_by_simulator,
        run.rollout_batch_size,
        run.over_sampling_batch_size,
        run.aggregates.steps,
        table.step,
        table.complete,
        table.rollout_time_adjusted_s,
        table.batches,
        table.reward,
    ]


def render_planned(planned: Sequence[PlannedFigure], out_dir: Path, *, force: bool = False) -> Rendered:
    """The `planned` figures in `out_dir`, drawing only those whose fingerprint changed (or all, `force`)."""
    rendered = Rendered()
    for figure in planned:
        if not force and fingerprint_of(figure.path) == figure.stamp.encode():
            rendered.unchanged.append(figure.path)
            continue
        use_agg()
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        title, caption = figure.text()
        rendered.drawn.append(save_svg(figure.draw, figure.path, title, caption, figure.stamp))
    return rendered
