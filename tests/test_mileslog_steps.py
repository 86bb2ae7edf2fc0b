"""The step merger over the fixture logs in tests/data/logs (one quirk per file, named after it)."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest

from harness.mileslog import LogParser, ParsedLog, StepRecord, parse_file, parse_lines
from support.machine import regenerate_golden

LOGS = Path(__file__).parent / "data" / "logs"
GOLDEN = LOGS / "container-log-docker-timestamps.expected.json"


def parse(name: str) -> ParsedLog:
    return parse_file(LOGS / name)


def by_step(parsed: ParsedLog) -> dict[int, StepRecord]:
    return {record.step: record for record in parsed.steps}


def test_two_perf_lines_merge_into_one_record_without_overwriting() -> None:
    parsed = parse("two-perf-lines-merged.log")
    assert [(r.step, r.complete) for r in parsed.steps] == [(0, True), (1, True)]
    step0 = by_step(parsed)[0].metrics
    # rollout side, rollout line, step line and train side all present
    assert step0["perf/rollout_time"] == 58.21
    assert step0["rollout/raw_reward_unfiltered"] == 0.66
    assert step0["rollout/raw_reward"] == 0.5
    assert step0["train/loss"] == 0.012
    assert step0["perf/step_time"] == 82.0 and step0["perf/train_wait_time"] == 60.1
    # the memory dump between them added nothing
    assert "used_GB" not in step0 and "gpu" not in step0
    assert parsed.problems == []
    assert by_step(parsed)[1].metrics["rollout/raw_reward"] == 0.47


def test_a_key_in_both_perf_lines_keeps_the_first_value_and_is_a_problem() -> None:
    parser = LogParser()
    parser.feed("x.py:1 - perf 4: {'perf/rollout_time': 50.0, 'perf/shared': 1.0}")
    (record,) = parser.feed("x.py:2 - perf 4: {'perf/step_time': 70.0, 'perf/shared': 2.0}")
    assert record.metrics["perf/shared"] == 1.0
    assert record.metrics["perf/step_time"] == 70.0
    assert len(record.problems) == 1 and "perf/shared" in record.problems[0]["reason"]
    assert parser.problems == [{"line": 2, "reason": record.problems[0]["reason"], "step": 4}]


def test_the_same_value_twice_is_not_a_problem() -> None:
    parser = LogParser()
    parser.feed("x.py:1 - perf 4: {'perf/rollout_time': 50.0, 'k': nan}")
    parser.feed("x.py:1 - perf 4: {'perf/rollout_time': 50.0, 'k': nan}")
    parser.feed("x.py:2 - perf 4: {'perf/step_time': 70.0}")
    assert parser.problems == []


def test_megatron_doubled_step_lines_are_kept_once() -> None:
    parsed = parse("megatron-doubled-step-lines.log")
    step0, step1 = parsed.steps
    assert [s["train/step"] for s in step0.train_steps] == [0, 1]
    assert [s["train/step"] for s in step1.train_steps] == [2, 3]
    # the record's metrics carry the LAST optimizer step of its rollout
    assert step0.metrics["train/step"] == 1 and step0.metrics["train/loss"] == 0.12
    assert step1.metrics["train/step"] == 3 and step1.metrics["train/loss"] == 0.22
    assert parsed.problems == []


def test_a_repeated_step_line_with_other_values_adds_keys_and_reports_conflicts() -> None:
    parser = LogParser()
    parser.feed("x.py:1 - perf 0: {'perf/rollout_time': 5.0}")
    parser.feed("model.py:1 - step 0: {'train/loss': 0.1, 'train/step': 0}")
    parser.feed("other.py:1 - step 0: {'train/loss': 0.2, 'train/extra': 3, 'train/step': 0}")
    (record,) = parser.feed("x.py:2 - perf 0: {'perf/step_time': 9.0}")
    assert record.train_steps == [{"train/loss": 0.1, "train/step": 0, "train/extra": 3}]
    assert [p["line"] for p in parser.problems] == [3]


@pytest.mark.parametrize("name", ["timestamp-old-form.log", "two-perf-lines-merged.log"])
def test_old_and_new_miles_timestamp_forms(name: str) -> None:
    parsed = parse(name)
    assert parsed.steps and all(r.complete for r in parsed.steps)
    assert "perf/rollout_time" in parsed.steps[0].metrics


def test_old_total_train_time_completes_a_step() -> None:
    (record,) = parse("timestamp-old-form.log").steps
    assert record.complete and record.metrics["perf/total_train_time"] == 85.0
    assert (record.derived["zero_std_all_right"], record.derived["zero_std_all_wrong"]) == (9, 3)


def test_ansi_colour_and_repeat_suffix() -> None:
    parsed = parse("ansi-and-repeat-suffix.log")
    (record,) = parsed.steps
    assert record.complete
    assert record.metrics["train/loss"] == 0.012
    assert record.derived["dropped_all_right"] == 5
    assert parsed.problems == []  # the suffix is not "text after the payload"


def test_every_zero_variance_suffix_form() -> None:
    steps = by_step(parse("zero-std-suffix-forms.log"))
    dropped = {
        n: (r.derived["dropped_groups"], r.derived["dropped_all_right"], r.derived["dropped_all_wrong"])
        for n, r in steps.items()
    }
    assert dropped == {0: (16, 12, 4), 1: (18, 10, 6), 2: (10, 7, 3), 3: (0, 0, 0), 4: (0, 0, 0)}
    assert steps[1].derived["dropped_other"] == {"group_has_aborted": 2}
    kept = {n: (r.derived["zero_std_all_right"], r.derived["zero_std_all_wrong"]) for n, r in steps.items()}
    assert kept == {0: (None, None), 1: (None, None), 2: (None, None), 3: (11, 5), 4: (13, 4)}
    # raw keys untouched
    assert steps[2].metrics["rollout/dynamic_filter/drop_zero_std_-1.0"] == 3


def test_nan_inf_and_numpy_scalars() -> None:
    (record,) = parse("nan-inf-numpy-values.log").steps
    metrics = record.metrics
    assert metrics["perf/rollout_time"] == 57.5 and type(metrics["perf/rollout_time"]) is float
    assert metrics["rollout/dynamic_filter/drop_zero_std_1"] == 3
    assert math.isnan(metrics["rollout/raw_reward_unfiltered"]) and math.isnan(metrics["rollout/kl"])
    assert metrics["rollout/response_len/max"] == math.inf and metrics["rollout/log_ratio_min"] == -math.inf
    assert record.derived["dropped_all_right"] == 3
    assert record.complete and metrics["perf/step_time"] == 80.25


def test_non_finite_values_become_null_in_strict_json_and_are_listed() -> None:
    import json

    (record,) = parse("nan-inf-numpy-values.log").steps
    doc = record.to_json(include_derived=False)
    text = json.dumps(doc, allow_nan=False)  # strict JSON: would raise on NaN/Infinity
    back = json.loads(text)
    assert back["metrics"]["rollout/raw_reward_unfiltered"] is None and back["metrics"]["rollout/kl"] is None
    assert back["non_finite"]["rollout/raw_reward_unfiltered"] == "nan"
    assert back["non_finite"]["rollout/response_len/max"] == "inf"
    assert back["non_finite"]["rollout/log_ratio_min"] == "-inf"
    assert back["metrics"]["perf/rollout_time"] == 57.5
    assert math.isnan(record.metrics["rollout/kl"])  # the record itself keeps what the log said


def test_memory_dump_dicts_are_not_metrics() -> None:
    parsed = parse("memory-dump-dict-ignored.log")
    (record,) = parsed.steps
    assert record.metrics == {"perf/rollout_time": 50.0, "perf/step_time": 60.0}
    assert parsed.problems == []


def test_unparseable_payload_is_a_problem_for_its_step_not_a_guess() -> None:
    parsed = parse("unparseable-payload.log")
    steps = by_step(parsed)
    assert [p["line"] for p in parsed.problems] == [1, 3]
    assert [p["step"] for p in parsed.problems] == [0, 1]
    assert "string not closed" in parsed.problems[0]["reason"]
    assert "'<'" in parsed.problems[1]["reason"]
    # nothing of the cut line was kept, and the step says so
    assert "perf/rollout_time" not in steps[0].metrics
    assert steps[0].problems == [parsed.problems[0]]
    assert steps[0].complete  # its train side came
    assert steps[0].t_rollout_end is None


def test_a_run_cut_between_the_two_perf_lines_leaves_an_incomplete_step() -> None:
    parsed = parse("run-cut-between-perf-lines.log")
    steps = by_step(parsed)
    assert steps[0].complete
    assert not steps[1].complete and steps[1].t_step_end is None
    assert steps[1].metrics["perf/rollout_time"] == 52.0
    assert steps[1].metrics["rollout/raw_reward"] == 0.55
    assert steps[1].metrics["train/loss"] == 0.05  # its step line, attached at finish
    assert steps[1].derived["dropped_all_wrong"] == 2


def test_tqdm_carriage_returns() -> None:
    parsed = parse("tqdm-carriage-returns.log")
    (record,) = parsed.steps
    assert record.complete and record.metrics == {"perf/rollout_time": 50.0, "perf/step_time": 60.0}
    assert parsed.lines == 3 and parsed.problems == []


def test_container_log_times_and_argument_dump() -> None:
    parsed = parse("container-log-docker-timestamps.log")
    steps = by_step(parsed)
    assert steps[0].t_rollout_end == "2026-11-29T07:52:41.814969Z"
    assert steps[0].t_step_end == "2026-11-29T07:52:42.814971Z"
    assert not steps[1].complete and steps[1].t_rollout_end == "2026-11-29T07:52:42.814973Z"
    assert parsed.args is not None
    assert parsed.args["rollout_batch_size"] == 32 and parsed.args["over_sampling_batch_size"] == 48
    assert parsed.args["lr"] == 1e-06 and parsed.args["tensorboard_dir"] is None
    assert parsed.args["partial_rollout"] is False
    assert parsed.args["eval_datasets"] == ["aime", "math500"]
    assert "INFO" not in json.dumps(parsed.args)  # the access line inside the dump is not an argument
    assert parsed.launch is not None and parsed.launch[:2] == ["python3", "train.py"]
    assert parsed.launch[-2:] == ["--prompt-data", "/data/dapo math.jsonl"]
    assert [(e.step, e.metrics["eval/math500"]) for e in parsed.evals] == [(0, 0.62)]


def test_only_the_first_launch_line_is_read() -> None:
    # Runs read together repeat their launch lines; only the first is kept, so only it is split.
    parsed = parse_lines(
        [
            "Running entrypoint for job raysubmit_1: python3 train.py --num-rollout 2",
            "x.py:1 - perf 0: {'perf/step_time': 1.0}",
            "Running entrypoint for job raysubmit_2: python3 train.py --prompt-data 'open",
        ]
    )
    assert parsed.launch == ["python3", "train.py", "--num-rollout", "2"]
    assert parsed.problems == []
    later = parse_lines(
        [
            "Running entrypoint for job raysubmit_1 without a command",
            "Running entrypoint for job raysubmit_2: python3 train.py --seed 3",
        ]
    )
    assert later.launch == ["python3", "train.py", "--seed", "3"]  # the first line that has a command
    assert [p["reason"] for p in later.problems] == ["launch line without a command"]


TA = "(MegatronTrainRayActor pid=2590)"


def test_only_the_first_argument_dump_is_read() -> None:
    # Miles dumps its arguments once; runs read together each bring theirs, and their values
    # must not mix. Later dumps cost no more than noise.
    dump = "------------------------ arguments ------------------------"
    end = "-------------------- end of arguments ---------------------"
    parsed = parse_lines(
        [
            dump,
            "  seed ............................................ 1",
            end,
            "x.py:1 - perf 0: {'perf/step_time': 1.0}",
            dump,
            "  seed ............................................ 2",
            "  lr .............................................. 1e-06",
            end,
            f"{TA} {dump}",
            f"{TA}   lr .............................................. 2e-06",
            f"{TA} {end}",
        ]
    )
    assert parsed.args == {"seed": 1}
    # a dump from another process while the first is open is not read either: the first goes on
    interleaved = parse_lines(
        [dump, "  seed ........ 1", f"{TA} {dump}", f"{TA}   lr ........ 2e-06", "  lr ........ 1e-06", end]
    )
    assert interleaved.args == {"seed": 1, "lr": 1e-06}


def test_eval_multi_turn_and_critic_lines() -> None:
    parsed = parse("eval-multi-turn-critic-lines.log")
    (record,) = parsed.steps
    assert record.metrics["multi_turn/turns_mean"] == 2.5
    assert record.critic_steps == [{"critic/value_loss": 0.4, "train/step": 0}]
    assert record.metrics["critic/value_loss"] == 0.4 and record.metrics["train/loss"] == 0.1
    assert "eval/aime" not in record.metrics
    assert [e.to_json() for e in parsed.evals] == [{"step": 0, "t": None, "metrics": {"eval/aime": 0.2}}]


def test_a_one_megabyte_metric_line() -> None:
    payload = {f"rollout/extra/key_{i:06d}": i * 0.5 for i in range(40_000)}
    payload["perf/rollout_time"] = 12.5
    line = f"(RolloutManager pid=1) [2026-10-02 09:00:00.000 rollout_manager] metrics.py:88 - perf 0: {payload!r}"
    assert len(line) > 1_000_000
    data = (line + "\nx.py:1 - perf 0: {'perf/step_time': 20.0}\n").encode()
    parsed = parse_file(io.BytesIO(data))
    (record,) = parsed.steps
    assert record.complete and len(record.metrics) == 40_002
    assert record.metrics["rollout/extra/key_039999"] == 39_999 * 0.5
    assert parsed.problems == []


def test_records_are_emitted_the_moment_the_train_side_perf_line_arrives() -> None:
    parser = LogParser()
    emitted = []
    lines = (LOGS / "two-perf-lines-merged.log").read_text().splitlines()
    for number, line in enumerate(lines, 1):
        for record in parser.feed(line):
            emitted.append((number, record.step))
    assert emitted == [(10, 0), (14, 1)]
    assert parser.finish() == []


def test_finish_flushes_open_steps_as_incomplete_and_only_once() -> None:
    parser = LogParser()
    assert parser.feed("x.py:1 - perf 3: {'perf/rollout_time': 5.0}") == []
    (record,) = parser.finish()
    assert (record.step, record.complete, record.t_step_end) == (3, False, None)
    assert parser.finish() == []
    with pytest.raises(RuntimeError):
        parser.feed("more")


def test_a_line_for_a_completed_step_is_a_problem_not_a_change() -> None:
    parser = LogParser()
    parser.feed("x.py:1 - perf 0: {'perf/rollout_time': 5.0}")
    (record,) = parser.feed("x.py:2 - perf 0: {'perf/step_time': 9.0}")
    parser.feed("x.py:3 - rollout 0: {'rollout/raw_reward': 0.5}")
    assert "rollout/raw_reward" not in record.metrics
    assert parser.problems[0]["line"] == 3 and "after step 0 was complete" in parser.problems[0]["reason"]


def test_step_lines_without_any_rollout_are_reported() -> None:
    parser = LogParser()
    parser.feed("model.py:1 - step 5: {'train/loss': 0.1, 'train/step': 5}")
    assert parser.finish() == []
    assert parser.problems == [{"line": 1, "reason": "step line 5: no training step to attach it to"}]


def test_to_json_shapes() -> None:
    (record,) = parse("timestamp-old-form.log").steps
    assert list(record.to_json()) == ["step", "complete", "t_rollout_end", "t_step_end", "metrics", "derived"]
    assert list(record.to_json(include_derived=False)) == ["step", "complete", "t_rollout_end", "t_step_end", "metrics"]
    doc = parse("timestamp-old-form.log").to_json()
    assert {"steps", "args", "launch", "failure", "problems"} <= set(doc)


def test_line_by_line_and_whole_file_agree_on_every_fixture() -> None:
    for path in sorted(LOGS.glob("*.log")):
        with path.open(encoding="utf-8", errors="replace", newline="\n") as handle:
            by_line = parse_lines(line.rstrip("\n") for line in handle)
        whole = parse_file(path)
        assert json.dumps(by_line.to_json()) == json.dumps(whole.to_json()), path.name
        # small chunks: lines cut across reads
        parser = LogParser()
        with path.open("rb") as stream:
            parser.feed_stream(stream, chunk_bytes=7)
        assert json.dumps(parser.result().to_json()) == json.dumps(whole.to_json()), path.name


def test_golden_parse_of_a_container_log() -> None:
    """The whole document for the container.log fixture; REGEN_GOLDEN=1 rewrites it (and fails)."""
    doc = parse("container-log-docker-timestamps.log").to_json()
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    if regenerate_golden():
        GOLDEN.write_text(text)
        pytest.fail(f"rewrote {GOLDEN.name}: check the diff and run again without REGEN_GOLDEN")
    assert text == GOLDEN.read_text()


@pytest.mark.parametrize(
    ("metrics", "non_finite"),
    [
        ({"a": 1, "b": 2.5}, {}),
        ({"a": 1e308, "b": 1e308}, {}),  # finite, though their sum is not
        ({"a": 10**400, "b": 0.5}, {}),  # an integer no float holds
        ({"a": 10**400, "b": float("inf")}, {"b": "inf"}),
        ({"a": float("inf"), "b": float("-inf"), "c": 1}, {"a": "inf", "b": "-inf"}),
        ({"a": float("nan"), "b": "x"}, {"a": "nan"}),
        ({"a": [1.0, float("nan")], "b": True}, {"a": "contains nan/inf"}),
    ],
)
def test_strict_json_metrics_nulls_what_is_not_finite_and_keeps_the_rest(metrics, non_finite) -> None:  # noqa: ANN001
    from harness.mileslog.records import strict_json_metrics

    clean, found = strict_json_metrics(metrics)

    assert found == non_finite
    assert list(clean) == list(metrics)
    assert all(clean[key] is None for key in non_finite if non_finite[key] != "contains nan/inf")
    assert {key: value for key, value in clean.items() if key not in non_finite} == {
        key: value for key, value in metrics.items() if key not in non_finite
    }
    assert clean is not metrics
