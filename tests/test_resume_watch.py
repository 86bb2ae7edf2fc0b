"""The proof of a resume, read from the trainer's own lines: verified, or refused with the line quoted."""

from __future__ import annotations

import pytest

from harness.checkpoints.watch import ResumeTarget, ResumeWatch
from harness.mileslog.checkpoint_lines import read_checkpoint_line, rollout_started

DIR = "/checkpoints/long/long-0123abcd"
TARGET = ResumeTarget(60, 60, f"{DIR}/iter_0000060")
STAMP = "2026-08-20T11:02:40.517000000Z "
ACTOR = "(FSDPTrainRayActor pid=812) [2026-08-20 11:02:40.517 actor_cell0_rank0] checkpoint.py:117 - "
ROLLOUT = "(RolloutManager pid=9) [2026-08-20 11:03:00.000 rollout_manager] "
LOADED = f"{STAMP}{ACTOR}[FSDP] Loaded model from {DIR}/iter_0000060/model"
OPTIMIZER = f"{STAMP}{ACTOR}[FSDP] Loaded optimizer from {DIR}/iter_0000060/optimizer"


def gather(rollout: int) -> str:
    return f"{STAMP}{ROLLOUT}ft_utils.py:61 - ft event=gather_start rollout_id={rollout} rank=0"


def perf(rollout: int) -> str:
    return f"{STAMP}{ROLLOUT}metrics.py:88 - perf {rollout}: {{'perf/rollout_time': 5.0}}"


def fed(*lines: str) -> ResumeWatch:
    watch = ResumeWatch(TARGET)
    for number, line in enumerate(lines, start=1):
        watch.feed(line, number)
    return watch


def test_the_load_line_then_the_checkpoint_s_next_rollout_verify_it() -> None:
    watch = fed("noise", LOADED, OPTIMIZER, gather(60))

    assert (watch.verdict, watch.load_line, watch.first_rollout, watch.cause) == ("verified", 2, 60, None)
    assert watch.feed(gather(0), 9) is None and watch.verdict == "verified"  # decided once


def test_a_perf_line_shows_the_first_rollout_where_no_ft_line_does() -> None:
    assert fed(LOADED, perf(60)).verdict == "verified"
    assert fed(LOADED, perf(61)).verdict == "refused"


@pytest.mark.parametrize(
    "line",
    [
        f"[FSDP] Checkpoint directory {DIR} not found; skipping load.",
        f"[FSDP] No tracker file at {DIR}/latest_checkpointed_iteration.txt; skipping load.",
        f"[FSDP] Model checkpoint {DIR}/iter_0000060/model not found; skipping load.",
        f"[FSDP] Failed to load model from {DIR}/iter_0000060/model: RuntimeError: size mismatch",
    ],
)
def test_each_skip_or_failed_load_is_refused_at_once_with_its_line_quoted(line: str) -> None:
    watch = fed("start", STAMP + ACTOR + line)

    assert watch.verdict == "refused"
    assert watch.cause == f"the trainer did not resume from iter_0000060: `{line}` (container.log line 2)"


def test_the_data_source_starting_from_the_first_prompt_is_refused() -> None:
    line = f"Checkpoint {DIR}/rollout/global_dataset_state_dict_59.pt does not exist."

    watch = fed(LOADED, STAMP + ROLLOUT + "data_source.py:80 - " + line)

    assert watch.verdict == "refused" and f"`{line}`" in (watch.cause or "")
    assert "first prompt" in (watch.cause or "")


def test_no_load_line_before_the_first_rollout_is_the_silent_fallback() -> None:
    watch = fed("start", gather(0))

    assert watch.verdict == "refused"
    assert watch.cause == (
        "the trainer did not resume from iter_0000060: it printed no load line and its first rollout is 0 (a --load "
        "Miles threw away trains from scratch without a word)"
    )


def test_a_loaded_checkpoint_whose_loop_restarts_at_zero_is_refused() -> None:
    watch = fed(LOADED, gather(0))

    assert watch.verdict == "refused" and "first rollout is 0, not 60" in (watch.cause or "")
    assert "slime#1558" in (watch.cause or "")


def test_a_load_of_another_checkpoint_is_refused() -> None:
    watch = fed(f"{STAMP}{ACTOR}[FSDP] Loaded model from {DIR}/iter_0000050/model")

    assert watch.verdict == "refused" and "not the chosen" in (watch.cause or "")


def test_an_end_before_any_rollout_is_refused() -> None:
    watch = fed(LOADED)
    watch.ended()

    assert watch.verdict == "refused"
    assert "ended before running any rollout" in (watch.cause or "")
    assert fed(LOADED, gather(60)).ended() is None


def test_lines_that_are_neither_cost_two_substring_tests_and_read_as_nothing() -> None:
    assert read_checkpoint_line(perf(3)) is None
    assert read_checkpoint_line("Checkpoint directory made") is None
    assert rollout_started("step 3: {'train/loss': 0}") is None
    assert rollout_started(f"{STAMP}(FSDPTrainRayActor pid=1) x.py:1 - rollout 7: {{'a': 1}}") == 7
    saved = read_checkpoint_line(
        f"{STAMP}{ACTOR}[FSDP] Saved checkpoint to {DIR}/iter_0000070 [repeated 2x across cluster]"
    )
    assert saved is not None and (saved.kind, saved.path) == ("saved", f"{DIR}/iter_0000070")


@pytest.mark.parametrize(
    ("lines", "verified", "cause"),
    [
        ([LOADED, gather(60)], True, None),
        (
            [f"{STAMP}{ACTOR}[FSDP] No tracker file at {DIR}/latest_checkpointed_iteration.txt; skipping load."],
            False,
            "No tracker file",
        ),
        (["start"], False, "ended before running any rollout"),
    ],
)
def test_a_resume_whose_harness_died_undecided_is_decided_from_the_attempt_s_log(
    tmp_path, lines: list, verified: bool, cause
) -> None:
    import json

    from harness.capture import Capture, RunState, RunStatus
    from harness.checkpoints.lineage import read_resume

    record = {
        "from_attempt": 1,
        "lineage": 1,
        "iteration": 60,
        "next_rollout_id": 60,
        "verified": None,
        "trainer_checkpoint": f"{DIR}/iter_0000060",
    }
    (tmp_path / "resume.json").write_text(json.dumps(record))
    (tmp_path / "container.log").write_text("".join(line + "\n" for line in lines))
    status = RunStatus("long", "long-1", "running", None, "2026-08-20T10:00:00Z", None, 200, 60, None)
    Capture(tmp_path, "long").write_status(status)

    undecided, _ = read_resume(str(tmp_path))
    status.state, status.ended_at, status.exit_code = RunState.INTERRUPTED, "2026-08-20T11:00:00Z", 137
    Capture(tmp_path, "long").write_status(status)
    decided, _ = read_resume(str(tmp_path))

    assert undecided is not None and undecided.verified is None  # still running: not decided from a partial log
    assert decided is not None and decided.verified is verified
    assert (cause is None and decided.cause is None) or cause in decided.cause
