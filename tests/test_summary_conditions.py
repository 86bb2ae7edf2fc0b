"""Comparisons say when the runs they compare were made under different conditions (guard, time scale, sim vs real)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.summary.conditions import condition_notes, read_conditions
from harness.summary.report import render_report
from harness.summary.summarize import summarize, summarize_with_warnings

DATA = Path(__file__).resolve().parent / "data" / "captures"


def edit_manifest(run_dir: Path, change) -> None:
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def lab_copy(tmp_path: Path) -> Path:
    target = tmp_path / "lab"
    shutil.copytree(DATA / "lab", target)
    return target


def comparison_notes(document) -> list[str]:
    (comparison,) = document.comparisons
    return comparison.notes


def test_alike_runs_get_no_condition_note(tmp_path):
    assert not [n for n in comparison_notes(summarize(lab_copy(tmp_path))) if "different conditions" in n]


def test_guard_time_scale_and_simulator_differences_are_named_in_the_comparison_and_the_report(tmp_path):
    captures = lab_copy(tmp_path)

    def filter_run(manifest):
        manifest["time_scale"] = 0.02
        manifest["guard"] = {"guarded": True, "requested": "sim", "picked": "sim"}
        manifest["experiment"].setdefault("container", {})["env"] = {"HARNESS_SIM_TIME_SCALE": "0.02"}

    edit_manifest(captures / "e2b-dapo-filter", filter_run)
    edit_manifest(captures / "plain", lambda m: m.update(guard={"guarded": False, "requested": "none", "picked": None}))
    edit_manifest(captures / "plain-48", lambda m: m["experiment"].update(guard={"sensor": "nvml"}))

    document = summarize(captures)
    notes = comparison_notes(document)
    against_plain = [n for n in notes if "e2b-dapo-filter and plain ran under different conditions" in n]
    assert len(against_plain) == 1
    assert "trainer: e2b-dapo-filter simulator, plain real" in against_plain[0]
    assert "time scale: e2b-dapo-filter 0.02, plain 1" in against_plain[0]
    assert "heat guard: e2b-dapo-filter on (sensor sim), plain off" in against_plain[0]
    against_48 = [n for n in notes if "e2b-dapo-filter and plain-48 ran" in n]
    assert (
        len(against_48) == 1
        and "heat guard: e2b-dapo-filter on (sensor sim), plain-48 on (sensor nvml)" in against_48[0]
    )
    # e6a-base says nothing of its guard: the guard is not said to differ, but the trainer and time scale are
    (against_e6a,) = [n for n in notes if "e2b-dapo-filter and e6a-base ran" in n]
    assert "heat guard" not in against_e6a and "time scale" in against_e6a
    report = render_report(document)
    assert against_plain[0] in report
    warned = summarize_with_warnings(captures).warnings
    assert against_plain[0] in warned and against_48[0] in warned


def test_read_conditions_without_a_manifest_says_nothing_differs():
    unknown = read_conditions(None, 1.0)
    known = read_conditions({"image": "miles-gb10-lab:latest", "guard": {"guarded": False}}, 1.0)
    assert condition_notes("a", ["b"], {"a": unknown, "b": known}) == []
    assert read_conditions({"experiment": {"image": "miles-gb10-lab/sim:latest"}}, 1.0).simulated is True
