"""`python3 -m harness.sim` and `harness sim` as programs: the log they print, exit codes, signals."""

from __future__ import annotations

import ast
import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.lab.milesargv import read_base_args
from harness.lab.milesnames import FILTER_PATH, FILTER_PATH_PUBLIC
from harness.mileslog import parse_lines
from harness.sim.config import parse_argv
from harness.sim.trainer import StepLog, simulate
from support.lines import LineReader

REPO = Path(__file__).resolve().parent.parent
FILTER_EXTRA = ["--dynamic-sampling-filter-path", FILTER_PATH, "--over-sampling-batch-size", "48"]
MILES_STAMP = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [a-z_0-9]+\]")


def sim_process(*args: str, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.sim", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


def expected_metrics(log: StepLog) -> dict:
    """What the parser should merge for one rollout id: every line's keys, the last optimizer step's."""
    return {**log.rollout_perf, **log.rollout, **log.optimizer_steps[-1], **log.train_perf}


def without_stamps(text: str) -> str:
    return MILES_STAMP.sub("[T]", text)


def test_the_lab_argv_runs_unchanged_and_the_parser_reads_what_the_sim_meant() -> None:
    argv = [*read_base_args(), *FILTER_EXTRA]
    stream = io.StringIO()
    logs = simulate(argv, stream=stream)
    parsed = parse_lines(stream.getvalue().splitlines())

    assert parsed.problems == [] and parsed.failure is None
    assert [(s.step, s.complete) for s in parsed.steps] == [(n, True) for n in range(12)]
    for record, log in zip(parsed.steps, logs):
        assert record.metrics == expected_metrics(log)
        assert record.train_steps == log.optimizer_steps
        assert record.derived["dropped_groups"] == log.result.dropped_total
        assert record.derived["dropped_all_right"] == log.result.dropped.get("zero_std_1", 0)
        assert record.derived["zero_std_all_right"] is None  # filter on: no zero-std counts
    assert parsed.launch == ["python3", "train.py", *argv]
    assert parsed.args is None  # the lab's --train-backend fsdp: Megatron's argument check never runs, no dump
    assert "(FSDPTrainRayActor pid=" in stream.getvalue()
    assert parsed.noise == {"ft": 24, "first_rollout_sample": 12, "progress": 120, "finish_rollout": 12}


def test_megatron_prints_the_argument_dump_the_parser_reads_back() -> None:
    argv = [*read_base_args(), *FILTER_EXTRA, "--train-backend", "megatron"]
    stream = io.StringIO()
    simulate(argv, stream=stream)
    parsed = parse_lines(stream.getvalue().splitlines())
    config = parse_argv(argv)
    assert parsed.problems == [] and parsed.failure is None
    assert parsed.args == dict(config.dump)
    assert parsed.args["rollout_batch_size"] == 32 and parsed.args["over_sampling_batch_size"] == 48
    assert parsed.args["dynamic_sampling_filter_path"] == FILTER_PATH
    assert parsed.args["colocate"] is True and parsed.args["hf_checkpoint"] == "/data/models/Qwen3-0.6B"
    assert "(MegatronTrainRayActor pid=" in stream.getvalue()


def test_a_plain_run_prints_zero_std_counts_and_no_drops() -> None:
    stream = io.StringIO()
    logs = simulate(["--num-rollout", "3", "--train-backend", "megatron"], stream=stream)
    parsed = parse_lines(stream.getvalue().splitlines())
    for record, log in zip(parsed.steps, logs):
        assert record.derived["dropped_groups"] == 0
        zero_std = [g for g in log.result.kept if g.zero_std]
        assert record.derived["zero_std_all_right"] == sum(1 for g in zero_std if g.rewards[0] == 1)
        assert record.derived["zero_std_all_wrong"] == sum(1 for g in zero_std if g.rewards[0] == 0)
        assert record.metrics == expected_metrics(log)
    # Megatron prints each step line twice; the parser keeps one.
    assert stream.getvalue().count(" - step 0: {") == 2 and parsed.problems == []


@pytest.mark.integration
def test_the_process_prints_the_log_flushed_and_exits_0() -> None:
    done = sim_process("--num-rollout", "2", "--seed", "5")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("harness sim: the simulated Miles trainer; time scale 0")
    assert any(line.startswith("Running entrypoint for job raysubmit_") for line in lines)
    assert sum("Abort request for ['http://127.0.0.1:30000']" in line for line in lines) == 2
    assert lines[-2].startswith("Job 'raysubmit_") and lines[-2].endswith("' succeeded")
    metric = next(line for line in lines if " - perf 0: {" in line)
    assert re.match(r"\(RolloutManager pid=\d+\) \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} rollout_manager\] ", metric)
    assert done.stderr == ""


@pytest.mark.integration
def test_processes_with_the_same_flags_print_the_same_log() -> None:
    first = sim_process("--num-rollout", "2", *FILTER_EXTRA)
    second = sim_process("--num-rollout", "2", *FILTER_EXTRA, env={**os.environ, "PYTHONHASHSEED": "123"})
    assert first.returncode == second.returncode == 0
    assert without_stamps(first.stdout) == without_stamps(second.stdout)
    other_seed = sim_process("--num-rollout", "2", "--seed", "9", *FILTER_EXTRA)
    assert without_stamps(other_seed.stdout) != without_stamps(first.stdout)


@pytest.mark.integration
def test_the_deprecated_filter_path_prints_the_same_metrics_and_a_warning() -> None:
    current = sim_process("--num-rollout", "2", *FILTER_EXTRA)
    deprecated = sim_process(
        "--num-rollout",
        "2",
        "--over-sampling-batch-size",
        "48",
        "--dynamic-sampling-filter-path",
        FILTER_PATH_PUBLIC,
    )
    metrics = [parse_lines(done.stdout.splitlines()).steps for done in (current, deprecated)]
    assert [s.metrics for s in metrics[0]] == [s.metrics for s in metrics[1]]
    assert "deprecated" in deprecated.stdout and "deprecated" not in current.stdout


@pytest.mark.integration
def test_over_sampling_below_the_batch_size_fails_the_job_as_miles_does() -> None:
    done = sim_process("--rollout-batch-size", "32", "--over-sampling-batch-size", "16")
    assert done.returncode == 1
    parsed = parse_lines(done.stdout.splitlines())
    assert parsed.steps == []
    assert parsed.failure is not None and parsed.failure["kind"] == "exception"
    assert parsed.failure["line"] == (
        "AssertionError: over_sampling_batch_size 16 should be greater than or equal to rollout_batch_size 32"
    )
    assert parsed.launch == ["python3", "train.py", "--rollout-batch-size", "32", "--over-sampling-batch-size", "16"]
    assert re.search(r"^Job 'raysubmit_\w+' failed$", done.stdout, re.M)


@pytest.mark.integration
@pytest.mark.parametrize(
    "args,reason",
    [
        (["--time-scale", "-1"], "--time-scale must be 0"),
        (["--time-scale", "fast"], "--time-scale must be a number"),
        (["--time-scale"], "--time-scale needs a value"),
        (["--rollout-batch-size", "x"], "invalid _positive_int value"),
        (["--n-samples-per-prompt", "0"], "must be at least 1"),
        (["--dynamic-sampling-filter-path", "my.filters.keep_long"], "models only the zero-variance filter"),
        (["--time-scale", "1e-320"], "--time-scale must be 0 (as fast as possible) or from 0.0001 to 100"),
        (["--time-scale", "1e308"], "--time-scale must be 0 (as fast as possible) or from 0.0001 to 100"),
        (["--time-scale", "0.00009"], "not '0.00009'"),
    ],
)
def test_a_command_line_the_sim_cannot_run_is_one_line_and_exit_2(args: list[str], reason: str) -> None:
    done = sim_process(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("harness sim: ")
    assert reason in done.stderr


@pytest.mark.integration
def test_one_answer_per_prompt_with_the_filter_fails_the_job_at_once_with_one_line_saying_why() -> None:
    done = sim_process("--n-samples-per-prompt", "1", *FILTER_EXTRA, timeout=30)

    assert done.returncode == 1
    reason = (
        "--n-samples-per-prompt 1 with the zero-variance filter: a group of one answer has no variance, so the "
        "filter drops every group and no batch can fill; give 2 or more answers per prompt, or no filter"
    )
    assert done.stderr.splitlines() == [f"harness sim: {reason}"]
    parsed = parse_lines(done.stdout.splitlines())
    assert parsed.steps == [] and parsed.failure is not None and parsed.failure["line"] == f"ValueError: {reason}"
    assert re.search(r"^Job 'raysubmit_\w+' failed$", done.stdout, re.M)


@pytest.mark.integration
def test_a_filter_that_cannot_fill_a_batch_fails_the_job_with_one_line_saying_so() -> None:
    # Every answer is cut at one token, so scores 0: every group is zero-variance and dropped.
    done = sim_process("--rollout-max-response-len", "1", *FILTER_EXTRA, "--num-rollout", "3", timeout=30)

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "harness sim: rollout 0: the dynamic filter kept 0 of 32 groups from 7440 prompts (7409 dropped, 31 still "
        "running), and another 48 would take more prompts than the data set holds (7473): the batch cannot fill"
    ]
    parsed = parse_lines(done.stdout.splitlines())
    assert parsed.steps == []
    assert parsed.failure is not None and parsed.failure["kind"] == "exception"
    assert parsed.failure["line"].startswith("RuntimeError: rollout 0: the dynamic filter kept 0 of 32 groups")
    assert re.search(r"^Job 'raysubmit_\w+' failed$", done.stdout, re.M)


@pytest.mark.integration
def test_harness_sim_passes_every_argument_through_untouched() -> None:
    args = [
        "--num-rollout",
        "2",
        "--kl-loss-coef",
        "-0.1",
        "--eps-clip=0.2",
        "--colocate",
        "--over-sampling-batch-size=40",
        "--time-scale",
        "0",
        "--seed",
        "4",
    ]
    result = CliRunner().invoke(app, ["sim", *args])
    assert result.exit_code == 0, result.output
    module = sim_process(*args)
    assert without_stamps(result.stdout) == without_stamps(module.stdout)
    assert (
        "python3 train.py --num-rollout 2 --kl-loss-coef -0.1 --eps-clip=0.2 --colocate "
        "--over-sampling-batch-size=40 --seed 4" in result.stdout
    )


def test_harness_sim_gives_miles_s_exit_codes() -> None:
    refused = CliRunner().invoke(app, ["sim", "--over-sampling-batch-size", "8"])
    assert refused.exit_code == 1 and "AssertionError: over_sampling_batch_size 8" in refused.stdout
    assert CliRunner().invoke(app, ["sim", "--help"]).exit_code == 0


def test_the_time_scale_comes_from_the_flag_else_the_environment() -> None:
    assert parse_argv(["--time-scale", "0.5"]).time_scale == 0.5
    assert parse_argv([], {"HARNESS_SIM_TIME_SCALE": "0.25"}).time_scale == 0.25
    assert parse_argv(["--time-scale=2"], {"HARNESS_SIM_TIME_SCALE": "0.25"}).time_scale == 2.0
    assert parse_argv([]).time_scale == 0.0
    assert "--time-scale" not in parse_argv(["--time-scale", "1", "--seed", "2"]).miles_argv


@pytest.mark.integration
def test_sim_imports_only_the_standard_library() -> None:
    """Statically (every import in harness/sim, also inside functions, and in harness/lab, whose entry protocol
    and Miles's names the sim image carries) and at run time (python -S): the standard library and those two."""
    stdlib = set(sys.stdlib_module_names)
    ours = ("harness.sim", "harness.lab", "milesargv", "milesnames")  # the lab entry's siblings, run as a script
    for path in sorted([*(REPO / "harness" / "sim").glob("*.py"), *(REPO / "harness" / "lab").glob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            for name in names:
                top = name.split(".")[0]
                assert top in stdlib or any(name == m or name.startswith(m + ".") for m in ours), (path.name, name)
    probe = (
        "import io, sys\nfrom harness.sim.cli import main\n"
        "rc = main(['--num-rollout', '1'], {}, io.StringIO(), io.StringIO())\n"
        "outside = sorted(m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names "
        "and m not in ('harness', '__main__') and not m.startswith(('harness.sim', 'harness.lab')))\n"
        "print(rc, outside)"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-E", "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "0 []", done.stderr


def start_sim(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.sim", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.mark.integration
def test_sigterm_stops_the_run_promptly_with_ray_s_stopped_lines() -> None:
    proc = start_sim("--time-scale", "1")
    reader = LineReader(proc)
    try:
        reader.until("end of arguments", timeout=20)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        assert time.monotonic() - sent < 2.0
        out, err = "".join(reader.rest()), proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert re.search(r"^Job 'raysubmit_\w+' was stopped$", out, re.M)
    assert err.strip() == "harness sim: SIGTERM: stopped before the first rollout"


@pytest.mark.integration
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_run_promptly_in_the_middle_of_a_long_rollout(signum: int) -> None:
    # 8000 prompts x 64 answers in one rollout: seconds of CPU before its first line, on any machine.
    proc = start_sim("--rollout-batch-size", "8000", "--n-samples-per-prompt", "64", "--time-scale", "0")
    reader = LineReader(proc)
    try:
        reader.until("end of arguments", timeout=20)
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signum)
        proc.wait(timeout=30)
        took = time.monotonic() - sent
        out, err = "".join(reader.rest()), proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum
    assert took < 2.0, f"{took:.1f} s to stop"  # the whole rollout takes seconds of CPU
    assert err.strip() == f"harness sim: {signal.Signals(signum).name}: stopped in rollout 0"
    assert "perf 0:" not in out and re.search(r"^Job 'raysubmit_\w+' was stopped$", out, re.M)


@pytest.mark.integration
def test_a_frozen_process_makes_no_progress_and_its_rollout_time_holds_the_pause() -> None:
    # Rollout 1 lasts about 0.9 s of wall time: room for the test to be late in freezing it.
    scale, pause_s = 0.03, 1.0
    args = ["--rollout-batch-size", "16", "--num-rollout", "2", "--seed", "3"]
    meant = simulate(args)  # the same run on simulated time: what each rollout takes without a pause
    proc = start_sim(*args, "--time-scale", str(scale))
    reader = LineReader(proc)
    try:
        reader.until("train_metric_utils.py:120 - perf 0: {", timeout=30)
        time.sleep(0.2)  # rollout 1 started right after that line: freeze it a little way in
        os.killpg(proc.pid, signal.SIGSTOP)
        time.sleep(pause_s)
        os.killpg(proc.pid, signal.SIGCONT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0
    steps = parse_lines(reader.rest()).steps
    rollout = [record.metrics["perf/rollout_time"] for record in steps]
    simulated = [log.rollout_perf["perf/rollout_time"] for log in meant]
    # Unpaused rollouts take their simulated time (give or take the sleeps' overshoot) ...
    for step in (0,):
        assert simulated[step] - 0.5 < rollout[step] < simulated[step] + 6.0, (step, rollout, simulated)
    # ... the frozen one took the pause on top, scaled like the rest: nothing was made up after the thaw.
    extra = rollout[1] - simulated[1]
    assert pause_s / scale * 0.95 < extra < pause_s / scale + 12.0, (rollout, simulated)
    step_time = steps[1].metrics["perf/step_time"]
    assert step_time - meant[1].train_perf["perf/step_time"] == pytest.approx(extra, abs=6.0)


# --------------------------------------------------------------------------- the Miles it stands in for


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_derived_reward_matches_the_printed_one_on_every_step(seed: int) -> None:
    """The default (08752a12) prints both the kept reward and the one before the filter: deriving the second
    from the first and the drop counts gives it back, step by step (integer rewards, zero variance the only
    drop reason)."""
    from harness.mileslog.keys import derive_unfiltered_reward

    argv = [*read_base_args(), *FILTER_EXTRA, "--seed", str(seed)]
    stream = io.StringIO()
    simulate(argv, stream=stream)
    parsed = parse_lines(stream.getvalue().splitlines())
    assert len(parsed.steps) == 12
    for record in parsed.steps:
        derived, why = derive_unfiltered_reward(record.metrics, 32)
        assert why == "" and derived == pytest.approx(record.metrics["rollout/raw_reward_unfiltered"], abs=1e-12)


def test_public_miles_prints_no_unfiltered_reward_and_the_harness_derives_the_same_one() -> None:
    public = ["--dynamic-sampling-filter-path", FILTER_PATH_PUBLIC, "--over-sampling-batch-size", "48"]
    logs = {}
    for miles in ("08752a12", "public-2026-08"):
        stream = io.StringIO()
        simulate([*read_base_args(), *public, "--miles", miles], stream=stream)
        logs[miles] = parse_lines(stream.getvalue().splitlines()).to_json()
    printed, derived = logs["08752a12"], logs["public-2026-08"]
    assert printed["reward_sources"] == {"printed": list(range(12))}
    assert derived["reward_sources"] == {"derived": list(range(12))}
    assert not any("rollout/raw_reward_unfiltered" in step["metrics"] for step in derived["steps"])
    assert [s["reward"] for s in derived["steps"]] == pytest.approx([s["reward"] for s in printed["steps"]], abs=1e-12)
    assert derived["problems"] == [] and derived["failure"] is None


@pytest.mark.integration
def test_public_miles_fails_the_write_up_filter_path_at_the_first_rollout_with_its_own_traceback() -> None:
    done = sim_process(*read_base_args(), *FILTER_EXTRA, "--miles", "public-2026-08")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert "ModuleNotFoundError: No module named 'miles.rollout.filter_hub.common_filters'" in lines
    assert any(
        line.startswith("ray.exceptions.RayTaskError(ModuleNotFoundError): ray::RolloutManager") for line in lines
    )
    assert any("ft event=gather_start rollout_id=0" in line for line in lines)  # the first rollout had started
    assert not any(" - perf 0: " in line for line in lines)
    parsed = parse_lines(lines)
    assert parsed.failure is not None and parsed.failure["kind"] == "missing_filter"
    assert parsed.failure["reason"] == f"the image's Miles has no {FILTER_PATH}"
    assert done.stderr.count("\n") == 1 and "ModuleNotFoundError" in done.stderr


@pytest.mark.integration
def test_the_miles_comes_from_the_flag_else_the_environment_and_a_wrong_one_is_exit_2() -> None:
    assert parse_argv([]).miles == "08752a12"
    assert parse_argv([], {"HARNESS_SIM_MILES": "public-2026-08"}).miles == "public-2026-08"
    assert parse_argv(["--miles", "08752a12"], {"HARNESS_SIM_MILES": "public-2026-08"}).miles == "08752a12"
    done = sim_process("--miles", "2025")
    assert done.returncode == 2 and "--miles must be one of 08752a12, public-2026-08, not '2025'" in done.stderr


def test_eval_lines_follow_the_eval_interval() -> None:
    stream = io.StringIO()
    simulate([*read_base_args(), "--num-rollout", "4", "--eval-interval", "2"], stream=stream)
    parsed = parse_lines(stream.getvalue().splitlines())
    assert [(e.step, e.skipped) for e in parsed.evals] == [
        (1, "no --eval-prompt-data given"),
        (3, "no --eval-prompt-data given"),
    ]
    stream = io.StringIO()
    simulate(
        [*read_base_args(), "--num-rollout", "2", "--eval-interval", "1", "--eval-prompt-data", "gsm8k", "/d"],
        stream=stream,
    )
    evals = parse_lines(stream.getvalue().splitlines()).evals
    assert [(e.step, e.skipped, list(e.metrics)) for e in evals] == [
        (0, None, ["eval/gsm8k"]),
        (1, None, ["eval/gsm8k"]),
    ]
