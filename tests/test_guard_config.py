"""The `guard:` block: documented defaults, validation, and its place outside the run id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from harness.cli import app
from harness.errors import ExitCode, HarnessError
from harness.experiments.store import ExperimentStore
from harness.guard.config import GuardConfig
from harness.run.plan import compute_run_id

REPO = Path(__file__).resolve().parent.parent


def flat(block: dict, prefix: str = "") -> dict:
    """Every key of a (nested) block, dotted: `sim.cpu.hot_c`."""
    out = {}
    for key, value in block.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_every_default_is_in_the_docs_table_with_its_value() -> None:
    doc = (REPO / "docs" / "guard.md").read_text()
    for key, value in flat(GuardConfig().model_dump()).items():
        shown = "unset" if value is None else f"{value:g}" if isinstance(value, float) else value
        assert f"| `{key}` | {shown} |" in doc, key


@pytest.mark.parametrize(
    "block, message",
    [
        ({"missing_polls": 0}, "missing_polls"),
        ({"on_missing": "panic"}, "on_missing"),
        ({"record_every_s": 0}, "record_every_s"),
        ({"sim": {"heat_tau_s": 0}}, "heat_tau_s"),
        ({"sim": {"idle_c": 96}}, "idle_c (96.0) must be below hot_c (95.0)"),
        ({"sim": {"hot": 90}}, "hot"),
    ],
)
def test_bad_guard_blocks_are_refused(block: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        GuardConfig(**block)


def test_the_guard_block_does_not_change_the_run_id() -> None:
    # Guard settings decide when a run is frozen, not what it computes; retuning them must not
    # make a sweep treat a finished run as another configuration.
    base = ExperimentStore(REPO / "experiments").load("plain").experiment
    retuned = base.model_copy(update={"guard": GuardConfig(pause_at_c=80, resume_at_c=70, sensor="none")})
    argv = ["python3", "train.py"]
    assert compute_run_id(base, argv, base.image) == compute_run_id(retuned, argv, base.image)


# --------------------------------------------------------------------------- configuration that cannot be meant

REFUSED = [
    # Tried as a new user would: -10 froze a run for 2 s of every 2.2 s; 500 could never fire; 1e-9 wrote 10,364
    # fsynced lines in 5 s.
    ({"pause_at_c": -10}, "guard.pause_at_c: -10 C is below 5 C: a reading that low counts as missing"),
    ({"pause_at_c": 500}, "guard.pause_at_c: 500 C is above 150 C: a reading that high counts as missing"),
    ({"resume_at_c": 2}, "guard.resume_at_c: 2 C is below 5 C"),
    ({"resume_at_c": 90}, "guard: resume_at_c (90.0) must be below pause_at_c (85.0)"),
    ({"resume_at_c": 85}, "guard: resume_at_c (85.0) must be below pause_at_c (85.0)"),
    ({"min_pause_s": 400}, "guard: min_pause_s (400.0) must not exceed max_pause_s (300.0)"),
    ({"poll_s": 1e-9}, "guard.poll_s: 1e-09 s is below 0.05 s"),
    ({"poll_s": 0.01}, "guard.poll_s: 0.01 s is below 0.05 s"),
    ({"poll_s": 2, "record_every_s": 1}, "guard: record_every_s (1.0) must not be below poll_s (2.0)"),
    ({"start_below_c": 200}, "guard.start_below_c: 200 C is above 150 C"),
    ({"start_below_c": 85}, "guard: start_below_c (85.0) must be below pause_at_c (85.0)"),
    ({"start_below_c": 50, "sensor": "none"}, "guard: start_below_c needs a sensor"),
    ({"zone_margin_c": -5}, "guard.zone_margin_c: Input should be greater than or equal to 0"),
    ({"start_timeout_s": 0}, "guard.start_timeout_s: Input should be greater than 0"),
    ({"on_start_timeout": "wait"}, "guard.on_start_timeout: input should be 'start' or 'refuse', got 'wait'"),
    ({"on_pause_failure": "ignore"}, "guard.on_pause_failure: input should be 'stop' or 'continue', got 'ignore'"),
    ({"sim": {"cpu": {"critical_c": 900}}}, "guard.sim.cpu.critical_c: 900 C is above 150 C"),
]


@pytest.mark.parametrize("guard, message", REFUSED)
def test_configuration_that_cannot_be_meant_is_refused_in_one_line_naming_file_and_key(
    tmp_path: Path, guard: dict, message: str
) -> None:
    (tmp_path / "hot.yaml").write_text(json.dumps({"name": "hot", "steps": 1, "guard": guard}))
    with pytest.raises(HarnessError) as err:
        ExperimentStore(tmp_path).load("hot")
    assert str(err.value).startswith(f"{tmp_path / 'hot.yaml'}: {message}"), str(err.value)
    assert "\n" not in str(err.value)


def test_a_refused_guard_block_stops_harness_run_before_anything_starts(tmp_path: Path) -> None:
    (tmp_path / "hot.yaml").write_text(json.dumps({"name": "hot", "steps": 1, "guard": {"pause_at_c": -10}}))
    done = CliRunner().invoke(
        app, ["run", "hot", "--experiments-dir", str(tmp_path), "--capture-dir", str(tmp_path / "capture")]
    )
    assert done.exit_code == ExitCode.BAD_INPUT
    assert done.output.strip().splitlines()[-1].startswith(f"error: {tmp_path / 'hot.yaml'}: guard.pause_at_c: -10 C")
    assert "Traceback" not in done.output and not (tmp_path / "capture").exists()


def test_a_sweep_file_s_guard_block_applies_to_each_run_and_a_bad_key_names_the_sweep_file(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(json.dumps({"name": "base", "steps": 1}))
    (tmp_path / "cool.yaml").write_text(
        json.dumps({"sweep": "base", "seeds": [1, 2], "guard": {"start_below_c": 50, "on_start_timeout": "refuse"}})
    )
    (tmp_path / "bad.yaml").write_text(json.dumps({"sweep": "base", "seeds": [1], "guard": {"start_below_c": -3}}))
    store = ExperimentStore(tmp_path)
    guard = store.load("base", seed=2, sweep="cool").experiment.guard
    assert (guard.start_below_c, guard.on_start_timeout) == (50.0, "refuse")
    assert store.load("base", seed=2).experiment.guard.start_below_c is None  # the experiment alone: no cooled start
    with pytest.raises(HarnessError, match=r"bad\.yaml: guard\.start_below_c: -3 C is below 5 C"):
        store.load("base", sweep="bad")


def test_the_seeds_sweep_starts_each_run_cooled() -> None:
    store = ExperimentStore(REPO / "experiments")
    for seed in store.load_sweep("seeds").seeds:
        assert store.load("plain-48", seed=seed, sweep="seeds").experiment.guard.start_below_c == 55.0


@pytest.mark.parametrize(
    "options, message",
    [
        (["--pause-at", "-10"], "--pause-at: -10 C is below 5 C"),
        (["--poll-s", "0.001"], "--poll-s: 0.001 s is below 0.05 s"),
        (["--resume-at", "90"], "--resume-at (90.0) must be below --pause-at (85.0)"),
        (["--min-pause-s", "9", "--max-pause-s", "3"], "--min-pause-s (9.0) must not exceed --max-pause-s (3.0)"),
    ],
)
def test_harness_guard_refuses_the_same_in_one_line_naming_the_option(options: list, message: str) -> None:
    done = CliRunner().invoke(app, ["guard", "--pid", "1", "--record", "/nonexistent", *options])
    assert done.exit_code == ExitCode.BAD_INPUT, done.output
    assert done.output.strip() == f"error: {message}" or done.output.strip().startswith(f"error: {message}")
