"""Trainer argv: base run file, overrides in place, flag values as argparse reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.lab import milesargv


def test_base_run_file_is_read_as_words(tmp_path: Path) -> None:
    args = tmp_path / "run.args"
    args.write_text("# comment\n\n--a 1\n--name 'two words'  # trailing comment\n--flag\n")
    assert milesargv.read_base_args(args) == ["--a", "1", "--name", "two words", "--flag"]


def test_unbalanced_quote_in_base_file_names_the_line(tmp_path: Path) -> None:
    args = tmp_path / "run.args"
    args.write_text("--a 1\n--b 'oops\n")
    with pytest.raises(ValueError, match=r"run.args:2"):
        milesargv.read_base_args(args)


def test_overrides_replace_in_place_remove_and_append() -> None:
    base = ["--a", "1", "--bare", "--list", "x", "y", "--b", "2"]
    out = milesargv.apply_overrides(base, {"a": 5, "bare": False, "list": ["p", "q", "r"], "new": True, "lr": 1e-06})
    assert out == ["--a", "5", "--list", "p", "q", "r", "--b", "2", "--new", "--lr", "1e-06"]
    assert base == ["--a", "1", "--bare", "--list", "x", "y", "--b", "2"]


def test_repeated_base_flag_collapses_to_one() -> None:
    assert milesargv.apply_overrides(["--a", "1", "--a", "2"], {"a": 3}) == ["--a", "3"]


def test_flag_values_last_wins_and_negative_numbers_are_values() -> None:
    words = ["--x", "1", "--y", "-1", "--z", "-0.5", "--x", "2", "--bare"]
    assert milesargv.flag_values(words) == {"--x": ["2"], "--y": ["-1"], "--z": ["-0.5"], "--bare": []}


def test_the_shipped_base_run_has_the_section_1_1_facts() -> None:
    flags = milesargv.flag_values(milesargv.read_base_args())
    assert flags["--rollout-batch-size"] == ["32"]
    assert flags["--n-samples-per-prompt"] == ["8"]
    assert flags["--num-rollout"] == ["12"]
    assert flags["--rm-type"] == ["math"]
    assert flags["--colocate"] == []
    assert "--rollout-max-response-len" in flags
    assert "--dynamic-sampling-filter-path" not in flags


def test_the_equals_form_is_read_like_the_spaced_form() -> None:
    words = ["--a=1", "--b", "2", "--c=x=y", "--bare", "--d=", "--list=p", "q"]
    assert milesargv.flag_values(words) == {
        "--a": ["1"],
        "--b": ["2"],
        "--c": ["x=y"],
        "--bare": [],
        "--d": [""],
        "--list": ["p", "q"],
    }


def test_parse_flags_keeps_the_words_as_written() -> None:
    flags = milesargv.parse_flags(["python3", "train.py", "--a=1", "--b", "2", "3"])
    assert [(f.name, f.values, f.words) for f in flags] == [
        ("", ("python3", "train.py"), ("python3", "train.py")),
        ("--a", ("1",), ("--a=1",)),
        ("--b", ("2", "3"), ("--b", "2", "3")),
    ]


def test_an_override_replaces_a_flag_written_with_equals() -> None:
    assert milesargv.apply_overrides(["--a=1", "--b", "2", "--a=3"], {"a": 5}) == ["--a", "5", "--b", "2"]
    assert milesargv.apply_overrides(["--a=1", "--b=2"], {}) == ["--a=1", "--b=2"]
