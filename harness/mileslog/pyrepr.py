"""A safe reader for the Python `repr` of a dict, as Miles prints its metrics.

Never `eval`: a small tokenizer and a recursive-descent reader accept exactly
the literals a metrics dict can hold and nothing else:

- strings in single or double quotes with Python escapes;
- integers and floats (`1e-06`), bare `nan`, `inf` and `-inf` (which
  `ast.literal_eval` rejects);
- `True`, `False`, `None`;
- numpy scalars as numpy 2 prints them: `np.float64(0.5)`, `np.int64(3)`,
  `np.float32(nan)`, `np.True_`, `np.str_('x')` (read as plain Python values);
- nested dicts, lists and tuples (a tuple is read as a list).

Two shortcuts read the common payloads faster and exactly as the reader does
(tests pin both): a dict that reads the same as JSON once its quotes are
swapped goes through a C JSON decoder (orjson where the payload ends its text, else
the json module), and a flat dict of scalars through
one regular expression.

Anything else raises `ReprError` with the column where reading stopped, so a
cut or garbled payload is reported, never guessed. Nesting is limited to
`MAX_DEPTH` levels so hostile input cannot exhaust the stack. The token
patterns have no nested quantifiers, so a 1 MB payload reads in linear time.
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Collection, NoReturn, TypeAlias, Union

import orjson

MAX_DEPTH = 64

# What the reader gives back. A dict key is a scalar (the reader refuses a list, dict or tuple there);
# a tuple is read as a list; numpy scalars as the Python values they hold.
PyScalar: TypeAlias = Union[None, bool, int, float, str]
PyValue: TypeAlias = Union[PyScalar, list["PyValue"], dict[PyScalar, "PyValue"]]
PyDict: TypeAlias = dict[PyScalar, "PyValue"]

# One token, after optional whitespace. Alternatives are tried in order; the
# string patterns use the "unrolled loop" form (linear, no backtracking).
_TOKEN = re.compile(
    r"""[ \t]*(?:
      (?P<str>'[^'\\\n]*(?:\\.[^'\\\n]*)*'|"[^"\\\n]*(?:\\.[^"\\\n]*)*")
     |(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
     |(?P<name>-?[A-Za-z_][A-Za-z0-9_.]*)
     |(?P<punct>[][{}(),:])
    )""",
    re.VERBOSE,
)

_NAMES: dict[str, PyScalar] = {
    "True": True,
    "False": False,
    "None": None,
    "nan": math.nan,
    "-nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "np.True_": True,
    "np.False_": False,
    "np.nan": math.nan,
    "np.inf": math.inf,
    "-np.inf": -math.inf,
}

_NP_FLOAT = {"float16", "float32", "float64", "float128", "longdouble", "half", "single", "double"}
_NP_INT = {
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "intp", "uintp", "intc", "uintc", "longlong", "ulonglong", "long", "ulong",
}  # fmt: skip
_NP_BOOL = {"bool_", "bool"}
_NP_STR = {"str_"}


# Fast path for the common case: a flat dict of scalars printed exactly as
# `repr` prints it (`{'k': v, 'k2': v2}`). It reads the same values as the
# general reader (a test pins that); anything it does not cover falls back.
_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_FLAT_ITEM = (
    r"'([^'\\\n]*)': (?:'([^'\\\n]*)'|(" + _NUMBER + r")|(True|False|None|nan|inf|-inf)"
    r"|np\.(float64|float32|int64|int32)\((" + _NUMBER + r"|nan|inf|-inf)\))"
)
_FLAT_DICT = re.compile(r"\{(?:" + _FLAT_ITEM + r", )*" + _FLAT_ITEM + r"\}|\{\}")
_FLAT_ITEMS = re.compile(_FLAT_ITEM)


class ReprError(ValueError):
    """A payload that is not a readable Python literal; `column` is 0-based."""

    def __init__(self, reason: str, column: int) -> None:
        super().__init__(f"{reason} at column {column}")
        self.reason = reason
        self.column = column


def parse_repr(text: str, start: int = 0) -> tuple[PyValue, int]:
    """Read one Python literal at `text[start:]`; return it and the index just past it.

    Raises `ReprError` when the text is not a literal this reader accepts.
    """
    return _Reader(text).value(start, 0)


def parse_dict_repr(text: str, start: int = 0) -> tuple[PyDict, int]:
    """Like `parse_repr`, but the literal must be a dict."""
    as_json = _json_dict(text, start)
    if as_json is not None:
        return as_json
    flat = _FLAT_DICT.match(text, start)
    if flat is not None:
        try:
            return _flat_items(text, start, flat.end()), flat.end()
        except ValueError:  # e.g. an integer beyond Python's digit limit: let the reader say so
            pass
    value, end = parse_repr(text, start)
    if not isinstance(value, dict):
        raise ReprError("not a dict", start)
    return value, end


# Fastest path: most metric dicts hold only strings without quotes or escapes, numbers and
# nested lists/dicts, which read the same as JSON once `'` becomes `"` (a length-preserving
# swap, so the end index carries over). Text that could read differently is left to the
# paths below: any `"` or backslash, more brackets than MAX_DEPTH, and the words only JSON
# reads (`NaN`, `Infinity`: refused as the decoder meets them; `null`, `true`, `false`: the
# only way a None or a bool comes out of it, so one in what it read sends the text on).
class _JSONOnlyWord(ValueError):
    pass


def _refuse(word: str) -> NoReturn:
    raise _JSONOnlyWord(word)


_JSON_DECODE = json.JSONDecoder(parse_constant=_refuse).raw_decode
_JSON_LEAVES = {int, float, str}
_JSON_CONTAINERS = {dict, list}
_NUMBERS = {int, float}
# orjson reads a payload that runs to the end of its text (as a metric line's does) several times faster than the
# json module, and the same values, but for an integer beyond 64 bits, which it reads as a float: one at least this
# large sends the text to the json module, which reads such integers as integers.
_WIDEST_EXACT = 2.0**63
_JSON_BLANKS = " \t\n\r"


def _json_dict(text: str, start: int) -> tuple[PyDict, int] | None:
    rest = text[start:] if start else text
    if '"' in rest or "\\" in rest or rest.count("[") + rest.count("{") > MAX_DEPTH:
        return None
    swapped = rest.replace("'", '"')
    whole = swapped.rstrip(_JSON_BLANKS)
    if whole.endswith("}"):
        try:
            value = orjson.loads(whole)
        except ValueError:  # text after the payload, or no JSON: the json module says which
            pass
        else:
            if isinstance(value, dict) and _no_json_words(value, orjson_read=True):
                return value, start + len(whole)
    try:
        value, end = _JSON_DECODE(swapped)
    except (ValueError, RecursionError):
        return None
    return (value, start + end) if isinstance(value, dict) and _no_json_words(value) else None


def _no_json_words(value: dict[str, object] | list[object], orjson_read: bool = False) -> bool:
    """True when no None or bool is in what the JSON decoder read (the types checked in C, level by level), nor, in
    what orjson read, a float as large as an integer beyond 64 bits."""
    items: Collection[object] = value.values() if isinstance(value, dict) else value
    types = set(map(type, items))
    if orjson_read and float in types:
        if types <= _NUMBERS:
            if max(map(abs, items)) >= _WIDEST_EXACT:  # type: ignore[arg-type]  # numbers only
                return False
        elif not all(abs(item) < _WIDEST_EXACT for item in items if isinstance(item, float)):
            return False
    if types <= _JSON_LEAVES:
        return True
    if not types <= _JSON_LEAVES | _JSON_CONTAINERS:
        return False
    return all(_no_json_words(item, orjson_read) for item in items if isinstance(item, (dict, list)))


class _Reader:
    __slots__ = ("text", "match")

    def __init__(self, text: str) -> None:
        self.text = text
        self.match = _TOKEN.match

    def token(self, pos: int) -> re.Match[str]:
        m = self.match(self.text, pos)
        if m is None:
            pos = _skip_blank(self.text, pos)
            if pos >= len(self.text):
                raise ReprError("payload ends early (cut line?)", pos)
            if self.text[pos] in "'\"":
                raise ReprError("string not closed (cut line?)", pos)
            raise ReprError(f"unexpected character {self.text[pos]!r}", pos)
        return m

    def value(self, pos: int, depth: int) -> tuple[PyValue, int]:
        m = self.token(pos)
        kind = m.lastgroup
        if kind != "punct":
            return self.scalar(m, depth)
        end = m.end()
        tok = m.group("punct")
        if depth >= MAX_DEPTH:
            raise ReprError("nested too deep", m.start(kind))
        if tok == "{":
            return self.dict_body(end, depth + 1)
        if tok == "[":
            return self.sequence(end, depth + 1, "]")
        if tok == "(":
            items, end, trailing_comma = self.sequence_items(end, depth + 1, ")")
            if len(items) == 1 and not trailing_comma:
                return items[0], end  # a parenthesised value, not a tuple
            return items, end
        raise ReprError(f"unexpected {tok!r}", m.start(kind))

    def scalar(self, m: re.Match[str], depth: int) -> tuple[PyScalar, int]:
        """The number, string or name token `m` (any token but punctuation)."""
        kind = m.lastgroup
        end = m.end()
        if kind == "num":
            tok = m.group("num")
            try:
                if "." in tok or "e" in tok or "E" in tok:
                    return float(tok), end
                return int(tok), end
            except ValueError:  # an integer beyond Python's digit limit
                raise ReprError("number too long", m.start(kind)) from None
        if kind == "str":
            return _unquote(m.group("str"), m.start(kind)), end
        return self.name(m, depth)

    def name(self, m: re.Match[str], depth: int) -> tuple[PyScalar, int]:
        tok = m.group("name")
        end = m.end()
        if tok in _NAMES:
            return _NAMES[tok], end
        prefix, _, kind = tok.rpartition(".")
        if prefix in ("np", "numpy"):
            if kind in _NP_FLOAT or kind in _NP_INT or kind in _NP_BOOL or kind in _NP_STR:
                return self.numpy_scalar(kind, m, depth)
        raise ReprError(f"unknown name {tok[:80]!r}", m.start("name"))

    def numpy_scalar(self, kind: str, m: re.Match[str], depth: int) -> tuple[PyScalar, int]:
        open_paren = self.token(m.end())
        if open_paren.lastgroup != "punct" or open_paren.group("punct") != "(":
            raise ReprError("expected '(' after a numpy type", open_paren.start())
        if depth >= MAX_DEPTH:
            raise ReprError("nested too deep", open_paren.start())
        inner, end = self.value(open_paren.end(), depth + 1)
        close = self.token(end)
        if close.lastgroup != "punct" or close.group("punct") != ")":
            raise ReprError("expected ')' after a numpy value", close.start())
        column = m.start("name")
        if kind in _NP_FLOAT:
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return float(inner), close.end()
        elif kind in _NP_INT:
            if isinstance(inner, int) and not isinstance(inner, bool):
                return inner, close.end()
        elif kind in _NP_BOOL:
            if isinstance(inner, bool):
                return inner, close.end()
        elif isinstance(inner, str):
            return inner, close.end()
        raise ReprError(f"np.{kind} of {type(inner).__name__}", column)

    def dict_body(self, pos: int, depth: int) -> tuple[PyDict, int]:
        result: PyDict = {}
        m = self.token(pos)
        if m.lastgroup == "punct" and m.group("punct") == "}":
            return result, m.end()
        while True:
            if m.lastgroup == "punct":  # keys are plain values: no list, dict or tuple
                raise ReprError(f"unexpected {m.group('punct')!r}", m.start("punct"))
            key, pos = self.scalar(m, depth)
            colon = self.token(pos)
            if colon.lastgroup != "punct" or colon.group("punct") != ":":
                raise ReprError("expected ':' after a key", colon.start(colon.lastgroup or 0))
            result[key], pos = self.value(colon.end(), depth)
            sep = self.token(pos)
            tok = sep.group("punct") if sep.lastgroup == "punct" else None
            if tok == "}":
                return result, sep.end()
            if tok != ",":
                raise ReprError("expected ',' or '}'", sep.start(sep.lastgroup or 0))
            m = self.token(sep.end())
            if m.lastgroup == "punct" and m.group("punct") == "}":
                return result, m.end()

    def sequence(self, pos: int, depth: int, close: str) -> tuple[list[PyValue], int]:
        items, end, _ = self.sequence_items(pos, depth, close)
        return items, end

    def sequence_items(self, pos: int, depth: int, close: str) -> tuple[list[PyValue], int, bool]:
        items: list[PyValue] = []
        m = self.token(pos)
        if m.lastgroup == "punct" and m.group("punct") == close:
            return items, m.end(), False
        while True:
            item, pos = self.value(m.start(), depth)
            items.append(item)
            sep = self.token(pos)
            tok = sep.group("punct") if sep.lastgroup == "punct" else None
            if tok == close:
                return items, sep.end(), False
            if tok != ",":
                raise ReprError(f"expected ',' or {close!r}", sep.start(sep.lastgroup or 0))
            m = self.token(sep.end())
            if m.lastgroup == "punct" and m.group("punct") == close:
                return items, m.end(), True


def _flat_items(text: str, start: int, end: int) -> PyDict:
    result: PyDict = {}
    for key, string, number, name, np_type, np_value in _FLAT_ITEMS.findall(text, start, end):
        if number:
            result[key] = float(number) if "." in number or "e" in number or "E" in number else int(number)
        elif name:
            result[key] = _NAMES[name]
        elif np_type:
            if np_value in _NAMES:
                if np_type.startswith("int"):
                    raise ValueError("np.int of a non-number")
                result[key] = _NAMES[np_value]
            elif np_type.startswith("int"):
                if "." in np_value or "e" in np_value or "E" in np_value:
                    raise ValueError("np.int of a float")
                result[key] = int(np_value)
            else:
                result[key] = float(np_value)
        else:
            result[key] = string
    return result


def _skip_blank(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


def _unquote(token: str, column: int) -> str:
    if "\\" not in token:
        return token[1:-1]
    try:
        # A single, already validated string-literal token: literal_eval only decodes escapes.
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError):
        raise ReprError("bad escape in a string", column) from None
    if not isinstance(value, str):  # pragma: no cover - the token pattern only admits strings
        raise ReprError("not a string", column)
    return value
