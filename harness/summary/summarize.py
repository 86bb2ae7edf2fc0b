"""Captures -> the summary document, schema `miles-gb10-lab/1` (DESIGN section 7).

`summarize(capture_dir)` returns the document as a plain dict (the JSON, as
written); `write_summary` writes it. The rules, as implemented (also in
docs/summary.md):

Run facts
- `filter`, `rollout_batch_size` (B), `over_sampling_batch_size` (O),
  `n_samples_per_prompt`: from args.json (Miles's own dump, the truth about
  what ran; raw strings such as `'None'` and `'32'` are read as values);
  where args.json is missing, from the manifest's `trainer_argv`; where that
  is missing too, from the experiment over the base-run args. A note says
  which source was used when it was not args.json. The filter is on when
  `dynamic_sampling_filter_path` is set and not None. O None or absent means
  Miles's default, B.
- A run that is not `succeeded` is summarized like any other, with its state
  and a note; one that never started (`not_started`) is listed under
  `skipped` with its reason.

Times (all durations in the JSON are in the trainer's seconds: wall seconds
for real runs; for simulated runs wall = trainer seconds x time_scale)
- The rollout of step N occupies the wall interval
  [t_rollout_end - rollout_time x time_scale, t_rollout_end].
- `pause_overlap_s`: the length of the union of the pause windows inside
  that interval (touching or overlapping windows are merged first, so no
  second counts twice), divided by time_scale. An open window (end null)
  ends at the run's `ended_at` (or, for a run with no end time yet, at the
  last time in the capture, with a note).
- `rollout_time_adjusted_s` = `rollout_time_s` - `pause_overlap_s`;
  `clean` = no overlap. Computed in integer microseconds where the inputs
  are (timestamps), divided into seconds once.
- `pause_total_s`: the length of the union of all the run's windows.

Miles keys (which reward, the step-time fallback, the drop and zero-std
keys, when the filter is on) are read by `harness.mileslog.keys`, the one
place those rules live.

Groups
- dropped_*: from `derive_step_values`; null for a run without the filter
  (not applicable).
- `batches` = ceil((B + dropped_groups) / O) for a filter run (kept = B):
  the prompt batches the rollout submitted. Null without the filter.
- A filter run without the unfiltered reward key gets null and a note.

Aggregates
- Over complete steps only: an incomplete step (the run ended between the
  rollout's and the trainer's lines) is shown, marked, and left out.
  `steps` counts complete steps; `clean_steps` the complete clean ones.
- Medians are pandas medians (the mean of the two middle values for an
  even count); means are math.fsum(values) / count over the complete steps
  that have the value (a note names the steps that lack it). `reward_mean_first4`
  is the mean over the first four complete steps, null unless all four
  have a reward. `step_time_sum_s` is null if a complete step lacks it.
- Nothing is rounded.

Comparisons: one per run whose experiment has a `compare` block: time ratios
by batches needed against the baseline's adjusted median, and the reward
against the baseline and the spread of the baselines, with `verdict.py`'s
sentence.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from harness.capture import write_text_atomic
from harness.lab.milesargv import apply_overrides, flag_values, read_base_args
from harness.mileslog import keys
from harness.mileslog.derive import derive_step_values, whole_number
from harness.summary import SCHEMA_ID
from harness.summary.captures import STATES, RunCapture, Skipped, find_runs, read_capture
from harness.times import US_PER_S, format_time_us, now_rfc3339, parse_time_us
from harness.summary.verdict import RewardFacts, reward_verdict

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
    # beyond the contract: what the split leaves over
    "dropped_other",
    "zero_std_other",
)

ROLLOUT_TIME = keys.ROLLOUT_TIME
FILTERED_KEY, UNFILTERED_KEY = keys.RAW_REWARD, keys.RAW_REWARD_UNFILTERED
FIRST_STEPS = 4


# --------------------------------------------------------------------------- run facts


@dataclass
class RunConfig:
    """What the trainer ran with, and where each fact came from."""

    filter: bool  # False also when nothing says (with a note)
    rollout_batch_size: Optional[int]
    over_sampling_batch_size: Optional[int]
    n_samples_per_prompt: Optional[int]
    sources: dict[str, str] = field(default_factory=dict)


_CONFIG_KEYS = {
    "filter": ("dynamic_sampling_filter_path", "--dynamic-sampling-filter-path"),
    "rollout_batch_size": ("rollout_batch_size", "--rollout-batch-size"),
    "over_sampling_batch_size": ("over_sampling_batch_size", "--over-sampling-batch-size"),
    "n_samples_per_prompt": ("n_samples_per_prompt", "--n-samples-per-prompt"),
}
_ABSENT = object()


def _python_value(value: Any) -> Any:
    """A dump value as Python: `'None'` -> None, `'32'` -> 32, `'True'` -> True; others as they are."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text in ("None", ""):
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _as_int(value: Any) -> Optional[int]:
    return whole_number(_python_value(value))


def _experiment_words(experiment: Mapping[str, Any]) -> Optional[list[str]]:
    miles = experiment.get("miles")
    if not isinstance(miles, Mapping):
        return None
    args = miles.get("args") if isinstance(miles.get("args"), Mapping) else {}
    extra = miles.get("extra_args") if isinstance(miles.get("extra_args"), str) else ""
    try:
        return apply_overrides(read_base_args(), args) + shlex.split(extra)
    except (OSError, ValueError):
        return None


def resolve_config(capture: RunCapture, notes: list[str]) -> RunConfig:
    """The run's filter, B, O and n: args.json, else trainer_argv, else the experiment (see module doc)."""
    argv = (capture.manifest or {}).get("trainer_argv")
    argv_flags = flag_values(argv) if isinstance(argv, list) and all(isinstance(w, str) for w in argv) else None
    experiment_flags: Optional[dict[str, list[str]]] = None
    raw: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for fact, (name, flag) in _CONFIG_KEYS.items():
        if capture.args is not None and name in capture.args:
            raw[fact], sources[fact] = capture.args[name], "args.json"
            continue
        if argv_flags is not None:
            values = argv_flags.get(flag, _ABSENT)
            sources[fact] = "trainer_argv"
        else:
            if experiment_flags is None:
                words = _experiment_words(capture.experiment)
                experiment_flags = flag_values(words) if words is not None else {}
            values = experiment_flags.get(flag, _ABSENT) if experiment_flags else _ABSENT
            sources[fact] = "experiment" if experiment_flags else "none"
        if values is _ABSENT:
            raw[fact] = _ABSENT
        else:
            raw[fact] = values[-1] if values else True

    filter_path = raw["filter"]
    filter_on: Optional[bool]
    if filter_path is _ABSENT:
        filter_on = False if sources["filter"] != "none" else None
    else:
        filter_on = keys.filter_is_on(filter_path)
    batch = _as_int(raw["rollout_batch_size"]) if raw["rollout_batch_size"] is not _ABSENT else None
    over = raw["over_sampling_batch_size"]
    over_value = None if over is _ABSENT else _python_value(over)
    over_int = batch if over_value is None else _as_int(over_value)
    samples = _as_int(raw["n_samples_per_prompt"]) if raw["n_samples_per_prompt"] is not _ABSENT else None

    used = sorted({source for source in sources.values() if source != "args.json"})
    if used == ["none"]:
        notes.append("no args.json, trainer_argv or experiment: filter, B, O and n unknown (filter taken as off)")
    elif used:
        where = {
            "trainer_argv": "the manifest's trainer_argv",
            "experiment": "the experiment over the current base-run args",
        }
        facts = ", ".join(fact for fact in _CONFIG_KEYS if sources[fact] != "args.json")
        lead = f"args.json missing: {facts}" if capture.args is None else f"args.json has no {facts}:"
        notes.append(f"{lead} read from {' and '.join(where[s] for s in used if s in where)}")
    for fact, value in (("rollout_batch_size", batch), ("n_samples_per_prompt", samples)):
        if value is None:
            notes.append(f"{fact} unknown: not found or not a whole number")
    if over_int is None and over_value is not None:
        notes.append(f"over_sampling_batch_size {over_value!r} is not a whole number: unknown")
    return RunConfig(bool(filter_on), batch, over_int, samples, sources)


# --------------------------------------------------------------------------- numbers


def _derive(metrics: Mapping[str, Any], memo: dict[tuple, dict[str, Any]]) -> dict[str, Any]:
    """`derive_step_values` over the keys it reads, remembered per distinct set of counts.

    Only the drop and zero-std keys matter to it, and their values repeat a
    lot from step to step, so one run's steps share the results (read-only).
    """
    relevant = {k: v for k, v in metrics.items() if k.startswith(keys.GROUP_KEY_PREFIXES)}
    try:
        key = tuple(relevant.items())
        derived = memo.get(key)
    except TypeError:  # an unhashable value: nothing to remember
        return derive_step_values(relevant)
    if derived is None:
        derived = memo[key] = derive_step_values(relevant)
    return derived


_number = keys.finite_number


def _steps_text(steps: Sequence[int]) -> str:
    """`0-3, 5, 7-11` for a list of step ids."""
    ordered = sorted(set(steps))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    word = "step" if len(ordered) == 1 else "steps"
    return f"{word} {', '.join(parts)}"


class _StepNotes:
    """Collects step ids per problem so each problem is one note, not one per step."""

    def __init__(self) -> None:
        self._steps: dict[str, list[int]] = {}

    def add(self, problem: str, step: int) -> None:
        self._steps.setdefault(problem, []).append(step)

    def discard(self, problem: str) -> None:
        self._steps.pop(problem, None)

    def emit(self, notes: list[str]) -> None:
        for problem, steps in self._steps.items():
            notes.append(problem.format(steps=_steps_text(steps)))


def _median(values: Iterable[float]) -> Optional[float]:
    import pandas as pd

    series = pd.Series(list(values), dtype="float64")
    return None if series.empty else float(series.median())


def _mean(values: Iterable[float]) -> Optional[float]:
    """The mean with a correctly rounded sum (math.fsum), so it does not depend on summation order."""
    values = list(values)
    return math.fsum(values) / len(values) if values else None


# --------------------------------------------------------------------------- one run


@dataclass
class RunSummary:
    """One run's part of the document, plus what comparisons need and the JSON does not carry."""

    name: str
    document: dict[str, Any]
    compare: Optional[dict[str, Any]]
    reward_key: Optional[str]


def summarize_run(capture: RunCapture) -> RunSummary:
    """Rows, aggregates and notes for one capture (rules in the module docstring)."""
    import numpy as np

    from harness.summary.windows import merge_windows, overlap_lengths, union_length

    notes = list(capture.notes)
    status = capture.status or {}
    experiment = capture.experiment
    manifest = capture.manifest or {}

    state = status.get("state") if capture.status is not None else "unknown"
    if state not in STATES and state != "unknown":
        notes.append(f"status.json state {state!r} is not one the contract knows: read as unknown")
        state = "unknown"
    if isinstance(status.get("run"), str) and status["run"] != capture.name:
        notes.append(f"status.json names the run {status['run']!r}, but its directory is {capture.name!r}")
    if state not in ("succeeded", "unknown"):
        detail = []
        if status.get("exit_code") is not None:
            detail.append(f"exit code {status['exit_code']}")
        if status.get("error"):
            detail.append(str(status["error"]))
        so_far = " so far" if state == "running" else ""
        notes.append(f"state {state}" + (f" ({'; '.join(detail)})" if detail else "") + f": summarized as captured{so_far}")

    time_scale = manifest.get("time_scale", 1) if capture.manifest is not None else 1
    if isinstance(time_scale, bool) or not isinstance(time_scale, (int, float)) or not time_scale > 0:
        notes.append(f"time_scale {time_scale!r} is not a positive number: 1 used")
        time_scale = 1
    if capture.manifest is None:
        notes.append("without manifest.json: experiment, seed and compare unknown, time_scale taken as 1")

    config = resolve_config(capture, notes)
    filter_on = config.filter
    batch, over = config.rollout_batch_size, config.over_sampling_batch_size

    seed = experiment.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        seed = None
    steps_expected = status.get("steps_expected", experiment.get("steps"))
    if isinstance(steps_expected, bool) or not isinstance(steps_expected, int):
        steps_expected = experiment.get("steps") if isinstance(experiment.get("steps"), int) else None

    # --- pause windows (wall clock, integer microseconds)
    ended_us = parse_time_us(status.get("ended_at"))
    if status.get("ended_at") is not None and ended_us is None:
        notes.append(f"status.json ended_at {status.get('ended_at')!r} is not an RFC 3339 time")
    known_times = [t for r in capture.records for t in (r.t_rollout_end_us, r.t_step_end_us) if t is not None]
    known_times += [t for p in capture.pauses for t in (p.start_us, p.end_us) if t is not None]
    windows: list[tuple[int, int]] = []
    for pause in capture.pauses:
        end = pause.end_us
        if end is None:
            if ended_us is not None:
                end = ended_us
                notes.append(
                    f"pause window opened at {format_time_us(pause.start_us)} never closed: "
                    f"counted up to the run's end, {format_time_us(ended_us)}"
                )
            else:
                end = max(known_times)
                notes.append(
                    f"pause window opened at {format_time_us(pause.start_us)} is open and the run has no end "
                    f"time: counted up to the last time in the capture, {format_time_us(end)}"
                )
        if end < pause.start_us:
            notes.append(f"pauses.jsonl line {pause.line}: window ends before it starts: left out")
            continue
        windows.append((pause.start_us, end))
    starts, ends = merge_windows(windows)
    origin = min(known_times) if known_times else 0
    starts_rel, ends_rel = starts - origin, ends - origin

    # --- per-step values
    problems = _StepNotes()
    records = capture.records
    count = len(records)
    rollout_time = np.full(count, np.nan)
    t_end_rel = np.full(count, np.nan)
    for i, record in enumerate(records):
        value = record.metrics.get(ROLLOUT_TIME)
        rt = _number(value)
        if value is not None and rt is None:
            problems.add(ROLLOUT_TIME + " is not a finite number in {steps}: no rollout time there", record.step)
        elif rt is not None and rt < 0:
            problems.add(ROLLOUT_TIME + " is negative in {steps}: no rollout time there", record.step)
            rt = None
        elif value is None and record.complete:
            problems.add(ROLLOUT_TIME + " missing in complete {steps}: no rollout time there", record.step)
        if rt is not None:
            rollout_time[i] = rt
            if record.t_rollout_end_us is None:
                problems.add("t_rollout_end missing in {steps}: pause overlap unknown there", record.step)
            else:
                t_end_rel[i] = record.t_rollout_end_us - origin
    known = ~np.isnan(rollout_time) & ~np.isnan(t_end_rel)
    wall_us = rollout_time * (float(time_scale) * US_PER_S)
    hi = np.where(known, t_end_rel, 0.0)
    lo = hi - np.where(known, wall_us, 0.0)
    overlap_wall_us = overlap_lengths(starts_rel, ends_rel, lo, hi)

    rows: list[dict[str, Any]] = []
    derive_memo: dict[tuple, dict[str, Any]] = {}
    reward_key = keys.reward_key(filter_on)
    no_reward = reward_key + " missing in {steps}: no reward there"
    any_reward = False
    for i, record in enumerate(records):
        metrics = record.metrics
        step = record.step
        rt = None if math.isnan(rollout_time[i]) else float(rollout_time[i])
        if known[i]:
            ov_wall = float(overlap_wall_us[i])
            if ov_wall == 0.0:
                overlap, adjusted, clean = 0.0, rt, True
            else:
                ov_trainer_us = ov_wall / time_scale if time_scale != 1 else ov_wall
                overlap = ov_trainer_us / US_PER_S
                adjusted = (rt * US_PER_S - ov_trainer_us) / US_PER_S
                clean = False
        else:
            overlap = adjusted = clean = None

        derived = _derive(metrics, derive_memo)
        for key in derived["unreadable_keys"]:
            problems.add(f"{key} is not a whole number in {{steps}}: left out of the counts", step)
        rollout_side = keys.rollout_side_logged(metrics)
        if filter_on and rollout_side:
            dropped = derived["dropped_groups"]
            dropped_right, dropped_wrong = derived["dropped_all_right"], derived["dropped_all_wrong"]
            dropped_other = sum(derived["dropped_other"].values())
            batches = -(-(batch + dropped) // over) if batch is not None and over else None
        else:
            dropped = dropped_right = dropped_wrong = dropped_other = batches = None
            if filter_on:
                problems.add("no rollout-side keys in {steps}: dropped groups unknown there", step)
            elif derived["dropped_groups"]:
                problems.add("drop keys logged without the filter in {steps}: not shown", step)

        raw_reward = _number(metrics.get(FILTERED_KEY))
        raw_unfiltered = _number(metrics.get(UNFILTERED_KEY))
        reward = keys.step_reward(metrics, filter_on)
        if reward is not None:
            any_reward = True
        elif rollout_side or record.complete:
            problems.add(no_reward, step)

        step_time, step_time_key = keys.step_time(metrics)
        if step_time_key == keys.STEP_TIME_OLD:
            problems.add(keys.STEP_TIME + " not logged in {steps}: " + keys.STEP_TIME_OLD + " (older name) used", step)
        elif step_time is None and record.complete:
            problems.add(keys.STEP_TIME + " missing in complete {steps}", step)
        if not record.complete:
            problems.add("{steps} incomplete (the run ended before the step did): shown, left out of medians and means", step)

        rows.append(
            {
                "step": step,
                "complete": record.complete,
                "rollout_time_s": rt,
                "pause_overlap_s": overlap,
                "rollout_time_adjusted_s": adjusted,
                "clean": clean,
                "dropped_groups": dropped,
                "dropped_all_right": dropped_right,
                "dropped_all_wrong": dropped_wrong,
                "batches": batches,
                "zero_std_all_right": derived["zero_std_all_right"],
                "zero_std_all_wrong": derived["zero_std_all_wrong"],
                "reward": reward,
                "raw_reward": raw_reward,
                "raw_reward_unfiltered": raw_unfiltered,
                "truncated_ratio": _number(metrics.get(keys.TRUNCATED_RATIO)),
                "step_time_s": step_time,
                "dropped_other": dropped_other,
                "zero_std_other": derived["zero_std_other"],
            }
        )
    if filter_on and not any_reward and records:
        notes.append(
            f"filter run without {UNFILTERED_KEY}: the Miles in the image is too old to log it, so reward is "
            f"null ({FILTERED_KEY} counts only the kept groups and is not comparable)"
        )
        problems.discard(no_reward)  # said once for the whole run
    if filter_on and (batch is None or not over):
        notes.append("B or O unknown: batches not computed")
    problems.emit(notes)

    complete_count = sum(1 for row in rows if row["complete"])
    if not records:
        notes.append("no step records (metrics.jsonl missing or empty)")
    elif steps_expected is not None and complete_count < steps_expected:
        notes.append(f"{complete_count} complete step{'' if complete_count == 1 else 's'} of {steps_expected} expected")

    _null_non_finite_rows(rows, notes)
    aggregates = _aggregates(rows, filter_on, union_length(starts, ends) / time_scale / US_PER_S, notes)
    _null_non_finite(aggregates, "aggregates", notes)
    document = {
        "experiment": experiment.get("name") if isinstance(experiment.get("name"), str) else None,
        "seed": seed,
        "state": state,
        "filter": config.filter,
        "rollout_batch_size": batch,
        "over_sampling_batch_size": over,
        "n_samples_per_prompt": config.n_samples_per_prompt,
        "steps": rows,
        "aggregates": aggregates,
        "notes": notes,
        "time_scale": time_scale,
        "steps_expected": steps_expected,
        "reward_key": reward_key if any_reward else None,
        "config_sources": config.sources,
    }
    compare = experiment.get("compare") if isinstance(experiment.get("compare"), dict) else None
    return RunSummary(capture.name, document, compare, reward_key if any_reward else None)


def _null_non_finite_rows(rows: list[dict[str, Any]], notes: list[str]) -> None:
    """Strict JSON has no NaN or infinity: such a row value (an overflow) becomes null, one note per key."""
    found = _StepNotes()
    for row in rows:
        for key, value in row.items():
            if type(value) is float and not math.isfinite(value):
                row[key] = None
                found.add(f"{key} is not a finite number ({value!r}) in {{steps}}: null", row["step"])
    found.emit(notes)


def _null_non_finite(document: dict[str, Any], where: str, notes: list[str]) -> None:
    """As `_null_non_finite_rows`, for a nested dict (aggregates, a comparison): a note per value."""
    for key, value in document.items():
        if isinstance(value, dict):
            _null_non_finite(value, f"{where}.{key}", notes)
        elif type(value) is float and not math.isfinite(value):
            document[key] = None
            notes.append(f"{where}.{key} is not a finite number ({value!r}): null")


def _aggregates(rows: list[dict[str, Any]], filter_on: bool, pause_total_s: float, notes: list[str]) -> dict[str, Any]:
    """Aggregates over complete steps (see the module docstring); `notes` gets what they leave out."""
    done = [row for row in rows if row["complete"]]
    adjusted = [row["rollout_time_adjusted_s"] for row in done if row["rollout_time_adjusted_s"] is not None]
    clean = [row["rollout_time_s"] for row in done if row["clean"] is True]
    dropped = [row["dropped_groups"] for row in done if row["dropped_groups"] is not None]
    rewards = [row["reward"] for row in done if row["reward"] is not None]
    first = done[:FIRST_STEPS]
    first_rewards = [row["reward"] for row in first if row["reward"] is not None]
    step_times = [row["step_time_s"] for row in done]
    has_all_step_times = bool(done) and all(t is not None for t in step_times)
    if done and len(first_rewards) < FIRST_STEPS and rewards:
        notes.append(f"reward_mean_first4 is null: fewer than {FIRST_STEPS} of the first complete steps have a reward")
    if done and not has_all_step_times and any(t is not None for t in step_times):
        notes.append("step_time_sum_s is null: a complete step has no step time")

    def total(key: str) -> Optional[int]:
        values = [row[key] for row in done if row[key] is not None]
        return sum(values) if values else None

    return {
        "steps": len(done),
        "clean_steps": len(clean),
        "rollout_time_adjusted_median_s": _median(adjusted),
        "rollout_time_clean_median_s": _median(clean),
        "dropped_groups_min": min(dropped) if filter_on and dropped else None,
        "dropped_groups_median": _median(dropped) if filter_on and dropped else None,
        "dropped_groups_max": max(dropped) if filter_on and dropped else None,
        "reward_mean": _mean(rewards),
        "reward_mean_first4": _mean(first_rewards) if len(first_rewards) == FIRST_STEPS else None,
        "step_time_sum_s": math.fsum(step_times) if has_all_step_times else None,
        "pause_total_s": pause_total_s,
        # beyond the contract
        "incomplete_steps": len(rows) - len(done),
        "dropped_all_right_total": total("dropped_all_right") if filter_on else None,
        "dropped_all_wrong_total": total("dropped_all_wrong") if filter_on else None,
        "zero_std_all_right_total": total("zero_std_all_right"),
        "zero_std_all_wrong_total": total("zero_std_all_wrong"),
    }


# --------------------------------------------------------------------------- comparisons


def compare_run(run: RunSummary, runs: Mapping[str, RunSummary]) -> Optional[dict[str, Any]]:
    """The comparison of one run with its `compare` block; None when it has none or no baseline."""
    block = run.compare or {}
    baseline_name = block.get("baseline")
    if not isinstance(baseline_name, str) or not baseline_name:
        return None
    names = block.get("baselines")
    baseline_names = [n for n in names if isinstance(n, str)] if isinstance(names, list) and names else [baseline_name]
    baseline_names = [n for n in dict.fromkeys(baseline_names) if n != run.name]  # a run is not its own baseline
    doc = run.document
    notes: list[str] = []
    baseline = runs.get(baseline_name)
    base_doc = baseline.document if baseline is not None else None
    if base_doc is None:
        notes.append(f"no capture of the baseline {baseline_name}: no time ratios")
    base_median = base_doc["aggregates"]["rollout_time_adjusted_median_s"] if base_doc else None

    groups: dict[int, list[Optional[float]]] = {}
    for row in doc["steps"]:
        if row["complete"] and row["batches"] is not None:
            groups.setdefault(row["batches"], []).append(row["rollout_time_adjusted_s"])
    if not doc["filter"]:
        notes.append(f"{run.name} runs without the filter: no batches, so no time ratios by batches")
    by_batches: dict[str, Any] = {}
    for batches in sorted(groups):
        times = [t for t in groups[batches] if t is not None]
        median = _median(times)
        by_batches[str(batches)] = {
            "steps": len(groups[batches]),
            "rollout_time_adjusted_median_s": median,
            "ratio": median / base_median if median is not None and base_median else None,
        }

    found = {name: runs[name] for name in baseline_names if name in runs}
    missing = [name for name in baseline_names if name not in runs]
    means = {name: r.document["aggregates"]["reward_mean"] for name, r in found.items()}
    for name, r in found.items():
        if r.document["state"] != "succeeded":
            notes.append(f"baseline {name} is {r.document['state']}: its mean is over its complete steps")
    values = [v for v in means.values() if v is not None]
    run_mean = doc["aggregates"]["reward_mean"]
    base_rewards = (
        {row["step"]: row["reward"] for row in base_doc["steps"] if row["complete"] and row["reward"] is not None}
        if base_doc
        else {}
    )
    shared = [
        (row["reward"], base_rewards[row["step"]])
        for row in doc["steps"]
        if row["complete"] and row["reward"] is not None and row["step"] in base_rewards
    ]
    experiment = doc["experiment"]
    seeds = {
        r.document["seed"]
        for r in runs.values()
        if experiment is not None and r.document["experiment"] == experiment and r.document["aggregates"]["steps"]
    }
    facts = RewardFacts(
        run=run.name,
        baseline=baseline_name,
        filter=bool(doc["filter"]),
        run_mean=run_mean,
        reward_key=run.reward_key,
        baseline_found=base_doc is not None,
        baseline_mean=base_doc["aggregates"]["reward_mean"] if base_doc else None,
        baselines=means,
        missing=missing,
        steps_higher=sum(1 for mine, theirs in shared if mine > theirs),
        steps_compared=len(shared),
        run_steps=doc["aggregates"]["steps"],
        steps_expected=doc["steps_expected"],
        state=doc["state"],
        seeds=max(1, len(seeds)),
    )
    return {
        "run": run.name,
        "baseline": baseline_name,
        "by_batches": by_batches,
        "reward": {
            "run_mean": run_mean,
            "baseline_mean": facts.baseline_mean,
            "baselines": means,
            "spread_min": min(values) if values else None,
            "spread_max": max(values) if values else None,
            "above_all_baselines": (run_mean > max(values)) if values and run_mean is not None else None,
            "steps_higher": facts.steps_higher,
            "steps_compared": facts.steps_compared,
            "verdict": reward_verdict(facts),
            # beyond the contract
            "run_mean_first4": doc["aggregates"]["reward_mean_first4"],
            "baseline_mean_first4": base_doc["aggregates"]["reward_mean_first4"] if base_doc else None,
            "baselines_missing": missing,
            "seeds_captured": facts.seeds,
        },
        "baseline_rollout_time_adjusted_median_s": base_median,
        "notes": notes,
    }


# --------------------------------------------------------------------------- the document


def summarize_captures(
    captures: Sequence[RunCapture], *, skipped: Sequence[Skipped] = (), generated_at: Optional[str] = None
) -> dict[str, Any]:
    """The `miles-gb10-lab/1` document for already-read captures."""
    from harness import __version__

    runs = {c.name: summarize_run(c) for c in sorted(captures, key=lambda c: c.name)}
    comparisons = [c for c in (compare_run(r, runs) for r in runs.values()) if c is not None]
    for comparison in comparisons:
        _null_non_finite(comparison, "comparison", comparison["notes"])
    return {
        "schema": SCHEMA_ID,
        "generated_at": generated_at or now_rfc3339(),
        "harness_version": __version__,
        "runs": {name: r.document for name, r in runs.items()},
        "comparisons": comparisons,
        "skipped": [s.to_dict() for s in skipped],
    }


def summarize(capture_dir: Path, *, generated_at: Optional[str] = None) -> dict[str, Any]:
    """Read every capture under `capture_dir` and return the summary document."""
    run_dirs, skipped = find_runs(Path(capture_dir))
    captures = []
    for capture in (read_capture(d) for d in run_dirs):
        if (capture.status or {}).get("state") == "not_started":  # no run happened: nothing to summarize
            skipped.append(Skipped(capture.name, f"not_started: {(capture.status or {}).get('error')}"))
        else:
            captures.append(capture)
    return summarize_captures(captures, skipped=skipped, generated_at=generated_at)


def dumps_summary(document: Mapping[str, Any]) -> str:
    """The document as JSON text: indented, one step row per line, strict (no NaN)."""
    return _dump(document, 0) + "\n"


def _flat(value: Any) -> bool:
    return isinstance(value, dict) and not any(isinstance(v, (dict, list)) for v in value.values())


def _dump_rows(rows: list[dict[str, Any]], level: int) -> str:
    """Step rows, one per line, in one encoder call: rows hold only numbers, booleans and nulls,
    so `}, {` can only be the boundary between two rows."""
    if not rows:
        return "[]"
    pad, inner = "  " * level, "  " * (level + 1)
    body = json.dumps(rows, allow_nan=False)[1:-1].replace("}, {", "},\n" + inner + "{")
    return "[\n" + inner + body + "\n" + pad + "]"


def _dump(value: Any, level: int) -> str:
    pad, inner = "  " * level, "  " * (level + 1)
    if isinstance(value, dict) and value:
        items = [
            f"{inner}{json.dumps(str(k), allow_nan=False)}: "
            + (_dump_rows(v, level + 1) if k == "steps" and isinstance(v, list) else _dump(v, level + 1))
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and value:
        if all(not isinstance(v, (dict, list)) for v in value) and len(value) <= 1:
            return json.dumps(value, allow_nan=False)
        if all(_flat(v) or not isinstance(v, (dict, list)) for v in value):
            items = [f"{inner}{json.dumps(v, allow_nan=False, ensure_ascii=False)}" for v in value]
        else:
            items = [f"{inner}{_dump(v, level + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value, allow_nan=False, ensure_ascii=False)


def write_summary(document: Mapping[str, Any], out: Path) -> Path:
    """Write the document atomically (temporary file, then rename); returns the path."""
    out = Path(out)
    write_text_atomic(out, dumps_summary(document))
    return out


def load_summary(path: Path) -> dict[str, Any]:
    """Read a summary document back; HarnessError when it is missing or not this schema."""
    from harness.errors import ExitCode, HarnessError

    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HarnessError(f"no summary at {path}: run `harness summarize` first", ExitCode.NOT_FOUND) from None
    except (OSError, ValueError) as err:
        raise HarnessError(f"cannot read the summary {path}: {err}") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA_ID:
        raise HarnessError(f"{path} is not a {SCHEMA_ID} summary")
    return document
