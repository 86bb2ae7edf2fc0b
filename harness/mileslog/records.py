"""What the parser yields: step records, evaluation records, the parsed log."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, TypedDict

from harness.mileslog.derive import DerivedValues
from harness.mileslog.keys import filter_setting, reward_key, reward_reading, rollout_batch_size
from harness.mileslog.pyrepr import PyDict, PyValue

# One step's (or evaluation's) merged keys: the key as Miles printed it, the value as the log said.
Metrics: TypeAlias = dict[str, PyValue]


class _ProblemBase(TypedDict):
    line: int
    reason: str


class Problem(_ProblemBase, total=False):
    """What could not be read on one line; `step` when it concerns a training step."""

    step: int


class _FailureBase(TypedDict):
    kind: Literal["oom", "exception", "missing_filter", "job_failed"]
    line: str
    line_number: int


class Failure(_FailureBase, total=False):
    """What ended the run: an out-of-memory or other exception line, or a `Job '...' failed` line.

    `missing_filter`: the exception says the run's filter path cannot be
    loaded; `reason` then names it ("the image's Miles has no PATH").
    """

    reason: str


class _StepJSONBase(TypedDict):
    step: int
    complete: bool
    t_rollout_end: str | None
    t_step_end: str | None
    metrics: Metrics


class StepJSON(_StepJSONBase, total=False):
    """`StepRecord.to_json()`: a metrics.jsonl line; `derived` and `reward` in `parse-log --json`."""

    non_finite: dict[str, str]
    derived: DerivedValues
    reward: float | None


class _EvalJSONBase(TypedDict):
    step: int
    t: str | None
    metrics: Metrics


class EvalJSON(_EvalJSONBase, total=False):
    """`EvalRecord.to_json()`."""

    non_finite: dict[str, str]
    skipped: str


class ParsedLogJSON(TypedDict):
    """The `parse-log --json` document."""

    steps: list[StepJSON]
    args: Metrics | None
    launch: list[str] | None
    failure: Failure | None
    problems: list[Problem]
    evals: list[EvalJSON]
    lines: int
    filter: bool | None
    reward_key: str
    reward_sources: dict[str, list[int]]
    noise: dict[str, int]


@dataclass
class StepRecord:
    """One training step (rollout id N), merged from every line that belongs to it.

    `metrics` holds the raw keys, untouched, of the rollout-side `perf N`,
    `rollout N`, `multi_turn N` and train-side `perf N` lines, plus the keys
    of the LAST optimizer-step line (`step M`) and the last `critic-step M`
    line of the rollout (earlier ones are in `train_steps` / `critic_steps`,
    one entry per M, Megatron's doubled prints removed). When two lines carry
    the same key with different values the first one is kept and the
    conflict is listed in `problems`. Keys are strings; values are what the
    payload said (`nan`/`inf` stay non-finite floats, numpy scalars become
    Python numbers).

    `t_rollout_end` / `t_step_end` are the Docker timestamps (RFC 3339, UTC,
    microseconds, `Z`) of the rollout-side and train-side `perf N` lines;
    None where the line carried no Docker timestamp or never came.
    `derived` is `derive_step_values(metrics)`.
    """

    step: int
    complete: bool
    t_rollout_end: str | None
    t_step_end: str | None
    metrics: Metrics
    derived: DerivedValues
    train_steps: list[Metrics] = field(default_factory=list)
    critic_steps: list[Metrics] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # numbers of the lines merged into it

    def to_json(self, include_derived: bool = True) -> StepJSON:
        """The per-step shape of `parse-log --json`; without `derived` it is a metrics.jsonl line.

        Strict JSON: a non-finite value (`nan`, `inf`, `-inf`) is written as
        null, and the key with what the log said is listed under `non_finite`.
        """
        metrics, non_finite = strict_json_metrics(self.metrics)
        doc: StepJSON = {
            "step": self.step,
            "complete": self.complete,
            "t_rollout_end": self.t_rollout_end,
            "t_step_end": self.t_step_end,
            "metrics": metrics,
        }
        if non_finite:
            doc["non_finite"] = non_finite
        if include_derived:
            doc["derived"] = self.derived.copy()
        return doc


def strict_json_metrics(metrics: Metrics) -> tuple[Metrics, dict[str, str]]:
    """(metrics with non-finite floats as None, {key: 'nan'|'inf'|'-inf'|'contains nan/inf'})."""
    values = metrics.values()
    if set(map(type, values)) <= _NUMBERS:
        try:
            if math.isfinite(sum(values)):  # type: ignore[arg-type]  # numbers only
                return dict(metrics), {}  # every value finite: a sum of them is (a nan or an inf in it is not)
        except OverflowError:  # an integer too large for a float: looked at one by one
            pass
    clean: Metrics = {}
    non_finite: dict[str, str] = {}
    for key, value in metrics.items():
        if isinstance(value, float) and not math.isfinite(value):
            clean[key], non_finite[key] = None, repr(value)
            continue
        finite = _finite_or_none(value)
        if finite != value:
            non_finite[key] = "contains nan/inf"
        clean[key] = finite
    return clean, non_finite


_NUMBERS = {int, float}


def _finite_or_none(value: PyValue) -> PyValue:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    if isinstance(value, dict):
        nested: PyDict = {k: _finite_or_none(v) for k, v in value.items()}
        return nested
    return value


@dataclass
class EvalRecord:
    """The `eval N` line(s) of rollout id N: evaluation, kept apart from training steps.

    `skipped` is the reason of an `eval N skipped: REASON` line (Miles skipped
    that evaluation); such a record has no metrics unless other lines gave some.
    """

    step: int
    t: str | None  # Docker timestamp of the first eval line, RFC 3339 UTC
    metrics: Metrics
    lines: list[int] = field(default_factory=list)
    skipped: str | None = None

    def to_json(self) -> EvalJSON:
        """Strict JSON, as `StepRecord.to_json`: non-finite values null, listed under `non_finite`."""
        metrics, non_finite = strict_json_metrics(self.metrics)
        doc: EvalJSON = {"step": self.step, "t": self.t, "metrics": metrics}
        if non_finite:
            doc["non_finite"] = non_finite
        if self.skipped is not None:
            doc["skipped"] = self.skipped
        return doc


@dataclass
class ParsedLog:
    """Everything read from one log; `to_json()` is the `parse-log --json` document.

    `failure` is a `Failure` or None. Each problem is `{"line": int, "reason": str}`
    plus `"step": N` when it concerns a training step.
    """

    steps: list[StepRecord]
    evals: list[EvalRecord]
    args: Metrics | None
    launch: list[str] | None
    failure: Failure | None
    problems: list[Problem]
    lines: int
    noise: dict[str, int] = field(default_factory=dict)  # noise lines recognised, by kind (lines.NOISE_KINDS)

    def filter_setting(self) -> tuple[bool | None, str]:
        """(filter on, where that was read): `keys.filter_setting` over the dump and the launch line."""
        return filter_setting(self.args, self.launch)

    def rollout_batch_size(self) -> int | None:
        """B from the dump, else the launch line; None when neither says."""
        return rollout_batch_size(self.args, self.launch)

    def to_json(self) -> ParsedLogJSON:
        """The `parse-log --json` document: each step with its reward by `keys.reward_reading`; `reward_sources`
        lists the steps by where their reward came from (`printed`, `derived`)."""
        filter_on, _ = self.filter_setting()
        batch = self.rollout_batch_size()
        steps = []
        sources: dict[str, list[int]] = {}
        for record in self.steps:
            doc = record.to_json()
            reading = reward_reading(record.metrics, filter_on, batch)
            doc["reward"] = reading.value
            if reading.source is not None:
                sources.setdefault(reading.source, []).append(record.step)
            steps.append(doc)
        return {
            "steps": steps,
            "args": None if self.args is None else dict(self.args),
            "launch": None if self.launch is None else list(self.launch),
            "failure": None if self.failure is None else self.failure.copy(),
            "problems": [problem.copy() for problem in self.problems],
            "evals": [record.to_json() for record in self.evals],
            "lines": self.lines,
            "filter": filter_on,
            "reward_key": reward_key(filter_on),
            "reward_sources": sources,
            "noise": dict(self.noise),
        }
