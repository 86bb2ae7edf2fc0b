"""`harness parse-log FILE|- [--json]`: the contract, the table, the errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app

LOGS = Path(__file__).parent / "data" / "logs"
WIDE = {"COLUMNS": "300"}  # wide enough for the launch line on one line


def run(*args: str, input: bytes | str | None = None):  # noqa: A002, ANN201
    return CliRunner().invoke(app, ["parse-log", *args], input=input, env=WIDE)


def test_json_document_has_exactly_the_contract_keys() -> None:
    result = run(str(LOGS / "container-log-docker-timestamps.log"), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {"steps", "args", "launch", "failure", "problems"} <= set(doc)
    for step in doc["steps"]:
        assert list(step) == ["step", "complete", "t_rollout_end", "t_step_end", "metrics", "derived", "reward"]
    first = doc["steps"][0]
    assert (first["step"], first["complete"], first["t_rollout_end"]) == (0, True, "2026-11-29T07:52:41.814969Z")
    assert first["metrics"]["perf/step_time"] == 110.0
    assert first["derived"]["dropped_all_right"] == 12 and first["derived"]["dropped_all_wrong"] == 4
    assert doc["steps"][1]["complete"] is False and doc["steps"][1]["t_step_end"] is None
    assert doc["args"]["rollout_batch_size"] == 32
    assert doc["launch"][:2] == ["python3", "train.py"]
    assert doc["failure"] is None and doc["problems"] == []


def test_json_failure_and_problems() -> None:
    oom = json.loads(run(str(LOGS / "oom-traceback-at-end.log"), "--json").stdout)
    assert oom["failure"]["kind"] == "oom" and "CUDA out of memory" in oom["failure"]["line"]
    assert oom["args"] is None and oom["launch"] is None
    bad = json.loads(run(str(LOGS / "unparseable-payload.log"), "--json").stdout)
    assert [(p["line"], p["step"]) for p in bad["problems"]] == [(1, 0), (3, 1)]


def test_json_keeps_an_integer_beyond_64_bits_exactly(tmp_path: Path) -> None:
    # orjson writes the document where it can; it refuses an integer past 64 bits, which the document keeps exact
    log = tmp_path / "miles.log"
    log.write_text(
        "(A pid=1) [t] x.py:1 - perf 0: {'perf/step_time': 2.5, 'rollout/big': 123456789012345678901234567890}\n"
        "(A pid=1) [t] x.py:1 - perf 1: {'perf/step_time': 2.5}\n"
    )
    result = run(str(log), "--json")
    assert result.exit_code == 0, result.output
    assert "123456789012345678901234567890" in result.stdout
    assert json.loads(result.stdout)["steps"][0]["metrics"]["rollout/big"] == 123456789012345678901234567890


def test_table_lists_steps_and_the_failure() -> None:
    result = run(str(LOGS / "oom-traceback-at-end.log"))
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    # no argument dump: read as without the filter, so dropped is "-" (null, as in the summary), not 0
    assert ["0", "yes", "50.0", "-", "-", "-", "-", "-", "60.0"] in rows
    assert ["1", "no", "51.0", "-", "-", "-", "-", "-", "-"] in rows
    assert "failure (oom) at line 20: torch.OutOfMemoryError: CUDA out of memory." in result.stdout


def test_table_columns() -> None:
    result = run(str(LOGS / "container-log-docker-timestamps.log"))
    rows = [line.split() for line in result.stdout.splitlines()]
    # step, complete, rollout s, dropped right/wrong, zero-std right/wrong, reward (the filter run's
    # unfiltered one, not rollout/raw_reward 0.500), step s
    assert ["0", "yes", "88.7", "12", "4", "-", "-", "0.700", "110.0"] in rows
    assert "reward: rollout/raw_reward_unfiltered (filter on, from the argument dump)" in result.stdout
    assert "argument dump: 13 arguments" in result.stdout
    assert "launch: python3 train.py --rollout-batch-size 32" in result.stdout
    assert "'/data/dapo math.jsonl'" in result.stdout  # shell-quoted again
    assert "failure" not in result.stdout and "problem" not in result.stdout
    zero = run(str(LOGS / "zero-std-suffix-forms.log")).stdout
    assert ["4", "yes", "50.0", "-", "-", "13", "4", "-", "60.0"] in [line.split() for line in zero.splitlines()]
    assert "reward: rollout/raw_reward (no argument dump or launch line: read as without the filter)" in zero


def test_table_shows_problems() -> None:
    result = run(str(LOGS / "unparseable-payload.log"))
    assert "2 problem(s):" in result.stdout
    assert "line 1: perf 0: payload does not parse: string not closed" in result.stdout


def test_reads_stdin() -> None:
    data = (LOGS / "two-perf-lines-merged.log").read_bytes()
    result = run("-", "--json", input=data)
    assert result.exit_code == 0, result.output
    assert [s["step"] for s in json.loads(result.stdout)["steps"]] == [0, 1]


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_a_file_that_cannot_be_read_is_one_red_line_and_exit_2(tmp_path: Path, make: str) -> None:
    target = tmp_path / "nope.log"
    if make == "directory":
        target.mkdir()
    result = run(str(target))
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "nope.log" in lines[0]
    assert result.stdout == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files without read permission")
def test_an_unreadable_file(tmp_path: Path) -> None:
    target = tmp_path / "secret.log"
    target.write_text("x\n")
    target.chmod(0)
    result = run(str(target))
    assert result.exit_code == 2 and "cannot read log file" in result.stderr


def test_random_bytes_are_read_without_error(tmp_path: Path) -> None:
    target = tmp_path / "noise.log"
    target.write_bytes(bytes(range(256)) * 50 + b"\xff\xfe x.py:1 - perf 0: {'perf/step_time': 1.0}\n")
    result = run(str(target), "--json")
    assert result.exit_code == 0, result.output
    assert [s["complete"] for s in json.loads(result.stdout)["steps"]] == [True]


def test_help_says_what_it_does() -> None:
    result = CliRunner().invoke(app, ["parse-log", "--help"], env=WIDE)
    assert result.exit_code == 0
    assert "Read a Miles log" in result.stdout and "--json" in result.stdout and "FILE|-" in result.stdout
    listed = CliRunner().invoke(app, ["--help"], env=WIDE)
    assert "parse-log" in listed.stdout


@pytest.mark.integration
def test_parse_log_imports_nothing_heavy() -> None:
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from harness.cli import app\n"
        f"try:\n    app(['parse-log', {str(LOGS / 'two-perf-lines-merged.log')!r}, '--json'], standalone_mode=False)\n"
        "except SystemExit:\n    pass\n"
        "print('HEAVY:' + ','.join(m for m in ('docker', 'pandas', 'matplotlib', 'pynvml', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "HEAVY:"


def strict_loads(text: str) -> dict:
    """json.loads that refuses NaN, Infinity and -Infinity, which strict JSON does not have."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: bare {constant}")

    return json.loads(text, parse_constant=refuse)


def test_json_is_strict_for_eval_values_and_arguments() -> None:
    log = (
        "------------------------ arguments ------------------------\n"
        "  lr .............................................. 1e999\n"
        "  loss_scales ..................................... [nan, 1.0]\n"
        "  seed ............................................ 1234\n"
        "-------------------- end of arguments ---------------------\n"
        "x.py:1 - perf 0: {'perf/rollout_time': 50.0, 'rollout/raw_reward': nan}\n"
        "x.py:1 - perf 0: {'perf/step_time': 60.0}\n"
        "x.py:9 - eval 0: {'eval/aime': nan, 'eval/math500': 0.62, 'eval/lens': [1.0, inf]}\n"
    )
    result = run("-", "--json", input=log)
    assert result.exit_code == 0, result.output
    doc = strict_loads(result.stdout)
    (record,) = doc["evals"]
    assert record["metrics"] == {"eval/aime": None, "eval/math500": 0.62, "eval/lens": [1.0, None]}
    assert record["non_finite"] == {"eval/aime": "nan", "eval/lens": "contains nan/inf"}
    assert doc["steps"][0]["non_finite"] == {"rollout/raw_reward": "nan"} and doc["steps"][0]["reward"] is None
    # a dumped value that reads as a non-finite number keeps the text Miles printed
    assert doc["args"] == {"lr": "1e999", "loss_scales": "[nan, 1.0]", "seed": 1234}
