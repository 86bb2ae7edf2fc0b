"""Every run's step rows as one tidy table: `run`, `experiment`, `seed`, `simulated`, then the row's columns.

One row per step of every run, `simulated` true for a run made by the
simulator (never to be read as a GB10's), then the columns of the summary's step rows
(docs/summary.md) with their JSON names; null stays null (an empty cell in
CSV). Parquet keeps the types (integers that may be null are nullable
int64, `clean` a nullable boolean) and needs pyarrow (`make setup` installs
it, as the `export` extra); CSV needs nothing more. Both are written whole or
not at all. In CSV, text that a spreadsheet program would read as a formula
is prefixed with `'` (`csv_cell`).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING

from harness.capture.files import write_bytes_atomic
from harness.errors import HarnessError
from harness.summary.document import FLOAT_ROW_KEYS, ROW_KEYS, SummaryDocument

if TYPE_CHECKING:
    from harness.jsontypes import JSONValue

FORMATS = ("parquet", "csv")
RUN_COLUMNS = ("run", "experiment", "seed", "simulated")
COLUMNS = RUN_COLUMNS + ROW_KEYS
FLOAT_COLUMNS = frozenset(FLOAT_ROW_KEYS)
BOOL_COLUMNS = frozenset({"simulated", "complete", "clean"})
TEXT_COLUMNS = frozenset({"run", "experiment", "reward_source"})
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what spreadsheet programs read as the start of a formula
PYARROW_HINT = (
    "parquet needs pyarrow: `make setup` installs it (or pip install 'miles-gb10-lab[export]'); "
    "--format csv needs nothing more"
)


def default_export_path(summary_dir: Path, fmt: str) -> Path:
    """`<summary dir>/steps.<format>`."""
    return Path(summary_dir) / f"steps.{fmt}"


def tidy_columns(document: SummaryDocument) -> dict[str, list[JSONValue]]:
    """The table as columns: every run's rows one after the other, runs in the document's order."""
    out: dict[str, list[JSONValue]] = {name: [] for name in COLUMNS}
    for name, run in document.runs.items():
        count = len(run.steps)
        out["run"] += [name] * count
        out["experiment"] += [run.experiment] * count
        out["seed"] += [run.seed] * count
        out["simulated"] += [run.made_by_simulator] * count  # a simulated number is never read as a GB10's
        for key, column in zip(ROW_KEYS, run.steps.columns()):
            out[key] += column
    return out


def export_steps(document: SummaryDocument, path: Path, fmt: str) -> Path:
    """Write the table as `fmt` (parquet or csv) to `path`; returns the path."""
    if fmt not in FORMATS:
        raise HarnessError(f"unknown export format {fmt!r}: one of {', '.join(FORMATS)}")
    columns = tidy_columns(document)
    data = _parquet(columns) if fmt == "parquet" else _csv(columns)
    path = Path(path)
    write_bytes_atomic(path, data)
    return path


def _parquet(columns: dict[str, list[JSONValue]]) -> bytes:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise HarnessError(PYARROW_HINT) from None

    def kind(name: str) -> object:  # a pyarrow DataType (pyarrow has no type stubs)
        if name in TEXT_COLUMNS:
            return pa.string()
        if name in BOOL_COLUMNS:
            return pa.bool_()
        if name in FLOAT_COLUMNS:
            return pa.float64()
        return pa.int64()

    schema = pa.schema(
        [pa.field(name, kind(name), nullable=name not in ("run", "step", "complete")) for name in COLUMNS]
    )
    table = pa.Table.from_pydict(columns, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def csv_cell(value: JSONValue) -> JSONValue:
    """A cell as CSV holds it: text a spreadsheet program would read as a formula is prefixed with `'`.

    OWASP's CSV-injection guidance: a cell that begins with `=`, `+`, `-`, `@`,
    a tab or a carriage return (a run directory named `=HYPERLINK(...)`) is
    prefixed with a single quote, so it is read as text; the csv module quotes
    the cell and doubles its quotes. Numbers are numbers (a reward of -0.5
    stays -0.5): only text is prefixed.
    """
    if isinstance(value, str) and value[:1] in FORMULA_STARTS:
        return "'" + value
    return value


def _csv(columns: dict[str, list[JSONValue]]) -> bytes:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(("" if value is None else csv_cell(value) for value in row) for row in zip(*columns.values()))
    return text.getvalue().encode("utf-8")
