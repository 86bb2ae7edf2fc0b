"""The summary document as JSON text, and back.

The layout is for people as well as programs: two-space indents, each step
row on one line. Every value is encoded by orjson, which only writes strict
JSON; a run's rows are encoded at once and laid one per line only where the
encoded text proves where each row ends (else row by row), so the layout
holds whatever a row or a note contains. A float that is not finite is
refused, never written as null behind the reader's back (the summarizer has
already turned each one into null with a note).
"""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional

import orjson

from harness.capture.reader import Skipped
from harness.summary import SCHEMA_ID
from harness.summary.document import FLOAT_ROW_KEYS, StepTable, SummaryDocument

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

MAX_SUMMARY_BYTES = 1 << 30
_INDENT = b"  "


ROWS_LEVEL = 3  # document > runs > <run> > steps


def dumps_summary(document: SummaryDocument, encoded_rows: Optional[Mapping[str, bytes]] = None) -> bytes:
    """The document as JSON (UTF-8): indented, one step row per line, strict.

    `encoded_rows`: runs whose rows `encode_rows` has already encoded (where
    they were computed, in parallel), by run name; the others are encoded here.
    """
    out: list[bytes] = []
    ready = {
        id(document.runs[name].steps): data for name, data in (encoded_rows or {}).items() if name in document.runs
    }
    _write(document, 0, out, ready)
    out.append(b"\n")
    return b"".join(out)


def encode_rows(table: StepTable) -> bytes:
    """A run's step rows as `dumps_summary` writes them (between the brackets), checked strict."""
    _check_finite(table)
    return _rows_one_per_line(table.rows(), _INDENT * (ROWS_LEVEL + 1))


def _items(value: object) -> list[tuple[str, object]]:
    """The (key, value) pairs of an object of the document: a dict, a dataclass or a Skipped."""
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, Skipped):
        return list(value.to_dict().items())
    if is_dataclass(value) and not isinstance(value, type):
        return [(spec.name, getattr(value, spec.name)) for spec in fields(value)]
    raise TypeError(f"not an object of a summary document: {type(value).__name__}")


def _is_object(value: object) -> bool:
    return isinstance(value, dict) or hasattr(value, "__dataclass_fields__")


def _scalar(value: object) -> bytes:
    if type(value) is float and not math.isfinite(value):
        raise ValueError(f"not strict JSON: {value!r} (the summary nulls such values, with a note)")
    return orjson.dumps(value)


def _flat(value: object) -> bool:
    """A value written on one line inside a list: a scalar, or an object of scalars."""
    if isinstance(value, StepTable) or isinstance(value, list):
        return False
    if _is_object(value):
        return not any(_is_object(item) or isinstance(item, (list, StepTable)) for _, item in _items(value))
    return True


def _one_line(value: object) -> bytes:
    if _is_object(value):
        return b"{" + b", ".join(orjson.dumps(str(key)) + b": " + _scalar(item) for key, item in _items(value)) + b"}"
    return _scalar(value)


def _write(value: object, level: int, out: list[bytes], ready: Mapping[int, bytes]) -> None:
    pad, inner = _INDENT * level, _INDENT * (level + 1)
    if isinstance(value, StepTable):
        if not len(value):
            out.append(b"[]")
            return
        encoded = ready.get(id(value)) if level == ROWS_LEVEL else None
        if encoded is None:
            _check_finite(value)
            encoded = _rows_one_per_line(value.rows(), inner)
        out += [b"[\n", inner, encoded, b"\n", pad, b"]"]
        return
    if _is_object(value):
        items = _items(value)
        if not items:
            out.append(b"{}")
            return
        out.append(b"{\n")
        for i, (key, item) in enumerate(items):
            out += [inner, orjson.dumps(str(key)), b": "]
            _write(item, level + 1, out, ready)
            out.append(b",\n" if i < len(items) - 1 else b"\n")
        out += [pad, b"}"]
        return
    if isinstance(value, list):
        if not value:
            out.append(b"[]")
        elif len(value) == 1 and not (_is_object(value[0]) or isinstance(value[0], list)):
            out += [b"[", _scalar(value[0]), b"]"]
        elif all(_flat(item) for item in value):
            out += [b"[\n", inner, (b",\n" + inner).join(_one_line(item) for item in value), b"\n", pad, b"]"]
        else:
            out.append(b"[\n")
            for i, item in enumerate(value):
                out.append(inner)
                _write(item, level + 1, out, ready)
                out.append(b",\n" if i < len(value) - 1 else b"\n")
            out += [pad, b"]"]
        return
    out.append(_scalar(value))


def _rows_one_per_line(rows: list[JSONObject], inner: bytes) -> bytes:
    """The rows, comma-separated, one per line.

    Encoded in one orjson call, whose compact output puts exactly `},{`
    between two rows; the rows are cut there only when that is the only place
    it occurs (a row holding such text, which the types do not allow, would
    add more): otherwise row by row.
    """
    encoded = orjson.dumps(rows)
    if encoded.count(b"},{") == len(rows) - 1:
        return encoded[1:-1].replace(b"},{", b"},\n" + inner + b"{")
    return (b",\n" + inner).join(map(orjson.dumps, rows))


def _check_finite(table: StepTable) -> None:
    """orjson would write NaN as null: refuse it instead (the summarizer has nulled such values, with a note)."""
    import numpy as np

    for key in FLOAT_ROW_KEYS:
        column = getattr(table, key)
        try:
            values = np.array(column, dtype=np.float64)  # null -> NaN
        except (TypeError, ValueError):
            raise ValueError(f"a step row's {key} holds a value that is not a number") from None
        if np.isinf(values).any() or int(np.isnan(values).sum()) != column.count(None):
            raise ValueError(
                f"not strict JSON: a step row's {key} is not a finite number "
                "(the summary nulls such values, with a note)"
            )


def write_summary(document: SummaryDocument, out: Path, encoded_rows: Optional[Mapping[str, bytes]] = None) -> Path:
    """Write the document atomically (temporary file, then rename); returns the path."""
    from harness.capture.files import write_bytes_atomic

    out = Path(out)
    write_bytes_atomic(out, dumps_summary(document, encoded_rows))
    return out


def load_summary(path: Path) -> SummaryDocument:
    """Read a summary back, typed; HarnessError (one line) when it is missing, unreadable or not this schema."""
    from harness.capture.bounded import Unreadable, read_bounded
    from harness.errors import ExitCode, HarnessError

    path = Path(path)
    try:
        data = orjson.loads(read_bounded(path, MAX_SUMMARY_BYTES))
    except FileNotFoundError:
        raise HarnessError(f"no summary at {path}: run `harness summarize` first", ExitCode.NOT_FOUND) from None
    except (Unreadable, orjson.JSONDecodeError) as err:
        raise HarnessError(f"cannot read the summary {path}: {err}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_ID:
        raise HarnessError(f"{path} is not a {SCHEMA_ID} summary")
    try:
        return SummaryDocument.from_dict(data)
    except ValueError as err:
        raise HarnessError(f"{path} is not a readable {SCHEMA_ID} summary: {err}") from None
