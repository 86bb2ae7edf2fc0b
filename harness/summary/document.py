"""The summary document, typed: what `miles-gb10-lab/1` holds (harness/schema/miles-gb10-lab-1.schema.json).

The summarizer builds these types; figures, report, export and the CLI read
them; `serialize` writes and reads them as JSON. Field order is the JSON's
key order. Fields with a default are the schema's extras: a summary written
before them still loads.

A run's step rows are a `StepTable`: one list per row key (the rows of a long
run are 100,000 small records, and columns are what the figures, the
aggregates and the export take). Its numbers are finite by construction (the
summarizer nulls the rest, with a note; JSON read back cannot hold NaN).
"""

from __future__ import annotations

import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, TypeVar

from harness.capture.reader import Skipped

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from harness.jsontypes import JSONObject, JSONValue

T = TypeVar("T")

ROW_KEYS = (
    "step",
    "complete",
    "rollout_time_s",
    "pause_overlap_s",
    "rollout_time_adjusted_s",
    "clean",
    "dropped_groups",
    "dropped_all_right",
    "dropped_all_wrong",
    "batches",
    "zero_std_all_right",
    "zero_std_all_wrong",
    "reward",
    "raw_reward",
    "raw_reward_unfiltered",
    "truncated_ratio",
    "step_time_s",
    # beyond the contract: what the split leaves over, and where the reward came from
    "dropped_other",
    "zero_std_other",
    "reward_source",
)
_EXTRA_ROW_KEYS = ("dropped_other", "zero_std_other", "reward_source")
FLOAT_ROW_KEYS = (
    "rollout_time_s",
    "pause_overlap_s",
    "rollout_time_adjusted_s",
    "reward",
    "raw_reward",
    "raw_reward_unfiltered",
    "truncated_ratio",
    "step_time_s",
)


@dataclass
class StepTable:
    """A run's step rows as columns, sorted by step (docs/summary.md, "The rules")."""

    step: list[int] = field(default_factory=list)
    complete: list[bool] = field(default_factory=list)
    rollout_time_s: list[Optional[float]] = field(default_factory=list)
    pause_overlap_s: list[Optional[float]] = field(default_factory=list)
    rollout_time_adjusted_s: list[Optional[float]] = field(default_factory=list)
    clean: list[Optional[bool]] = field(default_factory=list)
    dropped_groups: list[Optional[int]] = field(default_factory=list)
    dropped_all_right: list[Optional[int]] = field(default_factory=list)
    dropped_all_wrong: list[Optional[int]] = field(default_factory=list)
    batches: list[Optional[int]] = field(default_factory=list)
    zero_std_all_right: list[Optional[int]] = field(default_factory=list)
    zero_std_all_wrong: list[Optional[int]] = field(default_factory=list)
    reward: list[Optional[float]] = field(default_factory=list)
    raw_reward: list[Optional[float]] = field(default_factory=list)
    raw_reward_unfiltered: list[Optional[float]] = field(default_factory=list)
    truncated_ratio: list[Optional[float]] = field(default_factory=list)
    step_time_s: list[Optional[float]] = field(default_factory=list)
    dropped_other: list[Optional[int]] = field(default_factory=list)
    zero_std_other: list[Optional[int]] = field(default_factory=list)
    reward_source: list[Optional[str]] = field(default_factory=list)  # printed | derived | None (no reward)

    def __len__(self) -> int:
        return len(self.step)

    def columns(self) -> tuple[Sequence[JSONValue], ...]:
        """The columns in ROW_KEYS order."""
        return tuple(getattr(self, key) for key in ROW_KEYS)

    def rows(self) -> list[JSONObject]:
        """The rows as the JSON writes them: one dict per step, keys in ROW_KEYS order."""
        return [dict(zip(ROW_KEYS, values)) for values in zip(*self.columns())]

    def pick(self, column: Sequence[Optional[T]], *, complete: bool = True) -> tuple[list[int], list[T]]:
        """(steps, values) of one column, over the complete (or the incomplete) steps that have a value."""
        pairs = [
            (step, value)
            for step, done, value in zip(self.step, self.complete, column)
            if done is complete and value is not None
        ]
        return [step for step, _ in pairs], [value for _, value in pairs]

    def complete_positions(self) -> list[int]:
        """Positions of the complete steps, in row order."""
        return [i for i, done in enumerate(self.complete) if done]

    @classmethod
    def from_rows(cls, rows: object, where: str) -> "StepTable":
        """Columns from the JSON's rows; ValueError naming the row and the key when one does not fit."""
        if not isinstance(rows, list):
            raise ValueError(f"{where} is not a list of rows")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ValueError(f"{where}[{i}] is not an object")
        columns: list[Any] = []  # Any: each column's values are of its field's types, checked just below
        for key in ROW_KEYS:
            try:
                column = [row[key] for row in rows] if key not in _EXTRA_ROW_KEYS else [row.get(key) for row in rows]
            except KeyError:
                i = next(i for i, row in enumerate(rows) if key not in row)
                raise ValueError(f"{where}[{i}] has no {key!r}") from None
            allowed = _COLUMN_TYPES[key]
            if not set(map(type, column)) <= allowed:
                i = next(i for i, value in enumerate(column) if type(value) not in allowed)
                raise ValueError(f"{where}[{i}].{key} is {column[i]!r}: not {_COLUMN_KINDS[key]}")
            columns.append(column)
        return cls(*columns)


_COLUMN_TYPES: dict[str, set[type]] = {}
_COLUMN_KINDS: dict[str, str] = {}
for _key in ROW_KEYS:
    if _key == "step":
        _COLUMN_TYPES[_key], _COLUMN_KINDS[_key] = {int}, "an integer"
    elif _key == "complete":
        _COLUMN_TYPES[_key], _COLUMN_KINDS[_key] = {bool}, "true or false"
    elif _key == "clean":
        _COLUMN_TYPES[_key], _COLUMN_KINDS[_key] = {bool, type(None)}, "true, false or null"
    elif _key == "reward_source":
        _COLUMN_TYPES[_key], _COLUMN_KINDS[_key] = {str, type(None)}, '"printed", "derived" or null'
    elif _key in FLOAT_ROW_KEYS:
        _COLUMN_TYPES[_key], _COLUMN_KINDS[_key] = {float, int, type(None)}, "a number or null"
    else:
        _COLUMN_TYPES[_key], _COLUMN_KINDS[_key] = {int, type(None)}, "an integer or null"


@dataclass
class Aggregates:
    """A run's numbers over its complete steps."""

    steps: int
    clean_steps: int
    rollout_time_adjusted_median_s: Optional[float]
    rollout_time_clean_median_s: Optional[float]
    dropped_groups_min: Optional[int]
    dropped_groups_median: Optional[float]
    dropped_groups_max: Optional[int]
    reward_mean: Optional[float]
    reward_mean_first4: Optional[float]
    step_time_sum_s: Optional[float]
    pause_total_s: float
    incomplete_steps: int = 0
    pauses: int = 0  # the heat guard's pauses (harness.capture.records.tally_pauses: status and the figure count so)
    pause_failures: int = 0  # pauses the engine could not make (the run's notes say when and what it said)
    dropped_all_right_total: Optional[int] = None
    dropped_all_wrong_total: Optional[int] = None
    zero_std_all_right_total: Optional[int] = None
    zero_std_all_wrong_total: Optional[int] = None


@dataclass
class LineageAttempt:
    """One attempt of a resumed run's lineage (docs/checkpoints.md, "A stitched run"); times in wall seconds."""

    attempt: int
    state: str
    started_at: Optional[str]
    ended_at: Optional[str]
    first_rollout: int  # the first rollout it gives the run (its resume point; 0 for the lineage's first)
    until_rollout: Optional[int]  # one past the last it gives the run (None: to its end)
    steps: int  # complete steps it gives the run
    redone: list[int]  # rollouts it ran past the checkpoint the next attempt resumed from: not the run's
    wall_s: Optional[float]
    paused_s: float  # frozen by the heat guard
    down_before_s: Optional[float]  # from the previous attempt's end to its start (None: the first, or unknown)
    resumed_from: Optional[str]  # the checkpoint it loaded (None: the lineage's first)


@dataclass
class ResumeShock:
    """The mean reward of the 3 steps after a resume against the 3 before (docs/checkpoints.md, "Resume shock")."""

    attempt: int
    rollout: int  # the first rollout after the resume
    before_mean: Optional[float]
    after_mean: Optional[float]
    drop: Optional[float]  # before - after
    threshold: Optional[float]  # twice the run's median step-to-step change of reward
    shock: bool


@dataclass
class Lineage:
    """A resumed run's attempts, their summed wall and paused time, the down time between them (never in a step or
    a rollout time), and each resume's shock check."""

    attempts: list[LineageAttempt]
    wall_s: Optional[float]
    paused_s: float
    down_s: Optional[float]
    shocks: list[ResumeShock] = field(default_factory=list)


@dataclass
class RunSummary:
    """`runs.<run>`: the run's facts, its step rows, aggregates and notes."""

    experiment: Optional[str]
    seed: Optional[int]
    state: str
    filter: bool
    rollout_batch_size: Optional[int]
    over_sampling_batch_size: Optional[int]
    n_samples_per_prompt: Optional[int]
    steps: StepTable
    aggregates: Aggregates
    notes: list[str]
    time_scale: float = 1
    steps_expected: Optional[int] = None
    reward_key: Optional[str] = None
    config_sources: dict[str, str] = field(default_factory=dict)
    reward_source: Optional[str] = None  # printed | derived | "printed and derived" (steps differ) | None
    simulated: Optional[bool] = None  # made by the simulator (None: the capture does not say)
    config_hash: Optional[str] = None  # the configuration without the seed (conditions.config_hash); None: unknown

    @property
    def made_by_simulator(self) -> bool:
        """Simulated, as far as the document tells: its flag; else (a document from before the flag, or a capture
        that does not say) a time scale other than 1, which only the simulator runs at."""
        if self.simulated is not None:
            return self.simulated
        return self.time_scale != 1

    start_temp_c: Optional[float] = None  # the hottest watched temperature as the run started (manifest guard.start)
    start_below_c: Optional[float] = None  # the cooled start it waited for (manifest guard.start.below_c); None: none
    attempt: Optional[int] = None  # the attempt of the run read (0: a capture from before attempts); None: unknown
    started_at: Optional[str] = None  # that attempt's status.json started_at: with `attempt`, which capture this is
    lineage: Optional[Lineage] = None  # a resumed run's attempts, stitched (written only for such a run)


@dataclass
class BatchGroup:
    """The complete steps of a filter run that needed the same number of prompt batches."""

    steps: int
    rollout_time_adjusted_median_s: Optional[float]
    ratio: Optional[float]


@dataclass
class RewardComparison:
    """A run's reward against its baseline and the spread of its baselines, with the verdict."""

    run_mean: Optional[float]
    baseline_mean: Optional[float]
    baselines: dict[str, Optional[float]]
    spread_min: Optional[float]
    spread_max: Optional[float]
    above_all_baselines: Optional[bool]
    steps_higher: int
    steps_compared: int
    verdict: str
    run_mean_first4: Optional[float] = None
    baseline_mean_first4: Optional[float] = None
    baselines_missing: list[str] = field(default_factory=list)
    seeds_captured: int = 1


@dataclass
class SeedSpread:
    """One figure across the seeds of a condition: how many seeds have it, its mean, SD (n - 1), min and max."""

    seeds: int
    mean: Optional[float]
    sd: Optional[float]
    min: Optional[float]
    max: Optional[float]


@dataclass
class SeedFigures:
    """One seed's figures over the steps every pooled seed of its condition completed."""

    run: str
    seed: Optional[int]
    reward_mean: Optional[float]
    reward_mean_first4: Optional[float]
    rollout_time_adjusted_median_s: Optional[float]
    dropped_groups: Optional[int]  # totals over those steps (filter runs)
    dropped_all_right: Optional[int]
    dropped_all_wrong: Optional[int]


@dataclass
class ConditionSummary:
    """`conditions.<condition>`: the runs of one configuration without its seed, and their figures pooled."""

    experiment: Optional[str]
    config_hash: Optional[str]
    simulated: Optional[bool]
    filter: bool
    runs: list[str]  # every run of the condition
    seeds: list[SeedFigures]  # the runs in the pooled figures, one per seed
    left_out: dict[str, str]  # run -> why it is not in the pooled figures
    steps_pooled: int  # the complete steps every pooled seed has
    reward_mean: SeedSpread
    reward_mean_first4: SeedSpread
    rollout_time_adjusted_median_s: SeedSpread
    dropped_groups: SeedSpread
    dropped_all_right: SeedSpread
    dropped_all_wrong: SeedSpread
    notes: list[str] = field(default_factory=list)


@dataclass
class SeedComparison:
    """A comparison's across-seed block: the run's condition against its baseline's, or the pool of its baselines.

    The per-seed values are each seed's mean reward over the steps both sides
    completed (the reward counted before the filter, for a filter run).
    """

    against: str  # "baseline" (the baseline's condition) or "baselines" (the conditions of every baseline)
    condition: str
    baseline_conditions: list[str]
    steps: int  # the steps compared: complete in every seed on both sides
    seeds: int
    baseline_seeds: int
    mean: Optional[float]
    baseline_mean: Optional[float]
    difference: Optional[float]
    interval_low: Optional[float]
    interval_high: Optional[float]
    interval_excludes_zero: Optional[bool]
    welch_p: Optional[float]
    p_improvement: Optional[float]
    pooled_sd: Optional[float]
    seeds_needed: Optional[int]  # per condition, to detect the observed difference with 80% power at alpha 0.05
    effect: float
    seeds_needed_for_effect: Optional[int]
    too_few_seeds: bool  # the seeds cannot settle the question (no interval, or fewer than seeds_needed)
    verdict: str
    confidence: float = 0.95
    bootstrap_resamples: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    """`comparisons[]`: one run against its `compare` block."""

    run: str
    baseline: str
    by_batches: dict[str, BatchGroup]
    reward: RewardComparison
    baseline_rollout_time_adjusted_median_s: Optional[float] = None
    notes: list[str] = field(default_factory=list)
    across_seeds: list[SeedComparison] = field(default_factory=list)


@dataclass
class DecisionOutcome:
    """`decisions[].comparisons[]`: one comparison of an adaptive comparison, at the interim it was decided (or the
    last one recorded)."""

    comparison: str  # `A vs B`
    first: str
    second: str
    decision: (
        str  # larger (the first's values are larger), smaller, equal (none found after the last interim), continue
    )
    decided_at: Optional[int]  # the interim
    seeds: int  # of the first experiment, counted in the decision
    second_seeds: int
    mean: Optional[float]  # of the first's values counted
    second_mean: Optional[float]
    fixed_design_seeds: Optional[int]  # per experiment, for the difference seen: 80% power at alpha, two-sided t-test
    answer: str  # the line `harness decide` ends with


@dataclass
class DecisionInterim:
    """`decisions[].interims[]`: one interim as its record holds it."""

    interim: int
    seeds: dict[str, list[int]]  # per experiment run at this interim
    runs: dict[str, list[str]]
    values: dict[str, list[float]]
    decisions: dict[str, str]  # comparison -> decision after this interim
    statistics: dict[str, Optional[float]]  # the statistic of each comparison open at this interim
    boundary: Optional[float]  # of the comparator that decides `larger` (null: it could not reject then)
    alpha_spent: float
    replaced: list[str]  # a seed that failed twice (or gave no value) and the seed that took its place
    boundary_smaller: Optional[float] = None  # of the comparator that decides `smaller`


@dataclass
class DecisionSummary:
    """`decisions[]`: one adaptive comparison (`harness decide`), as its record holds it: recorded values are
    never recomputed from the captures."""

    name: str
    record: str  # the record's path under the capture root
    metric: str
    experiments: list[str]
    per_interim: int
    max_interims: int
    alpha: float
    permutations: int
    random_state: int
    simulated: bool
    steps: int
    finished: bool
    comparisons: list[DecisionOutcome]
    interims: list[DecisionInterim]
    notes: list[str] = field(default_factory=list)


@dataclass
class SummaryDocument:
    """The whole `miles-gb10-lab/1` document."""

    schema: str
    generated_at: str
    harness_version: str
    runs: dict[str, RunSummary]
    comparisons: list[Comparison]
    skipped: list[Skipped] = field(default_factory=list)
    simulated: Optional[bool] = None  # true when any run is simulated (None: none is, but some do not say)
    conditions: dict[str, ConditionSummary] = field(default_factory=dict)
    decisions: list[DecisionSummary] = field(default_factory=list)  # written only when there are some

    def to_dict(self) -> JSONObject:
        """The document as the JSON holds it (plain dicts and lists; `decisions` only when there are some)."""
        plain = to_plain_object(self)
        if not self.decisions:
            del plain["decisions"]
        return plain

    def simulated_runs(self) -> list[str]:
        """The runs made by the simulator (`RunSummary.made_by_simulator`), in the document's order."""
        return [name for name, run in self.runs.items() if run.made_by_simulator]

    @classmethod
    def from_dict(cls, data: object) -> "SummaryDocument":
        """The typed document from parsed JSON; ValueError naming the first key that does not fit."""
        document = _from_plain(cls, data, "the document")
        assert isinstance(document, SummaryDocument)  # _from_plain builds the class it is given
        return document


# --------------------------------------------------------------------------- plain <-> typed


def to_plain(value: object) -> JSONValue:
    """A part of the document (a dataclass of it, a StepTable, a dict or list of them, a value) as JSON holds it."""
    if isinstance(value, StepTable):
        return list(value.rows())
    if isinstance(value, Skipped):
        return dict(value.to_dict())
    if is_dataclass(value) and not isinstance(value, type):
        return to_plain_object(value)
    if isinstance(value, dict):
        return {key: to_plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [to_plain(item) for item in value]
    if value is None or isinstance(value, (str, int, float)):  # bool is an int
        return value
    raise TypeError(f"not a part of a summary document: {type(value).__name__}")


def to_plain_object(value: DataclassInstance) -> JSONObject:
    """A dataclass of the document as the JSON object that holds it (a run's `lineage` only when it resumed)."""
    plain = {f.name: to_plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, RunSummary) and value.lineage is None:
        del plain["lineage"]
    return plain


_HINTS: dict[type, dict[str, object]] = {}


def _hints(cls: type) -> dict[str, object]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _from_plain(kind: object, value: object, where: str) -> object:
    """`value` checked against the annotation `kind` (and built, for dataclasses)."""
    if kind is StepTable:
        return StepTable.from_rows(value, where)
    if kind is Skipped:
        if not isinstance(value, Mapping) or not all(isinstance(value.get(k), str) for k in ("directory", "reason")):
            raise ValueError(f"{where} is not an object with a directory and a reason")
        return Skipped(value["directory"], value["reason"])
    if isinstance(kind, type) and is_dataclass(kind):
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} is not an object")
        hints = _hints(kind)
        values = {}
        for spec in fields(kind):
            if spec.name in value:
                values[spec.name] = _from_plain(hints[spec.name], value[spec.name], f"{where}.{spec.name}")
            elif spec.default is MISSING and spec.default_factory is MISSING:  # a contract key
                raise ValueError(f"{where} has no {spec.name!r}")
        return kind(**values)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union:  # Optional[X]
        if value is None:
            return None
        return _from_plain(next(a for a in args if a is not type(None)), value, where)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} is not an object")
        return {key: _from_plain(args[1], item, f"{where}.{key}") for key, item in value.items()}
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"{where} is not a list")
        return [_from_plain(args[0], item, f"{where}[{i}]") for i, item in enumerate(value)]
    if not isinstance(kind, type):
        raise TypeError(f"{where}: the annotation {kind!r} has no rule here")
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise ValueError(f"{where} is {value!r}: not {_KIND_WORDS.get(kind, kind.__name__)}")
    return value


_KIND_WORDS = {float: "a number", int: "an integer", bool: "true or false", str: "a string"}
