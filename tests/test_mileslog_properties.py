"""Properties: line-by-line and whole-stream reading agree, whatever the split; random input never raises."""

from __future__ import annotations

import io
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.mileslog import LogParser, parse_file
from harness.mileslog import parser as parser_module
from harness.mileslog.records import strict_json_metrics
from support.properties import examples

RM = "(RolloutManager pid=2411) [2026-10-02 09:00:00.000 rollout_manager] metrics.py:88 - "
TA = "(MegatronTrainRayActor pid=2590) [2026-10-02 09:00:10.000 actor_cell0_rank0] "

ids = st.integers(min_value=0, max_value=4)
numbers = st.one_of(st.integers(-5, 50), st.floats(allow_nan=True, allow_infinity=True, width=32))
payloads = st.dictionaries(
    st.sampled_from(
        [
            "perf/rollout_time",
            "perf/step_time",
            "perf/train_time",
            "perf/total_train_time",
            "perf/train_wait_time",
            "rollout/raw_reward",
            "rollout/dynamic_filter/drop_zero_std_1",
            "rollout/dynamic_filter/drop_zero_std_0.0",
            "rollout/zero_std/count_1",
            "train/loss",
            "train/step",
            "eval/aime",
        ]
    ),
    numbers,
    max_size=5,
)


def metric_line(kind: str, ident: int, payload: dict) -> str:
    return f"{RM if kind in ('perf', 'eval', 'multi_turn') else TA + 'x.py:1 - '}{kind} {ident}: {payload!r}"


metric_lines = st.builds(
    metric_line, st.sampled_from(["perf", "rollout", "step", "eval", "multi_turn", "critic-step"]), ids, payloads
)
NOISE = [
    '(RolloutManager pid=2411) INFO:     127.0.0.1:51820 - "POST /generate HTTP/1.1" 200 OK',
    "(MegatronTrainRayActor pid=2590) memory_utils.py:41 - [Rank 0] Memory-Usage: {'gpu': '0', 'used_GB': 1.5}",
    "Rollout: 10%|#  | 5/48\rRollout: 50%|#####| 24/48\rRollout: 100%|##########| 48/48",
    "\x1b[36m(RolloutManager pid=2411)\x1b[0m x.py:1 - perf 1: {'perf/rollout_time': 3.0} \x1b[32m[repeated 2x across cluster]\x1b[0m",
    "------------------------ arguments ------------------------",
    "  rollout_batch_size .............................. 32",
    "  over_sampling_batch_size ........................ 48",
    "-------------------- end of arguments ---------------------",
    "(MegatronTrainRayActor pid=2590) ------------------------ arguments ------------------------",
    "(MegatronTrainRayActor pid=2590)   lr .............................................. 1e-06",
    "\x1b[36m(MegatronTrainRayActor pid=2590)\x1b[0m   seed ........................................ 7",
    "(RolloutManager pid=2411)   seed ............................................ 3",
    "  lr .............................................. 2e-06",
    "  save_only_flag ..................................",
    "  no_dots  value",
    "2026-02-30T00:00:00Z   lr .............................................. 9",
    "  seed\t.......... 5",
    "Running entrypoint for job raysubmit_1: python3 train.py --num-rollout 3",
    # A later launch line or dump is a line like any other (only the first is read): its noise and markers count.
    "Running entrypoint for job raysubmit_2: python3 train.py --x 'ft k=v' %| First rollout sample",
    "Running entrypoint for job raysubmit_3: python3 train.py Job 'r' failed Traceback (most recent call last):",
    "(A pid=1) ------------------------ arguments ------------------------ ft k=v %|",
    "Traceback (most recent call last):",
    '  File "train.py", line 1, in <module>',
    "torch.OutOfMemoryError: CUDA out of memory.",
    "(MegatronTrainRayActor pid=2590) Traceback (most recent call last):",
    "(MegatronTrainRayActor pid=2590) ValueError: bad",
    "During handling of the above exception, another exception occurred:",
    "Job 'raysubmit_1' failed",
    "x.py:1 - perf 2: {'perf/rollout_time': 1.0, 'cut",
    "",
    "\r",
    # Noise: `ft` lines, words that hold "ft " (no `ft` line), noise in lines that are read, ANSI codes in a marker.
    "(RolloutManager pid=2411) ft event=gather_start rollout_id=0 rank=0",
    "ft event=gather_end rollout_id=0 rank=0 groups=32",
    "x.py:1 - KV cache: 1200 tokens left, draft tokens: 4, soft limit=3",
    "(MegatronTrainRayActor pid=2590) memory_utils.py:41 - [Rank 0] Memory-Usage: {'gpu': '0'} %| ft a=b",
    "(RolloutManager pid=2411) First rollout sample: ['x - perf 3: {1}'] ft k=1 %|",
    "F\x1b[0minish rollout: {'a': 1}",
    "x.py:1 - step 1: {'train/step': 1}\rft event=gather_end",
    # Dicts in coloured lines: a memory dump, and ANSI codes that part a metric head, a marker or a noise marker.
    "\x1b[36m(MegatronTrainRayActor pid=2590)\x1b[0m memory_utils.py:41 - [Rank 0] Memory-Usage: {'gpu': '0'}",
    "\x1b[36m(MegatronTrainRayActor pid=2590)\x1b[0m x.py:1 - pe\x1b[0mrf 2: {'perf/step_time': 2.0}",
    "\x1b[36m(A pid=1)\x1b[0m x: {'a': 1} Trace\x1b[1mback (most recent call last):",
    "\x1b[36m(A pid=1)\x1b[0m x: {'a': 1} Job 'r' \x1b[1mfailed",
    "\x1b[36m(A pid=1)\x1b[0m x: {'a': 1} \x1b[%|1 ft\x1b[0m k=v",
    # A head whose id is in another script's digits (Python reads them), and dicts no head leads to.
    "(A pid=1) x.py:1 - perf \u0663: {'perf/step_time': 3.0}",
    "(A pid=1) x.py:1 - perf 3 : {'perf/step_time': 3.0} - step 4: {'train/step': 4}",
    "(A pid=1) memory_utils.py:41 - before: {'a': {'b': 1}} - perf x: {}",
]
noise_lines = st.one_of(st.sampled_from(NOISE), st.text(max_size=40))
docker_prefix = st.sampled_from(
    [
        "",
        "2026-11-29T07:52:40.814948044Z ",
        "2026-11-29T07:52:41.5Z ",
        "2026-11-29t07:52:41+01:00 ",
        "2026-02-30T00:00:00.1Z ",
    ]
)
lines_strategy = st.lists(
    st.builds(lambda prefix, text: prefix + text, docker_prefix, st.one_of(metric_lines, noise_lines)),
    max_size=60,
).map(lambda lines: [line.replace("\n", " ") for line in lines])


def document(parser: LogParser) -> str:
    result = parser.result()
    doc = result.to_json()
    doc["train_steps"] = [
        [
            [strict_json_metrics(p) for p in record.train_steps],
            [strict_json_metrics(p) for p in record.critic_steps],
            record.problems,
        ]
        for record in result.steps
    ]
    return json.dumps(doc, sort_keys=True, allow_nan=False)  # strict: raises on NaN/Infinity


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines_strategy, st.integers(min_value=1, max_value=300))
def test_feeding_lines_and_reading_a_stream_in_any_chunks_agree(lines: list[str], chunk: int) -> None:
    assert_line_and_stream_agree(lines, chunk)


def assert_line_and_stream_agree(lines: list[str], chunk: int) -> None:
    by_line = LogParser()
    emitted = []
    for line in lines:
        emitted.extend(by_line.feed(line))
    emitted.extend(by_line.finish())

    streamed = LogParser()
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    from_stream = streamed.feed_stream(io.BytesIO(data), chunk_bytes=chunk)
    from_stream.extend(streamed.finish())

    assert _same_json(emitted, from_stream)
    assert document(by_line) == document(streamed)
    # each step is emitted exactly once
    assert sorted(r.step for r in emitted) == sorted({r.step for r in emitted})


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines_strategy, st.integers(min_value=1, max_value=300))
def test_line_and_stream_agree_where_dumps_and_tracebacks_go_stale(lines: list[str], chunk: int) -> None:
    # The limits shrunk here make a dump or a traceback go stale within the few lines generated.
    saved = parser_module.STALE_LINES, parser_module.FINISHED_TRACEBACK_LINES
    parser_module.STALE_LINES, parser_module.FINISHED_TRACEBACK_LINES = 3, 2
    try:
        assert_line_and_stream_agree(lines, chunk)
    finally:
        parser_module.STALE_LINES, parser_module.FINISHED_TRACEBACK_LINES = saved


def _same_json(a: list, b: list) -> bool:
    return json.dumps([r.to_json() for r in a], allow_nan=False) == json.dumps(
        [r.to_json() for r in b], allow_nan=False
    )


@settings(max_examples=examples(200), deadline=None)
@given(st.binary(max_size=3000), st.integers(min_value=1, max_value=500))
def test_random_bytes_never_raise(data: bytes, chunk: int) -> None:
    parser = LogParser()
    parser.feed_stream(io.BytesIO(data), chunk_bytes=chunk)
    parsed = parser.result()
    json.dumps(parsed.to_json(), allow_nan=False)
    by_line = LogParser()
    for line in data.decode("utf-8", "replace").split("\n"):
        by_line.feed(line)
    by_line.result()


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=400))
def test_random_text_after_a_metric_head_never_raises(tail: str) -> None:
    parsed = parse_file(io.BytesIO(f"x.py:1 - perf 0: {{{tail}\nx.py:1 - perf 0: {{'perf/step_time': 1.0}}\n".encode()))
    assert len(parsed.steps) == 1


@pytest.mark.parametrize(
    "noise", [parser_module.STALE_LINES - 1, parser_module.STALE_LINES, parser_module.STALE_LINES + 1]
)
def test_an_argument_right_at_the_staleness_limit(noise: int) -> None:
    # A dump with no line of its own for more than STALE_LINES lines is closed: line by line and
    # the stream agree on exactly where.
    lines = [
        "------------------------ arguments ------------------------",
        *['(RolloutManager pid=2411) INFO:     127.0.0.1:51820 - "POST /generate HTTP/1.1" 200 OK'] * noise,
        "  lr .............................................. 1e-06",
    ]
    expected = {"lr": 1e-06} if noise <= parser_module.STALE_LINES else {}
    by_line = LogParser()
    for line in lines:
        by_line.feed(line)
    streamed = LogParser()
    streamed.feed_stream(io.BytesIO("".join(line + "\n" for line in lines).encode()))
    assert by_line.result().args == streamed.result().args == expected


def test_line_and_stream_agree_on_many_dump_heavy_logs() -> None:
    # Seeded, not shrunk: long runs of argument and dump lines from several sources, with limits
    # small enough that dumps and tracebacks go stale among them.
    pool = [line for line in NOISE if "arguments" in line or "...." in line or "  " in line] * 3 + NOISE
    prefixes = ["", "2026-11-29T07:52:40.814948044Z ", "2026-02-30T00:00:00.1Z ", "2026-11-29t07:52:41+01:00 "]
    rng = random.Random(8)
    saved = parser_module.STALE_LINES, parser_module.FINISHED_TRACEBACK_LINES
    parser_module.STALE_LINES, parser_module.FINISHED_TRACEBACK_LINES = 3, 2
    try:
        for _ in range(400):
            lines = [rng.choice(prefixes) + rng.choice(pool) for _ in range(rng.randint(1, 60))]
            assert_line_and_stream_agree(lines, rng.choice([7, 64, 1 << 20]))
    finally:
        parser_module.STALE_LINES, parser_module.FINISHED_TRACEBACK_LINES = saved
