"""Every error is one line, printed in one place (`harness.cli.app.fail`) with one prefix, `error: `.

Was: `--set stpes=4` printed 17 lines (one per known key), an unknown
experiment the simulator's banner and a 7-line list, a bad flag click's own
`Usage: ... Error: ...`, and the `--sim` hint was on `status` and `logs` but
not on `history` or `guard plot`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO / "experiments"
LAB = REPO / "tests" / "data" / "captures" / "lab"
WIDTH = "100"  # piped, as a script or CI reads it


def one_error(args: list[str], code: int, *, env: dict[str, str] | None = None) -> str:
    """Run the command; expect `code`, nothing on stderr but one `error: ` line, and return that line."""
    result = CliRunner().invoke(app, args, env={"COLUMNS": WIDTH, **(env or {})})
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert "Error:" not in result.output and "Usage:" not in result.output
    return lines[0]


@pytest.fixture
def sim_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory whose capture/gpu is empty and whose capture/sim holds one run, `plain`."""
    shutil.copytree(LAB / "plain", tmp_path / "capture" / "sim" / "plain")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_unknown_set_key_is_one_line_that_suggests_the_key() -> None:
    line = one_error(["run", "plain", "--set", "stpes=4", "--dry-run", "--experiments-dir", str(EXPERIMENTS)], 2)

    assert "--set stpes=4" in line and "did you mean steps?" in line
    assert "extends" not in line  # not the list of every key


def test_an_unknown_key_in_a_file_is_one_line_that_suggests_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("exp").mkdir()
    Path("exp/x.yaml").write_text("name: x\nsteps: 2\nstpes: 4\n")
    line = one_error(["show", "x", "--experiments-dir", "exp"], 2)

    assert "exp/x.yaml: stpes: unknown key (did you mean steps?)" in line


def test_an_unknown_nested_key_suggests_within_its_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("exp").mkdir()
    Path("exp/x.yaml").write_text("name: x\nsteps: 2\nguard: {pause_at: 80}\n")
    line = one_error(["show", "x", "--experiments-dir", "exp"], 2)

    assert "guard.pause_at: unknown key (did you mean pause_at_c?)" in line


def test_an_unknown_experiment_is_one_line_before_any_banner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the experiments directory as a user names it: `experiments`
    line = one_error(["run", "e2b-dapo-filtr", "--sim"], 2)

    assert "e2b-dapo-filtr" in line and "did you mean e2b-dapo-filter?" in line
    result = CliRunner().invoke(app, ["run", "e2b-dapo-filtr", "--sim"])
    assert "simulator" not in result.output  # the banner is for a run that starts


def test_an_unknown_experiment_of_a_sweep_is_one_line_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    line = one_error(["sweep", "plain-84", "--seeds", "1", "2"], 2)

    assert "did you mean plain-48?" in line


def test_a_bad_flag_is_one_error_line_with_the_harness_s_prefix() -> None:
    line = one_error(["run", "plain", "--sed", "3"], 2)

    assert "--sed" in line and "--seed" in line and "harness run --help" in line


def test_an_unknown_command_is_one_error_line_that_suggests_the_command() -> None:
    line = one_error(["stauts"], 2)

    assert "stauts" in line and "status" in line


def test_a_bad_option_value_is_one_error_line() -> None:
    line = one_error(["sweep", "plain", "--seeds", "0", "--dry-run"], 2)

    assert "--seeds" in line


def test_an_unknown_run_suggests_the_run(sim_only: Path) -> None:
    line = one_error(["logs", "plian", "--sim"], 5)

    assert "plian" in line and "did you mean plain?" in line


@pytest.mark.parametrize(
    "args",
    [
        ["logs", "plain"],
        ["history", "plain"],
        ["guard", "plot", "plain"],
    ],
)
def test_every_command_that_reads_one_run_says_the_simulator_s_root_has_it(sim_only: Path, args: list[str]) -> None:
    line = one_error(args, 5)

    assert line.endswith("capture/sim has it: add --sim"), line


def test_report_without_real_captures_points_at_the_simulator_s_not_at_summarize(sim_only: Path) -> None:
    line = one_error(["report"], 5)

    assert "harness summarize" not in line
    assert line.endswith("capture/sim has 1 simulated run: add --sim"), line


def test_report_with_real_captures_and_no_summary_says_to_summarize(sim_only: Path) -> None:
    shutil.copytree(LAB / "plain", sim_only / "capture" / "gpu" / "plain")
    line = one_error(["report"], 5)

    assert "`harness summarize` first" in line


def test_summarize_and_status_use_the_same_simulator_hint(sim_only: Path) -> None:
    line = one_error(["summarize"], 5)

    assert line.endswith("capture/sim has 1 simulated run: add --sim"), line
    assert "did you mean --sim" not in line


def test_a_long_error_is_one_paragraph_not_a_line_per_clause() -> None:
    from harness.cli.messages import message_lines

    message = "run plain not started: " + "; ".join(
        f"problem number {n} with a reason of some length" for n in range(6)
    )
    lines = message_lines("error: ", message, 100, paragraph=True)

    for line, after in zip(lines, lines[1:]):  # each line holds as many words as fit: no line ends at a clause
        assert len(line) + 1 + len(after.split()[0]) > 100, lines
