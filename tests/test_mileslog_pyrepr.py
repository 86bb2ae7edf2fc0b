"""The safe reader of Python dict reprs: what Miles prints, read without eval."""

from __future__ import annotations

import ast
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.mileslog.pyrepr import MAX_DEPTH, ReprError, parse_dict_repr, parse_repr


def test_reads_a_typical_metrics_dict() -> None:
    text = (
        "{'perf/rollout_time': 58.21, 'rollout/dynamic_filter/drop_zero_std_1': 12, "
        "'train/lr-pg_0': 1e-06, 'flag': True, 'none': None, 'name': 'grpo'}"
    )
    value, end = parse_dict_repr(text)
    assert end == len(text)
    assert value == {
        "perf/rollout_time": 58.21,
        "rollout/dynamic_filter/drop_zero_std_1": 12,
        "train/lr-pg_0": 1e-06,
        "flag": True,
        "none": None,
        "name": "grpo",
    }
    assert type(value["rollout/dynamic_filter/drop_zero_std_1"]) is int


def test_bare_nan_and_infinities_which_literal_eval_rejects() -> None:
    text = "{'a': nan, 'b': inf, 'c': -inf}"
    with pytest.raises(ValueError):
        ast.literal_eval(text)
    value, _ = parse_dict_repr(text)
    assert math.isnan(value["a"]) and value["b"] == math.inf and value["c"] == -math.inf


def test_numpy_2_scalars_become_python_numbers() -> None:
    value, _ = parse_dict_repr(
        "{'f': np.float64(0.5), 'i': np.int64(3), 'n': np.float64(nan), "
        "'g': np.float32(-inf), 'b': np.True_, 's': np.str_('x'), 'bb': np.bool_(False)}"
    )
    assert value["f"] == 0.5 and type(value["f"]) is float
    assert value["i"] == 3 and type(value["i"]) is int
    assert math.isnan(value["n"]) and value["g"] == -math.inf
    assert value["b"] is True and value["bb"] is False and value["s"] == "x"


def test_numpy_int_of_a_float_is_an_error_not_a_rounded_guess() -> None:
    with pytest.raises(ReprError, match="np.int64 of float"):
        parse_dict_repr("{'a': np.int64(0.5)}")


def test_nested_values_escapes_and_tuples() -> None:
    value, _ = parse_dict_repr(
        "{'d': {'x': [1, 2.5, (3,)]}, 'q': \"it's\", 'e': 'a\\'b\\n', 'u': '\\u00e9', 't': (1, 2), 'p': (7)}"
    )
    assert value == {"d": {"x": [1, 2.5, [3]]}, "q": "it's", "e": "a'b\n", "u": "é", "t": [1, 2], "p": 7}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{'a': 1, 'b': 2", "payload ends early"),  # a cut line
        ("{'perf/rollout_ti", "string not closed"),
        ("{'a': <object object at 0x7f>}", "unexpected character '<'"),
        ("{'a': foo}", "unknown name 'foo'"),
        ("{'a' 1}", "expected ':'"),
        ("{'a': 1 'b': 2}", "expected ',' or '}'"),
        ("{'a': 1,, 'b': 2}", "unexpected ','"),
        ("{[1]: 2}", "unexpected '['"),  # a key must be a plain value
        ("{'a': __import__('os')}", "unknown name"),
        ("{'a': " + "9" * 5000 + "}", "number too long"),
    ],
)
def test_unreadable_payloads_say_why(text: str, reason: str) -> None:
    with pytest.raises(ReprError) as caught:
        parse_dict_repr(text)
    assert reason in str(caught.value)


def test_nesting_is_bounded_instead_of_exhausting_the_stack() -> None:
    with pytest.raises(ReprError, match="nested too deep"):
        parse_repr("[" * 100_000)
    value, _ = parse_repr("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    assert isinstance(value, list)


def test_not_a_dict() -> None:
    with pytest.raises(ReprError, match="not a dict"):
        parse_dict_repr("[1, 2]")


def test_stops_at_the_closing_brace_and_reports_where() -> None:
    text = "{'a': 1} [repeated 2x across cluster]"
    value, end = parse_dict_repr(text)
    assert value == {"a": 1} and text[end:] == " [repeated 2x across cluster]"


def test_a_one_megabyte_dict_reads_in_linear_time() -> None:
    original = {f"rollout/key_{i}": i * 0.25 for i in range(60_000)}
    text = repr(original)
    assert len(text) > 1_000_000
    value, end = parse_dict_repr(text)
    assert value == original and end == len(text)


scalars = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=15), values, max_size=12))
def test_reads_back_whatever_repr_prints(original: dict) -> None:
    value, end = parse_dict_repr(repr(original))
    assert value == original
    assert end == len(repr(original))


@given(
    st.dictionaries(
        st.text(alphabet=st.characters(blacklist_characters="'\\\n"), max_size=15),
        st.one_of(
            st.integers(),
            st.floats(),
            st.booleans(),
            st.none(),
            st.text(alphabet=st.characters(blacklist_characters="'\\\n"), max_size=10),
        ),
        max_size=12,
    )
)
def test_flat_fast_path_reads_what_the_general_reader_reads(original: dict) -> None:
    text = repr(original)
    fast, fast_end = parse_dict_repr(text)
    general, general_end = parse_repr(text)
    assert fast_end == general_end == len(text)
    assert repr(fast) == repr(general)  # repr: nan == nan, and 1 vs 1.0 vs True stay apart


@given(st.text(max_size=200))
def test_any_text_either_parses_or_raises_repr_error(text: str) -> None:
    try:
        parse_repr(text)
    except ReprError:
        pass


pieces = st.sampled_from(
    [
        "{",
        "}",
        "[",
        "]",
        "(",
        ")",
        ", ",
        ": ",
        ",",
        " ",
        "'a'",
        "'b'",
        '"c"',
        "'q\"'",
        "'t\\'s'",
        "'\\\\/'",
        "1",
        "-2",
        "3.5",
        "1e5",
        "1E+400",
        "007",
        "-0",
        "True",
        "False",
        "None",
        "nan",
        "-inf",
        "null",
        "true",
        "false",
        "NaN",
        "Infinity",
        "np.float64(1.0)",
        "'null'",
        "\t",
        "9223372036854775808",
        "-18446744073709551617",
        "123456789012345678901234567890",
        "1e400",
        "9.3e18",
    ]
)


@given(st.lists(pieces, max_size=40).map(lambda parts: "{" + "".join(parts)))
def test_every_fast_path_reads_what_the_general_reader_reads(text: str) -> None:
    def read(reader) -> tuple:  # noqa: ANN001
        try:
            value, end = reader(text)
        except ReprError:
            return ("error",)
        return (repr(value), end) if isinstance(value, dict) else ("error",)

    assert read(parse_dict_repr) == read(parse_repr)


def test_json_like_payloads_that_python_reads_otherwise() -> None:
    # JSON words and quotes are not Python's: these never take the JSON shortcut.
    assert parse_dict_repr("{'a': 'x', 'b': [1, {'c': 2.5}]}") == ({"a": "x", "b": [1, {"c": 2.5}]}, 32)
    with pytest.raises(ReprError):
        parse_dict_repr("{'a': null}")
    assert parse_dict_repr("{'a': '\", \"b\": \"c'}")[0] == {"a": '", "b": "c'}
    nested = "{'a': " + "[" * 70 + "]" * 70 + "}"
    with pytest.raises(ReprError, match="nested too deep"):
        parse_dict_repr(nested)


@pytest.mark.parametrize(
    "number", ["9223372036854775807", "9223372036854775808", "18446744073709551616", "-9223372036854775809", "7" * 40]
)
def test_integers_beyond_64_bits_read_as_the_integers_they_are(number: str) -> None:
    # The JSON shortcut's fastest decoder reads such an integer as a float: the text goes to one that does not.
    payload = f"{{'a': {number}, 'b': [0.5, {number}], 'c': 'x', 'd': 2.5}}"

    value, end = parse_dict_repr(payload)

    assert value == {"a": int(number), "b": [0.5, int(number)], "c": "x", "d": 2.5} and end == len(payload)
    assert type(value["a"]) is int and type(value["b"][1]) is int  # type: ignore[index]


def test_a_payload_with_text_after_it_ends_where_its_dict_ends() -> None:
    payload = "{'a': 1.5, 'b': [2]}"

    for after in ("", "  ", " \t", " [repeated 2x across cluster]", " {'c': 3}"):
        assert parse_dict_repr("x: " + payload + after, 3) == ({"a": 1.5, "b": [2]}, 3 + len(payload))
