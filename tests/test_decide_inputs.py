"""`harness decide`: each bad input is one clear line (exit 2), a record in use is busy (exit 4), and a record made
under another design, edited by hand or torn is refused, noted or ignored as docs/summary.md says. Nothing here
starts a run: every refusal comes before the first."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.experiments.store import ExperimentStore
from harness.run.adaptive import DecideRequest, design_header, plan_seed
from harness.stats.adaptive import Design
from harness.stats.record import RecordLock, append_entry, read_record, record_path
from support.experiment_files import LONGEST_ERROR, write
from support.messages import messages

FILTER = (
    'name: {name}\nextends: parent\nmiles:\n  extra_args: "--dynamic-sampling-filter-path '
    'miles.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std --over-sampling-batch-size 48"\n'
)


@pytest.fixture
def decide_lab(exp_dir: Path) -> Path:
    """Experiments `parent` (4 steps, no filter), `other` (its copy), `short` (2 steps), `filtered` (the filter)."""
    write(exp_dir, "other", "name: other\nextends: parent\n")
    write(exp_dir, "short", "name: short\nextends: parent\nsteps: 2\n")
    write(exp_dir, "filtered", FILTER.format(name="filtered"))
    return exp_dir


def one_error_line(result) -> str:
    """Exit 2, no traceback, one short `error:` message (the simulator's choice may be said before it)."""
    assert result.exit_code == 2, (result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output and "internal error" not in result.output
    errors = [m for m in messages(result.stderr) if m.startswith("error: ")]
    assert len(errors) == 1 and len(errors[0]) <= LONGEST_ERROR, result.stderr[-2000:]
    return errors[0]


def decide(decide_lab: Path, tmp_path: Path, *args: str):
    return CliRunner().invoke(
        app,
        ["decide", *args, "--experiments-dir", str(decide_lab), "--capture-dir", str(tmp_path / "capture")],
        env={"COLUMNS": "200", "HARNESS_PROCESS_DIR": str(tmp_path / "processes")},
    )


@pytest.mark.parametrize(
    "args, said",
    [
        (["parent"], "decide compares two experiments or more; got 1 (parent)"),
        (["parent", "parent"], "parent is named twice: name each experiment once"),
        (["parent", "other", "--per-interim", "1"], "--per-interim 1: at least 2 seeds of each experiment"),
        (["parent", "other", "--per-interim", "300"], "--per-interim 300 x --interims 5 = 1,500 seeds of each"),
        (["parent", "other", "--alpha", "0.5"], "--alpha 0.5: give a level above 0 and below 0.5"),
        (["parent", "other", "--alpha", "0"], "--alpha 0: give a level above 0 and below 0.5"),
        (["parent", "other", "--metric", "loss"], "--metric loss: not one of reward, reward-unfiltered"),
        (["parent", "short"], "the experiments run different numbers of steps (parent 4, short 2)"),
        (
            ["filtered", "parent", "--metric", "dropped-groups"],
            "--metric dropped-groups: parent runs without the filter",
        ),
        (["parent", "other", "--name", "../up"], "--name '../up': a record's name is letters, digits"),
    ],
)
def test_each_bad_input_is_one_line_before_anything_runs(
    decide_lab: Path, tmp_path: Path, args: list[str], said: str
) -> None:
    line = one_error_line(decide(decide_lab, tmp_path, *args, "--sim", "--sim-engine", "process"))

    assert said in line
    assert not (tmp_path / "capture").exists() or not any(
        p.name != "decisions" for p in (tmp_path / "capture").iterdir() if not p.name.startswith(".")
    )


def _record(decide_lab: Path, tmp_path: Path, **design: object) -> Path:
    """A record of `parent` against `other` holding its design line only, as `decide` writes it first."""
    from harness.run.simswap import choose_target

    root = tmp_path / "capture"
    target = choose_target("process", 0.01, sys.executable)
    request = DecideRequest(
        Design(("parent", "other"), **design),  # type: ignore[arg-type]
        "reward",
        "parent-vs-other",
        root,
        ExperimentStore(decide_lab),
        sim=target,
        environ=dict(os.environ),
    )
    firsts = {name: plan_seed(request, name, 1) for name in ("parent", "other")}
    append_entry(request.record, design_header(request, firsts), "", root)
    return request.record


def test_changing_the_design_of_a_record_is_refused_in_one_line(decide_lab: Path, tmp_path: Path) -> None:
    _record(decide_lab, tmp_path)
    sim = ["--sim", "--sim-engine", "process", "--time-scale", "0.01"]

    line = one_error_line(decide(decide_lab, tmp_path, "parent", "other", "--per-interim", "3", *sim))
    metric = one_error_line(decide(decide_lab, tmp_path, "parent", "other", "--metric", "rollout-time", *sim))

    assert "decisions/parent-vs-other.jsonl was made under another design (--per-interim: 5 recorded, 3 now)" in line
    assert "--name NAME for a new record" in line
    assert "(--metric: reward recorded, rollout-time now)" in metric


def test_a_record_edited_by_hand_is_refused_naming_the_line(decide_lab: Path, tmp_path: Path) -> None:
    path = _record(decide_lab, tmp_path)
    line = json.loads(path.read_text())
    line["alpha"] = 0.2  # a design changed by hand, its check left as it was
    path.write_text(json.dumps(line) + "\n")

    said = one_error_line(decide(decide_lab, tmp_path, "parent", "other", "--sim", "--sim-engine", "process"))

    assert "decisions/parent-vs-other.jsonl line 1 was changed after it was written" in said


def test_a_second_decide_on_a_record_in_use_exits_4_with_no_wait(decide_lab: Path, tmp_path: Path) -> None:
    root = tmp_path / "capture"
    lock = RecordLock(record_path(root, "parent-vs-other"), root, {"pid": 1234, "host": "elsewhere"})
    lock.acquire(wait=False)
    try:
        done = decide(decide_lab, tmp_path, "parent", "other", "--sim", "--sim-engine", "process", "--no-wait")
    finally:
        lock.release()

    assert done.exit_code == 4, done.output
    (said,) = [m for m in messages(done.stderr) if m.startswith("error: ")]
    assert "decisions/parent-vs-other.jsonl is in use by another harness decide (harness pid 1234 on elsewhere)" in said


def test_a_torn_last_line_is_noted_and_left_out(tmp_path: Path) -> None:
    root = tmp_path / "capture"
    path = root / "decisions" / "x.jsonl"
    path.parent.mkdir(parents=True)
    from harness.stats.record import Header

    header = Header(
        name="x",
        experiments=["a", "b"],
        against_first=False,
        comparisons=["a vs b"],
        metric="reward",
        per_interim=5,
        interims=5,
        alpha=0.05,
        permutations=10_000,
        random_state=20_210,
        simulated=True,
        steps=2,
        conditions={"a": "1", "b": "2"},
        created_at="2026-01-01T00:00:00Z",
        adastop="0.1.3",
    )
    append_entry(path, header, "", root)
    with open(path, "ab") as handle:
        handle.write(b'{"interim": 1, "seeds": {"a": [1, 2' + b"\x00" * 40)  # a power loss mid-line

    record = read_record(path)

    assert record.header == header and record.interims == []
    assert record.torn is not None and record.torn.size == len(b'{"interim": 1, "seeds": {"a": [1, 2') + 40
    assert "a torn last line" in record.torn.describe(path)


def test_the_dry_run_is_the_plan_and_starts_nothing(decide_lab: Path, tmp_path: Path) -> None:
    args = ["parent", "other", "filtered", "--against-first", "--sim", "--sim-engine", "process", "--dry-run"]
    done = decide(decide_lab, tmp_path, *args)
    plan = decide(decide_lab, tmp_path, *args, "--json")

    assert done.exit_code == 0, done.output
    said = " ".join(messages(done.stdout))
    assert "at most 25 seeds each, 75 runs in all (3 experiments x 25)" in said
    assert "next: interim 1, 15 seeds of parent, other, filtered: 15 would run, 0 reused" in said
    document = json.loads(plan.stdout)
    assert document["comparisons"] == ["parent vs other", "parent vs filtered"]
    assert document["max_runs"] == 75 and len(document["next"]) == 15
    assert not (tmp_path / "capture" / "decisions").exists()


def test_a_dry_run_whose_next_seeds_would_be_refused_exits_as_decide_would(decide_lab: Path, tmp_path: Path) -> None:
    # Was: exit 0, the refused seed counted as reused; `decide` itself refuses it with exit 2 before anything starts.
    from harness.capture import Capture, RunStatus

    args = ["parent", "other", "--sim", "--sim-engine", "process"]
    first = json.loads(decide(decide_lab, tmp_path, *args, "--dry-run", "--json").stdout)["next"][0]
    Capture(tmp_path / "capture" / first["run"]).write_status(
        RunStatus(
            run=first["run"],
            run_id=f"{first['run']}-00000000",  # succeeded, with another configuration
            state="succeeded",
            exit_code=0,
            started_at="2026-01-01T00:00:00Z",
            ended_at="2026-01-01T01:00:00Z",
            steps_expected=4,
            steps_complete=4,
            error=None,
        )
    )

    shown = decide(decide_lab, tmp_path, *args, "--dry-run")
    as_json = decide(decide_lab, tmp_path, *args, "--dry-run", "--json")
    assert not (tmp_path / "capture" / "decisions").exists()  # a dry run writes no record
    real = decide(decide_lab, tmp_path, *args)

    assert shown.exit_code == as_json.exit_code == real.exit_code == 2, shown.output
    said = " ".join(messages(shown.stdout))
    assert f"{first['run']} (seed {first['seed']}): refuse: its capture succeeded" in said
    assert "9 would run, 0 reused, 1 refused" in said
    assert json.loads(as_json.stdout)["next"][0]["action"] == "refuse"
    for result in (shown, as_json):
        assert messages(result.stderr)[-1].startswith(f"error: run {first['run']} would not start: its capture")
