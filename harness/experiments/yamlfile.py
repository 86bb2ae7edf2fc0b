"""Reading a YAML file someone else wrote: bounded, strict, and every failure one short line.

An experiment file is input from whoever can write to the experiments
directory, so reading it must not hang, exhaust memory or crash: the size,
the nesting depth and the number of values after alias expansion are bounded
while the document is composed (before anything is built from it), keys must
be unique, and every error names the file and line and quotes at most a few
dozen characters of what the file says.
"""

from __future__ import annotations

import os
import re
import reprlib
import stat
from pathlib import Path
from typing import Hashable, Optional, Sequence, TypeAlias

import yaml

from harness.errors import HarnessError
from harness.secrets import redact_userinfo, shown_json

MAX_FILE_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_VALUES = 5_000  # scalars, lists and mappings once every alias is expanded (a real file has ~100)
SHOWN_CHARS = 80
MAX_INT_DIGITS = 1000  # far beyond any setting's range (each key's own bound says why); Python reads at most 4300

_shown = reprlib.Repr()
_shown.maxstring = _shown.maxother = SHOWN_CHARS - 4
_shown.maxlist = _shown.maxtuple = _shown.maxdict = _shown.maxset = _shown.maxfrozenset = 6
_shown.maxlevel = 3

# A YAML file's data as read, before the experiment schema has validated it: any key, any value.
RawMapping: TypeAlias = dict[object, object]


def shown(value: object) -> str:
    """`repr(value)` cut to about 80 characters, never built whole for a huge value; every URL password in it as
    *** (harness.secrets), hidden before the cut so that no piece of one is left."""
    text = _shown.repr(shown_json(value))
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def one_line(text: str, limit: int = 2 * SHOWN_CHARS) -> str:
    """`text` on one line and at most `limit` characters (for text quoted from a file), URL passwords as ***."""
    flat = " ".join(redact_userinfo(str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class _Refused(yaml.MarkedYAMLError):
    """The document exceeds a bound; raised while composing, so nothing big is ever built."""

    def __init__(self, problem: str, mark: Optional[yaml.Mark]) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader with bounds on depth and alias expansion, refusing duplicate and unhashable keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._values: dict[int, int] = {}  # id(node) -> values it stands for, aliases expanded
        self._total = 0  # values so far, aliases expanded: counted as they come, so a huge list stops early
        self._aliases = False

    def fetch_flow_collection_start(self, token_class: type[yaml.Token]) -> None:
        # Refused while scanning: the scanner looks ahead over every open `[` or `{`, so a deep
        # flow collection would cost time before the composer ever saw it.
        if self.flow_level >= MAX_DEPTH:
            raise _Refused(f"values nested more than {MAX_DEPTH} levels deep", self.get_mark())
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent: Optional[yaml.Node], index: int) -> Optional[yaml.Node]:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            if id(node) not in self._values:  # still being composed: the alias points into itself
                raise _Refused(
                    f"alias *{one_line(event.anchor, SHOWN_CHARS)} refers to a value that contains it", event.start_mark
                )
            self._aliases = True
            self._count(self._values[id(node)], event.start_mark)
            return node
        mark = self.peek_event().start_mark
        self._count(1, mark)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(f"values nested more than {MAX_DEPTH} levels deep", mark)
        node = super().compose_node(parent, index)
        self._depth -= 1
        self._values[id(node)] = 1 + sum(self._values[id(child)] for child in _children(node))
        return node

    def _count(self, values: int, mark: Optional[yaml.Mark]) -> None:
        self._total += values
        if self._total > MAX_VALUES:
            how = "once its aliases are expanded" if self._aliases else "in one document"
            raise _Refused(f"more than {MAX_VALUES} values {how}", mark)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = sum(character.isdigit() for character in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise _Refused(
                f"an integer of {digits} digits; no setting takes more than {MAX_INT_DIGITS}", node.start_mark
            )
        value: int = super().construct_yaml_int(node)
        return value

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, object]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *parent`: its keys may be overridden here
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a key must be a word or a number, not a list or mapping", key_node.start_mark
                ) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {shown(key)}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 (PyYAML) reads `1e2` and `1E-3` as text, because its floats need a dot; YAML 1.2, and every
# person writing `pause_at_c: 1e2`, reads them as numbers.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")
BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
BoundedLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+.0123456789"))


def _children(node: Optional[yaml.Node]) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        items: list[yaml.Node] = node.value
        return items
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def read_text(path: Path) -> str:
    """The file as UTF-8 text, refused when not a regular file, larger than MAX_FILE_BYTES or not UTF-8."""
    try:
        # O_NONBLOCK: opening a named pipe must not wait for a writer before it can be refused.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise HarnessError(f"{path}: cannot read: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise HarnessError(f"{path}: not a regular file; a YAML file is read only from a regular file")
        try:
            data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as err:
            raise HarnessError(f"{path}: cannot read: {err.strerror or err}") from None
    if len(data) > MAX_FILE_BYTES:
        raise HarnessError(f"{path}: larger than {MAX_FILE_BYTES // 1024} KiB, which no experiment file needs")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise HarnessError(f"{path}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None


def load_mapping(path: Path) -> RawMapping:
    """One YAML document from `path` as a mapping (an empty file is {}); every failure is a HarnessError."""
    text = read_text(path)
    try:
        data = yaml.load(text, Loader=BoundedLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        kind = "" if isinstance(err, _Refused) else "YAML syntax error: "
        raise HarnessError(f"{where}: {kind}{one_line(err.problem or err.context or 'unreadable')}") from None
    except yaml.YAMLError as err:
        raise HarnessError(f"{path}: YAML syntax error: {one_line(str(err))}") from None
    except (ValueError, TypeError, OverflowError) as err:  # e.g. a date like 2024-13-45, `!!int x`
        raise HarnessError(f"{path}: a value cannot be read: {one_line(str(err))}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise HarnessError(f"{path}: expected a mapping of keys, got {type(data).__name__}")
    return data


def key_text(path: Sequence[object]) -> str:
    """A key path for messages (`miles.args.lr`), each part cut short: keys come from the file too."""
    return ".".join(one_line(str(part), 60) for part in path)[:240] or "(top level)"
