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


RunName = Annotated[str, AfterValidator(check_safe_name)]


ExperimentName = Annotated[str, AfterValidator(check_experiment_name)]


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
