"""One RFC 3339 parser: the capture reader, the log reader and the log stream read every time alike."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engines.logstream import stamp_to_ns
from harness.mileslog import parse_lines
from harness.times import parse_time_us
from support.properties import examples

EXAMPLES = [
    "2026-11-29T08:00:00Z",
    "2026-11-29T08:00:00.5Z",
    "2026-11-29T08:00:00.891725514Z",  # Docker's nanoseconds
    "2026-11-29T08:00:00.8917255149Z",  # more digits than nanoseconds
    "2026-11-29T09:00:00.25+01:00",
    "2026-11-29T07:00:00-01:00",
    "2026-11-29t08:00:00z",
    "2026-11-29T23:59:60Z",  # a leap second: RFC 3339 allows it, the harness does not count one
    "2026-02-29T00:00:00Z",  # no 29 February in 2026
    "2024-02-29T00:00:00Z",
    "2026-11-29T08:00:00+24:00",  # an offset of a whole day is no offset
    "2026-11-29T08:00:00+01:60",
    "0000-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999999Z",
    "1969-12-31T23:59:59.5Z",  # before the epoch: still truncated towards the past
    "2026-11-29T08:00Z",
    "2026-11-29T08:00:00",
    "2026-11-29T08:00:00.Z",
    "２０２６-11-29T08:00:00Z",  # full-width digits are not digits here
]

digits = st.text(alphabet="0123456789", min_size=1, max_size=2)
stamps = st.builds(
    "{}-{}-{}{}{}:{}:{}{}{}".format,
    st.sampled_from(["2026", "1970", "2000", "2100", "0001", "1969"]),
    st.sampled_from(["01", "02", "11", "12", "13", "00"]),
    st.sampled_from(["01", "28", "29", "30", "31", "32"]),
    st.sampled_from(["T", "t"]),
    digits,
    digits,
    digits,
    st.one_of(st.just(""), st.text(alphabet="0123456789", min_size=0, max_size=12).map(lambda d: "." + d)),
    st.sampled_from(["Z", "z", "+00:00", "+01:00", "-05:30", "+23:59", "+24:00", "-00:60", ""]),
)


def readings(text: str) -> tuple:
    """The microseconds each reader makes of `text` (None where it is not a time)."""
    try:
        stream = stamp_to_ns(text) // 1000
    except ValueError:
        stream = None
    (record,) = parse_lines([f"{text} x.py:1 - perf 0: {{'perf/rollout_time': 1.0}}"]).steps
    log = None if record.t_rollout_end is None else parse_time_us(record.t_rollout_end)
    return parse_time_us(text), log, stream


@pytest.mark.parametrize("text", EXAMPLES)
def test_the_three_readers_agree(text: str) -> None:
    capture, log, stream = readings(text)
    assert capture == log == stream


@settings(max_examples=examples(400), deadline=None)
@given(stamps)
def test_the_three_readers_agree_on_any_stamp(text: str) -> None:
    capture, log, stream = readings(text)
    assert capture == log == stream


# --------------------------------------------------------------------------- harness.times itself

from harness import times  # noqa: E402
from harness.times import format_time_us, parse_time_ns, parse_times_us, split_time_prefix  # noqa: E402


def test_nanoseconds_are_kept_where_a_log_resumes() -> None:
    assert parse_time_ns("1970-01-01T00:00:01.000000001Z") == 1_000_000_001
    assert parse_time_ns("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert parse_time_ns("1970-01-01T01:00:01.5+01:00") == 1_500_000_000
    assert parse_time_ns("1969-12-31T23:59:59.999999999Z") == -1
    assert parse_time_us("1969-12-31T23:59:59.999999999Z") == -1  # truncated towards the past


def test_docker_prefix() -> None:
    assert split_time_prefix("2026-11-29T07:52:40.814948044Z hello world") == (
        parse_time_ns("2026-11-29T07:52:40.814948044Z"),
        "hello world",
    )
    assert split_time_prefix("2026-11-29T07:52:40Z  indented") == (parse_time_ns("2026-11-29T07:52:40Z"), " indented")
    for line in ("2026-11-29 07:52:40Z x", "2026-11-29T07:52:40Zx", "2026-11-29T07:52:40Z", "[2026-11-29 07:52:40] x"):
        assert split_time_prefix(line) == (None, line)


def test_format_is_utc_microseconds_with_z() -> None:
    assert format_time_us(parse_time_us("2026-11-29T08:52:40.8149489+01:00")) == "2026-11-29T07:52:40.814948Z"
    assert format_time_us(-1) == "1969-12-31T23:59:59.999999Z"


@pytest.mark.parametrize(
    "values",
    [
        EXAMPLES,
        [f"2026-11-29T08:00:{s:02d}.{s * 7919:06d}Z" for s in range(60)],
        [
            f"20{y:02d}-{m:02d}-{d:02d}T23:59:59Z"
            for y in (0, 4, 23, 24, 99)
            for m in (1, 2, 12, 13)
            for d in (0, 28, 29, 31)
        ],
        [f"1969-12-31T23:59:59.{'9' * k}Z" for k in range(1, 10)] * 3,
        ["2026-11-29T08:00:00.123456789Z"] * 9
        + ["2026-11-29T08:00:0x.123456789Z", None, 7, "", "2026-11-29T24:00:00.000000001Z"],
    ],
)
def test_many_at_once_equals_one_by_one(values: list, monkeypatch) -> None:
    monkeypatch.setattr(times, "_COLUMNAR_MIN", 1)  # the arrays even for a few values
    assert parse_times_us(values) == [parse_time_us(v) for v in values]


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.one_of(stamps, st.text(max_size=30)), min_size=0, max_size=60))
def test_many_at_once_equals_one_by_one_on_any_column(values: list) -> None:
    before, times._COLUMNAR_MIN = times._COLUMNAR_MIN, 1
    try:
        assert parse_times_us(values) == [parse_time_us(v) for v in values]
    finally:
        times._COLUMNAR_MIN = before


def test_a_long_column_with_a_few_odd_values() -> None:
    t0 = parse_time_us("2026-11-29T08:00:00Z")
    values: list = [format_time_us(t0 + i * 61_123_457) for i in range(5000)]
    values[7], values[99], values[4000] = "2026-11-29T08:00:00.1234567+01:00", None, "2026-02-30T00:00:00.000000Z"
    values[123] = values[123].replace("2", "\uff12", 1)
    assert parse_times_us(values) == [parse_time_us(v) for v in values]
    assert parse_times_us(values)[4000] is None and parse_times_us(values)[5] == t0 + 5 * 61_123_457


def test_format_writes_four_digit_years() -> None:
    assert format_time_us(parse_time_us("0001-01-01T00:00:00Z")) == "0001-01-01T00:00:00.000000Z"
