"""`harness export`: every run's step rows as one tidy table, read back with pandas."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.summary.document import ROW_KEYS
from harness.summary.summarize import summarize

DATA = Path(__file__).resolve().parent / "data" / "captures"
runner = CliRunner()


@pytest.fixture()
def edge_captures(tmp_path: Path) -> Path:
    target = tmp_path / "gpu"
    shutil.copytree(DATA / "edge", target)  # failed, running, simulated and unreadable runs: nulls of every kind
    return target


def pandas():  # imported on use: half a second of import the other worker is spared
    import pandas

    return pandas


def same(a: object, b: object) -> bool:
    pd = pandas()
    missing = lambda v: v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA  # noqa: E731
    if missing(a) or missing(b):
        return missing(a) and missing(b)
    return a == b


def expected_rows(capture_dir: Path) -> list[dict]:
    document = summarize(capture_dir)
    return [
        {"run": name, "experiment": run.experiment, "seed": run.seed, "simulated": run.made_by_simulator, **row}
        for name, run in document.runs.items()
        for row in run.steps.rows()
    ]


@pytest.mark.parametrize("fmt, read", [("parquet", "read_parquet"), ("csv", "read_csv")])
def test_export_writes_one_tidy_table_that_pandas_reads_back(edge_captures, fmt, read):
    result = runner.invoke(app, ["export", "--capture-dir", str(edge_captures), "--format", fmt])
    assert result.exit_code == 0, result.output
    path = edge_captures / "summary" / f"steps.{fmt}"
    assert f"wrote {path}" in result.output
    table = getattr(pandas(), read)(path)
    assert list(table.columns) == ["run", "experiment", "seed", "simulated", *ROW_KEYS]
    rows = expected_rows(edge_captures)
    assert len(table) == len(rows) == 8
    for got, want in zip(table.to_dict("records"), rows):
        assert all(same(got[key], want[key]) for key in want), (got, want)


def test_parquet_keeps_the_types(edge_captures):
    path = edge_captures / "steps.parquet"
    assert runner.invoke(app, ["export", "--capture-dir", str(edge_captures), "--out", str(path)]).exit_code == 0
    table = pandas().read_parquet(path, dtype_backend="numpy_nullable")
    assert str(table["step"].dtype) == "Int64" and str(table["batches"].dtype) == "Int64"
    assert str(table["reward"].dtype) == "Float64" and str(table["clean"].dtype) == "boolean"
    assert str(table["simulated"].dtype) == "boolean"
    # no simulated number passes for a GB10's: the simulated run says so on every row
    assert table.groupby("run")["simulated"].all().to_dict() == {
        "garbled": False,
        "old-filter": False,
        "running": False,
        "tiny-plain": True,
    }
    old_filter = table[table["run"] == "old-filter"]
    assert old_filter["batches"].tolist() == [1, 2, 1]
    assert old_filter["reward"].isna().tolist() == [True, True, False]  # step 2's reward is derived
    assert old_filter["reward_source"].tolist()[2] == "derived" and str(table["reward_source"].dtype) == "string"


def test_export_from_a_published_summary(edge_captures, tmp_path):
    summary = tmp_path / "published" / "s.json"
    assert (
        runner.invoke(
            app, ["summarize", "--capture-dir", str(edge_captures), "--out", str(summary), "--no-figures"]
        ).exit_code
        == 0
    )
    shutil.rmtree(edge_captures)
    result = runner.invoke(app, ["export", "--summary", str(summary), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert len(pandas().read_csv(summary.parent / "steps.csv")) == 8


def test_without_pyarrow_parquet_says_how_to_get_it_in_one_line(edge_captures, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)  # `import pyarrow` now fails
    result = runner.invoke(app, ["export", "--capture-dir", str(edge_captures)])
    assert result.exit_code != 0
    assert "pyarrow" in result.output and "make setup" in result.output and "--format csv" in result.output
    # 3 warnings: a skipped directory, an unreadable status, a comparison across time scales
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1 + 3


def test_an_unknown_format_is_one_error_line(edge_captures):
    result = runner.invoke(app, ["export", "--capture-dir", str(edge_captures), "--format", "xlsx"])
    assert result.exit_code != 0 and "one of parquet, csv" in result.output
