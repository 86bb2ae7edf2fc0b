"""What ended the run: the last exception of a traceback, Ray job failures, and what is not a failure."""

from __future__ import annotations

from pathlib import Path

from harness.mileslog import LogParser, parse_file, parse_lines
from harness.mileslog.parser import FINISHED_TRACEBACK_LINES

LOGS = Path(__file__).parent / "data" / "logs"
TA = "(MegatronTrainRayActor pid=2590)"
RM = "(RolloutManager pid=2411)"


def test_oom_traceback_at_the_end() -> None:
    parsed = parse_file(LOGS / "oom-traceback-at-end.log")
    assert parsed.failure is not None
    assert parsed.failure["kind"] == "oom"
    assert parsed.failure["line"].startswith("torch.OutOfMemoryError: CUDA out of memory.")
    # the driver's RayTaskError carries the remote traceback; its last exception line is the one reported
    assert parsed.failure["line_number"] == 20
    assert [(r.step, r.complete) for r in parsed.steps] == [(0, True), (1, False)]


def test_a_traceback_the_run_survived_is_not_its_failure() -> None:
    parsed = parse_file(LOGS / "survivable-traceback-mid-run.log")
    assert parsed.failure is None
    assert [(r.step, r.complete) for r in parsed.steps] == [(0, True), (1, True)]


def test_the_same_traceback_at_the_end_is_the_failure() -> None:
    lines = (LOGS / "survivable-traceback-mid-run.log").read_text().splitlines()
    parsed = parse_lines(lines[:6])  # cut right after the exception line
    assert parsed.failure == {
        "kind": "exception",
        "line": "ConnectionResetError: [Errno 104] Connection reset by peer",
        "line_number": 6,
    }


def test_another_process_s_metrics_after_a_fatal_traceback_do_not_make_it_survived() -> None:
    # Docker merges stdout and stderr as they arrive: an actor's metric line written before the driver's traceback
    # may come after it. Only a metric of the process that printed the traceback says that it survived.
    parsed = parse_lines(
        [
            "Traceback (most recent call last):",
            '  File "/root/miles/train.py", line 105, in <module>',
            "OSError: [Errno 28] No space left on device",
            "(RolloutManager pid=2411) [2026-10-02 09:00:00.000 rollout_manager] metrics.py:88 - perf 9: "
            "{'perf/rollout_time': 50.0}",
            "Job 'raysubmit_1' failed",
        ]
    )
    assert parsed.failure == {
        "kind": "exception",
        "line": "OSError: [Errno 28] No space left on device",
        "line_number": 3,
    }


def test_ray_job_failed_without_a_traceback() -> None:
    parsed = parse_file(LOGS / "ray-job-failed.log")
    assert parsed.failure == {"kind": "job_failed", "line": "Job 'raysubmit_QwErTy123' failed", "line_number": 4}


def test_an_exception_outranks_the_job_failed_line_that_follows_it() -> None:
    parsed = parse_lines(
        [
            "Traceback (most recent call last):",
            '  File "/root/miles/train.py", line 105, in <module>',
            "RuntimeError: NCCL watchdog timeout",
            "Job 'raysubmit_1' failed",
        ]
    )
    assert parsed.failure is not None and parsed.failure["kind"] == "exception"
    assert parsed.failure["line"] == "RuntimeError: NCCL watchdog timeout"


def test_an_oom_outranks_a_later_consequence() -> None:
    parsed = parse_lines(
        [
            f"{TA} Traceback (most recent call last):",
            f'{TA}   File "a.py", line 1, in f',
            f"{TA} torch.OutOfMemoryError: CUDA out of memory.",
            "Traceback (most recent call last):",
            '  File "train.py", line 1, in <module>',
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        ]
    )
    assert parsed.failure is not None
    assert (parsed.failure["kind"], parsed.failure["line_number"]) == ("oom", 3)


def test_interleaved_lines_from_other_actors_do_not_break_a_traceback() -> None:
    parsed = parse_lines(
        [
            f"{TA} Traceback (most recent call last):",
            f'{RM} INFO:     127.0.0.1:51820 - "POST /generate HTTP/1.1" 200 OK',
            f'{TA}   File "actor.py", line 301, in train',
            f"{RM} [2026-10-02 09:00:00.000 rollout_manager] http.py:3 - Note: waiting",
            f"{TA} ValueError: bad shape",
        ]
    )
    assert parsed.failure is not None
    assert parsed.failure["line"] == "ValueError: bad shape" and parsed.failure["line_number"] == 5


def test_ansi_coloured_prefixes_on_traceback_lines() -> None:
    cyan, reset = "\x1b[36m", "\x1b[0m"
    parsed = parse_lines(
        [
            f"{cyan}{TA}{reset} Traceback (most recent call last):",
            f'{cyan}{TA}{reset}   File "actor.py", line 301, in train',
            f"{cyan}{TA}{reset} torch.OutOfMemoryError: CUDA out of memory.",
        ]
    )
    assert parsed.failure is not None and parsed.failure["kind"] == "oom"


def test_a_traceback_cut_before_its_exception_line_is_not_a_failure() -> None:
    parsed = parse_lines(
        [
            "Traceback (most recent call last):",
            '  File "train.py", line 1, in <module>',
            "[2026-10-02 09:00:00] x.py:1 - some other output",
            "INFO: not an exception either",
        ]
    )
    assert parsed.failure is None


def test_chained_exceptions_report_the_last() -> None:
    parsed = parse_lines(
        [
            "Traceback (most recent call last):",
            '  File "a.py", line 1, in f',
            "KeyError: 'x'",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            '  File "a.py", line 3, in f',
            "RuntimeError: could not load",
        ]
    )
    assert parsed.failure is not None and parsed.failure["line"] == "RuntimeError: could not load"


def test_metrics_of_any_kind_after_an_exception_cancel_it() -> None:
    parser = LogParser()
    for line in ["Traceback (most recent call last):", '  File "a.py", line 1, in f', "ValueError: x"]:
        parser.feed(line)
    assert parser.failure is not None
    parser.feed("x.py:1 - eval 0: {'eval/aime': 0.1}")
    assert parser.failure is None


def test_a_job_failed_line_is_not_cancelled_by_metrics() -> None:
    parser = LogParser()
    parser.feed("Job 'raysubmit_1' failed")
    parser.feed("x.py:1 - perf 0: {'perf/rollout_time': 1.0}")
    assert parser.failure is not None and parser.failure["kind"] == "job_failed"


def test_a_stale_traceback_stops_costing_after_a_while() -> None:
    parser = LogParser()
    parser.feed(f"{TA} Traceback (most recent call last):")
    assert parser._idle is False  # every line is looked at while a traceback is open
    for _ in range(2100):
        parser.feed(f"{RM} noise")
    assert parser._idle is True
    parser.feed(f"{TA} ValueError: long after")
    assert parser.failure is None


def test_a_finished_traceback_stops_costing_soon() -> None:
    # Once its exception line is read, a traceback waits only for what continues it at once
    # (a chained exception, a RayTaskError's frames): other output soon closes it.
    parser = LogParser()
    for line in [
        f"{TA} Traceback (most recent call last):",
        f'{TA}   File "a.py", line 1, in f',
        f"{TA} ValueError: x",
    ]:
        parser.feed(line)
    assert parser._idle is False
    for _ in range(FINISHED_TRACEBACK_LINES + 1):
        parser.feed(f"{RM} noise")
    assert parser._idle is True
    assert parser.failure is not None and parser.failure["line"] == "ValueError: x"


def test_a_ray_task_error_continued_among_other_output_gives_the_last_exception() -> None:
    noise = [f"{RM} noise"] * (FINISHED_TRACEBACK_LINES - 10)
    parsed = parse_lines(
        [
            "Traceback (most recent call last):",
            '  File "/root/miles/train.py", line 80, in train',
            "ray.exceptions.RayTaskError(OutOfMemoryError): ray::MegatronTrainRayActor.train() (pid=2590)",
            *noise,
            '  File "/root/miles/miles/backends/megatron_utils/actor.py", line 301, in train',
            "torch.OutOfMemoryError: CUDA out of memory.",
        ]
    )
    assert parsed.failure is not None and parsed.failure["line"] == "torch.OutOfMemoryError: CUDA out of memory."
