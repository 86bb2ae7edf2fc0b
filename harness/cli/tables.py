"""Tables that fit: whole names, states and numbers in a terminal of any width; plain lines when piped.

In a terminal, free-text columns wrap at spaces (never inside a word), and
where even that is too wide, the columns marked droppable go, lowest `drop`
first; what is left is never cut. Piped (no terminal), or where even the
essential columns are wider than the terminal, a table is plain text: no box,
no colour, one line per row however long, so `grep` and `awk` see whole rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Optional, Sequence

GAP = 2  # columns apart, in a terminal and piped


@dataclass(frozen=True)
class Column:
    """One column: its header, how it is aligned, and how it gives way in a narrow terminal."""

    header: str
    justify: Literal["left", "right"] = "left"
    wrap: bool = False  # free text that may wrap at spaces
    drop: int = 0  # 0: always shown; else dropped when too narrow, 1 before 2 before ...


def print_table(
    console: Any, columns: Sequence[Column], rows: Sequence[Sequence[Any]], *, title: Optional[str] = None
) -> None:
    """Print rows under columns, fitted to the terminal, or plain when piped.

    A cell is a string of rich markup, or a rich Text shown exactly as written
    (for values read from files: a name with [brackets] is not markup).
    """
    plain = [[_plain(cell) for cell in row] for row in rows]
    if console.is_terminal:
        for dropped in [0, *sorted({c.drop for c in columns if c.drop})]:
            kept = [i for i, column in enumerate(columns) if not column.drop or column.drop > dropped]
            widths = _fit([columns[i] for i in kept], [[row[i] for i in kept] for row in plain], console.width)
            if widths is not None:
                console.print(
                    _table([columns[i] for i in kept], [[row[i] for i in kept] for row in rows], widths, title)
                )
                return
    _print_plain(console, columns, plain, title)


def _fit(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> Optional[list[int]]:
    """Column widths that fit `width` with every word whole, or None when they cannot."""
    from rich.cells import cell_len

    cells = [[column.header, *(row[i] for row in rows)] for i, column in enumerate(columns)]
    widest = [max(cell_len(text) for text in texts) for texts in cells]
    narrowest = [
        max(cell_len(word) for text in texts for word in text.split() or [""]) if column.wrap else w
        for column, texts, w in zip(columns, cells, widest)
    ]
    room = width - GAP * (len(columns) - 1)
    if sum(narrowest) > room:
        return None
    widths = list(narrowest)
    spare = room - sum(widths)
    wanting = [w - n for w, n in zip(widest, narrowest)]
    if sum(wanting) <= spare:
        return widest
    for i, want in enumerate(wanting):  # share the spare room by how much more each column wants
        widths[i] += spare * want // sum(wanting)
    return widths


def _table(
    columns: Sequence[Column], rows: Sequence[Sequence[Any]], widths: Sequence[int], title: Optional[str]
) -> Any:
    from rich import box
    from rich.table import Table

    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True
    )  # GAP wide: a space of padding and a one-space rule
    for column, width in zip(columns, widths):
        table.add_column(column.header, justify=column.justify, width=width, no_wrap=not column.wrap, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _print_plain(console: Any, columns: Sequence[Column], rows: Sequence[Sequence[str]], title: Optional[str]) -> None:
    from rich.cells import cell_len

    widths = [
        max(cell_len(text) for text in [column.header, *(row[i] for row in rows)]) for i, column in enumerate(columns)
    ]

    def line(cells: Sequence[str]) -> str:
        padded = [
            text + " " * (width - cell_len(text)) if column.justify == "left" else " " * (width - cell_len(text)) + text
            for column, text, width in zip(columns, cells, widths)
        ]
        return (" " * GAP).join(padded).rstrip()

    if title:
        console.out(title, highlight=False)
    console.out(line([column.header for column in columns]), highlight=False)
    for row in rows:
        console.out(line(row), highlight=False)


def _plain(cell: Any) -> str:
    """The text a cell shows, on one line."""
    from rich.text import Text

    return " ".join((cell if isinstance(cell, Text) else Text.from_markup(cell)).plain.split())
