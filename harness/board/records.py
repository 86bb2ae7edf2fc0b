"""What a run puts on the board: scalars, texts, its hyperparameters and the end of its session (plain data).

Every time here comes from the capture (a step's end, a guard sample's time, the status's times),
never from the clock of the writer, so a run written live and the same run rebuilt from its capture
carry the same records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

HparamValue = Union[str, float, bool]


@dataclass(frozen=True)
class Scalar:
    """One value of one tag at one step; `wall_time` in seconds since the epoch."""

    tag: str
    step: int
    wall_time: float
    value: float


@dataclass(frozen=True)
class Text:
    """One text of one tag at one step (a state change, a pause, the reward's source)."""

    tag: str
    step: int
    wall_time: float
    text: str


@dataclass(frozen=True)
class Hparams:
    """The run's configuration for TensorBoard's hparams plugin, and the tags its table shows as metrics."""

    wall_time: float
    values: dict[str, HparamValue]
    metrics: tuple[str, ...]


@dataclass(frozen=True)
class SessionEnd:
    """The run ended: `state` is its final state (the hparams table's status column)."""

    wall_time: float
    state: str


Record = Union[Scalar, Text, Hparams, SessionEnd]
