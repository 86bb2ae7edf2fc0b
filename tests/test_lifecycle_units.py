"""The deciding parts of the lifecycle, without Docker: outcome, rerun modes, log resume, captures, locks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.capture import Capture, RunStatus, append_jsonl, read_jsonl, write_json_atomic
from harness.capture.outcome import RunEnd, decide_outcome
from harness.engines.logstream import LogPosition, join_partials, split_lines, stamp_to_ns
from harness.errors import HarnessError
from harness.run.decide import configuration_changes, decide
from harness.run.gpulock import GpuLock

# --- outcome ------------------------------------------------------------------------------


def outcome(**kw):
    base = dict(
        exit_code=0,
        steps_complete=12,
        steps_expected=12,
        stop_state=None,
        stop_reason=None,
        failure=None,
        capture_error=None,
    )
    return decide_outcome(RunEnd(**{**base, **kw}))


def test_exit_0_with_every_step_is_the_only_success() -> None:
    assert outcome().state == "succeeded"
    short = outcome(steps_complete=11)
    assert short.state == "no_metrics" and short.error == "exited 0 after 11 of 12 complete steps"


def test_a_failure_names_the_parsers_line_or_the_signal() -> None:
    oom = outcome(exit_code=1, steps_complete=3, failure={"kind": "oom", "line": "torch.OutOfMemoryError: CUDA"})
    assert oom.state == "failed" and oom.error == "exit code 1: torch.OutOfMemoryError: CUDA"
    killed = outcome(exit_code=137, steps_complete=3)
    assert killed.state == "failed" and "SIGKILL" in killed.error


def test_a_filter_path_the_images_miles_lacks_is_named_as_such() -> None:
    line = "ModuleNotFoundError: No module named 'miles.rollout.filter_hub.common_filters'"
    reason = "the image's Miles has no miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter"
    failed = outcome(exit_code=1, steps_complete=0, failure={"kind": "missing_filter", "line": line, "reason": reason})
    assert failed.state == "failed" and failed.error == f"exit code 1: {reason} ({line})"


def test_the_manifest_records_how_a_rollout_is_submitted_only_when_set() -> None:
    from dataclasses import replace

    from harness.run.execute import rollout_submission
    from harness.run.plan import plan_launch

    store, experiment = load_lab_experiment()
    spec = plan_launch(experiment, base_args=store.base_args, capture_root="c", project_root="/p", environ={})
    assert rollout_submission(spec) == {}
    argv = (*spec.trainer_argv, "--rollout-submission-granularity", "sample")
    set_both = replace(spec, trainer_argv=argv, env={**spec.env, "MILES_USE_LEGACY_ROLLOUT_V1": "1"})
    assert rollout_submission(set_both) == {
        "rollout_submission_granularity": "sample",
        "MILES_USE_LEGACY_ROLLOUT_V1": "1",
    }


def load_lab_experiment():  # noqa: ANN201 - the store and its Experiment
    from harness.experiments.store import ExperimentStore

    store = ExperimentStore(Path(__file__).resolve().parents[1] / "experiments")
    return store, store.load("e2b-dapo-filter").experiment


def test_a_stop_by_the_harness_wins_over_the_exit_code_and_says_if_steps_are_usable() -> None:
    stopped = outcome(exit_code=143, stop_state="stopped", stop_reason="time limit of 240 min reached")
    assert stopped.state == "stopped" and stopped.steps_usable
    assert stopped.error == "time limit of 240 min reached; all 12 steps had completed, so the steps are usable"
    early = outcome(exit_code=143, steps_complete=5, stop_state="interrupted", stop_reason="interrupted by SIGINT")
    assert early.state == "interrupted" and not early.steps_usable and early.error == "interrupted by SIGINT"


def test_a_broken_capture_is_never_a_success() -> None:
    broken = outcome(capture_error="OSError: No space left on device")
    assert broken.state == "failed" and "No space left" in broken.error


REMOVED = "its container was removed while it ran"


@pytest.mark.parametrize(
    "exit_code,state_after,removed",
    [
        (None, None, True),  # the wait broke on the removal, then the container was not there
        (137, None, True),  # `docker rm -f`'s kill answered first, then the container was not there
        (137, {"Status": "removing", "Running": False, "ExitCode": 137}, True),  # answered mid-removal
        (None, {"Status": "removing", "Running": False, "ExitCode": 137}, True),
        (137, {"Status": "exited", "Running": False, "ExitCode": 137}, False),  # `docker kill`: it is still there
        (None, {"Status": "running", "Running": True}, False),  # a dropped connection, the container runs on
        (0, None, False),  # it ended on its own, and was removed after: an exit, not a removal while it ran
        (143, None, False),
    ],
)
def test_a_removal_is_read_from_the_engines_answers_whichever_came_first(exit_code, state_after, removed) -> None:
    from harness.engines.dockerrun import ended_by_removal

    assert ended_by_removal(exit_code, state_after) is removed


@pytest.mark.parametrize("exit_code", [None, 137], ids=["removal first", "exit first"])
def test_a_container_removed_from_outside_is_a_removal_whichever_answer_came_first(exit_code) -> None:
    removed = outcome(exit_code=exit_code, steps_complete=3, gone=REMOVED)

    assert removed.state == "failed" and not removed.steps_usable
    assert removed.error.startswith(f"{REMOVED}; the lines it printed after the capture's last one are gone")
    assert "SIGKILL" not in removed.error
    killed = outcome(exit_code=137, steps_complete=3)  # the engine said it is still there: a kill
    assert killed.state == "failed" and "SIGKILL" in killed.error


# --- rerun modes --------------------------------------------------------------------------


def status(state: str, run_id: str = "r-1") -> RunStatus:
    return RunStatus(
        run="r",
        run_id=run_id,
        state=state,
        exit_code=0,
        started_at="2026-01-01T00:00:00Z",
        ended_at="2026-01-01T01:00:00Z",
        steps_expected=12,
        steps_complete=12,
        error="boom",
    )


@pytest.mark.parametrize(
    ("state", "mode", "action"),
    [
        (None, "cached", "run"),
        ("succeeded", "cached", "skip"),
        ("succeeded", "retry", "skip"),
        ("succeeded", "force", "run"),
        ("failed", "cached", "skip"),
        ("failed", "retry", "run"),
        ("no_metrics", "retry", "run"),
        ("interrupted", "retry", "run"),
        ("stopped", "retry", "run"),
        ("running", "force", "skip"),
    ],
)
def test_rerun_modes(state: str | None, mode: str, action: str) -> None:
    decision = decide("r", "r-1", status(state) if state else None, mode)
    assert decision.action == action
    assert decision.reason


def test_a_changed_configuration_is_said() -> None:
    decision = decide("r", "r-2", status("succeeded", run_id="r-1"), "cached")
    assert decision.action == "skip" and "another configuration (run id r-1, now r-2)" in decision.reason


@pytest.mark.parametrize("mode", ["cached", "retry"])
def test_a_succeeded_capture_of_another_configuration_is_refused_naming_what_changed(mode: str) -> None:
    decision = decide("r", "r-2", status("succeeded", run_id="r-1"), mode, changes=["time scale 0.02 -> 0.01"])

    assert decision.action == "skip" and decision.refused
    assert decision.not_started() == (
        "run r not started: its capture succeeded at 2026-01-01T01:00:00Z with another configuration (time scale "
        "0.02 -> 0.01; run id r-1, now r-2); --force (make: FORCE=1) reruns it, keeping the old attempt, or --name "
        "NAME runs this configuration under a run name of its own"
    )
    assert not decide("r", "r-1", status("succeeded"), mode).refused  # the same run: reused
    assert decide("r", "r-2", status("succeeded", run_id="r-1"), "force").action == "run"


def test_the_changes_name_experiment_keys_argv_image_and_time_scale() -> None:
    old = {
        "experiment": {
            "steps": 12,
            "guard": {"sensor": "auto"},
            "description": "old words",
            "miles": {"args": {"seed": 1}},
            "container": {"env": {"HARNESS_SIM_TIME_SCALE": "0.02"}},
        },
        "trainer_argv": ["train.py", "--seed", "1"],
        "image": "lab:1",
        "time_scale": 0.02,
    }
    new = {
        "steps": 4,
        "guard": {"sensor": "sim"},
        "description": "new words",
        "miles": {"args": {"seed": 1}},
        "container": {"env": {"HARNESS_SIM_TIME_SCALE": "0.01"}},
    }

    changes = configuration_changes(old, new, ["train.py", "--seed", "1", "--x"], "lab:2", 0.01)

    assert changes == [
        "time scale 0.02 -> 0.01",
        "guard.sensor auto -> sim",
        "steps 12 -> 4",
        "trainer argv",
        "image lab:1 -> lab:2",
    ]
    assert configuration_changes(None, new, [], "lab:2", 0.01) == ["its manifest.json is missing or unreadable"]
    long = configuration_changes(
        {**old, "experiment": {"miles": {"extra_args": "x" * 80}}},
        {"miles": {"extra_args": "y" * 80}},
        old["trainer_argv"],
        "lab:1",
        0.02,
    )
    assert long == ["miles.extra_args"]  # a long value is named, not shown


# --- log streams --------------------------------------------------------------------------


def test_split_lines_joins_chunks_and_keeps_a_clean_final_partial() -> None:
    chunks = [b"2026-01-01T00:00:00.1Z a", b"b\n2026-01-01T00:00:00.2Z c\n2026-01-01T00:00:00.3Z d"]
    assert list(split_lines(chunks)) == [
        "2026-01-01T00:00:00.1Z ab",
        "2026-01-01T00:00:00.2Z c",
        "2026-01-01T00:00:00.3Z d",
    ]


def test_split_lines_drops_the_partial_line_of_a_broken_stream() -> None:
    def broken():
        yield b"2026-01-01T00:00:00.1Z whole\n2026-01-01T00:00:00.2Z cut"
        raise ConnectionResetError

    got = []
    with pytest.raises(ConnectionResetError):
        for line in split_lines(broken()):
            got.append(line)
    assert got == ["2026-01-01T00:00:00.1Z whole"]


def test_join_partials_removes_the_stamps_docker_puts_before_each_16k_piece() -> None:
    text = bytes(range(97, 123)) * 2000  # 52,000 bytes
    stamps = [
        b"2026-01-01T00:00:00.1Z ",
        b"2026-01-01T00:00:00.15Z ",
        b"2026-01-01T00:00:00.2Z ",
        b"2026-01-01T00:00:00.25Z ",
    ]
    pieces = [text[i : i + 16384] for i in range(0, len(text), 16384)]
    live = b"".join(s + p for s, p in zip(stamps, pieces))
    assert join_partials(live) == stamps[0] + text
    assert join_partials(stamps[0] + text) == stamps[0] + text  # a finished log is already joined


def test_log_position_resumes_without_loss_or_repeat() -> None:
    first = ["2026-01-01T00:00:01Z a", "2026-01-01T00:00:02Z b", "2026-01-01T00:00:02Z b"]
    position = LogPosition()
    assert list(position.new_lines(first)) == first
    assert position.since() == pytest.approx(stamp_to_ns("2026-01-01T00:00:02Z") / 1e9 - 1e-6)
    reopened = [
        "2026-01-01T00:00:01Z a",
        "2026-01-01T00:00:02Z b",
        "2026-01-01T00:00:02Z b",
        "2026-01-01T00:00:02Z b",
        "2026-01-01T00:00:03Z c",
    ]
    assert list(position.new_lines(reopened)) == ["2026-01-01T00:00:02Z b", "2026-01-01T00:00:03Z c"]


def test_stamp_to_ns_reads_trimmed_fractions() -> None:
    assert stamp_to_ns("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert stamp_to_ns("1970-01-01T00:00:01.000000001Z") == 1_000_000_001
    from harness.times import parse_time_us

    assert parse_time_us("1970-01-01T00:00:01.891725514Z") == 1_891_725  # truncated, never rounded up


# --- captures -----------------------------------------------------------------------------


def test_atomic_json_leaves_no_temporary_files(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "status.json", {"state": "running"})
    write_json_atomic(tmp_path / "status.json", {"state": "succeeded"})
    assert json.loads((tmp_path / "status.json").read_text()) == {"state": "succeeded"}
    assert os.listdir(tmp_path) == ["status.json"]


def test_a_torn_last_jsonl_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "pauses.jsonl"
    append_jsonl(path, {"a": 1})
    with path.open("a") as handle:
        handle.write('{"a": 2, "cut')
    assert list(read_jsonl(path)) == [{"a": 1}]


def test_a_corrupt_status_is_an_error_not_a_guess(tmp_path: Path) -> None:
    capture = Capture(tmp_path / "run")
    capture.directory.mkdir()
    capture.status_path.write_text("{not json")
    with pytest.raises(HarnessError, match="unreadable status"):
        capture.read_status()


# --- GPU locks ----------------------------------------------------------------------------


def test_gpu_sets_lock_what_they_share(tmp_path: Path) -> None:
    owner = {"run": "a", "pid": 1, "host": "h"}
    with GpuLock([0], owner, tmp_path, "k") as zero:
        zero.acquire(wait=False)
        with GpuLock([1], owner, tmp_path, "k") as one:
            one.acquire(wait=False)  # different GPU: fine
        with GpuLock([0, 1], owner, tmp_path, "k") as both, pytest.raises(HarnessError, match="busy"):
            both.acquire(wait=False)
        with GpuLock("all", owner, tmp_path, "k") as everything, pytest.raises(HarnessError, match="busy"):
            everything.acquire(wait=False)
        with GpuLock([0], owner, tmp_path, "other-host") as elsewhere:
            elsewhere.acquire(wait=False)  # another Docker host's GPU 0
    with GpuLock("all", owner, tmp_path, "k") as everything:
        everything.acquire(wait=False)  # released
        with GpuLock("none", owner, tmp_path, "k") as cpu:
            cpu.acquire(wait=False)  # a CPU-only run takes no lock


def test_waiting_for_the_gpu_ends_when_cancelled(tmp_path: Path) -> None:
    owner = {"run": "holder", "pid": 1, "host": "h"}
    asked = []
    with GpuLock("all", owner, tmp_path, "k") as held:
        held.acquire(wait=False)
        waiter = GpuLock("all", {"run": "waiter"}, tmp_path, "k")
        with pytest.raises(HarnessError, match="interrupted while waiting for the GPU") as err:
            waiter.acquire(wait=True, on_wait=asked.append, cancelled=lambda: bool(asked), poll_s=0.01)
        assert err.value.exit_code == 130
        assert asked == ["waiting for the GPU: run holder (harness pid 1 on h) holds it"]


def test_an_engine_object_removed_between_the_listing_and_the_look_is_passed_over() -> None:
    """Another harness may remove its container meanwhile: recover goes on with the others, never fails on it."""
    from harness.engines import Description
    from harness.errors import ExitCode, HarnessError
    from harness.run.settle import engine_objects

    class Gone:
        def describe(self) -> Description:
            raise HarnessError("no container 'abc' on the Docker engine", ExitCode.NOT_FOUND)

    class Here:
        def describe(self) -> Description:
            return Description("def", "mgl-x", "exited", 0, {"org.miles-gb10-lab.run": "x"}, None, None)

    class TwoObjects:
        name = "docker"

        def list(self, labels: object) -> list[object]:
            return [Gone(), Here()]

    notes: list[str] = []
    found = engine_objects([TwoObjects()], notes)  # type: ignore[list-item]

    assert [obj.id for obj in found] == ["def"] and notes == []


@given(
    lines=st.lists(st.text(alphabet="ab\u00e9", max_size=30), max_size=40), chars=st.integers(min_value=1, max_value=80)
)
def test_a_burst_is_written_in_pieces_of_whole_lines_in_order(lines, chars):
    """A long burst is cut into pieces of whole lines of at most `chars` characters (newlines counted), a longer
    line alone; nothing is lost, doubled or reordered."""
    from harness.run.logpump import whole_line_pieces

    pieces = list(whole_line_pieces(lines, chars))
    assert [line for piece in pieces for line in piece] == lines
    assert all(piece for piece in pieces)
    for piece in pieces:
        assert len(piece) == 1 or sum(len(line) + 1 for line in piece) <= chars
    if sum(len(line) + 1 for line in lines) <= chars:
        assert len(pieces) <= 1
