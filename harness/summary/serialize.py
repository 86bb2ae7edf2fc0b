"""The summary document as JSON text, and back.

The layout is for people as well as programs: two-space indents, each step
row on one line. Every value is encoded by orjson, which only writes strict
JSON: a run's rows at once, laid one per line only where the encoded text
proves where each row ends (else row by row), so the layout holds whatever a
row or a note contains; everything else an object at a time (each run's
facts, the comparisons, the conditions), indented by orjson. A float that is
not finite is refused, never written as null behind the reader's back (the
summarizer has already turned each one into null with a note).

The text is built from a few pieces a run, joined once: never a piece a
value (orjson's smallest output holds about 4 KB), so the many small runs of
a large capture root cost about what their bytes cost.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional

import orjson

from harness.capture.files import write_bytes_atomic
from harness.capture.reader import Skipped
from harness.errors import ExitCode, HarnessError
from harness.fs.bounded import Unreadable, orjson_reads_as_json, read_bounded
from harness.summary import SCHEMA_ID
from harness.summary.document import FLOAT_ROW_KEYS, RunSummary, StepTable, SummaryDocument

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from harness.jsontypes import JSONObject, JSONValue

MAX_SUMMARY_BYTES = 1 << 30
_INDENT = b"  "
ROWS_LEVEL = 3  # document > runs > <run> > steps
_RUN_LEVEL = 2  # document > runs > <run>
_STEPS_PLACEHOLDER = b'\n  "steps": []'  # a run's own `steps` key, as orjson indents the run alone


def dumps_summary(document: SummaryDocument, encoded_runs: Optional[Mapping[str, bytes]] = None) -> bytes:
    """The document as JSON (UTF-8): indented, one step row per line, strict.

    `encoded_runs`: runs that `encode_run` has already encoded (where they
    were computed, in parallel), by run name; the others are encoded here.
    """
    out: list[bytes] = [b"{\n"]  # a few pieces a run, joined once at the end
    # `decisions` only where a capture root has one: a document without is byte for byte what it was before them
    names = tuple(name for name in _field_names(type(document)) if name != "decisions" or document.decisions)
    for i, name in enumerate(names):
        out.append(_INDENT + orjson.dumps(name) + b": ")
        value = getattr(document, name)
        if name == "runs":
            _write_runs(value, out, encoded_runs or {})
        else:
            out.append(_indented(strict_plain(value, name), 1))
        out.append(b",\n" if i < len(names) - 1 else b"\n")
    out.append(b"}\n")
    return b"".join(out)


def encode_rows(table: StepTable) -> bytes:
    """A run's step rows as `dumps_summary` writes them (between the brackets), checked strict."""
    _check_finite(table)
    return _rows_one_per_line(table.rows(), _INDENT * (ROWS_LEVEL + 1))


def _write_runs(runs: Mapping[str, RunSummary], out: list[bytes], encoded_runs: Mapping[str, bytes]) -> None:
    if not runs:
        out.append(b"{}")
        return
    out.append(b"{\n")
    last = len(runs) - 1
    for i, (name, run) in enumerate(runs.items()):
        out.append(_INDENT * _RUN_LEVEL + orjson.dumps(str(name)) + b": ")
        encoded = encoded_runs.get(name)
        out.append(encoded if encoded is not None else encode_run(run, str(name)))
        out.append(b",\n" if i < last else b"\n")
    out.append(_INDENT + b"}")


_MARKER = _STEPS_PLACEHOLDER.replace(b"\n", b"\n" + _INDENT * _RUN_LEVEL)


def encode_run(run: RunSummary, name: str) -> bytes:
    """One run's object as `dumps_summary` writes it under `runs`: its facts indented by orjson, its rows one per
    line where `steps` stands; ValueError (naming where) for a number that is not finite."""
    names = _field_names(RunSummary)
    if run.lineage is None:  # a run that never resumed is written as it was before lineages
        names = tuple(name for name in names if name != "lineage")
    try:  # `steps` is a marker the rows replace: the run's only key at its own top level called so
        plain = {field_name: _plain(getattr(run, field_name)) if field_name != "steps" else [] for field_name in names}
    except _NotFinite:
        raise _not_finite(run, f"runs.{name}") from None
    encoded = _indented(plain, _RUN_LEVEL)
    if not len(run.steps):
        return encoded
    rows = encode_rows(run.steps)
    cut = encoded.index(_MARKER) + len(_MARKER) - 2  # before the marker's `[]`
    inner, pad = _INDENT * (ROWS_LEVEL + 1), _INDENT * ROWS_LEVEL
    return b"".join([encoded[:cut], b"[\n", inner, rows, b"\n", pad, b"]", encoded[cut + 2 :]])


def _indented(value: object, level: int) -> bytes:
    """orjson's two-space layout, every line after the first moved in by `level` indents.

    A raw newline only ever stands between tokens (a string's own newlines
    are escaped), so shifting every one shifts the layout and nothing else.
    """
    try:
        encoded = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except TypeError:  # an integer beyond 64 bits (an attempt number may be any size): the standard encoder's layout
        encoded = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False).encode()
    return encoded.replace(b"\n", b"\n" + _INDENT * level) if level else encoded


_FIELDS: dict[type[DataclassInstance], tuple[str, ...]] = {}


def _field_names(kind: type[DataclassInstance]) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(spec.name for spec in fields(kind))
    return names


def strict_plain(value: object, where: str = "the document") -> JSONValue:
    """The value as plain JSON data (as `document.to_plain`); ValueError naming where a float is not finite."""
    try:
        return _plain(value)
    except _NotFinite:
        raise _not_finite(value, where) from None


def _not_finite(value: object, where: str) -> ValueError:
    """The error for a value holding a float that is not finite, saying where in it (found again, the slow way)."""
    return ValueError(
        f"not strict JSON: {where}{_path_to_non_finite(value)} is not a finite number "
        "(the summary nulls such values, with a note)"
    )


class _NotFinite(Exception):
    pass


def _plain(value: object) -> JSONValue:
    # The exact types first: a summary of 10,000 runs converts some 400,000 values here.
    if type(value) is float:
        if value - value != 0.0:  # inf - inf and nan - nan are nan: not finite
            raise _NotFinite
        return value
    if type(value) is str or type(value) is int or type(value) is bool or value is None:
        return value
    if type(value) is list or type(value) is tuple:
        return [_plain(item) for item in value]
    if type(value) is dict:
        return {key if type(key) is str else str(key): _plain(item) for key, item in value.items()}
    names = _RECORD_FIELDS.get(type(value))
    if names is not None:  # a dataclass of the document met before (a condition's seed figures: 10,000 of them)
        return {name: _plain(getattr(value, name)) for name in names}
    return _plain_other(value)


# The dataclasses `_plain_other` has turned into objects field by field (never a StepTable, never a Skipped).
_RECORD_FIELDS: dict[type, tuple[str, ...]] = {}


def _plain_other(value: object) -> JSONValue:
    """`_plain` of what is not exactly a JSON type: a subclass of one, a table, a skipped run, a dataclass."""
    if isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if value - value != 0.0:
            raise _NotFinite
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, StepTable):
        _check_finite(value)
        return list(value.rows())
    if isinstance(value, Skipped):
        return dict(value.to_dict())
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        names = _RECORD_FIELDS[type(value)] = _field_names(type(value))
        return {name: _plain(getattr(value, name)) for name in names}
    raise TypeError(f"not a value of a summary document: {type(value).__name__}")


def _path_to_non_finite(value: object) -> str:
    """Where in `value` the first float that is not finite is (`.aggregates.reward_mean`), for the error."""
    if type(value) is float:
        return "" if math.isfinite(value) else f" ({value!r})"
    items: list[tuple[str, object]] = []
    if isinstance(value, (list, tuple)):
        items = [(f"[{i}]", item) for i, item in enumerate(value)]
    elif isinstance(value, dict):
        items = [(f".{key}", item) for key, item in value.items()]
    elif is_dataclass(value) and not isinstance(value, (type, StepTable)):
        items = [(f".{name}", getattr(value, name)) for name in _field_names(type(value))]
    for step, item in items:
        try:
            _plain(item)
        except _NotFinite:
            return step + _path_to_non_finite(item)
    return ""


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


SMALL_TABLE = 64  # rows below which the check is a plain loop (numpy's set-up costs more)


def _check_finite(table: StepTable) -> None:
    """orjson would write NaN as null: refuse it instead (the summarizer has nulled such values, with a note)."""
    if len(table) < SMALL_TABLE:
        for key in FLOAT_ROW_KEYS:
            for value in getattr(table, key):
                if value is None:
                    continue
                if type(value) not in (float, int, bool):
                    raise ValueError(f"a step row's {key} holds a value that is not a number")
                if not math.isfinite(value):
                    raise ValueError(_NOT_FINITE.format(key=key))
        return
    import numpy as np

    for key in FLOAT_ROW_KEYS:
        column = getattr(table, key)
        try:
            values = np.array(column, dtype=np.float64)  # null -> NaN
        except (TypeError, ValueError):
            raise ValueError(f"a step row's {key} holds a value that is not a number") from None
        if np.isinf(values).any() or int(np.isnan(values).sum()) != column.count(None):
            raise ValueError(_NOT_FINITE.format(key=key))


_NOT_FINITE = "not strict JSON: a step row's {key} is not a finite number (the summary nulls such values, with a note)"


def write_summary(document: SummaryDocument, out: Path, encoded_runs: Optional[Mapping[str, bytes]] = None) -> Path:
    """Write the document atomically (temporary file, then rename); returns the path."""
    out = Path(out)
    write_bytes_atomic(out, dumps_summary(document, encoded_runs))
    return out


def _not_json(word: str) -> None:
    raise ValueError(f"{word} is not JSON")


def load_summary(path: Path) -> SummaryDocument:
    """Read a summary back, typed; HarnessError (one line) when it is missing, unreadable or not this schema."""
    path = Path(path)
    try:
        raw = read_bounded(path, MAX_SUMMARY_BYTES)
        # Strict both ways (no NaN or Infinity); an integer past 64 bits (an attempt number) read as one.
        data = orjson.loads(raw) if orjson_reads_as_json(raw) else json.loads(raw, parse_constant=_not_json)
    except FileNotFoundError:
        raise HarnessError(f"no summary at {path}: run `harness summarize` first", ExitCode.NOT_FOUND) from None
    except RecursionError:
        raise HarnessError(f"cannot read the summary {path}: nested too deeply") from None
    except (Unreadable, ValueError) as err:
        raise HarnessError(f"cannot read the summary {path}: {err}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_ID:
        raise HarnessError(f"{path} is not a {SCHEMA_ID} summary")
    try:
        return SummaryDocument.from_dict(data)
    except ValueError as err:
        raise HarnessError(f"{path} is not a readable {SCHEMA_ID} summary: {err}") from None
