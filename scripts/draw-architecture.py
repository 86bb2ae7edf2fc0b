"""Draw docs/architecture.svg: the harness's packages in their layers and the path of one run through them.

The layers and the path are the tables below, in the order docs/architecture.md lists them. Run again when a
package comes or goes (tests/test_docs.py fails until the checked-in drawing is what this script draws now):

    .venv/bin/python scripts/draw-architecture.py            # writes docs/architecture.svg
    .venv/bin/python scripts/draw-architecture.py --stdout   # prints it instead
"""

from __future__ import annotations

import sys
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "architecture.svg"

# (layer, ((package, column, what it owns in a few words), ...)), top to bottom: a layer uses the layers below
# it. Columns 3 and 4 stay free in the middle layers, so the run's arrows down to the capture pass between boxes.
LAYERS: tuple[tuple[str, tuple[tuple[str, float, str], ...]], ...] = (
    ("command", (("cli", 3.5, "typer commands"),)),
    ("a run's life", (("run", 3.5, "plan, settle, execute"), ("cluster", 5, "runs placed by Ray"))),
    (
        "what a run uses",
        (
            ("experiments", 0, "files, schema, flags"),
            ("engines", 1, "Docker, processes"),
            ("guard", 2, "the heat guard"),
            ("checkpoints", 5, "save, verify, resume"),
            ("board", 6, "TensorBoard, W&B"),
            ("sim", 7, "the simulated trainer"),
        ),
    ),
    ("reading captures", (("summary", 5, "numbers, figures"), ("stats", 6, "AdaStop, seeds"))),
    (
        "the capture",
        (
            ("mileslog", 3, "what Miles prints"),
            ("capture", 4, "format, write, read"),
            ("fs", 5, "paths, locks, faults"),
        ),
    ),
    (
        "shared by all",
        (
            ("lab", 2, "image, Miles names"),
            ("errors.py", 3, "error, exit codes"),
            ("jsontypes.py", 4, "JSON types"),
            ("secrets.py", 5, "the secret rule"),
            ("times.py", 6, "RFC 3339 times"),
        ),
    ),
)

# A run's path: (from, to, label), in the order a run takes it.
PATH: tuple[tuple[str, str, str], ...] = (
    ("cli", "run", "1 plan_runs, run_planned"),
    ("run", "engines", "2 start"),
    ("run", "guard", "3 guard"),
    ("run", "capture", "4 write"),
    ("run", "mileslog", "5 parse"),
    ("capture", "summary", "6 summarize"),
)

COLUMNS = 8
LABEL_W = 130  # the layer names' column
BOX_W, BOX_H, GAP = 118, 46, 8
WIDTH = LABEL_W + COLUMNS * (BOX_W + GAP) + 10
ROW_H = 96
TOP = 70
PATH_COLOUR = "#c0392b"


def box_positions() -> dict[str, tuple[int, int]]:
    """Each package's box, top-left corner, by its layer's row and its column."""
    return {
        name: (LABEL_W + round(column * (BOX_W + GAP)), TOP + row * ROW_H)
        for row, (_, packages) in enumerate(LAYERS)
        for name, column, _ in packages
    }


def text(x: int, y: int, words: str, size: int, *, bold: bool = False, anchor: str = "middle") -> str:
    weight = ' font-weight="bold"' if bold else ""
    return f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}"{weight}>{escape(words)}</text>'


def arrow(start: tuple[int, int], end: tuple[int, int], label: str) -> list[str]:
    (x1, y1), (x2, y2) = start, end
    mid_x, mid_y = (x1 + x2) // 2, (y1 + y2) // 2
    # a label beside its arrow's middle, on the side the arrow leans away from, so two arrows' labels do not meet
    left = x2 < x1
    anchor = ' text-anchor="end"' if left else ""
    return [
        f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{PATH_COLOUR}" stroke-width="2" '
        'marker-end="url(#head)"/>',
        f'<text x="{mid_x - 6 if left else mid_x + 6}" y="{mid_y}" font-size="12" fill="{PATH_COLOUR}"{anchor}>'
        f"{escape(label)}</text>",
    ]


def path_ends(source: str, target: str, places: dict[str, tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Where an arrow leaves its box and meets the next: bottom to top going down, top to bottom going up."""
    (sx, sy), (tx, ty) = places[source], places[target]
    down = ty > sy
    lean = max(-BOX_W // 3, min(BOX_W // 3, (tx - sx) // 4))  # arrows to the side leave from that side
    start = (sx + BOX_W // 2 + lean, sy + BOX_H if down else sy)
    end = (tx + BOX_W // 2, ty - 2 if down else ty + BOX_H + 2)
    return start, end


def draw() -> str:
    """The whole SVG as text: the same every time for the same tables."""
    places = box_positions()
    height = TOP + len(LAYERS) * ROW_H + 10
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">',
        "<defs>",
        '<marker id="head" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto">'
        f'<path d="M0,0 L10,4 L0,8 z" fill="{PATH_COLOUR}"/></marker>',
        "</defs>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="white"/>',
        text(WIDTH // 2, 28, "The harness's packages, top to bottom, and a run's path through them", 18, bold=True),
        f'<text x="{WIDTH // 2}" y="50" font-size="13" text-anchor="middle" fill="{PATH_COLOUR}">'
        "harness run EXP: cli -&gt; run -&gt; engines, guard, capture, mileslog; then the summary reads the capture"
        "</text>",
    ]
    for row, (layer, packages) in enumerate(LAYERS):
        y = TOP + row * ROW_H
        lines.append(f'<line x1="10" y1="{y - 12}" x2="{WIDTH - 10}" y2="{y - 12}" stroke="#dddddd"/>')
        lines.append(text(12, y + BOX_H // 2 + 5, layer, 13, bold=True, anchor="start"))
        for name, _, owns in packages:
            x, top = places[name]
            on_path = any(name in (source, target) for source, target, _ in PATH)
            fill = "#fdecea" if on_path else "#eef2f7"
            lines.append(
                f'<rect x="{x}" y="{top}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="{fill}" stroke="#34495e"/>'
            )
            lines.append(text(x + BOX_W // 2, top + 19, name, 14, bold=True))
            lines.append(text(x + BOX_W // 2, top + 36, owns, 11))
    for source, target, label in PATH:
        start, end = path_ends(source, target, places)
        lines += arrow(start, end, label)
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def main() -> None:
    drawing = draw()
    if "--stdout" in sys.argv[1:]:
        sys.stdout.write(drawing)
    else:
        OUT.write_text(drawing)


if __name__ == "__main__":
    main()
