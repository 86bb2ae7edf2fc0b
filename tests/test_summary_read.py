"""The summary's fast read of metrics.jsonl (orjson, times as one column) reads exactly what the stdlib reads.

The reference below is the reader as it was, line by line with the standard
json module; the fast path must give the same records and the same notes, in
the same order, for every kind of line a capture can hold.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from harness.capture.columns import loads_line, read_metrics_columns, read_pause_windows
from harness.capture.reader import read_capture
from harness.fs.bounded import iter_jsonl, loads_json, orjson_reads_as_json
from harness.times import parse_time_us


def reference(path: Path) -> tuple[list[tuple], list[str]]:
    """metrics.jsonl read line by line with the stdlib: (step, complete, ends, metrics, line) and the notes."""
    notes: list[str] = []
    by_step: dict[int, tuple] = {}
    non_finite: dict[str, list[int]] = {}
    for number, obj in iter_jsonl(path, notes, loads=loads_json):
        step = obj.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            notes.append(f"{path.name} line {number}: no integer step: skipped")
            continue
        metrics = obj.get("metrics")
        if not isinstance(metrics, dict):
            notes.append(f"{path.name} line {number}: step {step} has no metrics object: read as empty")
            metrics = {}
        times = []
        for key in ("t_rollout_end", "t_step_end"):
            value = obj.get(key)
            micros = parse_time_us(value) if value is not None else None
            if value is not None and micros is None:
                notes.append(f"{path.name} line {number}: {key} {value!r} is not an RFC 3339 time: ignored")
            times.append(micros)
        complete = obj.get("complete")
        if not isinstance(complete, bool):
            notes.append(f"{path.name} line {number}: step {step} has no boolean 'complete': read as incomplete")
            complete = False
        said = obj.get("non_finite")
        if isinstance(said, dict):
            for key, what in said.items():
                non_finite.setdefault(f"{key} ({what})", []).append(step)
        if step in by_step:
            notes.append(f"{path.name}: step {step} on lines {by_step[step][-1]} and {number}: the last is used")
        by_step[step] = (step, complete, *times, metrics, number)
    for what, steps in non_finite.items():
        shown = ", ".join(str(s) for s in steps[:10]) + (f" and {len(steps) - 10} more" if len(steps) > 10 else "")
        notes.append(f"{path.name}: {what} in the log at step {shown}: read as null")
    return [by_step[step] for step in sorted(by_step)], notes


def fast(path: Path) -> tuple[list[tuple], list[str]]:
    notes: list[str] = []
    columns = read_metrics_columns(path, notes)
    return list(
        zip(
            columns.step,
            columns.complete,
            columns.t_rollout_end_us,
            columns.t_step_end_us,
            columns.metrics,
            columns.line,
        )
    ), notes


def line(step: object, end: object = "2026-11-29T08:00:10Z", **extra: object) -> str:
    return json.dumps(
        {
            "step": step,
            "complete": True,
            "t_rollout_end": end,
            "t_step_end": None,
            "metrics": {"perf/rollout_time": 1.5},
            **extra,
        }
    )


LINES = [
    line(0),
    line(1, "2026-11-29T08:00:20.123456789Z"),
    '{"step": 2, "complete": true, "t_rollout_end": null, "metrics": {"perf/rollout_time": NaN, "x": Infinity}}',
    '{"step": 3, "complete": true, "metrics": {"big": 18446744073709551615, "huger": 1%s, "e": 1e400}}' % ("0" * 400),
    line(4, "2026-13-01T00:00:00Z"),
    line(5, "yesterday"),
    line(6, 12345),
    line(True),
    line("7"),
    "[" * 100_000,
    "[1, 2]",
    "{not json",
    "",
    line(0, "2026-11-29T08:00:30+01:00"),  # step 0 again: the last line wins, with a note
    json.dumps({"step": 8, "complete": "yes", "metrics": []}),
    line(9, non_finite={"perf/rollout_time": "nan"}),
    '{"step": 10, "complete": true, "metrics": {"s": "\\ud800"}}',  # a lone surrogate: orjson refuses it
    '{"step": 11, "metrics": {"a": 1, "a": 2}}',
    line(12) + "   ",
    line(13)[:-5],  # cut short at the end of the file
]


def test_the_fast_read_equals_the_stdlib_read_line_for_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(LINES))
    expected, expected_notes = reference(path)
    got, got_notes = fast(path)
    assert got == expected
    assert got_notes == expected_notes
    assert [row[0] for row in got] == [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12]
    assert len(got_notes) > 8  # the bad lines were seen as bad


def test_many_fixed_width_times_are_parsed_as_a_column_with_the_same_answers(tmp_path):
    path = tmp_path / "metrics.jsonl"
    stamps = [f"2026-11-29T08:{m:02d}:{s:02d}.{s * 7919 % 1000000:06d}Z" for m in range(5) for s in range(60)]
    stamps[17] = "2026-02-30T08:00:00.000000Z"  # no such day: a note, as line by line
    path.write_text("".join(line(i, stamp) + "\n" for i, stamp in enumerate(stamps)))
    assert fast(path) == reference(path)


def test_a_file_as_the_harness_writes_it_takes_the_column_path_with_the_same_answers(tmp_path):
    path = tmp_path / "metrics.jsonl"
    order = [3, 1, 2, 0, 5, 4] * 20
    path.write_text(
        "".join(line(n + 6 * (i // 6), f"2026-11-29T08:00:{i % 60:02d}.5Z") + "\n" for i, n in enumerate(order))
    )
    got, got_notes = fast(path)
    assert (got, got_notes) == reference(path)
    assert [row[0] for row in got] == list(range(120)) and got_notes == []


def reference_pauses(path: Path) -> tuple[list, list[str]]:
    """pauses.jsonl read line by line with the stdlib (the reader as it was)."""
    notes: list[str] = []
    by_start: dict[int, tuple] = {}
    for number, obj in iter_jsonl(path, notes, loads=loads_json):
        start = parse_time_us(obj.get("start"))
        if start is None:
            notes.append(f"{path.name} line {number}: start {obj.get('start')!r} is not an RFC 3339 time: skipped")
            continue
        end_raw = obj.get("end")
        end = parse_time_us(end_raw) if end_raw is not None else None
        if end_raw is not None and end is None:
            notes.append(f"{path.name} line {number}: end {end_raw!r} is not an RFC 3339 time: read as still open")
        reason = obj.get("reason")
        peak = obj.get("peak_c")
        peak_c = float(peak) if isinstance(peak, (int, float)) and not isinstance(peak, bool) else None
        by_start[start] = (start, end, reason if isinstance(reason, str) else "", number, peak_c)
    return [by_start[start] for start in sorted(by_start)], notes


def test_pause_windows_read_fast_equal_the_stdlib_read(tmp_path):
    path = tmp_path / "pauses.jsonl"
    windows = [json.dumps({"start": f"2026-11-29T07:{m:02d}:00Z", "end": None, "reason": "hot"}) for m in range(60)]
    windows += [
        json.dumps(
            {
                "start": f"2026-11-29T07:{m:02d}:00Z",
                "end": f"2026-11-29T07:{m:02d}:30.25Z",
                "reason": "hot",
                "peak_c": 86.0,
            }
        )
        for m in range(0, 60, 2)
    ]
    windows += [
        '{"start": "soon", "end": null}',
        "{torn",
        '{"start": "2026-11-29T09:00:00Z", "end": 5, "reason": 7}',
        '{"start": "2026-11-29T09:01:00Z", "end": NaN}',
    ]
    path.write_text("\n".join(windows) + "\n")
    notes: list[str] = []
    got = [(w.start_us, w.end_us, w.reason, w.line, w.peak_c) for w in read_pause_windows(path, notes)]
    assert (got, notes) == reference_pauses(path)
    assert len(got) == 62 and len(notes) == 4


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": 1e400}', "[" * 2000 + "]" * 2000, '{"a": 1' + "0" * 400 + "}"])
def test_a_line_orjson_refuses_is_read_by_the_stdlib_rules(text):
    try:
        expected = loads_json(text.encode())
    except ValueError:
        with pytest.raises(ValueError):
            loads_line(text.encode())
    else:
        assert repr(loads_line(text.encode())) == repr(expected)


def test_read_capture_keeps_the_typed_records(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "metrics.jsonl").write_text(line(1) + "\n" + line(0) + "\n")
    capture = read_capture(run)
    assert [row.step for row in capture.records] == [0, 1] == capture.steps.step
    assert capture.records[0].metrics == {"perf/rollout_time": 1.5} and capture.records[0].line == 2


def test_columns_of_several_keys_equal_one_key_at_a_time(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        "".join(
            json.dumps({"step": i, "complete": True, "metrics": metrics}) + "\n"
            for i, metrics in enumerate([{"a": 1, "b": 2.0}, {"a": 3}, {"b": None, "c": [1]}, {"a": 4, "b": 5, "c": 6}])
        )
    )
    columns = read_metrics_columns(path, [])
    missing = object()
    for keys in (["a"], ["a", "b"], ["c", "zz", "a"], ["zz"], []):
        assert columns.columns(keys, missing) == [columns.column(key, missing) for key in keys]
    every = read_metrics_columns(path, [])
    every.metrics = [m for m in every.metrics if "a" in m]
    assert every.columns(["a"]) == [[1, 3, 4]]


# ---------------------------------------------------------------- the fast JSON reader reads what json reads

_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


@given(value=_JSON_VALUES, encoding=st.sampled_from(["utf-8", "utf-16"]))
def test_a_capture_s_json_is_read_as_the_standard_reader_reads_it(value, encoding):
    data = json.dumps(value).encode(encoding)  # NaN and Infinity as Python writes them, integers beyond 64 bits
    assert repr(loads_json(data)) == repr(json.loads(data))


@given(
    data=st.binary(max_size=40) | st.text(alphabet='{}[]":,0123456789.eE+-ntrufalsNIy \\', max_size=40).map(str.encode)
)
def test_bytes_that_are_not_json_fail_as_the_standard_reader_fails(data):
    try:
        expected = ("value", repr(json.loads(data)))
    except (ValueError, RecursionError):
        expected = ("error", "")
    try:
        got = ("value", repr(loads_json(data)))
    except ValueError:
        got = ("error", "")
    assert got == expected


def test_a_line_with_an_integer_beyond_64_bits_keeps_it_whole():
    """orjson would read it as a float: the one rule of the reader hands it to the standard reader."""
    value = loads_line(b'{"a": 123456789012345678901234567891}')["a"]
    assert type(value) is int and value == 123456789012345678901234567891


def test_a_metrics_file_with_an_integer_beyond_64_bits_keeps_it_whole(tmp_path):
    """The whole-file path reads what the line-by-line path reads: the integer whole, never orjson's float."""
    path = tmp_path / "metrics.jsonl"
    big = 2**70 + 1  # no float is this number
    row = {"step": 0, "complete": True, "t_rollout_end": None, "t_step_end": None, "metrics": {"n": big}}
    path.write_text(json.dumps(row) + "\n")
    [value] = read_metrics_columns(path, []).column("n")
    assert type(value) is int and value == big


_DIGIT_RUN = st.builds(
    lambda before, digits, after: b"a" * before + b"7" * digits + b"\x01" * after,
    st.integers(0, 40),
    st.integers(15, 22),
    st.integers(0, 40),
)


@given(
    st.binary(max_size=80) | st.from_regex(rb"\A[0-9a\x01 ]{0,90}\Z") | _DIGIT_RUN, st.sampled_from([1 << 20, 16, 25])
)
@example(b"a" * 14 + b"7" * 19, 16)  # the run's first digit 18 bytes before the second piece
def test_the_long_digit_check_is_the_regular_expression_s(data, piece):
    """orjson is trusted with a text exactly when no 19 ASCII digits stand in a row (the 0x01 bytes: the check's own
    mark for a digit must not read as one), whether the text is checked whole or a piece at a time."""
    from unittest import mock

    from harness.fs import bounded

    with mock.patch.object(bounded, "_CHECK_BYTES", piece):
        assert orjson_reads_as_json(data) == (re.search(rb"[0-9]{19}", data) is None)


@pytest.mark.parametrize("run", [18, 19, 20])
def test_eighteen_digits_in_a_row_go_to_orjson_and_nineteen_do_not(run):
    data = b'{"a": ' + b"9" * run + b"}"
    assert orjson_reads_as_json(data) == (run < 19)


@pytest.mark.parametrize("cap, whole", [(1 << 20, True), (120, False)])
def test_a_file_that_grew_after_it_was_measured_is_read_to_its_end_or_refused_past_the_cap(
    tmp_path, monkeypatch, cap, whole
):
    """The first read asks for the size measured and a byte more; a file longer than that by then is read on, to
    its end, and refused when it passes the cap."""
    import os
    from types import SimpleNamespace

    from harness.fs import bounded

    path = tmp_path / "status.json"
    data = b'{"state": "running", "pad": "' + b"x" * 200 + b'"}'
    path.write_bytes(data)
    real_fstat = os.fstat

    def measured_before_it_grew(fd):
        found = real_fstat(fd)
        return SimpleNamespace(st_mode=found.st_mode, st_size=40)

    monkeypatch.setattr(bounded.os, "fstat", measured_before_it_grew)
    if whole:
        assert bounded.read_bounded(path, cap) == data
    else:
        with pytest.raises(bounded.Unreadable, match="status.json is too large \\(over the cap of 120 bytes\\)"):
            bounded.read_bounded(path, cap)
