"""Tables that fit: whole names, states and numbers in a terminal of any width, and piped.

Free-text columns wrap at spaces (never inside a word), and where even that
is too wide, the columns marked droppable go, lowest `drop` first, and a
line under the table says which; what is left is never cut. The width is the
terminal's, or piped 100 columns ($COLUMNS when set: harness.cli.messages).
Piped, a table is plain text: no box, no colour, a row's first line holding
its first cells (so `grep NAME` finds the row), a wrapped cell continuing on
indented lines below. Where even the essential columns are wider than the
width, the table is plain, one line per row however long.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, Sequence

from rich.cells import cell_len
from rich.text import Text

from harness.cli.messages import output_width, outside_renderable, shown

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
) -> list[str]:
    """Print rows under columns, fitted to the width; the headers of the columns left out to fit.

    A cell is a string or a rich Text, shown exactly as written with its
    control characters escaped (harness.cli.messages): a string is never read
    as markup (a run named `[bold red]x` is that name); style is a Text's.
    """
    width = output_width(console.is_terminal, console.width)
    plain = [[_plain(cell) for cell in row] for row in rows]  # escaped by _plain, as outside_renderable would
    # On a terminal the cells are shown as they are (a name's leading or doubled spaces kept), so they are
    # measured so; piped, the plain text printed is what is measured (and no rich Text is needed).
    if console.is_terminal:
        rows = [[outside_renderable(cell) for cell in row] for row in rows]
    measured = [[_one_line(cell) for cell in row] for row in rows] if console.is_terminal else plain
    measure = _measure([column.header for column in columns], measured)
    for dropped in [0, *sorted({c.drop for c in columns if c.drop})]:
        kept = [i for i, column in enumerate(columns) if not column.drop or column.drop > dropped]
        widths = _fit([columns[i] for i in kept], [[row[i] for i in kept] for row in measured], width, measure)
        if widths is None:
            continue
        if console.is_terminal:
            console.print(_table([columns[i] for i in kept], [[row[i] for i in kept] for row in rows], widths, title))
        else:
            _print_plain(
                console, [columns[i] for i in kept], [[row[i] for i in kept] for row in plain], title, widths, measure
            )
        left_out = [column.header for i, column in enumerate(columns) if i not in kept]
        if left_out:
            console.print(Text(f"(left out to fit {width} columns: {', '.join(left_out)})"))
        return left_out
    _print_plain(console, columns, plain, title, None, measure)
    return []


def _measure(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Callable[[str], int]:
    """How the table's texts are measured: by `len` where every one is printable ASCII (one check of them all:
    a table of 10,000 runs has 100,000 cells to measure), else by `_cells`."""
    every = "".join([*headers, *(text for row in rows for text in row)])
    return len if every.isascii() and every.isprintable() else _cells


def _fit(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int, measure: Callable[[str], int]
) -> Optional[list[int]]:
    """Column widths that fit `width` with every word whole, or None when they cannot (`measure`: see `_measure`)."""
    cells = [[column.header, *(row[i] for row in rows)] for i, column in enumerate(columns)]
    widest = [max(map(measure, texts)) for texts in cells]
    narrowest = [
        max(measure(word) for text in texts for word in text.split() or [""]) if column.wrap else w
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
    # A column that wants little gets it all first, fewest first, while that is no more than an even share (so a
    # temperature, `95.5 C`, is never broken for a long state's sake); the rest share what is left by how much
    # more each wants.
    rest = sorted(range(len(columns)), key=lambda i: wanting[i])
    while rest and wanting[rest[0]] <= spare // len(rest):
        first = rest.pop(0)
        widths[first] += wanting[first]
        spare -= wanting[first]
    wanted = sum(wanting[i] for i in rest)
    for i in rest:
        widths[i] += spare * wanting[i] // wanted
    return widths


def _table(
    columns: Sequence[Column], rows: Sequence[Sequence[Any]], widths: Sequence[int], title: Optional[str]
) -> Any:
    from rich import box
    from rich.table import Table

    from harness.cli.messages import outside

    table = Table(
        title=outside(title) if title is not None else None,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
    )  # GAP wide: a space of padding and a one-space rule
    for column, width in zip(columns, widths):
        table.add_column(
            outside(column.header), justify=column.justify, width=width, no_wrap=not column.wrap, overflow="fold"
        )
    for row in rows:
        table.add_row(*row)
    return table


def _print_plain(
    console: Any,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    title: Optional[str],
    fitted: Optional[Sequence[int]],
    measure: Callable[[str], int],
) -> None:
    """Plain text; with `fitted` widths, a wrapping column's cell goes on over the row's next lines."""
    import textwrap

    widths = (
        list(fitted)
        if fitted is not None
        else [max(map(measure, [column.header, *(row[i] for row in rows)])) for i, column in enumerate(columns)]
    )
    left = [column.justify == "left" for column in columns]
    wrapping = [fitted is not None and column.wrap for column in columns]

    def pieces(column: Column, text: str, width: int) -> list[str]:
        if fitted is None or not column.wrap or measure(text) <= width:
            return [text]
        return textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False) or [""]

    def lines(cells: Sequence[str]) -> list[str]:
        if measure is len and not any(wrap and len(text) > width for wrap, text, width in zip(wrapping, cells, widths)):
            # The common row: printable ASCII on one line, each cell padded to its width (what the loop below does)
            padded = [text.ljust(w) if lft else text.rjust(w) for text, w, lft in zip(cells, widths, left)]
            return [(" " * GAP).join(padded).rstrip()]
        wrapped = [pieces(column, text, width) for column, text, width in zip(columns, cells, widths)]
        out = []
        for depth in range(max(len(parts) for parts in wrapped)):
            texts = [parts[depth] if depth < len(parts) else "" for parts in wrapped]
            padded = [
                text + " " * (width - measure(text))
                if column.justify == "left"
                else " " * (width - measure(text)) + text
                for column, text, width in zip(columns, texts, widths)
            ]
            out.append((" " * GAP).join(padded).rstrip())
        return out

    printed = [shown(title)] if title else []
    printed += lines([column.header for column in columns])
    for row in rows:
        printed += lines(row)
    # One call (rich costs about as much a call as a line), a line per object (a line break in a text is escaped),
    # each a Text unless the console shows strings as written: the lines are escaped already, and any console must
    # print them as written, never as markup.
    as_written = getattr(console, "prints_strings_as_written", False)
    console.print(
        *(printed if as_written else [Text(line) for line in printed]),
        sep="\n",
        no_wrap=True,
        overflow="ignore",
        crop=False,
    )


def _one_line(cell: Any) -> str:
    """The text a cell shows on a terminal, its line breaks as spaces and every other space kept."""
    return (cell.plain if isinstance(cell, Text) else str(cell)).replace("\n", " ")


def _plain(cell: Any) -> str:
    """The text a cell shows, on one line."""
    if type(cell) is str and " " not in cell and cell.isprintable():  # a name or a number: as it is
        return cell  # (every other whitespace is unprintable, so there is none to join)
    return " ".join(shown(cell.plain if isinstance(cell, Text) else str(cell)).split())


def _cells(text: str) -> int:
    """Columns `text` takes on a terminal: its length where it is printable ASCII (a table of 10,000 runs measures
    each of its cells; rich's own count costs several times more)."""
    return len(text) if text.isascii() and text.isprintable() else cell_len(text)
