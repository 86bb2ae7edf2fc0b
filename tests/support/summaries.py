"""A capture made from a Miles log the way the runner writes one, and what the summary reads from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.capture import append_jsonl, write_json_atomic
from harness.mileslog import parse_file
from harness.summary import SCHEMA_FILE
from harness.summary.summarize import summarize


def summary_schema_validator() -> Any:
    """A validator of the summary JSON schema (jsonschema's Draft 2020-12), the schema itself checked first, once."""
    import jsonschema

    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def summary_rewards(log: Path, root: Path) -> tuple[dict[int, float | None], dict]:
    """The summary of a capture made from `log` under `root`: each step's reward, and the run's document."""
    parsed = parse_file(log)
    run = root / "r"
    run.mkdir(parents=True)
    write_json_atomic(
        run / "status.json", {"run": "r", "run_id": "r-1", "state": "succeeded", "exit_code": 0, "steps_expected": 3}
    )
    write_json_atomic(
        run / "manifest.json",
        {
            "run": "r",
            "run_id": "r-1",
            "time_scale": 1,
            "experiment": {"name": "r", "seed": 1, "steps": 3},
            "trainer_argv": parsed.launch,
        },
    )
    write_json_atomic(run / "args.json", parsed.args)
    for record in parsed.steps:
        append_jsonl(run / "metrics.jsonl", record.to_json(include_derived=False))
    document = summarize(root).to_dict()["runs"]["r"]
    return {row["step"]: row["reward"] for row in document["steps"]}, document
