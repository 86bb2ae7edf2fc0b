"""Every JSON the harness writes or prints is strict: no NaN, Infinity or -Infinity.

Values are made finite where they are read (the parser writes null and lists
the key under `non_finite`; experiments refuse non-finite numbers), and every
encoder call refuses what slipped through rather than writing it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "harness").rglob("*.py"), *(ROOT / "scripts").glob("*.py"), ROOT / "summarize_miles.py"])


@functools.cache
def calls_in(path: Path) -> tuple[ast.Call, ...]:
    """The module's JSON encoder calls, parsed once for both tests (a module that never says `dump` has none)."""
    source = path.read_text()
    if "dump" not in source:
        return ()
    return tuple(json_encoder_calls(ast.parse(source, str(path))))


def json_encoder_calls(tree: ast.AST) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("dumps", "dump")
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("json", "orjson")
    ]


def test_every_json_encoder_call_refuses_non_finite_numbers() -> None:
    loose = []
    for path in SOURCES:
        for call in calls_in(path):
            if call.func.value.id == "orjson":
                continue  # orjson never writes NaN (it writes null)
            strict = any(
                k.arg == "allow_nan" and isinstance(k.value, ast.Constant) and k.value.value is False
                for k in call.keywords
            )
            if not strict:
                loose.append(f"{path.relative_to(ROOT)}:{call.lineno}")
    assert loose == []


def test_the_scan_finds_the_calls() -> None:
    calls = [call for path in SOURCES for call in calls_in(path)]
    assert len(calls) >= 10


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # numpy says so too, on the way
def test_a_summary_value_that_overflows_is_null_and_noted(tmp_path: Path) -> None:
    import json

    from harness.summary.serialize import dumps_summary
    from harness.summary.summarize import summarize
    from harness.times import format_time_us, parse_time_us

    t0 = parse_time_us("2026-11-29T08:00:00Z")

    def at(seconds: float) -> str:
        return format_time_us(t0 + round(seconds * 1_000_000))

    run = tmp_path / "huge"
    run.mkdir()
    (run / "status.json").write_text(json.dumps({"run": "huge", "state": "succeeded", "ended_at": at(1000)}))
    (run / "manifest.json").write_text(
        json.dumps({"run": "huge", "time_scale": 1, "experiment": {"name": "huge", "seed": 1, "steps": 2}})
    )
    steps = [
        {
            "step": 0,
            "complete": True,
            "t_rollout_end": at(100),
            "t_step_end": at(110),
            "metrics": {"perf/rollout_time": 60.0, "perf/step_time": 70.0},
        },
        {
            "step": 1,
            "complete": True,
            "t_rollout_end": at(300),
            "t_step_end": at(310),
            "metrics": {"perf/rollout_time": 1e303, "perf/step_time": 1e308},
        },
    ]  # a second is 1e6 us: overflows
    (run / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    (run / "pauses.jsonl").write_text(json.dumps({"start": at(250), "end": at(260), "reason": "hot"}) + "\n")
    document = summarize(tmp_path)

    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: bare {constant}")

    doc = json.loads(dumps_summary(document), parse_constant=refuse)["runs"]["huge"]
    assert doc["steps"][0]["rollout_time_adjusted_s"] == 60.0  # the good step keeps its numbers
    assert doc["steps"][1]["rollout_time_adjusted_s"] is None
    assert any("rollout_time_adjusted_s" in note and "step 1" in note and "inf" in note for note in doc["notes"])


def test_a_non_finite_arg_in_a_manifest_s_experiment_leaves_its_flags_unread() -> None:
    from harness.summary.run_config import _experiment_flags

    assert _experiment_flags({"miles": {"args": {"lr": float("nan")}}}) == {}
    assert _experiment_flags({"miles": {"args": {"lr": float("inf")}, "extra_args": "--seed 3"}}) == {}
    assert _experiment_flags({"miles": {"args": {"lr": 0.5}}}).get("--lr") == ["0.5"]
