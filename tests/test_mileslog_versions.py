"""Logs built from Miles's own format strings, April and August 2026, read into the same step records.

Miles logs through Python's `logging` with one format string per version:

- April 2026 (and slime): `[%(asctime)s] %(filename)s:%(lineno)d - %(message)s`,
  the date as `%Y-%m-%d %H:%M:%S`, the rollout's metrics from `rollout.py`
  and the train rank's from `data.py`; the write-up's main (08752a12) prints
  `rollout/raw_reward_unfiltered`;
- August 2026 (the public snapshot): `[%(asctime)s.%(msecs)03d %(procname)s]
  %(filename)s:%(lineno)d - %(message)s`, from `metrics.py` and
  `log_utils.py`, with `ft key=value` lines around each gather, tqdm bars,
  the sample lines, `passrate/...` and the zero-std percentages on the
  rollout's line, `eval N skipped: REASON`, and no unfiltered reward.

Each message is Miles's f-string (`f"perf {rollout_id}: {log_dict}"`,
`f"rollout {rollout_id}: {log_dict}"`, `f"step {step}: {log_dict}"`), each
line behind Ray's `(Actor pid=N)` prefix, with or without Docker's
timestamps. FSDP prints no argument dump and each step line once; Megatron
prints the dump and each step line twice. Rewards are integers, and zero
variance is the only drop reason, so the derived reward is exact.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

from harness.lab.milesnames import FILTER_PATH, FILTER_PATH_PUBLIC
from harness.mileslog import parse_lines

APRIL = ("[%(asctime)s] %(filename)s:%(lineno)d - %(message)s", "%Y-%m-%d %H:%M:%S")
AUGUST = ("[%(asctime)s.%(msecs)03d %(procname)s] %(filename)s:%(lineno)d - %(message)s", "%Y-%m-%d %H:%M:%S")
FORMATS = {"april": APRIL, "august": AUGUST}
FILES = {
    "april": {"rollout_perf": "rollout.py", "rollout": "data.py", "step": "model.py", "perf": "train_metric_utils.py"},
    "august": {
        "rollout_perf": "metrics.py",
        "rollout": "log_utils.py",
        "step": "model.py",
        "perf": "train_metric_utils.py",
    },
}
B, N = 4, 4
START = 1_787_990_400.0  # 2026-08-29 in UTC seconds, any day will do
# Per step: (kept reward, all-right drops, all-wrong drops); the kept answers are B x N with that mean.
STEPS = [(0.5, 2, 1), (0.625, 0, 3), (0.75, 0, 0)]


def unfiltered(kept: float, right: int, wrong: int) -> float:
    """Every answer of every judged group: the kept ones, then n of each dropped group's reward."""
    return (kept * B * N + right * N) / ((B + right + wrong) * N)


class Writer:
    """Lines as Ray streams them: `(Actor pid=N) ` + Miles's formatted record, optionally Docker-stamped."""

    def __init__(self, version: str, docker: bool) -> None:
        fmt, datefmt = FORMATS[version]
        self.formatter = logging.Formatter(fmt, datefmt)
        self.version, self.docker = version, docker
        self.lines: list[str] = []
        self.t = START

    def raw(self, text: str, actor: str | None = None) -> None:
        line = f"({actor}) {text}" if actor else text
        if self.docker:
            stamp = logging.Formatter("%(asctime)s", "%Y-%m-%dT%H:%M:%S").format(self._record("", "x.py", 0))
            line = f"{stamp}.{int(self.t * 1e6) % 1_000_000:06d}000Z {line}"
        self.lines.append(line)
        self.t += 0.5

    def log(self, actor: str | None, proc: str, filename: str, lineno: int, message: str) -> None:
        record = self._record(message, filename, lineno)
        record.procname = proc
        self.raw(self.formatter.format(record), actor)

    def _record(self, message: str, filename: str, lineno: int) -> logging.LogRecord:
        record = logging.LogRecord("miles", logging.INFO, filename, lineno, message, None, None)
        record.created, record.msecs = self.t, (self.t % 1) * 1000
        return record


def build_log(version: str, backend: str, filter_on: bool, docker: bool) -> list[str]:
    w = Writer(version, docker)
    rollout, train = "RolloutManager pid=2411", f"{'FSDP' if backend == 'fsdp' else 'Megatron'}TrainRayActor pid=2590"
    files = FILES[version]
    argv = ["python3", "train.py", "--train-backend", backend, "--rollout-batch-size", str(B)]
    argv += ["--n-samples-per-prompt", str(N), "--eval-interval", "2"]
    if filter_on:
        path = FILTER_PATH if version == "april" else FILTER_PATH_PUBLIC
        argv += ["--over-sampling-batch-size", "8", "--dynamic-sampling-filter-path", path]
    w.raw(f"Running entrypoint for job raysubmit_abcdefghijklmnop: {' '.join(argv)}")
    if backend == "megatron":
        w.raw("------------------------ arguments ------------------------")
        w.raw(f"  rollout_batch_size {'.' * 30} {B}")
        w.raw(f"  dynamic_sampling_filter_path {'.' * 20} {argv[-1] if filter_on else None}")
        w.raw("-------------------- end of arguments ---------------------")
    for step, (kept, right, wrong) in enumerate(STEPS):
        august = version == "august"
        if august:
            w.log(rollout, "rollout_manager", "ft_utils.py", 61, f"ft event=gather_start rollout_id={step} rank=0")
            w.log(
                rollout,
                "rollout_manager",
                "sglang_rollout.py",
                318,
                "First rollout sample: ['Q: {1+1}? A: 2'], label: 2, reward: 1",
            )
            w.raw(
                "Rollout generation:  50%|#####     | 8/16 [00:04<00:04,  2.00it/s]\r"
                "Rollout generation: 100%|##########| 16/16 [00:08<00:00,  2.00it/s]",
                rollout,
            )
            w.log(
                rollout,
                "rollout_manager",
                "sglang_rollout.py",
                356,
                "Finish rollout: ['Q: 2+2? A: {4}'], label: 4, reward: 1",
            )
            w.log(rollout, "rollout_manager", "ft_utils.py", 64, f"ft event=gather_end rollout_id={step} rank=0")
        perf: dict[str, Any] = {"perf/rollout_time": 40.0 + step, "perf/tokens_per_gpu_per_sec": 1800.0}
        if filter_on:
            for reward, count in ((1, right), (0, wrong)):
                if count:
                    perf[f"rollout/dynamic_filter/drop_zero_std_{reward}"] = count
        else:
            perf["rollout/zero_std/count_1"] = 1
        if august:
            perf["rollout/zero_std/all_zero_percentage"] = 0.0
            perf["rollout/zero_std/all_one_percentage"] = 0.0
            perf["passrate/pass@1"] = kept
        elif filter_on:
            perf["rollout/raw_reward_unfiltered"] = unfiltered(kept, right, wrong)
        perf["rollout/response_len/mean"] = 350.0
        perf["rollout/truncated_ratio"] = 0.0
        w.log(rollout, "rollout_manager", files["rollout_perf"], 88, f"perf {step}: {perf}")
        rollout_line = {"rollout/raw_reward": kept, "rollout/rewards": 0.0, "rollout/response_lengths": 350.0}
        w.log(train, "actor_cell0_rank0", files["rollout"], 40, f"rollout {step}: {rollout_line}")
        step_line = {"train/loss": 0.01 * step, "train/grad_norm": 0.2, "train/lr-pg_0": 1e-06, "train/step": step}
        w.log(train, "actor_cell0_rank0", files["step"], 512, f"step {step}: {step_line}")
        if backend == "megatron":  # printed twice, from two files
            w.log(train, "actor_cell0_rank0", "log_utils.py", 95, f"step {step}: {step_line}")
        train_perf = {"perf/train_wait_time": 41.0 + step, "perf/train_time": 20.0, "perf/step_time": 61.0 + step}
        w.log(train, "actor_cell0_rank0", files["perf"], 120, f"perf {step}: {train_perf}")
        if step % 2 == 1:
            if august:
                w.log(None, "main", "train.py", 88, f"eval {step} skipped: no eval data set")
            else:
                w.log(rollout, "rollout_manager", "rollout.py", 120, f"eval {step}: {{'eval/gsm8k': 0.7}}")
    return w.lines


CASES = list(itertools.product(("april", "august"), ("fsdp", "megatron"), (True, False), (True, False)))


@pytest.mark.parametrize(("version", "backend", "filter_on", "docker"), CASES)
def test_every_version_and_shape_reads_without_problems(
    version: str, backend: str, filter_on: bool, docker: bool
) -> None:
    parsed = parse_lines(build_log(version, backend, filter_on, docker))
    assert parsed.problems == [] and parsed.failure is None
    assert [(s.step, s.complete) for s in parsed.steps] == [(0, True), (1, True), (2, True)]
    assert (parsed.args is not None) == (backend == "megatron")  # the dump is Megatron's
    assert parsed.filter_setting()[0] is filter_on and parsed.rollout_batch_size() == B
    if version == "august":
        assert parsed.noise == {"ft": 6, "first_rollout_sample": 3, "progress": 6, "finish_rollout": 3}
        assert [(e.step, e.skipped, e.metrics) for e in parsed.evals] == [(1, "no eval data set", {})]
    else:
        assert parsed.noise == {}
        assert [(e.step, e.skipped, e.metrics) for e in parsed.evals] == [(1, None, {"eval/gsm8k": 0.7})]
    for record in parsed.steps:
        assert (record.t_rollout_end is not None) == docker
        assert len(record.train_steps) == 1  # Megatron's second print dropped


@pytest.mark.parametrize(("backend", "filter_on"), list(itertools.product(("fsdp", "megatron"), (True, False))))
def test_april_and_august_give_the_same_step_records(backend: str, filter_on: bool) -> None:
    """The training numbers each version prints are the same steps: the keys both print agree, and the reward
    is the same, printed by April's Miles, derived from August's."""
    parsed = {
        (version, docker): parse_lines(build_log(version, backend, filter_on, docker))
        for version, docker in itertools.product(("april", "august"), (True, False))
    }
    shared = {"perf/rollout_time", "rollout/raw_reward", "train/step", "perf/step_time", "train/loss"}
    shared |= {"rollout/dynamic_filter/drop_zero_std_1", "rollout/dynamic_filter/drop_zero_std_0"}
    reference = parsed[("april", False)]
    for key, log in parsed.items():
        assert len(log.steps) == len(reference.steps), key
        for mine, theirs in zip(log.steps, reference.steps):
            assert {k: v for k, v in mine.metrics.items() if k in shared} == {
                k: v for k, v in theirs.metrics.items() if k in shared
            }, key
            assert mine.derived["dropped_groups"] == theirs.derived["dropped_groups"]
            assert mine.train_steps == theirs.train_steps
    for version in ("april", "august"):
        document = parsed[(version, True)].to_json()
        rewards = [step["reward"] for step in document["steps"]]
        if filter_on:
            assert rewards == pytest.approx([unfiltered(*step) for step in STEPS], abs=1e-12)
            source = "printed" if version == "april" else "derived"
            assert document["reward_sources"] == {source: [0, 1, 2]}
        else:
            assert rewards == [kept for kept, _, _ in STEPS]
            assert document["reward_sources"] == {"printed": [0, 1, 2]}


def test_the_filter_path_missing_from_the_image_is_named_as_such() -> None:
    lines = build_log("august", "fsdp", True, True)[:1]
    lines[0] = lines[0].replace(FILTER_PATH_PUBLIC, FILTER_PATH)
    lines += [
        "Traceback (most recent call last):",
        '  File "/root/miles/train.py", line 72, in train',
        "ray.exceptions.RayTaskError(ModuleNotFoundError): ray::RolloutManager.generate() (pid=2411, ip=127.0.0.1)",
        '  File "/root/miles/miles/utils/misc.py", line 18, in load_function',
        "    module = importlib.import_module(module_path)",
        "ModuleNotFoundError: No module named 'miles.rollout.filter_hub.common_filters'",
        "Job 'raysubmit_abcdefghijklmnop' failed",
    ]
    failure = parse_lines(lines).failure
    assert failure is not None and failure["kind"] == "missing_filter"
    assert failure["reason"] == f"the image's Miles has no {FILTER_PATH}"


def test_another_missing_module_is_an_ordinary_exception() -> None:
    lines = build_log("august", "fsdp", True, False)[:1] + [
        "Traceback (most recent call last):",
        '  File "/root/miles/train.py", line 1, in <module>',
        "ModuleNotFoundError: No module named 'sglang'",
    ]
    failure = parse_lines(lines).failure
    assert failure is not None and failure["kind"] == "exception" and "reason" not in failure
