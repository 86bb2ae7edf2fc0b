"""Run and experiment names: safe as directory and container names, and which experiment makes which run."""

from __future__ import annotations

import re

from pydantic import AfterValidator
from typing_extensions import Annotated

from harness.experiments.yamlfile import shown

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


# Directory names the capture tree uses for itself (dot-names are refused by SAFE_NAME).
RESERVED_NAMES = {
    "summary": "the summary's directory in the capture tree",
    "tensorboard": "the TensorBoard event files' directory in the capture tree",
    "wandb": "the offline W&B runs' directory in the capture tree",
    "decisions": "the adaptive comparisons' records' directory in the capture tree (harness decide)",
}


def check_safe_name(name: object) -> str:
    """`name`, when it can be a run's directory and container name; else ValueError."""
    if not isinstance(name, str) or not SAFE_NAME.match(name) or ".." in name:
        raise ValueError(
            f"{shown(name)} is not a safe name (letters, digits, '.', '_', '-'; starts with a letter or digit; "
            "at most 64)"
        )
    if name in RESERVED_NAMES:
        raise ValueError(f"{name!r} is reserved: it is {RESERVED_NAMES[name]}")
    return name


def check_experiment_name(value: object) -> str:
    """`value`, when it can name an experiment file (a name, never a path); else ValueError."""
    if not isinstance(value, str) or not SAFE_NAME.match(value) or ".." in value:
        raise ValueError(
            f"{shown(value)} is not an experiment name: give the stem of a file in the experiments directory "
            "(letters, digits, '.', '_', '-'), never a path"
        )
    return value


# Docker's image reference grammar (github.com/distribution/reference, regexp.go), whole: NAME[:TAG][@DIGEST], the
# NAME an optional registry host (any case, an optional port) and lower-case path components, at most 255 long.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
# (Newer engines also take an IPv6 literal host, `[::1]:5000/x`; older ones refuse it, so the harness does too.)
_HOST = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_NAME = rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>{_NAME})(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?",
    re.ASCII,
)
IMAGE_NAME_MAX = 255


def check_image(image: str) -> str:
    """`image`, when it is a Docker image reference (so never an option such as `--privileged`); else ValueError."""
    match = IMAGE_REFERENCE.fullmatch(image)
    if not match or len(match["name"]) > IMAGE_NAME_MAX:
        raise ValueError(
            f"{shown(image)} is not a Docker image reference: NAME[:TAG][@DIGEST], NAME lower case (after an "
            "optional registry host), e.g. miles-gb10-lab:latest"
        )
    return image


RunName = Annotated[str, AfterValidator(check_safe_name)]


ImageReference = Annotated[str, AfterValidator(check_image)]


ExperimentName = Annotated[str, AfterValidator(check_experiment_name)]


# Miles seeds Python's, NumPy's and torch's generators with its seeds, and NumPy takes 0 to 2**32-1; the harness's
# start at 1 (seed 1 is the run `<name>`, seed k the run `<name>-s<k>`), so a run name grows by at most 11 characters.
SEED_MIN = 1
SEED_MAX = 2**32 - 1
SEED_RANGE = f"seeds are {SEED_MIN} to {SEED_MAX}: Miles seeds NumPy with them, whose seeds are 32-bit"


def check_seed(seed: int) -> int:
    """`seed`, when it is in SEED_RANGE; else ValueError saying the range and why."""
    if not SEED_MIN <= seed <= SEED_MAX:
        raise ValueError(f"{shown(seed)} is out of range: {SEED_RANGE}")
    return seed


Seed = Annotated[int, AfterValidator(check_seed)]


def run_name(name: str, seed: int) -> str:
    """`<name>` for seed 1, `<name>-s<k>` for seed k."""
    return name if seed == 1 else f"{name}-s{seed}"


_SEED_RUN = re.compile(r"^(?P<name>.+)-s(?P<seed>[1-9][0-9]*)$")


def makers_of(run: str) -> list[tuple[str, int]]:
    """Every (experiment name, seed) whose run name is `run`."""
    makers = [(run, 1)]
    match = _SEED_RUN.match(run)
    if match and int(match["seed"]) >= 2:
        makers.append((match["name"], int(match["seed"])))
    return makers
