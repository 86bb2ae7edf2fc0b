"""The sanity rules one at a time (docs/summary.md, "Sanity rules"): what is flagged, what is kept, and where the
lines are drawn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.summary.captures import read_capture
from harness.summary.summarize import summarize, summarize_run
from harness.times import format_time_us, parse_time_us

T0 = parse_time_us("2026-11-29T08:00:00Z")
PLAIN_ARGS = {
    "rollout_batch_size": 32,
    "over_sampling_batch_size": None,
    "n_samples_per_prompt": 8,
    "dynamic_sampling_filter_path": None,
}


def at(seconds: float) -> str:
    return format_time_us(T0 + round(seconds * 1_000_000))


def write_run(
    root: Path,
    name: str = "r",
    *,
    rollouts: tuple = ((100, 50.0),),
    started: float = 0,
    ended: float | None = 1000,
    pauses: list | None = None,
    manifest: dict | None = None,
    args: dict | None = None,
    lines: list[str] | None = None,
) -> Path:
    run = root / name
    run.mkdir(parents=True)
    status = {
        "run": name,
        "run_id": "x",
        "state": "succeeded",
        "exit_code": 0,
        "started_at": at(started),
        "ended_at": None if ended is None else at(ended),
        "steps_expected": len(rollouts),
        "steps_complete": len(rollouts),
        "error": None,
    }
    (run / "status.json").write_text(json.dumps(status))
    (run / "manifest.json").write_text(json.dumps(manifest or {"time_scale": 1, "experiment": {"name": name}}))
    (run / "args.json").write_text(json.dumps(args or PLAIN_ARGS))
    if lines is None:
        lines = [
            json.dumps(
                {
                    "step": i,
                    "complete": True,
                    "t_rollout_end": at(end),
                    "t_step_end": at(end + 5),
                    "metrics": {"perf/rollout_time": rollout, "perf/step_time": rollout + 5, "rollout/raw_reward": 0.5},
                }
            )
            for i, (end, rollout) in enumerate(rollouts)
        ]
    (run / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
    (run / "pauses.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pauses or []))
    return run


def run_of(run_dir: Path) -> dict:
    return summarize_run(read_capture(run_dir)).to_dict()


def notes(doc: dict) -> str:
    return "\n".join(doc["notes"])


@pytest.mark.parametrize("early, flagged", [(0.5, False), (2.0, True)])
def test_a_rollout_may_start_up_to_a_second_before_started_at(tmp_path, early, flagged):
    doc = run_of(write_run(tmp_path, rollouts=((100, 100 + early),)))
    row = doc["steps"][0]
    assert (row["clean"] is None) is flagged
    assert ("would start the rollout before the run did" in notes(doc)) is flagged


@pytest.mark.parametrize(
    "scale, used",
    [
        ("1e-06", 1e-6),
        ("1000000", 1e6),
        ("0.01", 0.01),
        ("2e6", 1),
        ("1e-7", 1),
        ("0", 1),
        ('"fast"', 1),
        ("true", 1),
        ("NaN", 1),
        ("1" + "0" * 400, 1),
    ],
)
def test_time_scale_within_1e_minus_6_and_1e6(tmp_path, scale, used):
    run = write_run(tmp_path)
    (run / "manifest.json").write_text('{"time_scale": %s, "experiment": {"name": "r"}}' % scale)
    doc = run_of(run)
    assert doc["time_scale"] == used
    assert ("manifest.json time_scale" in notes(doc)) is (used == 1)


@pytest.mark.parametrize(
    "compare, baselines, said",
    [
        ({"baseline": "b"}, ["b"], None),
        ({"baseline": "b", "baselines": ["b", "c"]}, ["b", "c"], None),
        ({"baseline": ["b"]}, None, "compare.baseline ['b'] is not a run name: no comparison"),
        ({"baseline": ""}, None, "compare.baseline '' is not a run name"),
        ({"baseline": "b", "baselines": "c"}, ["b"], "compare.baselines 'c' is not a list of run names: ignored"),
        ({"baseline": "b", "baselines": ["c", 7]}, ["c"], "compare.baselines has 7, not a run name: left out"),
        (["b"], None, "compare ['b'] is not an object: no comparison"),
    ],
)
def test_the_compare_block_is_checked_key_by_key(tmp_path, compare, baselines, said):
    write_run(tmp_path, "b")
    write_run(tmp_path, "c")
    write_run(tmp_path, "r", manifest={"time_scale": 1, "experiment": {"name": "r", "compare": compare}})
    document = summarize(tmp_path).to_dict()
    comparisons = {c["run"]: c for c in document["comparisons"]}
    if baselines is None:
        assert "r" not in comparisons
    else:
        assert sorted(comparisons["r"]["reward"]["baselines"]) == baselines
    doc_notes = notes(document["runs"]["r"])
    assert (said in doc_notes) if said else "compare" not in doc_notes


def test_a_step_id_beyond_2_53_is_skipped_with_a_note(tmp_path):
    lines = [json.dumps({"step": step, "complete": True, "metrics": {}}) for step in (0, 2**60, 1)]
    doc = run_of(write_run(tmp_path, lines=lines))
    assert [row["step"] for row in doc["steps"]] == [0, 1]
    assert "metrics.jsonl line 2: step 1152921504606846976 is beyond 2^53: skipped" in doc["notes"]


def test_pause_windows_are_clipped_to_the_run_or_left_out(tmp_path):
    pauses = [
        {"start": at(-50), "end": at(60), "reason": "hot"},  # straddles the start: [0, 60]
        {"start": at(2000), "end": at(2100), "reason": "hot"},  # after the end: left out
        {"start": at(990), "end": at(1010), "reason": "hot"},
    ]  # straddles the end: [990, 1000]
    doc = run_of(write_run(tmp_path, rollouts=((100, 50.0),), pauses=pauses))
    assert doc["aggregates"]["pause_total_s"] == 70.0
    assert doc["steps"][0]["pause_overlap_s"] == 10.0
    text = notes(doc)
    assert text.count("clipped to it") == 2 and "pauses.jsonl line 2" in text and "lies outside the run" in text


def test_an_open_window_with_no_time_to_end_it_at_is_left_out(tmp_path):
    # opened before the run started, and nothing else in the capture: no time in the run to end it at
    doc = run_of(write_run(tmp_path, rollouts=(), ended=None, pauses=[{"start": at(-10), "end": None}]))
    assert doc["aggregates"]["pause_total_s"] == 0.0
    assert "open window and no time to end it at: left out" in notes(doc)


@pytest.mark.parametrize("value, said", [(-32, "is not a positive number"), (2**60, "is beyond 2^53")])
def test_a_batch_size_out_of_range_is_unknown_with_a_note(tmp_path, value, said):
    doc = run_of(write_run(tmp_path, args={**PLAIN_ARGS, "rollout_batch_size": value}))
    assert doc["rollout_batch_size"] is None
    assert f"args.json rollout_batch_size {value} {said}: unknown" in doc["notes"]


def test_a_run_that_cannot_be_summarized_is_skipped_and_the_others_stay(tmp_path, monkeypatch):
    import harness.summary.summarize as summarize_module

    write_run(tmp_path, "good")
    write_run(tmp_path, "bad")
    real = summarize_module.summarize_run

    def broken(capture, *parts):  # noqa: ANN001, ANN002, ANN202 - a bug in the code, for one run only
        if capture.name == "bad":
            raise ZeroDivisionError("a bug")
        return real(capture, *parts)

    monkeypatch.setattr(summarize_module, "summarize_run", broken)
    result = summarize_module.summarize_with_warnings(tmp_path, workers=1)
    assert list(result.document.runs) == ["good"]
    assert [s.to_dict() for s in result.document.skipped] == [
        {"directory": "bad", "reason": "could not be summarized (ZeroDivisionError: a bug)"}
    ]
    assert "skipped bad: could not be summarized (ZeroDivisionError: a bug)" in result.warnings


def test_a_count_of_true_is_not_read_as_1_even_after_a_1(tmp_path):
    lines = [
        json.dumps({"step": i, "complete": True, "metrics": {"rollout/zero_std/count_1": value}})
        for i, value in enumerate([1, True, 1.0])
    ]
    doc = run_of(write_run(tmp_path, lines=lines))
    assert [row["zero_std_all_right"] for row in doc["steps"]] == [1, None, 1]
    assert (
        "metrics.jsonl: rollout/zero_std/count_1 is not a count (True) in step 1: zero_std_all_right unknown there"
        in doc["notes"]
    )
