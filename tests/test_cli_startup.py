"""`harness --help`, `ls` and `--dry-run` must not import Docker, pandas, matplotlib, NVML, numpy, scipy,
TensorBoard or W&B."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
HEAVY = (
    "docker",
    "pandas",
    "matplotlib",
    "pynvml",
    "numpy",
    "scipy",
    "tensorboardX",
    "tensorboard",
    "wandb",
    "tbparse",
)

PROBE = """
import sys
from harness.cli import app

try:
    app({args!r}, standalone_mode=False)
except SystemExit:
    pass
heavy = [m for m in {heavy!r} if m in sys.modules]
print("HEAVY:" + ",".join(heavy))
"""


@pytest.mark.parametrize(
    "args",
    [["--help"], ["ls"], ["run", "e2b-dapo-filter", "--dry-run"], ["run", "plain", "--dry-run", "--json"]],
    ids=["help", "ls", "dry-run", "dry-run-json"],
)
def test_light_commands_import_nothing_heavy(args: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "HEAVY:", out.stdout[-500:]


@pytest.mark.parametrize(
    "entry",
    [
        "from harness.cli import main; main()",
        "import runpy, sys; sys.argv[0] = 'summarize_miles.py'; runpy.run_path('summarize_miles.py', run_name='__main__')",
    ],
)
def test_the_commands_end_with_what_they_hold_frozen(entry: str) -> None:
    """As a command ends, what the process holds is frozen, so that Python's last collection at exit does not walk
    it (after a summary of 10,000 runs it took a third of a second)."""
    probe = f"import atexit, gc\natexit.register(lambda: print('FROZEN', gc.get_freeze_count() > 0))\n{entry}"
    done = subprocess.run(
        [sys.executable, "-c", probe, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "FROZEN True" in done.stdout, done.stdout[-400:]


# --- each command loads its own module, and parse-log nothing it does not need ------------------------------------

LOADED = """
import sys
from harness.cli import app

try:
    app({args!r}, standalone_mode=False)
except SystemExit:
    pass
print("LOADED:" + ",".join(sorted(m for m in sys.modules if m.startswith("harness.cli."))))
print("TOP:" + ",".join(sorted({{m.split(".")[0] for m in sys.modules}})))
"""


def loaded(args: list[str]) -> tuple[set[str], set[str]]:
    """(the harness.cli modules, the top-level packages) a process that runs `harness ARGS` has imported."""
    out = subprocess.run(
        [sys.executable, "-c", LOADED.format(args=args)], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(":", 1) for line in out.stdout.splitlines() if line.startswith(("LOADED:", "TOP:")))
    return set(filter(None, lines["LOADED"].split(","))), set(lines["TOP"].split(","))


def command_modules_imported_by(module: str) -> set[str]:
    """The command modules `module` imports at its top (demo reuses run's helpers): loaded along with it."""
    import ast

    from harness.cli import COMMANDS

    tree = ast.parse((REPO / "harness" / "cli" / f"{module}.py").read_text())
    names = {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    return {name for name in names if name.removeprefix("harness.cli.") in set(COMMANDS.values())}


def test_parse_log_json_loads_only_its_module_and_no_validation_or_rendering_library(tmp_path: Path) -> None:
    log = tmp_path / "container.log"
    log.write_text("2026-11-29T07:00:00.000000000Z (A pid=1) [t] x.py:1 - perf 1: {'perf/step_time': 1.0}\n")

    modules, packages = loaded(["parse-log", str(log), "--json"])

    assert {m for m in modules if m.count(".") == 2} == {"harness.cli.app", "harness.cli.logs"}
    # typer builds a pydantic validator for a str argument; YAML and rich have nothing to do for --json
    assert not {"pydantic", "pydantic_core", "yaml", "rich", "numpy"} & packages


def test_parse_log_as_a_table_loads_no_validation_library(tmp_path: Path) -> None:
    log = tmp_path / "container.log"
    log.write_text("2026-11-29T07:00:00.000000000Z (A pid=1) [t] x.py:1 - perf 1: {'perf/step_time': 1.0}\n")

    modules, packages = loaded(["parse-log", str(log)])

    assert "harness.cli.runs" not in modules and "harness.cli.summary" not in modules
    assert not {"pydantic", "pydantic_core", "yaml", "numpy"} & packages


def command_names() -> list[str]:
    from harness.cli import COMMANDS

    return list(COMMANDS)


@pytest.mark.parametrize("name", command_names())
def test_a_command_loads_its_own_module_only(name: str) -> None:
    from harness.cli import COMMANDS

    modules, _ = loaded([name, "--help"])

    own = f"harness.cli.{COMMANDS[name]}"
    commands = {f"harness.cli.{module}" for module in COMMANDS.values()}
    assert own in modules
    assert modules & commands == {own} | command_modules_imported_by(COMMANDS[name])
