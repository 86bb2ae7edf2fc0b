"""The `guard:` block: documented defaults, validation, and its place outside the run id."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.experiments.store import ExperimentStore
from harness.guard.config import GuardConfig
from harness.run.plan import compute_run_id

REPO = Path(__file__).resolve().parent.parent


def test_every_default_is_in_the_docs_table_with_its_value() -> None:
    doc = (REPO / "docs" / "guard.md").read_text()
    for key, value in GuardConfig().model_dump().items():
        if key == "sim":
            for sim_key, sim_value in value.items():
                assert f"| `sim.{sim_key}` | {sim_value:g} |" in doc, sim_key
        elif isinstance(value, float):
            assert f"| `{key}` | {value:g} |" in doc, key
        else:
            assert f"| `{key}` | {value} |" in doc, key


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
