"""A secret never travels as a trainer flag: the trainer prints its argv, so it would be in container.log.

A flag whose name follows the secret rule (TOKEN, KEY, SECRET, PASSWORD or
CREDENTIAL, like an env variable) and carries a value is refused by every
route a flag takes, in one line that names the place and says to pass the
secret by environment. A password in a URL of a plain env value is shown as ***.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.experiments.store import ExperimentStore
from harness.secrets import is_secret_flag
from support.messages import messages

REPO = Path(__file__).resolve().parent.parent
SECRET = "wk-SEKRET5"
PASSWORD = "pw-SEKRET9"
BASE = ["--rollout-batch-size", "32", "--input-key", "messages", "--num-rollout", "12", "--seed", "1"]


def cli(exp_dir: Path, *args: str):
    env = {"COLUMNS": "200", "DOCKER_HOST": "unix:///nonexistent.sock"}  # a dry run's pre-flight finds no engine
    return CliRunner().invoke(app, [*args, "--experiments-dir", str(exp_dir)], env=env)


def refused(result, *where: str) -> str:
    """Exit 2 with one `error:` line naming `where` and the way out, the secret nowhere in the output."""
    assert result.exit_code == 2, (result.exit_code, result.output[-2000:])
    assert SECRET not in result.output, result.output
    lines = messages(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for part in where:
        assert part in lines[0], lines[0]
    assert "by environment" in lines[0] and "container.env" in lines[0] and "pass_env" in lines[0]
    return lines[0]


FILE_ROUTES = [
    (f"miles:\n  args: {{wandb-key: {SECRET}}}\n", "x.yaml: miles.args.wandb-key", "--wandb-key"),
    (f"miles:\n  args: {{hf_token: [{SECRET}, b]}}\n", "x.yaml: miles.args.hf_token", "--hf_token"),
    (f"miles:\n  extra_args: '--wandb-key {SECRET}'\n", "x.yaml: miles.extra_args", "--wandb-key"),
    (f"miles:\n  extra_args: '--x 1 --Wandb-Key={SECRET}'\n", "x.yaml: miles.extra_args", "--Wandb-Key"),
    (f"miles:\n  extra_args: '--db-password {SECRET} --y'\n", "x.yaml: miles.extra_args", "--db-password"),
]


@pytest.mark.parametrize("text, where, flag", FILE_ROUTES)
def test_a_secret_flag_in_an_experiment_file_is_refused(exp_dir: Path, text: str, where: str, flag: str) -> None:
    (exp_dir / "x.yaml").write_text(f"name: x\nextends: parent\n{text}")
    for command in (["run", "x", "--dry-run"], ["run", "x", "--dry-run", "--json"], ["show", "x"]):
        refused(cli(exp_dir, *command), where, flag)


def test_a_secret_flag_in_the_command_of_a_process_run_is_refused(exp_dir: Path) -> None:
    (exp_dir / "x.yaml").write_text(
        f"name: x\nsteps: 1\nengine: process\ncommand: [python3, t.py, --api-token, {SECRET}]\n"
    )
    refused(cli(exp_dir, "run", "x", "--dry-run"), "x.yaml: command", "--api-token")


@pytest.mark.parametrize(
    "assignment, flag",
    [
        (f"miles.args.wandb-key={SECRET}", "--wandb-key"),
        (f"miles.extra_args=--wandb-key={SECRET}", "--wandb-key"),
        (f"miles.extra_args=--x 1 --wandb-key {SECRET}", "--wandb-key"),
        (f"miles.args={{wandb-key: {SECRET}}}", "--wandb-key"),
        (f"miles={{args: {{client-secret: {SECRET}}}}}", "--client-secret"),
    ],
)
def test_a_secret_flag_given_with_set_is_refused_and_blamed_on_the_set(
    exp_dir: Path, assignment: str, flag: str
) -> None:
    (exp_dir / "x.yaml").write_text("name: x\nextends: parent\n")
    key = assignment.partition("=")[0]
    line = refused(cli(exp_dir, "run", "x", "--dry-run", "--set", assignment), f"--set {key}=***", flag)
    assert "x.yaml" not in line


@pytest.mark.parametrize("name", ["MILES_EXTRA_ARGS", "MILES_ARGS"])
def test_the_harness_argv_variables_cannot_be_set_by_hand(exp_dir: Path, name: str) -> None:
    (exp_dir / "x.yaml").write_text("name: x\nextends: parent\n")
    done = cli(exp_dir, "run", "x", "--dry-run", "--set", f"container.env.{name}=--wandb-key {SECRET}")
    assert done.exit_code == 2 and SECRET not in done.output and f"{name} is set by the harness" in done.stderr
    (exp_dir / "y.yaml").write_text(f"name: y\nextends: parent\ncontainer: {{pass_env: [{name}]}}\n")
    done = cli(exp_dir, "run", "y", "--dry-run")
    assert done.exit_code == 2 and f"{name} is set by the harness" in done.stderr, done.output


def test_a_boolean_secret_flag_and_flags_that_only_look_secret_are_fine(exp_dir: Path) -> None:
    (exp_dir / "x.yaml").write_text(
        "name: x\nextends: parent\nmiles:\n  args: {use-wandb-key-auth: true, hf-token: false, input-key: prompt,"
        " max-tokens-per-gpu: 9216, label-key: answer}\n  extra_args: '--read-token-from-env --tokenizer-path /m'\n"
    )
    experiment = ExperimentStore(exp_dir, base_args=BASE).load("x").experiment
    argv = experiment.trainer_args(BASE) + experiment.extra_words()
    assert "--use-wandb-key-auth" in argv and "--hf-token" not in argv
    assert argv[argv.index("--input-key") + 1] == "prompt" and "9216" in argv
    assert cli(exp_dir, "run", "x", "--dry-run").exit_code == 3  # accepted: refused only for want of Docker here


@pytest.mark.parametrize(
    "name, secret",
    [
        ("wandb-key", True),
        ("--HF-TOKEN", True),
        ("wandbapikey", True),
        ("gcs-credentials", True),
        ("max-tokens-per-gpu", False),
        ("input-key", False),
        ("keep-old", False),
        ("wandb-k", True),
        ("--wandb-ke", True),
        ("wandb-", False),
        ("wandb-project", False),
    ],
)
def test_the_secret_rule_for_flag_names(name: str, secret: bool) -> None:
    assert is_secret_flag(name) is secret


def test_a_password_in_a_url_is_stars_in_the_dry_run_and_show(exp_dir: Path) -> None:
    (exp_dir / "x.yaml").write_text(
        f"name: x\nextends: parent\ncontainer:\n  env: {{PLAIN: 'https://me:{PASSWORD}@h/x'}}\n"
    )
    for command in (["run", "x", "--dry-run"], ["run", "x", "--dry-run", "--json"], ["show", "x"]):
        done = cli(exp_dir, *command)
        assert done.exit_code == (0 if command[0] == "show" else 3), done.output  # 3: no Docker answers here
        assert PASSWORD not in done.output and "https://***@h/x" in done.output, done.output
    done = cli(
        exp_dir, "run", "x", "--dry-run", "--set", f"container.env.OTHER=ftp://u:{PASSWORD}@h", "--set", "no.such=1"
    )
    assert done.exit_code == 2 and PASSWORD not in done.output


@pytest.mark.integration
def test_the_finding_a_flag_is_refused_and_the_environment_way_keeps_every_file_clean(tmp_path: Path) -> None:
    """The attack's command is refused before anything runs; by environment the run succeeds, nothing in clear."""
    captures = tmp_path / "capture"
    env = {**os.environ, "HARNESS_LOCK_DIR": str(tmp_path / "locks"), "HARNESS_PROCESS_DIR": str(tmp_path / "p")}
    common = [
        "run",
        "plain",
        "--sim",
        "--sim-engine",
        "process",
        "--time-scale",
        "0.001",
        "--set",
        "steps=1",
        "--capture-dir",
        str(captures),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "harness", *common, "--set", f"miles.args.wandb-key={SECRET}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and SECRET not in done.stdout + done.stderr, done.stderr
    assert "--set miles.args.wandb-key=***" in done.stderr and not captures.exists()

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            *common,
            "--set",
            f"container.env.WANDB_API_KEY={SECRET}",
            "--set",
            f"container.env.PLAIN=https://me:{PASSWORD}@h/x",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert SECRET not in done.stdout + done.stderr and PASSWORD not in done.stdout + done.stderr
    files = [path for path in (captures / "plain").rglob("*") if path.is_file()]
    assert {"manifest.json", "container.log", "status.json"} <= {path.name for path in files}
    for path in files:
        text = path.read_text(errors="replace")
        assert SECRET not in text and PASSWORD not in text, path.name
    manifest = json.loads((captures / "plain" / "manifest.json").read_text())
    assert manifest["experiment"]["container"]["env"]["PLAIN"] == "https://***@h/x"
    assert manifest["env"]["WANDB_API_KEY"] == "***"
