"""How the harness talks to a person: one renderer for every message, one rule for text that came from outside.

- `shown`: text that came from a file, a directory name, the trainer or the
  user is shown as written, with its control characters escaped (`\\x1b`,
  `\\n`), so no name can move the cursor, clear the screen or end a line.
  Rich markup is never read in it: the renderers print it as plain text.
- `outside`, `outside_renderable`: the same rule for what rich prints: text
  from outside as a rich `Text` (escaped, never read as markup). Every
  console of the harness applies it to every string it is given
  (`harness.cli.app.stdout`), so a string is never markup: styling is a
  `Text` built from the harness's own words (`Text.assemble`).
- `message_lines`: a message fitted to the width. One that fits is one line.
  An error wider than the width is one paragraph wrapped at words. Any other
  message that does not fit says what happened on its first line (the part before
  its first `: `), then its details on indented lines, a clause (`; `) per
  line, wrapped at spaces; a long list in parentheses is one item per line.
  A single token longer than the width (a path, a command to copy) is never
  broken. Nothing is lost: the lines joined by single spaces, their indents
  taken off, are the message (`whole_message`).
- `output_width`: the terminal's width; piped, $COLUMNS when set, else 100.
"""

from __future__ import annotations

import os
import re
import textwrap
from typing import Any, Optional

PIPED_WIDTH = 100
INDENT = "  "
# A list shown one item per line: `(known: a, b, c, d, e)` with at least this many items.
LIST_ITEMS = 5
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_BRACKET = re.compile(r"[][(){}]")
_LIST = re.compile(r"\((?P<label>[^():]{1,40}): (?P<items>[^()]*)\)")


def shown(text: str) -> str:
    """`text` with every control character escaped: what came from outside can only ever be read."""
    if text.isprintable():  # no control character in it (they are all unprintable): the common case, quickly
        return text
    return _CONTROL.sub(lambda found: repr(found.group(0))[1:-1], text)


def outside(text: str, style: str = "") -> Any:
    """A rich `Text` of outside text: `shown`, never read as markup (a run named `[bold red]x` stays that)."""
    from rich.text import Text

    return Text(shown(text), style=style)


def outside_renderable(thing: Any) -> Any:
    """What a console may print: a string as `outside` text, a `Text` with its control characters escaped."""
    from rich.text import Text

    if isinstance(thing, str):
        return outside(thing)
    if isinstance(thing, Text) and _CONTROL.search(thing.plain):
        escaped = Text(style=thing.style, justify=thing.justify, no_wrap=thing.no_wrap, overflow=thing.overflow)
        for part in thing.divide(sorted({0, *(i for m in _CONTROL.finditer(thing.plain) for i in m.span())})):
            escaped.append_text(outside(part.plain, part.style) if _CONTROL.match(part.plain) else part)
        return escaped
    return thing


def fitted(thing: Any, width: int) -> Any:
    """A rich `Text` wrapped at spaces to `width`, its styles kept and a word longer than the width whole (anything
    else, or a Text that must not wrap, as it is)."""
    from rich._wrap import divide_line  # rich's own word splitter, without its folding or cropping
    from rich.text import Text

    if not isinstance(thing, Text) or thing.no_wrap or width < 1:
        return thing
    pieces: list[Text] = []
    for line in thing.split(allow_blank=True):
        parts = line.divide(divide_line(line.plain, width, fold=False))
        for piece in parts[:-1]:
            piece.rstrip()  # the space the line was broken at
        pieces.extend(parts)
    wrapped = Text("\n", style=thing.style).join(pieces)
    wrapped.end, wrapped.justify = thing.end, thing.justify
    return wrapped


def output_width(is_terminal: bool, terminal_width: int, environ: Optional[dict[str, str]] = None) -> int:
    """The width to fit: the terminal's; piped, $COLUMNS when it is a sane number, else PIPED_WIDTH."""
    if is_terminal:
        return terminal_width
    columns = (environ if environ is not None else os.environ).get("COLUMNS", "")
    return int(columns) if columns.isdigit() and 20 <= int(columns) <= 10_000 else PIPED_WIDTH


def message_lines(prefix: str, text: str, width: int, *, paragraph: bool = False) -> list[str]:
    """`prefix` + `text` as lines of at most `width` (see the module's rules); the text is `shown`. A `paragraph`
    (an error) is wrapped at words only: no line per clause or per item."""
    text = shown(text)
    if len(prefix) + len(text) <= width:
        return [prefix + text]
    if paragraph:
        return _wrapped(prefix + text, width, INDENT)
    head, *tail = _split_outside_brackets(text, ": ", limit=1)
    rest = tail[0] if tail else ""
    if not rest or len(prefix) + len(head) + 1 > width:  # no first part that stands alone: one paragraph
        return _clause(prefix + text, width, first="")
    lines = _wrapped(prefix + head + ":", width, INDENT)
    clauses = [part.strip() for part in _split_outside_brackets(rest, "; ")]
    for number, clause in enumerate(clauses):
        lines += _clause(clause + (";" if number < len(clauses) - 1 else ""), width, first=INDENT)
    return lines


def _split_outside_brackets(text: str, separator: str, limit: int = -1) -> list[str]:
    """`text` split at `separator` where it is not inside parentheses or brackets (at most `limit` times)."""
    if not _BRACKET.search(text):  # the common message: no brackets at all
        return text.split(separator, limit)
    parts, depth, start = [], 0, 0
    for found in re.finditer(f"[][(){{}}]|{re.escape(separator)}", text):
        char = found.group()
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0:
            parts.append(text[start : found.start()])
            start = found.end()
            limit -= 1
            if limit == 0:  # the rest is one part, whatever it holds
                break
    return [*parts, text[start:]]


def _clause(clause: str, width: int, *, first: str) -> list[str]:
    """One clause wrapped (its first line indented by `first`), a long list in it one item per line."""
    more = first + INDENT
    listed = _LIST.search(clause)
    if listed is not None and len(items := [i.strip() for i in listed["items"].split(",")]) >= LIST_ITEMS:
        before, after = clause[: listed.start()].rstrip(), clause[listed.end() :].strip()
        lines = _wrapped(f"{first}{before} ({listed['label']}:", width, more)
        lines += [f"{more}{item}," for item in items[:-1]]
        return lines + _wrapped(f"{more}{items[-1]}){(' ' + after) if after else ''}", width, more)
    return _wrapped(first + clause, width, more)


def _wrapped(line: str, width: int, indent: str) -> list[str]:
    """A line wrapped at spaces, its continuation indented; a word longer than the width stays whole."""
    text = line.lstrip(" ")
    first_indent = line[: len(line) - len(text)]
    width = max(width, len(indent) + 20)
    if _single_spaced(text):
        return _wrapped_single_spaced(text, width, first_indent, indent)
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=first_indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [line]


def _single_spaced(text: str) -> bool:
    """Words parted by single spaces only, none at either end: where `_wrapped_single_spaced` is textwrap's wrap."""
    return text.isprintable() and "  " not in text and not text.startswith(" ") and not text.endswith(" ")


def _wrapped_single_spaced(text: str, width: int, first_indent: str, indent: str) -> list[str]:
    """textwrap's greedy wrap of single-spaced words (whole words, no hyphen breaks), a line at a time.

    Each line is the longest run of whole words that fits, found with one search
    back from the width instead of one step per word: a summary of thousands of
    runs wraps thousands of verdicts.
    """
    lines: list[str] = []
    prefix = first_indent
    while text:
        room = width - len(prefix)
        if len(text) <= room:
            lines.append(prefix + text)
            break
        cut = text.rfind(" ", 0, room + 1)
        if cut <= 0:  # the first word is longer than the room: it stays whole, on a line of its own
            cut = text.find(" ", room)
            if cut < 0:
                lines.append(prefix + text)
                break
        lines.append(prefix + text[:cut])
        text = text[cut + 1 :]
        prefix = indent
    return lines or [first_indent]


def whole_message(lines: list[str]) -> str:
    """The message `message_lines` rendered, from its lines (for scripts and tests that read it whole)."""
    return " ".join(line.strip() for line in lines if line.strip())
