"""`make demo` / `harness demo`: the write-up's runs on the simulator with simulated heat, summary, figures, report."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.experiments.store import ExperimentStore
from harness.run.demo import DEMO_RUNS, DEMO_START_BELOW_C, WRITE_UP, headline, plan_demo, verdict_lines
from harness.run.plan import plan_runs
from harness.run.simswap import DEFAULT_TIME_SCALE, MIN_POLL_S, SimTarget
from harness.summary.document import SummaryDocument
from harness.summary.summarize import summarize
from support.clones import make
from support.lab import leftover_of_another_root
from support.messages import messages

REPO_ROOT = Path(__file__).resolve().parent.parent
STORE = ExperimentStore(REPO_ROOT / "experiments")
LAB_CAPTURES = REPO_ROOT / "tests" / "data" / "captures" / "lab"
WRITE_UPS_RUNS = ["e2b-dapo-filter", "plain", "plain-48", "plain-48-s2", "plain-48-s3", "e6a-base"]
# The write-up's runs, and the seeds it asks for: the filter and plain over three seeds each.
DEMO_RUN_NAMES = [
    "e2b-dapo-filter",
    "e2b-dapo-filter-s2",
    "e2b-dapo-filter-s3",
    "plain",
    "plain-s2",
    "plain-s3",
    "plain-48",
    "plain-48-s2",
    "plain-48-s3",
    "e6a-base",
]
FILTER_SEEDS = ["e2b-dapo-filter", "e2b-dapo-filter-s2", "e2b-dapo-filter-s3"]


def target(time_scale: float = DEFAULT_TIME_SCALE) -> SimTarget:
    return SimTarget("process", time_scale, sys.executable, "a test")


# --- what the demo runs -------------------------------------------------------------------------


def test_the_demo_runs_the_write_up_s_runs_with_three_seeds_of_the_filter_and_of_plain():
    plans = plan_demo(STORE, Path("capture/sim"), target(), environ={})

    assert [plan.spec.run for plan in plans] == DEMO_RUN_NAMES
    assert set(WRITE_UPS_RUNS) <= set(DEMO_RUN_NAMES)
    assert dict(DEMO_RUNS)["e2b-dapo-filter"] == (1, 2, 3) and dict(DEMO_RUNS)["plain"] == (1, 2, 3)
    compare = next(plan.experiment.compare for plan in plans if plan.spec.run == "e2b-dapo-filter")
    assert compare is not None and compare.baseline == "plain"
    assert sorted(compare.baselines) == sorted(run for run in WRITE_UPS_RUNS if run != "e2b-dapo-filter")
    assert {name for name, _ in DEMO_RUNS} == {"e2b-dapo-filter", "plain", "plain-48", "e6a-base"}
    assert all(plan.sim is not None and plan.time_scale == DEFAULT_TIME_SCALE for plan in plans)
    assert all(plan.spec.steps_expected == 12 and plan.spec.device_requests == () for plan in plans)


def test_each_run_s_own_guard_runs_on_simulated_heat_in_the_simulator_s_time():
    own = STORE.load("plain").experiment.guard
    plans = plan_demo(STORE, Path("capture/sim"), target(0.02), environ={})

    for plan in plans:
        guard = plan.experiment.guard
        assert guard.sensor == "sim"
        assert (guard.pause_at_c, guard.resume_at_c, guard.on_max_pause) == (
            own.pause_at_c,
            own.resume_at_c,
            own.on_max_pause,
        )
        assert guard.min_pause_s == pytest.approx(own.min_pause_s * 0.02)
        assert guard.max_pause_s == pytest.approx(own.max_pause_s * 0.02)
        assert guard.poll_s == pytest.approx(max(own.poll_s * 0.02, MIN_POLL_S))
        assert guard.sim.heat_tau_s == pytest.approx(own.sim.heat_tau_s * 0.02)
        assert guard.sim.cool_tau_s == pytest.approx(own.sim.cool_tau_s * 0.02)
        assert guard.sim.hot_c > guard.pause_at_c  # a running simulation always heats into a pause


def test_the_demo_makes_the_runs_run_sim_makes_so_each_reuses_the_other_s_captures():
    demo = plan_demo(STORE, Path("capture/sim"), target(), environ={})
    by_hand = [
        plan
        for name, seeds in DEMO_RUNS
        for plan in plan_runs(STORE, name, seeds, [], Path("capture/sim"), {}, sim=target())
    ]

    assert DEFAULT_TIME_SCALE == 0.01  # a 12-step filter run well under a minute (issue: entry points)
    assert [plan.spec.run_id for plan in demo] == [plan.spec.run_id for plan in by_hand]
    # The same guard, cooled start included: a demo's capture and a `run --sim` one are alike, and each reuses the
    # other's (a summary pools them as seeds of one condition).
    assert [plan.experiment.guard.start_below_c for plan in demo] == [DEMO_START_BELOW_C] * len(demo)
    assert [plan.experiment.guard for plan in demo] == [plan.experiment.guard for plan in by_hand]


def test_tiny_time_scales_still_make_a_valid_guard():
    plan = plan_demo(STORE, Path("capture/sim"), target(1e-5), steps=2, environ={})[0]
    assert plan.experiment.guard.poll_s == MIN_POLL_S and plan.experiment.guard.min_pause_s == pytest.approx(3e-4)
    assert plan.spec.steps_expected == 2


# --- the headline table -------------------------------------------------------------------------


def test_the_headline_reads_the_summary_and_sets_the_write_up_beside_it():
    rows = {row.figure: row for row in headline(summarize(LAB_CAPTURES))}

    assert rows["plain: median rollout, pauses out"].demo == "58.0 s"
    assert rows["plain: median rollout, pauses out"].write_up == "58.0 s" == WRITE_UP["plain_median"]
    assert rows["filter: one-batch steps, x plain"].demo == "2 of 4: 69.1 s, 1.19x"
    assert rows["filter: two-batch steps, x plain"].demo == "2 of 4: 120.0 s, 2.07x"
    assert rows["reward: filter (unfiltered) vs plain"].demo == "0.705 vs 0.655"
    assert rows["reward: the baselines' spread"].demo == "0.640-0.660"
    assert rows["filter: dropped groups per step"].write_up == "16-48, median 36"
    assert rows["reward: first four steps"].write_up == "0.672 vs 0.625"


def test_the_headline_of_an_empty_summary_is_dashes_not_an_error():
    rows = headline(
        SummaryDocument.from_dict(
            {
                "schema": "miles-gb10-lab/1",
                "generated_at": "2026-11-30T00:00:00Z",
                "harness_version": "0",
                "runs": {},
                "comparisons": [],
            }
        )
    )

    assert len(rows) == 12
    assert rows[1].demo == "-" and rows[4].demo == "0 of -" and rows[-1].demo == "-"


# --- end to end -------------------------------------------------------------------------------


def check_demo_output(output: str, captures: Path, steps: int, shown: Path | None = None) -> None:
    """Every run succeeded with its steps on simulated heat; summary, figures, report written and where they are said."""
    for run in DEMO_RUN_NAMES:
        status = json.loads((captures / run / "status.json").read_text())
        assert (status["state"], status["steps_complete"]) == ("succeeded", steps), run
        manifest = json.loads((captures / run / "manifest.json").read_text())
        assert manifest["experiment"]["guard"]["sensor"] == "sim"
        assert manifest["experiment"]["container"]["gpus"] == "none"
        start = manifest["guard"]["start"]  # a cooled start: the simulated host starts warm, each run waits
        assert start["outcome"] == "cool" and start["hottest_c"] < DEMO_START_BELOW_C, run
    summary = json.loads((captures / "summary" / "miles-gb10-lab.json").read_text())
    assert sorted(summary["runs"]) == sorted(DEMO_RUN_NAMES)
    assert [c["run"] for c in summary["comparisons"]] == FILTER_SEEDS
    assert summary["simulated"] is True and sorted(summary["conditions"]) == [
        "e2b-dapo-filter",
        "e6a-base",
        "plain",
        "plain-48",
    ]
    report = (captures / "summary" / "report.md").read_text()
    assert report.startswith("# miles-gb10-lab: summary (SIMULATED)") and "## Across seeds" in report
    figures = sorted(p.name for p in (captures / "summary").glob("*.svg"))
    guard = sorted(f"guard-{run}.svg" for run in DEMO_RUN_NAMES)  # the heat guard's figure of each run
    assert figures == sorted(
        [f"{kind}-{run}.svg" for run in FILTER_SEEDS for kind in ("reward", "rollout-time")]
        + [f"seeds-reward-{c}.svg" for c in ("e2b-dapo-filter", "plain", "plain-48")]
        + ["seeds-e2b-dapo-filter-vs-plain.svg", "seeds-e2b-dapo-filter-vs-baselines.svg"]
        + guard
    )
    assert "headline numbers" in output and "write-up (GB10)" in output
    assert "reward across seeds, filter vs plain" in output
    said = messages(output)  # each verdict fitted to the width: read whole
    assert any(m.startswith("across seeds, e2b-dapo-filter against plain: Across 3 seeds each") for m in said)
    assert any(
        m.startswith("across seeds, e2b-dapo-filter against e6a-base + plain + plain-48 (pooled): Across 3 seeds")
        for m in said
    )
    assert all(line in said for line in verdict_lines(SummaryDocument.from_dict(summary)))  # whole, never cropped
    shown = shown or captures
    assert f"summary JSON  {shown / 'summary' / 'miles-gb10-lab.json'}" in output
    assert f"report        {shown / 'summary' / 'report.md'}" in output
    for figure in figures:
        assert f"figure        {shown / 'summary' / figure}" in output
    assert "e2b-dapo-filter against plain:" in output


@pytest.mark.integration
def test_harness_demo_end_to_end_on_the_process_engine(tmp_path):
    captures = tmp_path / "capture-sim"
    env = {
        "DOCKER_HOST": "unix:///nonexistent.sock",
        "HARNESS_LOCK_DIR": str(tmp_path / "locks"),
        "HARNESS_PROCESS_DIR": str(tmp_path / "processes"),
        "COLUMNS": "200",
    }
    # Another capture root's run of the same name, left in the process engine's root by a killed demo: never a
    # failure here, at most one warning line.
    leftover = leftover_of_another_root(tmp_path / "processes", "e6a-base", tmp_path / "elsewhere" / "e6a-base")
    done = CliRunner().invoke(
        app, ["demo", "--steps", "2", "--time-scale", "0.002", "--capture-dir", str(captures)], env=env
    )

    assert done.exit_code == 0, done.output
    check_demo_output(done.stdout, captures, 2)
    assert len([line for line in done.output.splitlines() if leftover.id in line or "elsewhere" in line]) <= 1
    assert leftover.directory.exists()  # that root's to settle
    filtered = json.loads((captures / "summary" / "miles-gb10-lab.json").read_text())["runs"]["e2b-dapo-filter"]
    windows = [json.loads(line) for line in (captures / "e2b-dapo-filter" / "pauses.jsonl").read_text().splitlines()]
    assert any(window["end"] is not None for window in windows)  # the guard really paused the run, and thawed it
    assert filtered["aggregates"]["pause_total_s"] > 0 and filtered["time_scale"] == 0.002
    # Piped, each step line sums up the guard's pauses of its run so far (a line per pause only with -v).
    assert re.search(r": step \d+ .*\| .*\d+ pauses?, \d+ wall s", done.stdout), done.stdout
    notes = messages(done.stderr)  # each fitted to the width by the one renderer: read whole
    assert any(note.startswith("simulator: the process engine") for note in notes), notes
    assert any(note.startswith("demo: 10 runs at once") for note in notes), notes
    assert "e2b-dapo-filter: step 1 (2/2 complete)" in done.stdout  # live progress, one line per step when piped

    again = CliRunner().invoke(
        app, ["demo", "--steps", "2", "--time-scale", "0.002", "--capture-dir", str(captures)], env=env
    )

    assert again.exit_code == 0, again.output
    assert again.stdout.count(" reused: succeeded at ") == 10
    check_demo_output(again.stdout, captures, 2)  # the same end results, figures included
    assert "10 of 10 runs reused" in again.stdout and "runs reused" not in done.stdout
    assert f"`harness status --capture-dir {captures}` lists the captures" in again.stdout
    on_a_terminal = CliRunner().invoke(
        app,
        ["demo", "--steps", "2", "--time-scale", "0.002", "--capture-dir", str(captures)],
        env={**env, "TTY_COMPATIBLE": "1", "COLUMNS": "100"},
    )
    table = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", on_a_terminal.stdout)  # the live table, colours out
    assert on_a_terminal.exit_code == 0 and re.search(r"plain-48-s2 +reused +[━╸╺ ]*2/2 ", table), table

    same = CliRunner().invoke(
        app,
        [
            "run",
            "e2b-dapo-filter",
            "--sim",
            "--time-scale",
            "0.002",
            "--set",
            "steps=2",
            "--capture-dir",
            str(captures),
        ],
        env=env,
    )
    assert same.exit_code == 0  # the demo's run is the run `run --sim` makes: not another configuration
    assert "e2b-dapo-filter: already succeeded at" in same.output and "another configuration" not in same.output

    fewer = CliRunner().invoke(
        app, ["demo", "--steps", "1", "--time-scale", "0.002", "--capture-dir", str(captures)], env=env
    )
    assert fewer.exit_code == 2  # another configuration: never summarized as if it were the run asked for
    last = messages(fewer.output)[-1]
    assert last.startswith("error: run e2b-dapo-filter not started: its capture succeeded at "), fewer.output
    assert "steps 2 -> 1" in last and last.endswith("(and 9 more, above)")


def test_the_demo_s_help_speaks_of_the_demo_not_of_an_option_it_does_not_have():
    done = CliRunner().invoke(app, ["demo", "--help"], env={"COLUMNS": "200"})

    assert done.exit_code == 0
    assert "With --sim" not in done.output and "--sim " not in done.output
    assert "harness run EXP --sim" in done.output  # what each of its runs is


@pytest.mark.integration
def test_make_demo_from_a_fresh_clone_without_docker(clone):
    # --steps alone would be a quick look, under capture/sim-quick: the demo's own root is asked for here.
    flags = "DEMO_FLAGS=--steps 2 --capture-dir capture/sim"
    done = make(clone, "demo", flags, "SIM_TIME_SCALE=0.002", docker_host="unix:///nonexistent.sock")

    assert done.returncode == 0, done.stdout + done.stderr
    check_demo_output(done.stdout, clone / "capture" / "sim", 2, shown=Path("capture/sim"))
    assert "simulated runs use the process engine instead" in done.stdout
    assert "make demo: done in" in done.stdout and "set-up included" in done.stdout
    assert not (clone / "capture" / "gpu").exists()


def test_the_demo_s_default_time_scale_is_the_one_documented():
    text = (REPO_ROOT / "docs" / "demo.md").read_text()

    assert f"--time-scale {DEFAULT_TIME_SCALE:g}" in text or f"time scale {DEFAULT_TIME_SCALE:g}" in text
    assert os.path.exists(REPO_ROOT / "Dockerfile.sim")


def test_the_readme_s_quick_start_is_make_demo_then_make_test():
    readme = (REPO_ROOT / "README.md").read_text()
    start = readme.index("## Quick start")
    quick = readme[start : readme.index("\n## ", start)]
    commands = [line.split("#")[0].strip() for line in quick.splitlines() if line.startswith("    ")]

    assert commands[:2] == ["make demo", "make test"]
    assert "capture/sim/summary/miles-gb10-lab.json" in quick


@pytest.mark.integration
def test_the_demo_run_again_reruns_what_did_not_succeed_and_publishes_nothing_built_on_a_missing_run(tmp_path):
    captures = tmp_path / "capture-sim"
    env = {
        "DOCKER_HOST": "unix:///nonexistent.sock",
        "HARNESS_LOCK_DIR": str(tmp_path / "locks"),
        "HARNESS_PROCESS_DIR": str(tmp_path / "processes"),
        "COLUMNS": "200",
    }
    args = ["demo", "--steps", "1", "--time-scale", "0.002", "--capture-dir", str(captures)]
    assert CliRunner().invoke(app, args, env=env).exit_code == 0

    # As Ctrl-C leaves a run: interrupted, part of its steps done.
    status_path = captures / "e2b-dapo-filter" / "status.json"
    interrupted = json.loads(status_path.read_text())
    interrupted.update(state="interrupted", error="interrupted by SIGINT", steps_complete=0, exit_code=130)
    status_path.write_text(json.dumps(interrupted))
    again = CliRunner().invoke(app, args, env=env)

    assert again.exit_code == 0, again.output
    assert "--retry" not in again.output
    assert again.stdout.count(" reused: succeeded at ") == 9 and "9 of 10 runs reused" in again.stdout
    rerun = json.loads(status_path.read_text())
    assert (rerun["state"], rerun["steps_complete"]) == ("succeeded", 1) and rerun["started_at"] != interrupted[
        "started_at"
    ]
    check_demo_output(again.stdout, captures, 1)

    # A run the demo cannot rerun by itself: nothing is summarized, and the line says which run and what to do.
    (captures / "plain-48-s2" / "status.json").write_text("{not json")
    summary_before = (captures / "summary" / "miles-gb10-lab.json").read_bytes()
    broken = CliRunner().invoke(app, args, env=env)

    assert broken.exit_code == 1, broken.output
    assert "write-up (GB10)" not in broken.output and "summary JSON" not in broken.output  # no table, no paths
    assert (captures / "summary" / "miles-gb10-lab.json").read_bytes() == summary_before
    said = messages(broken.output)
    assert any(
        message.startswith("warning: plain-48-s2 not run: its status is broken") and "--force" in message
        for message in said
    ), broken.output
    assert said[-1] == (
        "warning: no summary, figures or headline numbers: they need all 10 runs, and plain-48-s2 "
        "did not succeed; `harness demo` again reruns it and reuses the 9 that succeeded"
    )
