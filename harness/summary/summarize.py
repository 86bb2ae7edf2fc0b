"""Captures -> the summary document, schema `miles-gb10-lab/1` (the rules in docs/summary.md).

The jobs, each in its own module, in the order they run:

- `harness.capture` reads each run's files (bounded, tolerant; metrics.jsonl
  as columns);
- `frames`: one capture -> the run's facts, checked, its span and its pause
  windows (`run_config`: filter, B, O, n);
- `rows`: a frame -> its step rows (`StepTable`);
- `aggregates`: the rows -> the run's aggregates;
- `comparisons`: the runs -> one comparison per `compare` block;
- `seeds`: the runs -> conditions, figures pooled over seeds, and each
  comparison's across-seed block;
- `document` and `serialize`: the typed document and its JSON.

Each run is summarized on its own, from its own files: a run that cannot be
read or holds values out of range is flagged in its notes (or, failing
everything, listed under `skipped` with the reason), and no other run's
numbers change. The document is always complete enough to write.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional, Sequence, Union

from harness import __version__
from harness.capture.reader import RunCapture, Skipped, find_runs
from harness.checkpoints.stitch import StitchedPart, read_run
from harness.mileslog import keys
from harness.stats import seeds as seedstats
from harness.stats.seeds import DEFAULT_EFFECT
from harness.summary import SCHEMA_ID
from harness.summary.aggregates import aggregate, null_non_finite
from harness.summary.comparisons import CompareBlock, compare_run, seeds_by_experiment
from harness.summary.conditions import RunConditions, condition_notes
from harness.summary.decisions import read_decisions
from harness.summary.document import Comparison, RunSummary, StepTable, SummaryDocument, to_plain_object
from harness.summary.frames import read_frame
from harness.summary.lineage import run_lineage
from harness.summary.rows import build_rows
from harness.summary.seeds import SeedComparisons, summarize_conditions
from harness.summary.serialize import dumps_summary, encode_run, load_summary, write_summary
from harness.times import now_rfc3339

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

__all__ = [
    "Summary",
    "dumps_summary",
    "load_summary",
    "summarize",
    "summarize_captures",
    "summarize_directory",
    "summarize_run",
    "summarize_with_warnings",
    "write_summary",
]


@dataclass
class RunResult:
    """One run's summary, and its checked compare block (which the JSON does not carry)."""

    name: str
    summary: RunSummary
    compare: Optional[CompareBlock]
    flagged: bool = False  # a value of the run was out of range (its notes say which)
    run_json: Optional[bytes] = None  # the run encoded (serialize.encode_run), where it was computed
    conditions: Optional[RunConditions] = None  # what the JSON does not carry either: said in comparison notes

    def to_dict(self) -> JSONObject:
        """`runs.<run>` as the JSON holds it (`lineage` only for a resumed run)."""
        return to_plain_object(self.summary)


@dataclass
class Summary:
    """The document, and what the commands should warn about."""

    document: SummaryDocument
    warnings: list[str] = field(default_factory=list)
    encoded_runs: dict[str, bytes] = field(default_factory=dict)  # for write_summary: runs already encoded
    seed_comparisons: Optional[SeedComparisons] = None  # the conditions compared, for comparisons made on demand


def summarize_run(capture: RunCapture, parts: Sequence[StitchedPart] = ()) -> RunResult:
    """One run's part of the document, from its capture alone (`parts`: a resumed run's attempts, stitched into
    `capture` by harness.checkpoints.stitch)."""
    frame = read_frame(capture)
    notes = frame.notes
    rows = build_rows(frame, notes)
    config = frame.config
    aggregates = aggregate(
        rows.table, config.filter, rows.pause_total_s, rows.reward_key or keys.reward_key(config.filter), notes
    )
    aggregates.pauses, aggregates.pause_failures = frame.pauses.pauses, frame.pauses.failed
    null_non_finite(aggregates, notes)
    summary = RunSummary(
        experiment=frame.experiment,
        seed=frame.seed,
        state=frame.state,
        filter=config.filter,
        rollout_batch_size=config.rollout_batch_size,
        over_sampling_batch_size=config.over_sampling_batch_size,
        n_samples_per_prompt=config.n_samples_per_prompt,
        steps=rows.table,
        aggregates=aggregates,
        notes=notes,
        time_scale=frame.time_scale if frame.time_scale is not None else 1,  # unknown: said in the notes
        steps_expected=frame.steps_expected,
        reward_key=rows.reward_key,
        config_sources=config.sources,
        reward_source=run_reward_source(rows.table),
        simulated=frame.conditions.simulated if frame.conditions is not None else None,
        config_hash=frame.conditions.config_hash if frame.conditions is not None else None,
        start_temp_c=frame.start_temp_c,
        start_below_c=frame.start_below_c,
        attempt=capture.attempt,
        started_at=_text((capture.status or {}).get("started_at")),
    )
    if parts:  # which capture this is: the lineage's head (harness.summary.staleness compares it)
        summary.started_at = _text((parts[-1].capture.status or {}).get("started_at"))
        argv = (capture.manifest or {}).get("trainer_argv")
        words = [str(word) for word in argv] if isinstance(argv, list) else []
        summary.lineage = run_lineage(parts, rows.table, words, notes)
    compare = CompareBlock(frame.baseline, frame.baselines) if frame.baseline is not None else None
    return RunResult(capture.name, summary, compare, flagged=notes.flags > 0, conditions=frame.conditions)


def _text(value: object) -> Optional[str]:
    return value if isinstance(value, str) else None


def run_reward_source(table: StepTable) -> Optional[str]:
    """Where the run's reward figures came from: `printed`, `derived`, `printed and derived`, or None (no reward).

    Over the complete steps, as the means are."""
    found = {source for done, source in zip(table.complete, table.reward_source) if done and source is not None}
    if len(found) > 1:
        return f"{keys.PRINTED} and {keys.DERIVED}"
    return found.pop() if found else None


def summarize_captures(
    captures: Sequence[RunCapture],
    *,
    skipped: Sequence[Skipped] = (),
    generated_at: Optional[str] = None,
    effect: float = DEFAULT_EFFECT,
) -> Summary:
    """The document for already-read captures, with the warnings the commands print."""
    outcomes = [_summarize_or_skip(c) for c in sorted(captures, key=lambda c: c.name)]
    return _document(outcomes, skipped, generated_at, effect)


def summarize(
    capture_dir: Path,
    *,
    generated_at: Optional[str] = None,
    workers: Optional[int] = None,
    effect: float = DEFAULT_EFFECT,
) -> SummaryDocument:
    """Read every capture under `capture_dir` and return the summary document."""
    return summarize_with_warnings(capture_dir, generated_at=generated_at, workers=workers, effect=effect).document


def summarize_with_warnings(
    capture_dir: Path,
    *,
    generated_at: Optional[str] = None,
    workers: Optional[int] = None,
    encode: bool = False,
    effect: float = DEFAULT_EFFECT,
) -> Summary:
    """`summarize`, with the warnings the commands print.

    The runs are read and summarized in `workers` processes (default: one
    per core, up to 8, when the captures are large enough, or many enough,
    to gain from it);
    each run's result is the same either way. `encode`: also encode each
    run for the JSON where it is computed (`Summary.encoded_runs`).
    `effect`: the difference in mean reward the across-seed comparisons say
    how many seeds would detect.
    """
    with _collector_paused():
        return _summarize_directories(Path(capture_dir), generated_at, workers, encode, effect)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off (and what exists frozen) while a summary is made.

    A summary allocates many objects that live to its end and makes no cycles
    worth collecting; each full collection walks every live object, so
    10,000 runs' results took the main process 3.1 CPU s to take in with the
    collector on and 1.7 s without. Frozen before the workers fork, what they
    inherit is never walked (nor its pages copied) by theirs. At the end,
    what the summary made joins the oldest generation with the rest, unwalked:
    left young, the first collections after it would walk all of it (writing
    the JSON of 10,000 runs took a third longer). The price: a cycle the
    summary left as garbage waits for the next full collection (the commands
    summarize once and end; a process that summarizes again and again would
    hold such garbage longer, never lose track of it).
    """
    was_enabled = gc.isenabled()
    freezing = gc.get_freeze_count() == 0  # never thaw what a caller froze
    gc.disable()
    if freezing:
        gc.freeze()
    try:
        yield
    finally:
        if freezing:
            gc.freeze()  # what was made here too, so that thawing moves it to the oldest generation
            gc.unfreeze()
        if was_enabled:
            gc.enable()


def _summarize_directories(
    capture_dir: Path, generated_at: Optional[str], workers: Optional[int], encode: bool, effect: float
) -> Summary:
    run_dirs, skipped = find_runs(capture_dir)
    if workers is None:
        workers = _default_workers(run_dirs)
    if workers > 1 and len(run_dirs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
        with ProcessPoolExecutor(min(workers, len(run_dirs)), mp_context=context) as pool:
            pending = pool.map(
                summarize_directory,
                run_dirs,
                [encode] * len(run_dirs),
                chunksize=max(1, len(run_dirs) // (4 * workers)),
            )
            _warm_statistics()  # while the workers read: the main process would only wait
            outcomes = list(pending)
    else:
        outcomes = [summarize_directory(d, encode) for d in run_dirs]
    summary = _document(outcomes, skipped, generated_at, effect)
    _add_decisions(summary, capture_dir)
    return summary


def _add_decisions(summary: Summary, capture_dir: Path) -> None:
    """The adaptive comparisons' blocks, as their records under the capture root hold them (`harness decide`)."""
    blocks, warnings = read_decisions(capture_dir, summary.document.runs)
    summary.document.decisions = blocks
    summary.warnings.extend(warnings)


def _warm_statistics() -> None:
    """Import scipy for the across-seed comparisons now (every worker is already forked); without it, say nothing:
    each comparison across seeds says so itself."""
    try:
        seedstats.warm()
    except ImportError:
        pass


PARALLEL_BYTES = 32 << 20  # below this much metrics.jsonl, starting processes costs more than it saves
PARALLEL_RUNS = 1_000  # unless there are this many runs: each costs its own files' reading, however short
MAX_WORKERS = 8


def _default_workers(run_dirs: Sequence[Path]) -> int:
    import os

    total = 0
    for run_dir in run_dirs:
        try:
            total += os.stat(run_dir / "metrics.jsonl").st_size
        except OSError:
            continue
    if total < PARALLEL_BYTES and len(run_dirs) < PARALLEL_RUNS:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_WORKERS))


def summarize_directory(run_dir: Path, encode: bool = False) -> Union[RunResult, Skipped]:
    """One run directory read and summarized; a run that never started (or cannot be summarized) is Skipped.

    `encode`: with the run encoded for the JSON (`RunResult.run_json`): nothing after this changes a run's summary.
    """
    stitched = read_run(run_dir)  # a resumed run: its lineage's attempts as one run
    capture = stitched.capture
    if (capture.status or {}).get("state") == "not_started":  # no run happened: nothing to summarize
        return Skipped(capture.name, f"not_started: {(capture.status or {}).get('error')}")
    result = _summarize_or_skip(capture, stitched.parts)
    if encode and isinstance(result, RunResult):  # here, so that runs summarized in parallel are encoded in parallel
        try:
            result.run_json = encode_run(result.summary, result.name)
        except ValueError:
            pass  # not strict JSON: the writer says so, where it is written
    return result


def _summarize_or_skip(capture: RunCapture, parts: Sequence[StitchedPart] = ()) -> Union[RunResult, Skipped]:
    try:
        return summarize_run(capture, parts)
    except Exception as err:  # a bug must not cost the other runs their summary: say it, go on
        return Skipped(capture.name, f"could not be summarized ({type(err).__name__}: {err})")


def _document(
    outcomes: Sequence[Union[RunResult, Skipped]],
    skipped: Sequence[Skipped],
    generated_at: Optional[str],
    effect: float = DEFAULT_EFFECT,
) -> Summary:
    skipped = list(skipped)
    results: dict[str, RunResult] = {}
    for outcome in outcomes:
        if isinstance(outcome, Skipped):
            skipped.append(outcome)
        else:
            results[outcome.name] = outcome
    warnings = [f"skipped {s.directory}: {s.reason}" for s in skipped]
    runs = {name: result.summary for name, result in results.items()}
    conditions = {name: result.conditions for name, result in results.items() if result.conditions is not None}
    grouped = summarize_conditions(runs, {name: c.config for name, c in conditions.items()})
    warnings.extend(grouped.warnings)
    across = SeedComparisons(runs, grouped, effect)
    seeds_of = seeds_by_experiment(runs)
    comparisons: list[Comparison] = []
    for name, result in results.items():
        if result.compare is None:
            continue
        try:
            comparison = compare_run(name, result.compare, runs, seeds_of)
            differ = condition_notes(name, [result.compare.baseline, *result.compare.baselines], conditions)
            comparison.notes.extend(differ)
            warnings.extend(differ)  # not silent: the commands say it too
            comparisons.append(comparison)
        except Exception as err:  # as above: one comparison, not the document
            warnings.append(f"{name}: no comparison ({type(err).__name__}: {err})")
            continue
        try:
            comparison.across_seeds = across.blocks(name, result.compare.baseline, result.compare.baselines)
        except Exception as err:  # the run's own comparison stands without it
            comparison.notes.append(f"no comparison across seeds ({type(err).__name__}: {err})")
            warnings.append(f"{name}: no comparison across seeds ({type(err).__name__}: {err})")
    for name, result in results.items():
        if result.summary.state == "unknown":
            warnings.append(
                f"{name}: status.json unreadable, summarized with state unknown ({'; '.join(result.summary.notes[:1])})"
            )
        if result.flagged:
            warnings.append(f"{name}: values out of range, flagged in its notes")
    simulated = [run.simulated for run in runs.values()]
    document = SummaryDocument(
        SCHEMA_ID,
        generated_at or now_rfc3339(),
        __version__,
        runs,
        comparisons,
        skipped,
        simulated=True if True in simulated else (False if simulated and None not in simulated else None),
        conditions=grouped.summaries,
    )
    encoded = {name: result.run_json for name, result in results.items() if result.run_json is not None}
    return Summary(document, warnings, encoded, across)
