"""`harness decide` on the simulator: the filter's 1.5x rollout time is decided at the first interim, the record's
decisions are the `adastop` package's own, a second decide starts no run, an interrupted one resumed ends with
the record of one never interrupted, and the answer reaches the summary, the report and its figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from adastop import MultipleAgentsComparator
from typer.testing import CliRunner

from harness.cli import app
from support.messages import messages
from support.summaries import summary_schema_validator

REPO = Path(__file__).resolve().parent.parent
SIM = ["--sim", "--sim-engine", "process", "--time-scale", "0.002", "--set", "steps=2"]
VOLATILE = ("at", "created_at", "check")


def decide(root: Path, tmp_path: Path, *args: str):
    done = CliRunner().invoke(
        app,
        ["decide", *args, *SIM, "--capture-dir", str(root), "--experiments-dir", str(REPO / "experiments")],
        env={"HARNESS_PROCESS_DIR": str(tmp_path / "processes"), "COLUMNS": "250"},
    )
    assert done.exit_code == 0, done.output[-3000:]
    return messages(done.stdout)


def record(root: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (root / "decisions" / f"{name}.jsonl").read_text().splitlines()]


def adastop_replayed(lines: list[dict]) -> list[str]:
    """Each interim's decision of the one comparison, by the package's comparators fed the recorded values in order
    (one on the pair as given, one reversed, each at alpha / 2: docs/summary.md, "Adaptive comparisons")."""
    header, interims = lines[0], lines[1:]
    first, second = header["experiments"]
    made = [
        MultipleAgentsComparator(
            n=header["per_interim"],
            K=header["interims"],
            B=header["permutations"],
            comparisons=pairs,
            alpha=header["alpha"] / 2,
            beta=0,
            seed=header["random_state"],
        )
        for pairs in (None, np.array([(1, 0)]))
    ]
    so_far: dict[str, list[float]] = {first: [], second: []}
    out = []
    for interim in interims:
        for name, values in interim["values"].items():
            so_far[name] += values
        for comparator in made:
            if not comparator.is_finished:
                comparator.partial_compare({n: np.array(v) for n, v in so_far.items()}, verbose=False)
        upper, lower = made[0].decisions["[0 1]"], made[1].decisions["[1 0]"]
        out.append(
            "larger"
            if upper == "larger"
            else "smaller"
            if lower == "larger"
            else "continue"
            if "continue" in (upper, lower)
            else "equal"
        )
    return out


@pytest.mark.integration
def test_the_filter_s_rollout_time_is_decided_at_the_first_interim_and_a_second_decide_runs_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "capture"
    said = decide(root, tmp_path, "e2b-dapo-filter", "plain", "--metric", "rollout-time", "--parallel", "10")

    assert said[-1].startswith(
        "e2b-dapo-filter vs plain: rollout-time larger, decided at interim 1 (5 seeds each, 10 runs; a fixed design"
    )
    assert "SIMULATED: the simulator's runs, not a GB10's" in said[-2]
    lines = record(root, "e2b-dapo-filter-vs-plain")
    assert [line["kind"] for line in lines] == ["design", "interim"]
    assert lines[1]["seeds"] == {"e2b-dapo-filter": [1, 2, 3, 4, 5], "plain": [1, 2, 3, 4, 5]}
    assert [lines[1]["decisions"]["e2b-dapo-filter vs plain"]] == adastop_replayed(lines) == ["larger"]
    attempts = sorted((root / ".attempts").rglob("status.json"))

    again = decide(root, tmp_path, "e2b-dapo-filter", "plain", "--metric", "rollout-time", "--name", "again")

    assert "1 interim made now, 0 runs started" in again[-3]
    assert sorted((root / ".attempts").rglob("status.json")) == attempts  # no new attempt of any run
    (reused,) = record(root, "again")[1:]
    assert reused["values"] == lines[1]["values"]
    assert sum(map(len, reused["reused"].values())) == 10

    for command in ("summarize", "report"):
        done = CliRunner().invoke(app, [command, "--capture-dir", str(root)], env={"COLUMNS": "200"})
        assert done.exit_code == 0, done.output
    document = json.loads((root / "summary" / "miles-gb10-lab.json").read_text())
    summary_schema_validator().validate(document)
    (block, _) = document["decisions"]
    assert block["comparisons"][0]["decision"] == "larger" and block["simulated"] is True
    report = (root / "summary" / "report.md").read_text()
    assert "## Adaptive comparison" in report and "### again (SIMULATED)" in report
    figure = (root / "summary" / "decision-e2b-dapo-filter-vs-plain.svg").read_text()
    assert "SIMULATED: e2b-dapo-filter vs plain: rollout-time larger, decided at interim 1" in figure
    board = root / "tensorboard" / "decisions" / "e2b-dapo-filter-vs-plain"
    assert any(board.glob("events.out.tfevents.*"))


def decide_process(root: Path, tmp_path: Path, failpoint: str = "") -> subprocess.CompletedProcess:
    args = ["e2b-dapo-filter", "plain", "--metric", "reward", "--per-interim", "2", "--interims", "2"]
    env = {**os.environ, "HARNESS_PROCESS_DIR": str(tmp_path / "processes"), "COLUMNS": "200"}
    if failpoint:
        env["HARNESS_FAILPOINT"] = failpoint
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "decide",
            *args,
            *SIM,
            "--parallel",
            "4",
            "--capture-dir",
            str(root),
            "--experiments-dir",
            str(REPO / "experiments"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=REPO,
    )


@pytest.mark.integration
def test_an_interrupted_decide_resumed_ends_with_the_record_of_one_never_interrupted(tmp_path: Path) -> None:
    interrupted, whole = tmp_path / "interrupted", tmp_path / "whole"
    name = "e2b-dapo-filter-vs-plain"

    killed = decide_process(interrupted, tmp_path, "decide-interim:1")
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert len(record(interrupted, name)) == 2  # the design and interim 1, whole
    resumed = decide_process(interrupted, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    never = decide_process(whole, tmp_path)
    assert never.returncode == 0, never.stderr[-2000:]

    def stable(lines: list[dict]) -> list[dict]:
        return [{k: v for k, v in line.items() if k not in VOLATILE} for line in lines]

    assert stable(record(interrupted, name)) == stable(record(whole, name))
    lines = record(whole, name)
    assert len(lines) == 3  # n = 2 can decide nothing before the last interim: both interims ran
    assert [line["decisions"]["e2b-dapo-filter vs plain"] for line in lines[1:]] == adastop_replayed(lines)
    assert "1 interim made now" in resumed.stdout.replace("\n", " ").replace("  ", " ")


FLAKY = """
import os, shlex, sys
args = shlex.split(os.environ.get("MILES_ARGS", ""))
seed = args[args.index("--seed") + 1] if "--seed" in args else "1"
if seed in os.environ.get("FLAKY_SEEDS", "").split():
    os.environ["FAKE_SCENARIO"] = "oom"  # the stand-in trainer's CUDA out of memory
os.execv(sys.executable, [sys.executable, "-u", {trainer!r}])
"""


@pytest.mark.integration
def test_a_seed_that_fails_is_retried_once_then_replaced_by_the_next_seed_and_the_record_says_so(
    process_lab, tmp_path: Path
) -> None:
    from support.lab import TRAINER

    wrapper = tmp_path / "flaky.py"
    wrapper.write_text(FLAKY.format(trainer=str(TRAINER)))
    process_lab.experiment("flaky", command=[sys.executable, str(wrapper)], env={"FLAKY_SEEDS": "2"})
    process_lab.experiment("steady")

    done = process_lab.cli("decide", "flaky", "steady", "--per-interim", "2", "--interims", "1", "--parallel", "4")

    assert done.exit_code == 0, done.output[-3000:]
    (interim,) = record(process_lab.captures, "flaky-vs-steady")[1:]
    assert interim["seeds"] == {"flaky": [1, 3], "steady": [1, 2]}
    assert [(r["experiment"], r["seed"]) for r in interim["retried"]] == [("flaky", 2)]
    ((swap),) = interim["replaced"]
    assert (swap["experiment"], swap["seed"], swap["by"]) == ("flaky", 2, 3)
    assert swap["why"].startswith("failed twice (last: failed") and "OutOfMemoryError" in swap["why"]
    assert len(process_lab.attempts("flaky-s2")) == 2  # run once, retried once, never a third time
    assert "flaky vs steady: reward equal (no difference found at alpha 0.05 after 2 seeds each)" in done.output
