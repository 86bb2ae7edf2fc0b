"""Miles command lines: read the base run, apply flag overrides, read flag values.

Standard library only: the lab image's entry imports this file as it is, so
the image and the harness build the trainer's argv the same way.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence, Tuple, Union

BASE_RUN_FILE = Path(__file__).with_name("base-run.args")

# A flag's value as an experiment's miles.args holds it (checked by harness.experiments.flags). The functions
# below take any value, as a manifest read back may hold one: another value is one word, its str().
FlagValue = Union[str, int, float, bool, None, Sequence[Union[str, int, float]]]

_NUMBER = re.compile(r"^-\d|^-\.\d")


def is_flag(word: str) -> bool:
    """A word that starts a flag (`--x`), as opposed to a value such as `-1`."""
    return word.startswith("-") and not _NUMBER.match(word) and word != "-"


def read_base_args(path: Path = BASE_RUN_FILE) -> list[str]:
    """The words of an args file: shell-split lines, comments and blank lines skipped."""
    words: list[str] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            words.extend(shlex.split(stripped, comments=True))
        except ValueError as err:
            raise ValueError(f"{path}:{number}: {err}") from None
    return words


@dataclass(frozen=True)
class Flag:
    """One flag as argparse reads it: `--name v1 v2` or `--name=v`, with the words as written."""

    name: str  # with its dashes; "" for words before the first flag (e.g. `python3 train.py`)
    values: Tuple[str, ...]
    words: Tuple[str, ...]


def parse_flags(words: Sequence[str]) -> list[Flag]:
    """Group argv words into flags in order, reading `--flag value` and `--flag=value` alike.

    The one reader of Miles argv: the harness's checks, its dry run and the
    image's entry all see the flags through it.
    """
    groups: list[tuple[str, list[str], list[str]]] = []  # (name, values, words), frozen at the end
    for word in words:
        if is_flag(word):
            name, joined, value = word.partition("=") if word.startswith("--") else (word, "", "")
            groups.append((name, [value] if joined else [], [word]))
        elif groups:
            groups[-1][1].append(word)
            groups[-1][2].append(word)
        else:
            groups.append(("", [word], [word]))
    return [Flag(name, tuple(values), tuple(written)) for name, values, written in groups]


def flag_values(words: Sequence[str]) -> dict[str, list[str]]:
    """Each flag's values (last occurrence wins, as argparse does), keyed by `--name`."""
    return {flag.name: list(flag.values) for flag in parse_flags(words) if flag.name}


def format_value(value: object) -> list[str]:
    """The argv words for one flag value: True -> bare flag, lists -> several words."""
    if value is True:
        return []
    if isinstance(value, (list, tuple)):
        return [_word(v) for v in value]
    return [_word(value)]


def _word(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def apply_overrides(base: Sequence[str], overrides: Mapping[str, object]) -> list[str]:
    """Base argv with flags replaced in place, removed (False/None) or appended.

    Keys are flag names without leading dashes; every occurrence of an
    overridden flag in the base is collapsed into one, at its first position.
    """
    wanted = {f"--{name.lstrip('-')}": value for name, value in overrides.items()}
    out: list[str] = []
    done: set[str] = set()
    for flag in parse_flags(base):
        if flag.name not in wanted:
            out.extend(flag.words)
            continue
        if flag.name in done:
            continue
        done.add(flag.name)
        out.extend(_render(flag.name, wanted[flag.name]))
    for name, value in wanted.items():
        if name not in done:
            out.extend(_render(name, value))
    return out


def _render(flag: str, value: object) -> list[str]:
    if value is False or value is None:
        return []
    return [flag, *format_value(value)]
