"""One line at a time: prefixes, metric heads, the argument dump, launch and exception lines."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.mileslog.lines import (
    _RAY_PREFIX,
    argument_marker,
    argument_value,
    exception_line,
    find_metric,
    is_oom,
    job_failed,
    may_end_metric_head,
    read_argument,
    read_launch,
    read_metric,
    split_ray_prefix,
    strip_ansi,
)
from harness.times import format_time_us, split_time_prefix


def metric(text: str):  # noqa: ANN201
    head = find_metric(strip_ansi(text))
    assert head is not None, text
    return read_metric(strip_ansi(text), head)


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("2026-11-29T07:52:40.814948044Z ", "2026-11-29T07:52:40.814948Z"),  # nanoseconds truncated
        ("2026-11-29T07:52:40.8Z ", "2026-11-29T07:52:40.800000Z"),
        ("2026-11-29T07:52:40Z ", "2026-11-29T07:52:40.000000Z"),
        ("2026-11-29T08:52:40.5+01:00 ", "2026-11-29T07:52:40.500000Z"),  # converted to UTC
    ],
)
def test_docker_timestamp_prefix_is_normalised_to_utc(prefix: str, expected: str) -> None:
    stamp, rest = split_time_prefix(prefix + "(pid=1) hello")
    assert format_time_us(stamp // 1000) == expected
    assert rest == "(pid=1) hello"


@pytest.mark.parametrize(
    "line",
    [
        "[2026-11-29 07:52:40] rollout.py:1 - perf 0: {}",  # Miles's own timestamp, not Docker's
        "2026-13-45T07:52:40.1Z impossible date",
        "2026-11-29T07:52:40.1Z",  # no space, no line
        "",
    ],
)
def test_no_docker_prefix(line: str) -> None:
    assert split_time_prefix(line) == (None, line)


def test_ansi_codes_are_removed() -> None:
    assert strip_ansi("\x1b[36m(RolloutManager pid=1)\x1b[0m x \x1b[32m[repeated 2x across cluster]\x1b[0m") == (
        "(RolloutManager pid=1) x [repeated 2x across cluster]"
    )


@pytest.mark.parametrize(
    ("line", "source", "rest"),
    [
        ("(RolloutManager pid=2411) hi", "RolloutManager pid=2411", "hi"),
        (
            '(MegatronTrainRayActor pid=7, ip=172.17.0.2)   File "x"',
            "MegatronTrainRayActor pid=7, ip=172.17.0.2",
            '  File "x"',
        ),  # the line's own indentation is kept
        ("(pid=12) x", "pid=12", "x"),
        ("(raylet) worker died", "raylet", "worker died"),
        ("no prefix", "", "no prefix"),
        ("(not a ray prefix) x", "", "(not a ray prefix) x"),
    ],
)
def test_ray_prefix(line: str, source: str, rest: str) -> None:
    assert split_ray_prefix(line) == (source, rest)


ray_prefix_pieces = st.sampled_from(
    ["(", ")", " ", "pid=", "7" * 9, "raylet", "gcs_server", "Actor", ", ip=10.0.0.1", "\n", "x" * 90, "\u00e9", "  "]
)


@given(st.lists(ray_prefix_pieces, max_size=14).map(lambda pieces: "(" + "".join(pieces)))
def test_a_ray_prefix_is_split_where_the_pattern_ends(line: str) -> None:
    # The split reads each prefix once (they repeat); what it splits off is what the pattern matches.
    found = _RAY_PREFIX.match(line)

    assert split_ray_prefix(line) == (("", line) if found is None else (found.group(1), line[found.end() :]))


@pytest.mark.parametrize(
    "line",
    [
        # old form (slime, early Miles): [YYYY-MM-DD HH:MM:SS]
        "(RolloutManager pid=1) [2025-06-01 12:00:00] rollout.py:210 - perf 3: {'perf/rollout_time': 1.5}",
        # new form: [YYYY-MM-DD HH:MM:SS.mmm procname]
        "(RolloutManager pid=1) [2026-10-01 12:00:00.123 rollout_manager] metrics.py:88 - perf 3: {'perf/rollout_time': 1.5}",
        # a driver line: no Ray prefix
        "[2026-10-01 12:00:00.123 main] metrics.py:88 - perf 3: {'perf/rollout_time': 1.5}",
        # ANSI colour around the prefix and around the repeat suffix
        "\x1b[36m(RolloutManager pid=1)\x1b[0m [2026-10-01 12:00:00.123 rollout_manager] metrics.py:88 - perf 3: "
        "{'perf/rollout_time': 1.5} \x1b[32m[repeated 7x across cluster]\x1b[0m",
        "x.py:1 - perf 3: {'perf/rollout_time': 1.5} [repeated 7x across cluster]",
    ],
    ids=["old-timestamp", "new-timestamp", "driver", "ansi-repeat", "plain-repeat"],
)
def test_metric_lines_in_every_shape(line: str) -> None:
    read = metric(line)
    assert (read.kind, read.id, read.payload, read.error, read.trailing) == (
        "perf",
        3,
        {"perf/rollout_time": 1.5},
        None,
        "",
    )


@pytest.mark.parametrize("kind", ["perf", "rollout", "step", "eval", "multi_turn", "critic-step"])
def test_every_kind(kind: str) -> None:
    read = metric(f"x.py:1 - {kind} 12: {{'a': 1}}")
    assert (read.kind, read.id) == (kind, 12)


@pytest.mark.parametrize(
    "line",
    [
        "memory_utils.py:41 - [Rank 0] Memory-Usage after offload: {'gpu': '0', 'used_GB': 79.5}",
        "memory_utils.py:41 - perf summary: {'perf/step_time': 1.0}",
        "x.py:1 - perfs 3: {'a': 1}",
        "x.py:1 -perf 3: {'a': 1}",
        "x.py:1 - perf three: {'a': 1}",
        "x.py:1 - perf 3: ['a']",
        'INFO:     127.0.0.1:51820 - "POST /generate HTTP/1.1" 200 OK',
    ],
)
def test_lines_that_are_not_metrics(line: str) -> None:
    assert find_metric(line) is None


def test_a_payload_that_does_not_parse_is_an_error_not_a_guess() -> None:
    read = metric("x.py:1 - perf 3: {'perf/rollout_time': 1.5, 'rollout/raw_rew")
    assert read.payload is None
    assert read.error is not None and "string not closed" in read.error


def test_text_after_the_payload_is_kept_apart() -> None:
    read = metric("x.py:1 - perf 3: {'a': 1} and more")
    assert read.payload == {"a": 1}
    assert read.trailing == "and more"


# ---- argument dump -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "marker"),
    [
        ("------------------------ arguments ------------------------", "start"),
        ("-------------------- end of arguments ---------------------", "end"),
        ("[2026-10-01 12:00:00] arguments.py:50 - ----------- arguments -----------", "start"),
        ("unexpected keyword arguments ---", None),
        ("---- arguments", None),
        ("arguments ----", None),
    ],
)
def test_argument_dump_markers(line: str, marker: str | None) -> None:
    assert argument_marker(line) == marker


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("  rollout_batch_size .............................. 32", ("rollout_batch_size", 32)),
        ("  lr .............................................. 1e-06", ("lr", 1e-06)),
        ("  eps_clip ........................................ 0.2", ("eps_clip", 0.2)),
        ("  tensorboard_dir ................................. None", ("tensorboard_dir", None)),
        ("  use_tensorboard ................................. True", ("use_tensorboard", True)),
        ("  partial_rollout ................................. False", ("partial_rollout", False)),
        (
            "  dynamic_sampling_filter_path .................... miles.rollout.filter_hub.x.f",
            ("dynamic_sampling_filter_path", "miles.rollout.filter_hub.x.f"),
        ),
        (
            "  eval_datasets ................................... ['aime', 'math500']",
            ("eval_datasets", ["aime", "math500"]),
        ),
        ("  prompt_key ...................................... [not a list", ("prompt_key", "[not a list")),
        ("  seed ............................................ -1", ("seed", -1)),
        ("  save .............................................", ("save", "")),
        # a name of 48 characters or more gets no dots, two spaces
        (
            "  a_very_long_argument_name_that_takes_all_the_dots  7",
            ("a_very_long_argument_name_that_takes_all_the_dots", 7),
        ),
        ("just prose here", None),
    ],
)
def test_argument_lines(line: str, expected: tuple | None) -> None:
    assert read_argument(line) == expected


def test_argument_values_that_stay_strings() -> None:
    assert argument_value("nan") == "nan"  # not a float: only numbers with digits become numbers
    assert argument_value("1.2.3") == "1.2.3"
    assert argument_value("'quoted'") == "'quoted'"


# ---- launch line, failures ---------------------------------------------------------


def test_launch_line_becomes_argv() -> None:
    argv, problem = read_launch(
        "Running entrypoint for job raysubmit_8Fd: python3 train.py --num-rollout 2 --prompt-data '/data/a b.jsonl'"
    )
    assert argv == ["python3", "train.py", "--num-rollout", "2", "--prompt-data", "/data/a b.jsonl"]
    assert problem is None


def test_launch_line_with_a_broken_quote_is_split_on_spaces_and_said() -> None:
    argv, problem = read_launch("Running entrypoint for job raysubmit_8Fd: python3 train.py --x 'open")
    assert argv == ["python3", "train.py", "--x", "'open"]
    assert problem is not None and "split on spaces" in problem


@pytest.mark.parametrize(
    "line",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::MegatronTrainRayActor.train() (pid=1, ip=1.2.3.4)",
        "KeyboardInterrupt",
        "RuntimeError: NCCL error",
        "ConnectionResetError: [Errno 104] Connection reset by peer",
        "Exception: boom",
    ],
)
def test_exception_lines(line: str) -> None:
    assert exception_line(line)


@pytest.mark.parametrize(
    "line",
    [
        'INFO:     127.0.0.1:51820 - "POST /generate HTTP/1.1" 200 OK',
        "Note: this is prose",
        '  File "/root/x.py", line 3, in f',
        "During handling of the above exception, another exception occurred:",
        "ValueError:no-space-after-colon",
        "",
    ],
)
def test_not_exception_lines(line: str) -> None:
    assert not exception_line(line)


def test_out_of_memory_and_job_failed() -> None:
    assert is_oom("torch.OutOfMemoryError: CUDA out of memory.")
    assert is_oom("RuntimeError: CUDA error: out of memory")
    assert not is_oom("RuntimeError: NCCL error")
    assert job_failed("Job 'raysubmit_QwE' failed") == "Job 'raysubmit_QwE' failed"
    assert job_failed("Job 'raysubmit_QwE' succeeded") is None


def test_the_longest_ray_prefix_the_pattern_takes_and_one_longer() -> None:
    inner = "a" * 200 + "pid=" + "1" * 10 + "b" * 120
    assert split_ray_prefix(f"({inner}) x") == (inner, "x")
    assert split_ray_prefix(f"({inner}b) x") == ("", f"({inner}b) x")
    assert split_ray_prefix(f"(raylet{'c' * 120}) x") == (f"raylet{'c' * 120}", "x")


head_pieces = st.sampled_from(
    [
        " - ",
        "perf",
        "step",
        "critic-step",
        "multi_turn",
        " ",
        "1",
        "7" * 17,
        "-",
        ": {",
        "{",
        ":",
        "x",
        "\u0661",
        "\u00e9",
    ]
)


@given(st.lists(head_pieces, max_size=16).map("".join))
def test_a_line_none_of_whose_braces_may_end_a_head_holds_none(text: str) -> None:
    # The batch reader passes over a dict whose `{` ends no head without looking for its line.
    raw = text.encode()
    braces = [at for at in range(len(raw)) if raw[at] == ord("{")]

    if not any(may_end_metric_head(raw, at) for at in braces):
        assert find_metric(text) is None


@pytest.mark.parametrize(
    ("text", "ends"),
    [
        ("x - perf 3: {", True),
        ("x - critic-step -" + "1" * 18 + ": {", True),
        ("x - critic-step -" + "1" * 19 + ": {", False),
        ("x - perf \u0663: {", True),  # a digit of another script: find_metric reads it
        ("[Rank 0] Memory-Usage before train: {", False),
        ("x - perf: {", False),
    ],
)
def test_a_brace_that_may_end_a_metric_head(text: str, ends: bool) -> None:
    raw = text.encode()

    assert may_end_metric_head(raw, len(raw) - 1) is ends
