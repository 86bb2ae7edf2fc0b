"""The typed summary document and its JSON: the types match the published schema, the writer is strict and
safe whatever a row or a note holds, and a summary reads back into the same types."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.summary import SCHEMA_FILE
from harness.summary.document import (
    ROW_KEYS,
    Aggregates,
    Comparison,
    ConditionSummary,
    RewardComparison,
    RunSummary,
    SeedComparison,
    SeedSpread,
    SummaryDocument,
)
from harness.summary.serialize import dumps_summary, load_summary, write_summary
from harness.summary.summarize import summarize

DATA = Path(__file__).resolve().parent / "data" / "captures"


@pytest.fixture(scope="module")
def lab_document() -> SummaryDocument:
    return summarize(DATA / "lab")


def schema_properties(name: str) -> set[str]:
    schema = json.loads(SCHEMA_FILE.read_text())
    if name == "document":
        return set(schema["properties"])
    if name == "reward":
        return set(schema["$defs"]["comparison"]["properties"]["reward"]["properties"])
    return set(schema["$defs"][name]["properties"])


@pytest.mark.parametrize(
    "kind, name",
    [
        (SummaryDocument, "document"),
        (RunSummary, "run"),
        (Aggregates, "aggregates"),
        (Comparison, "comparison"),
        (RewardComparison, "reward"),
        (SeedComparison, "seed_comparison"),
        (ConditionSummary, "condition"),
        (SeedSpread, "spread"),
    ],
)
def test_the_types_hold_exactly_the_keys_the_schema_publishes(kind, name):
    assert {f.name for f in dataclasses.fields(kind)} == schema_properties(name)


def test_the_step_row_keys_are_the_schema_s(lab_document):
    assert set(ROW_KEYS) == schema_properties("row")


def test_a_summary_reads_back_into_the_same_document(lab_document, tmp_path):
    path = write_summary(lab_document, tmp_path / "s.json")
    again = load_summary(path)
    assert again == lab_document
    assert dumps_summary(again) == dumps_summary(lab_document)


def test_the_writer_holds_any_text_and_puts_each_row_on_one_line(lab_document):
    document = summarize(DATA / "lab")
    odd = '}, {"step": 1}, {\n"quoted" \\ é ✓ \u2028'
    run = document.runs.pop("plain")
    run.notes.append(odd)
    document.runs[odd] = run
    document.comparisons[0].reward.verdict = odd
    text = dumps_summary(document)
    assert json.loads(text) == document.to_dict()
    row_lines = [line for line in text.decode().splitlines() if line.lstrip().startswith('{"step":')]
    assert len(row_lines) == sum(len(r.steps) for r in document.runs.values())


def test_rows_are_laid_one_per_line_even_holding_what_their_types_forbid(lab_document):
    document = summarize(DATA / "lab")
    steps = document.runs["plain"].steps
    steps.dropped_groups[1] = '}, {"step": 9}, {'
    steps.batches[2] = [{"a": 1}, {"b": 2}]
    text = dumps_summary(document)
    assert json.loads(text) == document.to_dict()
    assert sum(line.lstrip().startswith('{"step":') for line in text.decode().splitlines()) == 4 + 4 * 4


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["aggregates", "row"])
def test_the_writer_refuses_a_number_that_is_not_finite(lab_document, value, where):
    document = summarize(DATA / "lab")
    if where == "aggregates":
        document.runs["plain"].aggregates.reward_mean = value
    else:
        document.runs["plain"].steps.rollout_time_adjusted_s[2] = value
    said = "runs.plain.aggregates.reward_mean" if where == "aggregates" else "rollout_time_adjusted_s"
    with pytest.raises(ValueError, match=f"not strict JSON: .*{said}"):
        dumps_summary(document)


@pytest.mark.parametrize(
    "change, said",
    [
        (lambda d: d["runs"]["plain"]["aggregates"].pop("steps"), "runs.plain.aggregates has no 'steps'"),
        (lambda d: d["runs"]["plain"]["steps"][2].pop("reward"), "runs.plain.steps[2] has no 'reward'"),
        (lambda d: d["runs"]["plain"]["steps"][1].update(step="1"), "runs.plain.steps[1].step is '1'"),
        (lambda d: d["runs"]["plain"].update(filter="yes"), "runs.plain.filter is 'yes': not true or false"),
        (
            lambda d: d["comparisons"][0]["reward"].update(baselines=[]),
            "comparisons[0].reward.baselines is not an object",
        ),
    ],
)
def test_a_summary_that_does_not_fit_is_one_error_naming_the_key(lab_document, tmp_path, change, said):
    document = lab_document.to_dict()
    change(document)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(document))
    with pytest.raises(HarnessError) as raised:
        load_summary(path)
    assert said in raised.value.message and "\n" not in raised.value.message


def test_a_summary_with_nan_or_nested_too_deep_is_one_error(tmp_path):
    for text in ('{"schema": "miles-gb10-lab/1", "x": NaN}', "[" * 100_000):
        path = tmp_path / "s.json"
        path.write_text(text)
        with pytest.raises(HarnessError, match="cannot read the summary"):
            load_summary(path)
