"""The simulator's checkpoints, as Miles's FSDP backend makes and loads them: layout, lines, skips, exactness."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from harness.lab.milesargv import read_base_args
from harness.lab.milesnames import FILTER_PATH
from harness.mileslog import parse_lines
from harness.sim.checkpoint import PowerCut
from harness.sim.clock import Stopped
from harness.sim.config import SimUsageError
from harness.sim.params import DEFAULT_PARAMS
from harness.sim.trainer import CLOCK_METRICS, CheckpointUnreadable, CheckpointUnwritable, StepLog, simulate
from support.lines import LineReader
from support.timing import scaled

REPO = Path(__file__).resolve().parent.parent
BASE = read_base_args()  # the lab's run: --train-backend fsdp, 12 rollouts
FILTER = ["--dynamic-sampling-filter-path", FILTER_PATH, "--over-sampling-batch-size", "48"]
GLOBAL = ["--rollout-global-dataset"]
STAMP = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [a-z_0-9]+\]")
TRAIN_LINE = re.compile(
    r"^\(FSDPTrainRayActor pid=\d+\) \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} actor_cell0_rank0\] checkpoint\.py:\d+ - "
)


class _Watch(io.StringIO):
    """A log stream that asks the run to stop (as SIGKILL would: the stop is checked inside the rollout) once a
    line holds `marker`."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker
        self.hit = False

    def write(self, text: str) -> int:
        self.hit = self.hit or self.marker in text
        return super().write(text)

    def stop_requested(self) -> Optional[int]:
        return int(signal.SIGKILL) if self.hit else None


def sim(argv: list[str], env: Optional[dict[str, str]] = None) -> tuple[list[StepLog], str]:
    stream = io.StringIO()
    logs = simulate(argv, stream=stream, env=env or {})
    return logs, stream.getvalue()


def killed_during(argv: list[str], rollout: int) -> str:
    """Run until rollout `rollout` has started, then stop it there; the log it printed."""
    stream = _Watch(f"gather_start rollout_id={rollout} ")
    with pytest.raises(Stopped):
        simulate(argv, stream=stream, stop_requested=stream.stop_requested)
    return stream.getvalue()


def clockless_metrics(text: str) -> dict[int, dict[str, object]]:
    """Every printed metric of every complete step, those that are the clock's left out, by rollout id."""
    parsed = parse_lines(text.splitlines())
    assert parsed.problems == [] and parsed.failure is None
    return {
        record.step: {key: value for key, value in record.metrics.items() if key not in CLOCK_METRICS}
        | {"train_steps": record.train_steps}
        for record in parsed.steps
        if record.complete
    }


def checkpoint_lines(text: str) -> list[str]:
    return [STAMP.sub("[T]", line) for line in text.splitlines() if "[FSDP]" in line or "does not exist." in line]


def first_rollout(text: str) -> int:
    return int(re.search(r"gather_start rollout_id=(\d+) ", text).group(1))


# ---- saving --------------------------------------------------------------------------------------------------


def test_a_save_leaves_miles_s_layout_meta_and_tracker(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    logs, text = sim([*BASE, "--num-rollout", "7", "--save", str(save), "--save-interval", "3", *GLOBAL])
    assert [log.step for log in logs] == list(range(7))
    # after rollouts 2 and 5 ((r + 1) % 3 == 0), and always after the last one (6)
    assert sorted(p.name for p in save.iterdir()) == [
        "iter_0000003",
        "iter_0000006",
        "iter_0000007",
        "latest_checkpointed_iteration.txt",
        "rollout",
    ]
    assert (save / "latest_checkpointed_iteration.txt").read_text() == "7"
    assert sorted(p.name for p in (save / "rollout").iterdir()) == [
        f"global_dataset_state_dict_{r}.pt" for r in (2, 5, 6)
    ]
    iteration = save / "iter_0000006"
    assert sorted(p.name for p in iteration.iterdir()) == ["lr_scheduler", "meta.json", "model", "optimizer", "rng.pt"]
    for part in ("model", "optimizer", "lr_scheduler"):
        assert (iteration / part / ".metadata").is_file()
    meta = json.loads((iteration / "meta.json").read_text())
    assert set(meta) == {
        "iteration",
        "rollout_id",
        "next_rollout_id",
        "global_step",
        "micro_step",
        "world_size",
        "timestamp",
    }
    assert (meta["iteration"], meta["rollout_id"], meta["next_rollout_id"], meta["world_size"]) == (6, 5, 6, 1)
    assert meta["global_step"] == 6  # --global-batch-size 256 = 32 x 8: one optimizer step a rollout
    assert not list(iteration.glob("*.tmp"))  # meta.json went through a temporary file, renamed

    saved = [line for line in text.splitlines() if "Saved checkpoint" in line]
    assert [TRAIN_LINE.sub("", line) for line in saved] == [
        f"[FSDP] Saved checkpoint to {save}/iter_{n:07d}" for n in (3, 6, 7)
    ]
    assert all(TRAIN_LINE.match(line) for line in saved)
    # each save comes after its rollout's train-side perf line and before the next rollout starts
    lines = text.splitlines()
    at = lines.index(saved[1])
    assert " - perf 5: {'perf/train_wait_time'" in lines[at - 1]
    assert "gather_start rollout_id=6 " in lines[at + 1]


def test_without_save_optim_there_is_no_optimizer_and_no_scheduler(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    sim([*BASE, "--num-rollout", "2", "--save", str(save), "--no-save-optim"])
    assert sorted(p.name for p in (save / "iter_0000002").iterdir()) == ["meta.json", "model", "rng.pt"]
    assert not (save / "rollout").exists()  # the data state only with --rollout-global-dataset


def test_a_save_takes_simulated_time_for_its_nominal_size(tmp_path: Path) -> None:
    def save_seconds(*extra: str) -> float:
        _, text = sim([*BASE, "--num-rollout", "1", "--save", str(tmp_path / "c"), *extra])
        lines = text.splitlines()
        saved = next(i for i, line in enumerate(lines) if "Saved checkpoint" in line)
        return _seconds(lines[saved]) - _seconds(lines[saved - 1])

    params = DEFAULT_PARAMS
    full = (params.checkpoint_model_gb + params.checkpoint_optimizer_gb) * params.checkpoint_write_s_per_gb
    assert save_seconds() == pytest.approx(full, abs=0.002)
    assert save_seconds("--no-save-optim") == pytest.approx(
        params.checkpoint_model_gb * params.checkpoint_write_s_per_gb, abs=0.002
    )


def _seconds(line: str) -> float:
    stamp = STAMP.search(line).group(0)
    hours, minutes, seconds = stamp.split()[1].split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def test_the_sentinel_asks_for_a_save_at_the_next_save_point_and_is_removed(tmp_path: Path) -> None:
    save, sentinel = tmp_path / "ckpt", tmp_path / "save-now"
    sentinel.write_text("")
    _, text = sim([*BASE, "--num-rollout", "3", "--save", str(save), "--save-trigger-sentinel", str(sentinel)])
    assert not sentinel.exists()
    assert [TRAIN_LINE.sub("", line) for line in text.splitlines() if "Saved" in line] == [
        f"[FSDP] Saved checkpoint to {save}/iter_0000001",  # the sentinel, at rollout 0's save point
        f"[FSDP] Saved checkpoint to {save}/iter_0000003",  # the last rollout
    ]


def test_with_no_checkpoint_flag_the_log_is_the_same_and_saving_adds_only_its_lines(tmp_path: Path) -> None:
    plain_logs, plain = sim([*BASE, *FILTER, "--num-rollout", "4"])
    _, saving = sim([*BASE, *FILTER, "--num-rollout", "4", "--save", str(tmp_path / "c"), "--save-interval", "2"])

    def body(text: str) -> list[str]:
        """The lines, without the launch line, the job id, timestamps and the clock's values (a save takes time,
        so the clock's sums round differently after it)."""
        lines = [line for line in text.splitlines() if not line.startswith("Running entrypoint")]
        lines = [re.sub(r"raysubmit_\w+", "raysubmit_X", STAMP.sub("[T]", line)) for line in lines]
        for key in CLOCK_METRICS:
            lines = [re.sub(rf"'{key}': [^,}}]+", f"'{key}': T", line) for line in lines]
        return lines

    assert [line for line in body(saving) if "Saved checkpoint" not in line] == body(plain)
    assert len(body(saving)) == len(body(plain)) + 2
    parsed = parse_lines(saving.splitlines())
    assert parsed.problems == [] and parsed.failure is None and len(parsed.steps) == 4


def test_public_miles_prints_the_checkpoint_lines_of_miles_logs_section_7(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    _, text = sim([*BASE, "--num-rollout", "2", "--save", str(save), "--miles", "public-2026-08"])
    _, loaded = sim([*BASE, "--num-rollout", "3", "--load", str(save), "--miles", "public-2026-08"])
    saved = next(line for line in text.splitlines() if "Saved" in line)
    model = next(line for line in loaded.splitlines() if "Loaded model" in line)
    assert re.fullmatch(
        rf"\(FSDPTrainRayActor pid=\d+\) \[[^]]+ actor_cell0_rank0\] checkpoint\.py:248 - "
        rf"\[FSDP\] Saved checkpoint to {save}/iter_0000002",
        saved,
    )
    assert re.fullmatch(
        rf"\(FSDPTrainRayActor pid=\d+\) \[[^]]+ actor_cell0_rank0\] checkpoint\.py:117 - "
        rf"\[FSDP\] Loaded model from {save}/iter_0000002/model",
        model,
    )


# ---- power cuts at each moment of a save ------------------------------------------------------------------------


def test_a_power_cut_during_the_model_write_leaves_the_earlier_checkpoint_named(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    argv = [*BASE, "--num-rollout", "6", "--save", str(save), "--save-interval", "3", *GLOBAL]
    with pytest.raises(PowerCut):
        simulate(argv, env={"HARNESS_SIM_CRASH_AT": "model-write:6"})
    torn = save / "iter_0000006"
    assert sorted(p.name for p in torn.iterdir()) == ["model"]
    assert [p.name for p in (torn / "model").iterdir()] == ["__0_0.distcp"]  # no .metadata: torn
    assert (save / "latest_checkpointed_iteration.txt").read_text() == "3"
    assert not (save / "rollout" / "global_dataset_state_dict_5.pt").exists()


def test_a_power_cut_after_meta_json_leaves_the_tracker_on_the_earlier_checkpoint(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    argv = [*BASE, "--num-rollout", "6", "--save", str(save), "--save-interval", "3", *GLOBAL]
    stream = io.StringIO()
    with pytest.raises(PowerCut):
        simulate(argv, stream=stream, env={"HARNESS_SIM_CRASH_AT": "after-meta:6"})
    done = save / "iter_0000006"
    # the order of a save: everything of the iteration, the data state, meta.json; then the tracker
    assert sorted(p.name for p in done.iterdir()) == ["lr_scheduler", "meta.json", "model", "optimizer", "rng.pt"]
    assert (save / "rollout" / "global_dataset_state_dict_5.pt").is_file()
    assert (save / "latest_checkpointed_iteration.txt").read_text() == "3"
    assert "iter_0000006" not in stream.getvalue()


def test_a_power_cut_in_the_tracker_write_leaves_it_empty(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    with pytest.raises(PowerCut):
        simulate([*BASE, "--num-rollout", "2", "--save", str(save)], env={"HARNESS_SIM_CRASH_AT": "tracker-write"})
    assert (save / "latest_checkpointed_iteration.txt").read_text() == ""
    assert (save / "iter_0000002" / "meta.json").is_file()


def test_a_power_cut_after_the_tracker_is_before_the_saved_line(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    stream = io.StringIO()
    with pytest.raises(PowerCut):
        simulate(
            [*BASE, "--num-rollout", "4", "--save", str(save), "--save-interval", "2"],
            stream=stream,
            env={"HARNESS_SIM_CRASH_AT": "after-tracker:4"},
        )
    assert (save / "latest_checkpointed_iteration.txt").read_text() == "4"
    assert [TRAIN_LINE.sub("", line) for line in stream.getvalue().splitlines() if "Saved" in line] == [
        f"[FSDP] Saved checkpoint to {save}/iter_0000002"
    ]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("moment", "tracker", "meta"),
    [("model-write", "2", False), ("after-meta", "2", True), ("tracker-write", "", True), ("after-tracker", "4", True)],
)
def test_the_process_sigkills_itself_at_each_crash_point(tmp_path: Path, moment: str, tracker: str, meta: bool) -> None:
    save = tmp_path / "ckpt"
    done = subprocess.run(
        [sys.executable, "-m", "harness.sim", *BASE, "--num-rollout", "4", "--save", str(save), "--save-interval", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HARNESS_SIM_CRASH_AT": f"{moment}:4"},
    )
    assert done.returncode == -signal.SIGKILL
    assert (save / "latest_checkpointed_iteration.txt").read_text() == tracker
    assert (save / "iter_0000004" / "meta.json").is_file() == meta
    assert "succeeded" not in done.stdout and "Saved checkpoint to " + str(save / "iter_0000004") not in done.stdout


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("HARNESS_SIM_CRASH_AT", "mid-write"),
        ("HARNESS_SIM_CRASH_AT", "after-meta:six"),
        ("HARNESS_SIM_RESUME_FAULT", "power-cut"),
    ],
)
def test_an_unknown_fault_or_crash_point_is_a_usage_error(variable: str, value: str) -> None:
    with pytest.raises(SimUsageError, match=variable):
        simulate([*BASE, "--num-rollout", "1"], env={variable: value})


# ---- loading ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint_6(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the lab's base run with the filter, checkpointed every 3 rollouts, stopped in rollout 7."""
    save = tmp_path_factory.mktemp("ckpt") / "run"
    killed_during([*BASE, *FILTER, "--save", str(save), "--save-interval", "3", *GLOBAL], rollout=7)
    assert (save / "latest_checkpointed_iteration.txt").read_text() == "6"
    return save


def loaded_lines(text: str) -> list[str]:
    """The checkpoint lines' messages, in order."""
    return [re.sub(r"^.*? - ", "", line) for line in checkpoint_lines(text)]


def test_a_load_prints_miles_s_lines_and_the_loop_starts_at_next_rollout_id(checkpoint_6: Path) -> None:
    logs, text = sim([*BASE, *FILTER, *GLOBAL, "--load", str(checkpoint_6)])
    assert [re.sub(r"pid=\d+", "pid=N", line) for line in checkpoint_lines(text)] == [
        f"(FSDPTrainRayActor pid=N) [T] checkpoint.py:117 - [FSDP] Loaded model from {checkpoint_6}/iter_0000006/model",
        f"(FSDPTrainRayActor pid=N) [T] checkpoint.py:131 - "
        f"[FSDP] Loaded optimizer from {checkpoint_6}/iter_0000006/optimizer",
    ]
    assert [log.step for log in logs] == list(range(6, 12))
    assert first_rollout(text) == 6


def test_no_load_optim_loads_the_model_only(checkpoint_6: Path) -> None:
    _, text = sim([*BASE, *FILTER, *GLOBAL, "--load", str(checkpoint_6), "--no-load-optim", "--num-rollout", "7"])
    assert loaded_lines(text) == [f"[FSDP] Loaded model from {checkpoint_6}/iter_0000006/model"]


@pytest.mark.parametrize(
    ("rollouts", "global_dataset"),
    [(FILTER, True), ([], True), ([*FILTER, "--partial-rollout"], True)],
    ids=["filter", "plain", "partial-rollout"],
)
def test_a_resumed_run_continues_exactly_as_the_uninterrupted_one(
    tmp_path: Path, rollouts: list[str], global_dataset: bool
) -> None:
    argv = [*BASE, *rollouts, *(GLOBAL if global_dataset else [])]
    _, whole = sim(argv)
    save = tmp_path / "ckpt"
    killed = killed_during([*argv, "--save", str(save), "--save-interval", "3"], rollout=7)
    _, resumed = sim([*argv, "--save", str(save), "--save-interval", "3", "--load", str(save)])

    expected = clockless_metrics(whole)
    assert sorted(clockless_metrics(killed)) == list(range(7))
    continued = clockless_metrics(resumed)
    assert sorted(continued) == list(range(6, 12))
    for step in range(6, 12):
        assert continued[step] == expected[step], f"step {step}"


def test_without_the_global_dataset_the_data_source_starts_again_from_the_first_prompt(tmp_path: Path) -> None:
    argv = [*BASE, *FILTER]
    logs_whole, whole = sim(argv)
    save = tmp_path / "ckpt"
    killed_during([*argv, "--save", str(save), "--save-interval", "3"], rollout=7)
    assert not (save / "rollout").exists()
    logs, resumed = sim([*argv, "--load", str(save)])
    assert "does not exist" not in resumed  # Miles says nothing: only the global dataset is saved and loaded
    assert logs[0].step == 6 and logs[0].result.judged[0].prompt < 48  # the first batch of the data set again
    assert logs_whole[6].result.judged[0].prompt >= 6 * 48
    assert clockless_metrics(resumed)[6] != clockless_metrics(whole)[6]


def test_the_data_state_of_the_start_rollout_is_read_and_a_missing_one_is_said(checkpoint_6: Path) -> None:
    _, text = sim([*BASE, *FILTER, *GLOBAL, "--load", str(checkpoint_6), "--start-rollout-id", "8"])
    assert first_rollout(text) == 8
    missing = f"{checkpoint_6}/rollout/global_dataset_state_dict_7.pt"
    line = next(line for line in text.splitlines() if "does not exist." in line)
    assert re.fullmatch(
        rf"\(RolloutManager pid=\d+\) \[[^]]+ rollout_manager\] data_source\.py:\d+ - Checkpoint {missing} does not exist\.",
        line,
    )


def test_a_continuation_at_or_below_the_loaded_iteration_runs_no_rollout_and_succeeds(checkpoint_6: Path) -> None:
    logs, text = sim([*BASE, *FILTER, *GLOBAL, "--load", str(checkpoint_6), "--num-rollout", "6"])
    assert logs == []
    assert "gather_start" not in text and "Loaded model" in text
    assert text.splitlines()[-2].endswith("' succeeded")


# ---- what Miles does when the load does not happen ----------------------------------------------------------------


def test_a_missing_load_directory_or_tracker_is_miles_s_silent_path(tmp_path: Path) -> None:
    for load in (tmp_path / "absent", tmp_path):
        logs, text = sim([*BASE, "--num-rollout", "2", "--load", str(load), *GLOBAL])
        assert checkpoint_lines(text) == [] and [log.step for log in logs] == [0, 1]


def _copy_of(checkpoint: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(checkpoint, copy)
    return copy


def test_a_missing_model_is_said_and_the_run_trains_from_scratch(checkpoint_6: Path, tmp_path: Path) -> None:
    copy = _copy_of(checkpoint_6, tmp_path)
    shutil.rmtree(copy / "iter_0000006" / "model")
    logs, text = sim([*BASE, *FILTER, *GLOBAL, "--load", str(copy), "--num-rollout", "2"])
    assert loaded_lines(text) == [f"[FSDP] Model checkpoint {copy}/iter_0000006/model not found; skipping load."]
    assert [log.step for log in logs] == [0, 1]


def test_a_torn_model_fails_to_load_and_the_run_trains_from_scratch(checkpoint_6: Path, tmp_path: Path) -> None:
    copy = _copy_of(checkpoint_6, tmp_path)
    (copy / "iter_0000006" / "model" / ".metadata").unlink()
    logs, text = sim([*BASE, *FILTER, *GLOBAL, "--load", str(copy), "--num-rollout", "1"])
    [line] = loaded_lines(text)
    assert line.startswith(f"[FSDP] Failed to load model from {copy}/iter_0000006/model: FileNotFoundError: ")
    assert [log.step for log in logs] == [0]
    _, fresh = sim([*BASE, *FILTER, *GLOBAL, "--num-rollout", "1"])
    assert clockless_metrics(text) == clockless_metrics(fresh)  # from scratch: the untrained policy, prompt 0 on


def test_loop_at_zero_starts_at_rollout_0_with_the_trained_policy(checkpoint_6: Path) -> None:
    fault = {"HARNESS_SIM_RESUME_FAULT": "loop-at-zero"}
    logs, _ = sim([*BASE, *FILTER, *GLOBAL, "--load", str(checkpoint_6), "--num-rollout", "1"], env=fault)
    fresh, _ = sim([*BASE, *FILTER, *GLOBAL, "--num-rollout", "1"])
    assert [log.step for log in logs] == [0] and min(group.prompt for group in logs[0].result.judged) == 0
    trained = {group.prompt: group.pass_rate for group in logs[0].result.judged}
    untrained = {group.prompt: group.pass_rate for group in fresh[0].result.judged}
    common = trained.keys() & untrained.keys()
    assert common and all(trained[p] > untrained[p] for p in common)  # six rollouts of training in the policy


def test_an_empty_tracker_fails_the_job_as_miles_s_int_does(checkpoint_6: Path, tmp_path: Path) -> None:
    copy = _copy_of(checkpoint_6, tmp_path)
    (copy / "latest_checkpointed_iteration.txt").write_text("")
    with pytest.raises(CheckpointUnreadable, match=r"ValueError: invalid literal for int\(\) with base 10: ''"):
        sim([*BASE, "--load", str(copy)])


@pytest.mark.integration
def test_an_empty_tracker_is_a_traceback_and_exit_1(checkpoint_6: Path, tmp_path: Path) -> None:
    copy = _copy_of(checkpoint_6, tmp_path)
    (copy / "latest_checkpointed_iteration.txt").write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "harness.sim", *BASE, "--load", str(copy)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "ValueError: invalid literal for int() with base 10: ''" in done.stdout
    assert done.stdout.splitlines()[-4].endswith("' failed") and done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("fault", "lines", "start"),
    [
        ("silent-no-load", [], 0),
        ("no-dir", ["[FSDP] Checkpoint directory {dir} not found; skipping load."], 0),
        ("no-tracker", ["[FSDP] No tracker file at {dir}/latest_checkpointed_iteration.txt; skipping load."], 0),
        ("no-model", ["[FSDP] Model checkpoint {dir}/iter_0000006/model not found; skipping load."], 0),
        ("load-fails", ["[FSDP] Failed to load model from {dir}/iter_0000006/model: RuntimeError: "], 0),
        (
            "no-data-state",
            [
                "[FSDP] Loaded model from {dir}/iter_0000006/model",
                "[FSDP] Loaded optimizer from {dir}/iter_0000006/optimizer",
                "Checkpoint {dir}/rollout/global_dataset_state_dict_5.pt does not exist.",
            ],
            6,
        ),
        (
            "loop-at-zero",
            [
                "[FSDP] Loaded model from {dir}/iter_0000006/model",
                "[FSDP] Loaded optimizer from {dir}/iter_0000006/optimizer",
            ],
            0,
        ),
        (
            "zero-rollouts",
            [
                "[FSDP] Loaded model from {dir}/iter_0000006/model",
                "[FSDP] Loaded optimizer from {dir}/iter_0000006/optimizer",
            ],
            6,
        ),
    ],
)
def test_each_fault_imitates_its_upstream_fallback(
    checkpoint_6: Path, fault: str, lines: list[str], start: int
) -> None:
    logs, text = sim(
        [*BASE, *FILTER, *GLOBAL, "--load", str(checkpoint_6), "--num-rollout", "8"],
        env={"HARNESS_SIM_RESUME_FAULT": fault},
    )
    got = loaded_lines(text)
    want = [line.format(dir=checkpoint_6) for line in lines]
    assert len(got) == len(want) and all(g.startswith(w) for g, w in zip(got, want)), got
    assert logs[0].step == start
    assert text.splitlines()[-2].endswith("' succeeded")


def test_no_data_state_starts_the_prompts_from_the_first_with_the_model_loaded(checkpoint_6: Path) -> None:
    logs, _ = sim(
        [*BASE, *FILTER, *GLOBAL, "--load", str(checkpoint_6), "--num-rollout", "7"],
        env={"HARNESS_SIM_RESUME_FAULT": "no-data-state"},
    )
    assert logs[0].step == 6 and logs[0].result.judged[0].prompt < 48


def test_reward_collapse_after_a_load_is_low_for_three_rollouts_then_recovers(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    argv = [*BASE, *GLOBAL, "--num-rollout", "12"]
    killed_during([*argv, "--save", str(save), "--save-interval", "3"], rollout=4)
    healthy, _ = sim([*argv, "--load", str(save)])
    collapsed, _ = sim([*argv, "--load", str(save)], env={"HARNESS_SIM_RESUME_FAULT": "reward-collapse"})

    def reward(logs: list[StepLog]) -> list[float]:
        return [log.rollout["rollout/raw_reward"] for log in logs]

    assert [log.step for log in collapsed] == list(range(3, 12))
    assert all(r < 0.3 for r in reward(collapsed)[:3]), reward(collapsed)
    assert min(reward(healthy)[:3]) > 0.5
    assert reward(collapsed)[3:] == reward(healthy)[3:]


def test_another_seed_keeps_the_checkpoint_s_train_draws_unless_no_load_rng(checkpoint_6: Path) -> None:
    def pg_loss(argv: list[str]) -> float:
        logs, _ = sim([*BASE, *FILTER, *GLOBAL, "--num-rollout", "7", *argv])
        return logs[-1].optimizer_steps[0]["train/pg_loss"]

    _, whole = sim([*BASE, *FILTER, *GLOBAL, "--num-rollout", "7"])
    loaded = pg_loss(["--load", str(checkpoint_6)])
    assert loaded == clockless_metrics(whole)[6]["train/pg_loss"]
    other_seed = ["--load", str(checkpoint_6), "--seed", "2"]
    # the prompts' answers follow --seed (SGLang's sampling seed) either way; the train side follows rng.pt
    assert pg_loss(other_seed) != pg_loss([*other_seed, "--no-load-rng"])


def test_checkpoint_flags_need_the_fsdp_backend() -> None:
    with pytest.raises(SimUsageError, match="--train-backend fsdp"):
        simulate(["--num-rollout", "1", "--save", "/nonexistent/ckpt"], env={})


# ---- the interruption as it happens: SIGKILL of the process, then a new one that loads --------------------------


@pytest.mark.integration
def test_a_process_killed_during_rollout_7_resumes_to_the_same_metrics(tmp_path: Path) -> None:
    save = tmp_path / "ckpt"
    argv = [*BASE, *FILTER, *GLOBAL, "--save", str(save), "--save-interval", "3"]
    whole = subprocess.run(
        [sys.executable, "-m", "harness.sim", *argv], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert whole.returncode == 0, whole.stderr
    save_2 = tmp_path / "ckpt2"
    argv_2 = [*BASE, *FILTER, *GLOBAL, "--save", str(save_2), "--save-interval", "3"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.sim", *argv_2, "--time-scale", "0.001"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    reader = LineReader(proc)
    try:
        reader.until("gather_start rollout_id=7 ", timeout=60)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=scaled(10)) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert (save_2 / "latest_checkpointed_iteration.txt").read_text() == "6"
    resumed = subprocess.run(
        [sys.executable, "-m", "harness.sim", *argv_2, "--load", str(save_2)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert resumed.returncode == 0, resumed.stderr
    expected, continued = clockless_metrics(whole.stdout), clockless_metrics(resumed.stdout)
    assert sorted(continued) == list(range(6, 12))
    assert all(continued[step] == expected[step] for step in range(6, 12))


def test_a_save_the_file_system_refuses_kills_the_job(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(CheckpointUnwritable, match="NotADirectoryError|FileExistsError"):
        sim([*BASE, "--num-rollout", "1", "--save", str(blocker / "ckpt")])


@pytest.mark.integration
def test_a_save_the_file_system_refuses_is_a_traceback_and_exit_1(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.sim",
            *BASE,
            "--num-rollout",
            "2",
            "--save",
            str(blocker / "c"),
            "--save-interval",
            "1",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout.splitlines()[-4].endswith("' failed") and "actor_model.save_model(rollout_id)" in done.stdout
    assert done.stderr.startswith("harness sim: --save: ") and done.stderr.count("\n") == 1
    assert "gather_start rollout_id=1 " not in done.stdout  # died at rollout 0's save
