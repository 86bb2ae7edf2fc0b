"""Rules on trainer flags that the experiment schema and the loader share: owned flags, abbreviations, conflicts."""

from __future__ import annotations

import math
import re
import shlex
from typing import TYPE_CHECKING, Any, Optional, Sequence

from pydantic import AfterValidator
from typing_extensions import Annotated

from harness.errors import HarnessError
from harness.experiments.yamlfile import one_line, shown
from harness.lab import milesargv
from harness.lab.milesnames import CHECKPOINT_FLAGS, FLAGS, NUM_ROLLOUT_FLAG, ROLLOUT_SEED_FLAG, SEED_FLAG

BASE_RUN_LABEL = "harness/lab/base-run.args"


# Flags the harness sets from `steps` and `seed`; setting them elsewhere would
# make the run name, the seed sweep and the expected step count lie. The checkpoint flags it sets from the
# `checkpoint` block (and `run --resume`): set elsewhere, a checkpoint would go where the harness does not verify
# it, or a resume load what the harness did not choose.
OWNED_FLAGS = {
    NUM_ROLLOUT_FLAG: "steps",
    SEED_FLAG: "seed",
    ROLLOUT_SEED_FLAG: "seed",
    **{flag: "checkpoint" for flag in CHECKPOINT_FLAGS},
}
OWNER_HINTS = {"checkpoint": "use the experiment's `checkpoint` block (and `harness run --resume` to load)"}


FLAG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


# The harness sets these from miles.args / miles.extra_args: set by hand they would bypass every check on flags.
HARNESS_ENV = {"MILES_ARGS": "miles.args", "MILES_EXTRA_ARGS": "miles.extra_args"}


def _flag_name(name: str) -> str:
    if name.startswith("-"):
        raise ValueError(f"flag {shown(name)}: write flag names without leading dashes")
    if not FLAG_NAME.match(name):
        raise ValueError(f"flag {shown(name)}: a flag name is letters, digits, '-', '_' and '.'")
    owner = owned_flag(f"--{name}")
    if owner:
        raise ValueError(f"flag {shown(name)} is set by the harness: {owner}")
    abbreviation = abbreviated_flag(f"--{name}")
    if abbreviation:
        raise ValueError(f"flag {shown(name)}: {abbreviation}")
    return name


# Every trainer flag the harness reads or sets besides the owned ones (harness.lab.milesnames names each and says
# who reads it): set by hand, an abbreviation of one would pass the loader's checks and reach Miles as that flag.
READ_FLAGS = tuple(flag for flag in FLAGS if flag not in OWNED_FLAGS)


HARNESS_FLAGS = (*OWNED_FLAGS, *READ_FLAGS)


FULL_NAME_HINT = "argparse would expand it, unseen by the harness's checks: write the full flag name"


def owned_flag(flag: str) -> Optional[str]:
    """Why `flag` may not be given by hand (it, or an abbreviation argparse would expand to it, is owned)."""
    for owned, key in OWNED_FLAGS.items():
        hint = OWNER_HINTS.get(key, f"use the experiment's `{key}` key")
        if flag == owned:
            return hint
        if len(flag) > 2 and owned.startswith(flag):
            return f"it abbreviates {owned}, which argparse would set; {hint}"
    return None


def abbreviated_flag(flag: str) -> Optional[str]:
    """Why `flag` may not be written so: it is a strict prefix of flags the harness reads or sets, which Miles's
    argparse would expand to one of them (or refuse as ambiguous) while the harness read the flag's other value."""
    if not flag.startswith("--") or len(flag) <= 2 or flag in HARNESS_FLAGS:
        return None  # a full name is taken as it is, even when it begins another flag's name
    longer = [known for known in HARNESS_FLAGS if known.startswith(flag)]
    if not longer:
        return None
    named = " or ".join(longer[:3]) + (f" (and {len(longer) - 3} more)" if len(longer) > 3 else "")
    return f"{flag} abbreviates {named}, which the harness reads or sets; {FULL_NAME_HINT}"


def refused_flag(flag: str) -> Optional[str]:
    """Why a flag (with its dashes) may not be given in an experiment: owned by the harness, or abbreviated."""
    owner = owned_flag(flag)
    if owner and (flag in OWNED_FLAGS or sum(known.startswith(flag) for known in HARNESS_FLAGS) == 1):
        return f"{flag} is set by the harness: {owner}"
    return abbreviated_flag(flag)


def refuse_flags(words: Sequence[str], *, owned: bool = True) -> None:
    """ValueError naming the first flag among `words` that `refused_flag` refuses; with owned=False the owned flags
    written in full pass (a process engine's command may run a trainer bare, with its own argv)."""
    for parsed in milesargv.parse_flags(words):
        why = None if not owned and parsed.name in OWNED_FLAGS else refused_flag(parsed.name)
        if why:
            raise ValueError(one_line(why, 240))


def _flag_value(value: object) -> milesargv.FlagValue:
    words: list[object]
    if value is None or isinstance(value, (bool, int, float, str)):
        words = [value]
    elif isinstance(value, list) and all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in value):
        words = value
    else:
        raise ValueError(
            f"expected a word, a number, true/false/null, or a list of words and numbers (for a flag that takes "
            f"several values), got {shown(value)}"
        )
    for word in words:
        if isinstance(word, float) and not math.isfinite(word):
            raise ValueError(f"{word} is not a finite number: Miles would read the word {word!r} as text, or fail")
        if isinstance(word, str) and milesargv.is_flag(word):
            raise ValueError(f"the value {shown(word)} would be read as a flag; a value may not start with '-'")
    return value


FlagName = Annotated[str, AfterValidator(_flag_name)]


if TYPE_CHECKING:
    FlagValue = milesargv.FlagValue
else:  # pydantic sees Any: nothing is coerced or refused before _flag_value checks the value, as the checker sees it
    FlagValue = Annotated[Any, AfterValidator(_flag_value)]


def split_or_none(text: object) -> Optional[list[str]]:
    try:
        return shlex.split(text) if isinstance(text, str) else None
    except ValueError:
        return None  # refused, without quoting it, by the validation of miles.extra_args


def refuse_conflicts(sources: Sequence[tuple[str, milesargv.Flag]]) -> None:
    """A flag given twice with different values is an error naming both places (the same value twice is harmless)."""
    first: dict[str, tuple[str, milesargv.Flag]] = {}
    for source, flag in sources:
        if not flag.name:
            continue
        if flag.name not in first:
            first[flag.name] = (source, flag)
            continue
        earlier_source, earlier = first[flag.name]
        if _same_values(earlier.values, flag.values):
            continue
        hint = (
            f"set miles.args.{flag.name[2:]} to change a flag of the base run"
            if earlier_source.startswith("the base run")
            else "give it once"
        )
        raise HarnessError(
            f"{source}: {flag.name} is given twice with different values: {_words(flag.values)} here and "
            f"{_words(earlier.values)} at {earlier_source}; {hint}"
        )


def _same_values(a: Sequence[str], b: Sequence[str]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            if float(x) != float(y):
                return False
        except ValueError:
            return False
    return True


def _words(values: Sequence[str]) -> str:
    return one_line(shlex.join(values), 60) if values else "(no value)"
