"""One bad capture never changes or stops the others: the poison list, all in one capture set beside good runs.

Each poisoned run carries one finding of the review. The summary of the whole
set must be written (exit 0, warnings, no traceback), every good run's part of
it must equal the summary of the good runs alone, and each poisoned run must be
flagged with a note naming the file, the key and the value (docs/summary.md,
"Sanity rules").
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAB = REPO / "tests" / "data" / "captures" / "lab"
GOOD = ["e2b-dapo-filter", "e6a-base", "plain", "plain-48", "plain-48-s2"]
T0 = "2026-11-29T12:00:00Z"
HUGE = int("9" * 400)  # a 400-digit integer


def at(seconds: float) -> str:
    from harness.times import format_time_us, parse_time_us

    return format_time_us(parse_time_us(T0) + round(seconds * 1_000_000))


def metrics(rollout: float, reward: float = 0.6, **extra: object) -> dict:
    return {
        "perf/rollout_time": rollout,
        "rollout/zero_std/count_0": 3,
        "rollout/zero_std/count_1": 12,
        "rollout/raw_reward": reward,
        "rollout/truncated_ratio": 0.05,
        "perf/step_time": 100.0,
        **extra,
    }


def steps(**changes: dict) -> list[dict]:
    """Four complete steps, rollouts of 50 s ending at 100, 300, 500 and 700 s; `s1={...}` changes step 1."""
    out = []
    for n, end in enumerate((100, 300, 500, 700)):
        line = {
            "step": n,
            "complete": True,
            "t_rollout_end": at(end),
            "t_step_end": at(end + 50),
            "metrics": metrics(50.0),
        }
        change = dict(changes.get(f"s{n}", {}))
        line["metrics"].update(change.pop("metrics", {}))
        line.update(change)
        out.append(line)
    return out


NO_KEY = object()  # write_run(time_scale=NO_KEY): a manifest without the key; manifest=False: no manifest at all
FILTER = "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter"
SIM_BANNER = (
    "harness sim: the simulated Miles trainer; time scale 0.1: times are measured wall seconds / 0.1, pauses included"
)


def write_run(
    root: Path,
    name: str,
    *,
    lines: list | None = None,
    pauses: list | None = None,
    time_scale: object = 1,
    compare: object = None,
    filter_on: bool = False,
    manifest: bool = True,
    log: list[tuple[float, str]] | None = None,
) -> Path:
    """A plain run of four steps (started at 0 s, ended at 1,000 s) with a pause window [250, 260].

    `filter_on`: a filter run (O = 48); `log`: container.log's lines, as (seconds, text).
    """
    run = root / name
    run.mkdir(parents=True)
    (run / "status.json").write_text(
        json.dumps(
            {
                "run": name,
                "run_id": f"{name}-0",
                "state": "succeeded",
                "exit_code": 0,
                "started_at": at(0),
                "ended_at": at(1000),
                "steps_expected": 4,
                "steps_complete": 4,
                "error": None,
            }
        )
    )
    if manifest:
        facts = {
            "run": name,
            "run_id": f"{name}-0",
            "time_scale": time_scale,
            "experiment": {"name": name, "seed": 1, "steps": 4, "compare": compare},
        }
        if time_scale is NO_KEY:
            del facts["time_scale"]
        (run / "manifest.json").write_text(json.dumps(facts))
    (run / "args.json").write_text(
        json.dumps(
            {
                "rollout_batch_size": 32,
                "over_sampling_batch_size": 48 if filter_on else None,
                "n_samples_per_prompt": 8,
                "dynamic_sampling_filter_path": FILTER if filter_on else None,
            }
        )
    )
    if log is not None:
        (run / "container.log").write_text("".join(f"{at(seconds)} {text}\n" for seconds, text in log))
    text = [line if isinstance(line, str) else json.dumps(line) for line in (lines if lines is not None else steps())]
    (run / "metrics.jsonl").write_text("\n".join(text) + "\n")
    windows = pauses if pauses is not None else [{"start": at(250), "end": at(260), "reason": "hot", "peak_c": 86.0}]
    (run / "pauses.jsonl").write_text("".join(json.dumps(p) + "\n" for p in windows))
    return run


def poison(root: Path) -> None:
    """Every poisoned run of the review, each named after its finding."""
    write_run(
        root, "p-reward-1e308", lines=steps(**{f"s{n}": {"metrics": {"rollout/raw_reward": 1e308}} for n in range(4)})
    )
    write_run(root, "p-rollout-1e303", lines=steps(s1={"metrics": {"perf/rollout_time": 1e303}}))
    write_run(
        root,
        "p-huge-int",
        lines=steps(s0={"metrics": {"rollout/zero_std/count_1": HUGE}}, s2={"metrics": {"perf/rollout_time": HUGE}}),
    )
    deep = steps()
    deep.insert(1, "[" * 100_000)
    write_run(root, "p-deep-metrics", lines=deep)
    (write_run(root, "p-deep-status") / "status.json").write_text("[" * 100_000)
    args = write_run(root, "p-dev-zero") / "args.json"
    args.unlink()
    os.symlink("/dev/zero", args)
    write_run(root, "p-time-scale", time_scale=1e-300)
    write_run(
        root,
        "p-pause-forever",
        pauses=[{"start": "0001-01-01T00:00:00Z", "end": "9999-12-31T23:59:59Z", "reason": "hot", "peak_c": 86.0}],
    )
    write_run(root, "p-end-9999", lines=steps(s2={"t_rollout_end": "9999-12-31T23:59:59Z"}))
    write_run(root, "p-end-0001", lines=steps(s2={"t_rollout_end": "0001-01-01T00:00:00Z"}))
    write_run(
        root,
        "p-negative",
        lines=steps(s1={"metrics": {"perf/rollout_time": -5.0}}, s2={"metrics": {"perf/step_time": -3.0}}),
    )
    write_run(root, "p-compare-list", compare={"baseline": ["plain"], "baselines": ["plain"]})
    poison_counts(root)
    poison_pauses(root)
    poison_time_scales(root)
    poison_step_order(root)


DROP_RIGHT = "rollout/dynamic_filter/drop_zero_std_1"
COUNT_RIGHT = "rollout/zero_std/count_1"


def filter_steps(**changes: dict) -> list[dict]:
    """`steps` of a filter run: 5 groups dropped all right in each step, unless changed."""
    lines = steps(**changes)
    for line, n in zip(lines, range(4)):
        line["metrics"] = {DROP_RIGHT: 5, "rollout/raw_reward_unfiltered": 0.6, **line["metrics"]}
        line["metrics"].update(changes.get(f"s{n}", {}).get("metrics", {}))
    return lines


def poison_counts(root: Path) -> None:
    """Counts that are not sane integers: too big for 64 bits, beyond 2^53, negative, fractional, summing past 2^53."""
    write_run(root, "p-count-1e308", filter_on=True, lines=filter_steps(s1={"metrics": {DROP_RIGHT: 1e308}}))
    write_run(
        root,
        "p-count-1e30",
        filter_on=True,
        lines=filter_steps(s2={"metrics": {"rollout/dynamic_filter/drop_zero_std_0": 10**30}}),
    )
    write_run(
        root,
        "p-count-negative",
        filter_on=True,
        lines=filter_steps(s1={"metrics": {"rollout/dynamic_filter/drop_group_has_aborted": -5}}),
    )
    write_run(root, "p-count-fraction", filter_on=True, lines=filter_steps(s3={"metrics": {DROP_RIGHT: 2.5}}))
    write_run(root, "p-zero-std-1e308", lines=steps(s0={"metrics": {COUNT_RIGHT: 1e308}}))
    many = {f"rollout/dynamic_filter/drop_reason_{k}": 2**53 for k in range(1100)}  # each sane, the sum past 2^63
    write_run(
        root,
        "p-count-sum",
        filter_on=True,
        lines=filter_steps(
            s0={"metrics": many}, s1={"metrics": {DROP_RIGHT: 2**53}}, s2={"metrics": {DROP_RIGHT: 2**53}}
        ),
    )


def poison_pauses(root: Path) -> None:
    """Pause windows left open in a finished run (the close line lost), and one covering a whole rollout."""
    write_run(root, "p-open-window", pauses=[{"start": at(250), "end": None, "reason": "hot", "peak_c": 86.0}])
    write_run(
        root,
        "p-open-window-log",
        pauses=[{"start": at(250), "end": None, "reason": "hot", "peak_c": 86.0}],
        log=[
            (10, "a line"),
            (100, "a line"),
            (250.5, "printed as the pause began"),
            (262, "running again"),
            (400, "a line"),
        ],
    )
    write_run(
        root, "p-pause-covers-rollout", pauses=[{"start": at(240), "end": at(310), "reason": "hot", "peak_c": 86.0}]
    )
    write_run(root, "p-rollout-zero", lines=steps(s2={"metrics": {"perf/rollout_time": 0.0}}))


BAD_TIME_SCALES = {"zero": 0, "null": None, "text": "abc", "huge": 1e300, "no-key": NO_KEY}


def poison_time_scales(root: Path) -> None:
    """Simulated runs (time scale 0.1) whose manifest lacks a valid time scale: the simulator's first line has it."""
    for label, scale in BAD_TIME_SCALES.items():
        write_run(root, f"p-scale-{label}", time_scale=scale, log=[(0, SIM_BANNER), (1, "Job submitted")])
    write_run(root, "p-scale-no-manifest", manifest=False, log=[(0, SIM_BANNER)])
    write_run(root, "p-scale-unknown", time_scale="abc", log=[(0, "not the simulator")])
    write_run(root, "p-minority-median", lines=steps(**{f"s{n}": {"t_rollout_end": None} for n in (1, 2, 3)}))


def poison_step_order(root: Path) -> None:
    """A step id of -1, and a t_rollout_end that goes back in time from one step to the next."""
    lines = steps()
    lines.insert(
        0,
        {
            "step": -1,
            "complete": True,
            "t_rollout_end": at(20),
            "t_step_end": at(30),
            "metrics": metrics(10.0, reward=0.1),
        },
    )
    write_run(root, "p-step-minus-1", lines=lines)
    write_run(root, "p-rollout-end-backwards", lines=steps(s2={"t_rollout_end": at(200)}))


def good_captures(root: Path) -> Path:
    root.mkdir(parents=True)
    for name in GOOD:
        shutil.copytree(LAB / name, root / name)
    return root


def summarize_with_the_script(root: Path, out: Path, *extra: str) -> tuple[dict, subprocess.CompletedProcess]:
    done = subprocess.run(
        [sys.executable, "summarize_miles.py", "--capture-dir", str(root), "--out", str(out), *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return read_strictly(out), done


def refuse(constant: str) -> None:
    raise AssertionError(f"not strict JSON: bare {constant}")


def read_strictly(path: Path) -> dict:
    return json.loads(path.read_text(), parse_constant=refuse) if path.exists() else {}


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory) -> dict:
    """The summary of the good runs and the poisoned ones together, as `harness summarize --no-figures` writes it.

    In process, so the fast tier checks every finding; the script in a process of its own, figures drawn, writes
    the same document (`poisoned_by_script`, the integration tests).
    """
    from typer.testing import CliRunner

    from harness.cli import app

    root = good_captures(tmp_path_factory.mktemp("poisoned") / "gpu")
    poison(root)
    out = root / "summary" / "miles-gb10-lab.json"
    done = CliRunner().invoke(app, ["summarize", "--capture-dir", str(root), "--out", str(out), "--no-figures"])
    return {"document": read_strictly(out), "done": done, "root": root}


@pytest.fixture(scope="module")
def poisoned_by_script(tmp_path_factory) -> dict:
    """The same set summarized by the script, in a process of its own, with its figures."""
    root = good_captures(tmp_path_factory.mktemp("poisoned-by-script") / "gpu")
    poison(root)
    document, done = summarize_with_the_script(root, root / "summary" / "miles-gb10-lab.json")
    return {"document": document, "done": done, "root": root}


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict:
    root = good_captures(tmp_path_factory.mktemp("good") / "gpu")
    document, done = summarize_with_the_script(root, root / "summary" / "miles-gb10-lab.json", "--no-figures")
    assert done.returncode == 0, done.stderr
    return document


def run_of(poisoned: dict, name: str) -> dict:
    runs = poisoned["document"].get("runs", {})
    assert name in runs, f"{name} is not summarized: {poisoned['done'].stderr[-2000:]}"
    return runs[name]


def notes_of(poisoned: dict, name: str) -> str:
    return "\n".join(run_of(poisoned, name)["notes"])


def but_when(document: dict) -> dict:
    return {k: v for k, v in document.items() if k not in ("generated_at", "harness_version")}


@pytest.mark.integration
def test_the_script_writes_the_json_with_warnings_and_no_traceback(poisoned_by_script, poisoned):
    done = poisoned_by_script["done"]
    assert "Traceback" not in done.stderr + done.stdout
    assert done.returncode == 0, done.stderr
    assert poisoned_by_script["document"]["schema"] == "miles-gb10-lab/1"
    assert "warning: p-reward-1e308: values out of range, flagged in its notes" in done.stderr
    assert "warning: p-deep-status: status.json unreadable, summarized with state unknown" in done.stderr
    # what the fast tier checks, finding by finding, is what the script writes
    assert but_when(poisoned_by_script["document"]) == but_when(poisoned["document"])


def test_the_command_in_process_writes_the_json_with_warnings_and_no_traceback(poisoned):
    done = poisoned["done"]
    assert "Traceback" not in done.output
    assert done.exit_code == 0, done.output
    assert poisoned["document"]["schema"] == "miles-gb10-lab/1"
    assert "warning: p-reward-1e308: values out of range, flagged in its notes" in done.stderr


def test_the_document_is_valid_against_the_schema(poisoned):
    from support.summaries import summary_schema_validator

    summary_schema_validator().validate(poisoned["document"])


@pytest.mark.integration
def test_good_runs_keep_exactly_their_numbers(poisoned_by_script, good):
    document = poisoned_by_script["document"]
    for name in GOOD:
        assert document["runs"][name] == good["runs"][name], name
    assert document["comparisons"] == good["comparisons"]


def test_rewards_of_1e308_give_a_null_mean_with_a_note(poisoned):
    run = run_of(poisoned, "p-reward-1e308")
    assert [row["reward"] for row in run["steps"]] == [None] * 4  # outside --rm-type math's 0 to 1: left out
    assert run["aggregates"]["reward_mean"] is None and run["aggregates"]["reward_mean_first4"] is None
    notes = notes_of(poisoned, "p-reward-1e308")
    assert "rollout/raw_reward" in notes and "1e+308" in notes and "metrics.jsonl" in notes


def test_a_rollout_time_of_1e303_over_a_pause_is_flagged_not_counted(poisoned):
    run = run_of(poisoned, "p-rollout-1e303")
    row = run["steps"][1]
    assert row["rollout_time_s"] == 1e303
    assert (row["pause_overlap_s"], row["rollout_time_adjusted_s"], row["clean"]) == (None, None, None)
    assert run["aggregates"]["rollout_time_adjusted_median_s"] == 50.0  # the three other steps
    notes = notes_of(poisoned, "p-rollout-1e303")
    assert "perf/rollout_time" in notes and "1e+303" in notes and "step 1" in notes


def test_a_400_digit_integer_metric_is_flagged_and_never_written(poisoned):
    run = run_of(poisoned, "p-huge-int")
    notes = notes_of(poisoned, "p-huge-int")
    assert "rollout/zero_std/count_1" in notes and "perf/rollout_time" in notes and "400 digits" in notes
    assert run["steps"][2]["rollout_time_s"] is None
    assert "9" * 30 not in json.dumps(run)
    assert run["aggregates"]["zero_std_all_right_total"] < 100


def test_a_line_nested_100000_deep_in_metrics_jsonl_is_a_bad_line(poisoned):
    run = run_of(poisoned, "p-deep-metrics")
    assert [row["step"] for row in run["steps"]] == [0, 1, 2, 3]
    assert "metrics.jsonl line 2" in notes_of(poisoned, "p-deep-metrics")


def test_a_status_json_nested_100000_deep_leaves_the_state_unknown(poisoned):
    run = run_of(poisoned, "p-deep-status")
    assert run["state"] == "unknown"
    assert len(run["steps"]) == 4
    assert "status.json" in notes_of(poisoned, "p-deep-status")


def test_args_json_linked_to_dev_zero_is_not_read(poisoned):
    run = run_of(poisoned, "p-dev-zero")
    assert "args.json is not a regular file" in notes_of(poisoned, "p-dev-zero")
    assert run["rollout_batch_size"] is None  # nothing else says B: the experiment has no miles block


def test_a_time_scale_of_1e_300_is_refused_with_a_note(poisoned):
    run = run_of(poisoned, "p-time-scale")
    assert run["time_scale"] == 1
    notes = notes_of(poisoned, "p-time-scale")
    assert "manifest.json" in notes and "time_scale" in notes and "1e-300" in notes
    # no simulator's line to take it from: where the rollouts lie against the pause is unknown
    assert run["steps"][1]["pause_overlap_s"] is None and run["steps"][1]["rollout_time_adjusted_s"] is None
    assert run["aggregates"]["pause_total_s"] == 10.0  # wall seconds, as said


def test_a_pause_window_from_year_1_to_9999_is_clipped_to_the_run(poisoned):
    run = run_of(poisoned, "p-pause-forever")
    assert run["aggregates"]["pause_total_s"] == 1000.0  # the run's span, started_at to ended_at
    notes = notes_of(poisoned, "p-pause-forever")
    assert "pauses.jsonl line 1" in notes and "0001-01-01T00:00:00" in notes and "clipped" in notes


@pytest.mark.parametrize("name, stamp", [("p-end-9999", "9999-12-31T23:59:59"), ("p-end-0001", "0001-01-01T00:00:00")])
def test_a_rollout_end_outside_the_run_is_noted_and_not_counted_clean(poisoned, name, stamp):
    run = run_of(poisoned, name)
    row = run["steps"][2]
    assert (row["pause_overlap_s"], row["rollout_time_adjusted_s"], row["clean"]) == (None, None, None)
    assert run["aggregates"]["clean_steps"] == 2  # steps 0 and 3; step 1 overlaps the pause
    notes = notes_of(poisoned, name)
    assert "t_rollout_end" in notes and stamp in notes and "step 2" in notes and "outside the run" in notes


def test_negative_durations_are_flagged(poisoned):
    run = run_of(poisoned, "p-negative")
    assert run["steps"][1]["rollout_time_s"] is None and run["steps"][2]["step_time_s"] is None
    assert run["aggregates"]["step_time_sum_s"] is None
    notes = notes_of(poisoned, "p-negative")
    assert "perf/rollout_time is negative (-5.0) in step 1" in notes
    assert "perf/step_time is negative (-3.0) in step 2" in notes


def test_a_compare_baseline_given_as_a_list_is_said(poisoned):
    notes = notes_of(poisoned, "p-compare-list")
    assert "manifest.json" in notes and "compare.baseline" in notes and "['plain']" in notes
    assert not [c for c in poisoned["document"]["comparisons"] if c["run"] == "p-compare-list"]


def test_runs_summarized_in_several_processes_give_the_same_document(poisoned):
    from harness.summary.summarize import summarize

    def stable(workers: int) -> dict:
        document = summarize(poisoned["root"], workers=workers, generated_at="2026-11-29T12:00:00Z").to_dict()
        return {k: v for k, v in document.items() if k != "harness_version"}

    assert stable(2) == stable(1)
    assert but_when(stable(1)) == but_when(poisoned["document"])


def test_runs_encoded_where_they_are_computed_are_written_as_the_writer_would(poisoned):
    from harness.summary.serialize import dumps_summary
    from harness.summary.summarize import summarize_with_warnings

    summary = summarize_with_warnings(poisoned["root"], workers=2, encode=True)
    assert set(summary.encoded_runs) == set(summary.document.runs)
    assert dumps_summary(summary.document, summary.encoded_runs) == dumps_summary(summary.document)


def test_a_summary_leaves_the_collector_on_nothing_frozen_and_what_it_made_in_the_oldest_generation(poisoned):
    """The collector is paused while a summary is made; after it, the summary's objects are old (no young
    collection walks them), nothing stays frozen, and the collector runs again."""
    import gc

    from harness.summary.summarize import summarize_with_warnings

    assert gc.isenabled() and gc.get_freeze_count() == 0
    summary = summarize_with_warnings(poisoned["root"], workers=1)
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    runs = list(summary.document.runs.values())
    assert runs
    young = {id(thing) for generation in (0, 1) for thing in gc.get_objects(generation=generation)}
    assert not [run for run in runs if id(run) in young or id(run.notes) in young]
    assert id(summary.document) not in young


# ---------------------------------------------------------------- counts that are not sane integers


def column(run: dict, key: str) -> list:
    return [row[key] for row in run["steps"]]


DROP_COLUMNS = ("dropped_groups", "dropped_all_right", "dropped_all_wrong", "dropped_other", "batches")


@pytest.mark.parametrize(
    "name, step, key, shown, unknown",
    [
        ("p-count-1e308", 1, DROP_RIGHT, "1e+308", {"dropped_groups", "dropped_all_right", "batches"}),
        (
            "p-count-1e30",
            2,
            "rollout/dynamic_filter/drop_zero_std_0",
            "100000...0000 (31 digits)",  # the file's integer, kept whole and shortened for the note
            {"dropped_groups", "dropped_all_wrong", "batches"},
        ),
        (
            "p-count-negative",
            1,
            "rollout/dynamic_filter/drop_group_has_aborted",
            "-5",
            {"dropped_groups", "dropped_other", "batches"},
        ),
        ("p-count-fraction", 3, DROP_RIGHT, "2.5", {"dropped_groups", "dropped_all_right", "batches"}),
    ],
)
def test_a_drop_count_that_is_not_a_sane_integer_is_null_in_its_step_with_a_note(
    poisoned, name, step, key, shown, unknown
):
    run = run_of(poisoned, name)
    good = {"dropped_groups": 5, "dropped_all_right": 5, "dropped_all_wrong": 0, "dropped_other": 0, "batches": 1}
    for field in DROP_COLUMNS:
        expected = [None if n == step and field in unknown else good[field] for n in range(4)]
        assert column(run, field) == expected, field
    assert run["aggregates"]["dropped_groups_max"] == 5 and run["aggregates"]["steps"] == 4
    notes = notes_of(poisoned, name)
    assert key in notes and shown in notes and f"step {step}" in notes and "metrics.jsonl" in notes
    assert f"warning: {name}: values out of range, flagged in its notes" in poisoned["done"].stderr


def test_a_zero_variance_count_of_1e308_is_null_in_its_step_with_a_note(poisoned):
    run = run_of(poisoned, "p-zero-std-1e308")
    assert column(run, "zero_std_all_right") == [None, 12, 12, 12]
    assert column(run, "zero_std_all_wrong") == [3, 3, 3, 3]
    assert run["aggregates"]["zero_std_all_right_total"] == 36
    notes = notes_of(poisoned, "p-zero-std-1e308")
    assert COUNT_RIGHT in notes and "1e+308" in notes and "step 0" in notes


def test_counts_whose_sum_passes_2_to_the_53_are_null_with_a_note(poisoned):
    run = run_of(poisoned, "p-count-sum")
    assert column(run, "dropped_groups") == [None, 2**53, 2**53, 5]
    assert column(run, "batches")[0] is None and column(run, "dropped_all_right")[0] == 5
    assert run["aggregates"]["dropped_all_right_total"] is None
    assert run["aggregates"]["dropped_groups_max"] == 2**53
    notes = notes_of(poisoned, "p-count-sum")
    assert "step 0" in notes and "2^53" in notes and "dropped_all_right_total" in notes


def test_every_integer_written_is_within_2_to_the_53(poisoned):
    def integers(value):
        if isinstance(value, dict):
            for item in value.values():
                yield from integers(item)
        elif isinstance(value, list):
            for item in value:
                yield from integers(item)
        elif isinstance(value, int) and not isinstance(value, bool):
            yield value

    assert max(map(abs, integers(poisoned["document"]))) <= 2**53


# ---------------------------------------------------------------- pause windows left open, pauses over a whole rollout


def test_an_open_window_in_a_finished_run_ends_at_the_next_step_time(poisoned):
    run = run_of(poisoned, "p-open-window")
    # opened at 250 s; step 1's rollout ended at 300 s, so the run was not frozen after that
    assert run["aggregates"]["pause_total_s"] == 50.0
    assert column(run, "pause_overlap_s") == [0.0, 50.0, 0.0, 0.0]
    assert column(run, "rollout_time_adjusted_s") == [50.0, None, 50.0, 50.0]
    assert column(run, "clean") == [True, False, True, True]
    assert run["aggregates"]["rollout_time_adjusted_median_s"] == 50.0
    notes = notes_of(poisoned, "p-open-window")
    assert "never closed" in notes and at(300)[:19] in notes
    assert "rollout_time_adjusted_s" in notes and "step 1" in notes


def test_an_open_window_in_a_finished_run_ends_at_the_next_log_line(poisoned):
    run = run_of(poisoned, "p-open-window-log")
    # the line at 250.5 s is within a second of the start (printed as the pause began): the one at 262 s ends it
    assert run["aggregates"]["pause_total_s"] == 12.0
    assert column(run, "pause_overlap_s") == [0.0, 12.0, 0.0, 0.0]
    assert column(run, "rollout_time_adjusted_s") == [50.0, 38.0, 50.0, 50.0]
    notes = notes_of(poisoned, "p-open-window-log")
    assert "container.log" in notes and at(262)[:19] in notes


def test_a_pause_over_a_whole_rollout_gives_no_adjusted_time(poisoned):
    run = run_of(poisoned, "p-pause-covers-rollout")
    assert column(run, "pause_overlap_s") == [0.0, 50.0, 0.0, 0.0]
    assert column(run, "rollout_time_adjusted_s") == [50.0, None, 50.0, 50.0]
    assert column(run, "clean") == [True, False, True, True]
    notes = notes_of(poisoned, "p-pause-covers-rollout")
    assert "rollout_time_adjusted_s" in notes and "step 1" in notes


def test_a_rollout_time_of_0_gives_no_adjusted_time(poisoned):
    run = run_of(poisoned, "p-rollout-zero")
    assert column(run, "rollout_time_s") == [50.0, 50.0, 0.0, 50.0]
    assert column(run, "rollout_time_adjusted_s") == [50.0, 40.0, None, 50.0]
    assert "perf/rollout_time is 0 in step 2: rollout_time_adjusted_s null" in notes_of(poisoned, "p-rollout-zero")


def test_no_adjusted_time_written_is_zero_or_below(poisoned):
    medians = 0
    for name, run in poisoned["document"]["runs"].items():
        adjusted = [v for v in column(run, "rollout_time_adjusted_s") if v is not None]
        assert all(v > 0 for v in adjusted), name
        complete = [row["rollout_time_adjusted_s"] for row in run["steps"] if row["complete"]]
        given = [v for v in complete if v is not None]
        median = run["aggregates"]["rollout_time_adjusted_median_s"]
        if given and len(given) * 2 >= len(complete):  # null only where fewer than half the steps have a value
            assert median == statistics.median(given) and median > 0, name
            medians += 1
        else:
            assert median is None, name
    assert medians >= len(poisoned["document"]["runs"]) // 2  # most runs keep their median: the check above ran


# ---------------------------------------------------------------- the time scale of simulated runs


@pytest.mark.parametrize("label", [*BAD_TIME_SCALES, "no-manifest"])
def test_a_sim_run_without_a_valid_time_scale_takes_the_one_its_log_prints(poisoned, label):
    name = f"p-scale-{label}"
    run = run_of(poisoned, name)
    assert run["time_scale"] == 0.1
    # 50 trainer s = 5 wall s: step 1's rollout [295, 300] misses the window [250, 260]
    assert column(run, "pause_overlap_s") == [0.0, 0.0, 0.0, 0.0]
    assert column(run, "rollout_time_adjusted_s") == [50.0] * 4
    assert run["aggregates"]["pause_total_s"] == pytest.approx(100.0)  # 10 wall s / 0.1
    notes = notes_of(poisoned, name)
    assert "container.log line 1" in notes and "the time scale the simulator printed, 0.1" in notes
    flagged = f"warning: {name}: values out of range, flagged in its notes" in poisoned["done"].stderr
    assert flagged == (label not in ("no-key", "no-manifest"))  # a bad value is flagged, a missing one is not


def test_a_run_whose_time_scale_is_unknown_publishes_no_adjusted_numbers(poisoned):
    run = run_of(poisoned, "p-scale-unknown")
    assert column(run, "rollout_time_s") == [50.0] * 4
    for key in ("pause_overlap_s", "rollout_time_adjusted_s", "clean"):
        assert column(run, key) == [None] * 4, key
    assert run["aggregates"]["rollout_time_adjusted_median_s"] is None
    assert run["aggregates"]["clean_steps"] == 0
    assert run["time_scale"] == 1 and run["aggregates"]["pause_total_s"] == 10.0  # wall seconds, as said
    notes = notes_of(poisoned, "p-scale-unknown")
    assert "'abc'" in notes and "time scale unknown" in notes


def test_a_median_over_a_minority_of_the_steps_is_not_the_runs_median(poisoned):
    run = run_of(poisoned, "p-minority-median")
    assert column(run, "rollout_time_adjusted_s") == [50.0, None, None, None]
    assert run["aggregates"]["rollout_time_adjusted_median_s"] is None
    notes = notes_of(poisoned, "p-minority-median")
    assert "rollout_time_adjusted_median_s" in notes and "1 of 4" in notes


# ---------------------------------------------------------------- step ids and the order of time


def test_a_step_id_of_minus_1_is_noted_and_left_out(poisoned):
    run = run_of(poisoned, "p-step-minus-1")
    assert column(run, "step") == [0, 1, 2, 3]
    assert run["aggregates"]["reward_mean_first4"] == 0.6 and run["aggregates"]["steps"] == 4
    notes = notes_of(poisoned, "p-step-minus-1")
    assert "metrics.jsonl line 1" in notes and "step -1" in notes


def test_a_rollout_end_that_goes_back_in_time_is_noted_and_its_steps_not_counted(poisoned):
    run = run_of(poisoned, "p-rollout-end-backwards")
    assert column(run, "rollout_time_adjusted_s") == [50.0, None, None, 50.0]
    assert column(run, "clean") == [True, None, None, True]
    assert run["aggregates"]["rollout_time_adjusted_median_s"] == 50.0  # 2 of 4 steps: half, not a minority
    notes = notes_of(poisoned, "p-rollout-end-backwards")
    assert "t_rollout_end" in notes and "back" in notes and at(300)[:19] in notes and at(200)[:19] in notes


def test_a_summary_leaves_the_cycle_collector_as_it_found_it(poisoned):
    import gc

    from harness.summary.summarize import summarize_with_warnings

    assert gc.isenabled() and gc.get_freeze_count() == 0
    summarize_with_warnings(poisoned["root"], workers=2)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        summarize_with_warnings(poisoned["root"], workers=1)
        assert not gc.isenabled()
    finally:
        gc.enable()
