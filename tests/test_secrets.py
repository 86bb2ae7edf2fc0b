"""Secrets never in clear: set by every route, grepped for in every output and every capture file.

A value is a secret when its variable's name contains TOKEN, KEY, SECRET,
PASSWORD or CREDENTIAL, or is listed in `container.secret_env`. It reaches the
trainer through its environment only; everywhere the harness writes or prints
it, it is `***`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app

REPO = Path(__file__).resolve().parent.parent
TRAINER = REPO / "tests" / "images" / "fake-trainer" / "trainer.py"

SECRETS = {  # variable -> value; each set by a different route below
    "HF_TOKEN": "hf-file-7f1c9a",  # container.env in the file
    "MY_LOGIN": "login-listed-52be",  # container.env, listed in container.secret_env
    "WANDB_API_KEY": "wandb-set-c0ffee",  # --set container.env.X=...
    "DB_PASSWORD": "pw-set-equals-9d2e",  # --set=container.env.X=...
    "GITHUB_TOKEN": "gh-passenv-4411",  # pass_env, from the harness's environment
    "Cloud_Credential": "cred-mixed-case-77aa",  # the name rule ignores case
}

# Checks the trainer's environment without printing a value, then becomes the fake trainer.
CHECK = """
import hashlib, json, os, sys
want = json.loads(os.environ["EXPECTED_SHA256"])
got = {k: hashlib.sha256(os.environ.get(k, "").encode()).hexdigest() for k in want}
if got != want:
    print("secret mismatch for " + ", ".join(k for k in want if got[k] != want[k]), flush=True)
    sys.exit(3)
os.execv(sys.executable, [sys.executable, "-u", sys.argv[1]])
"""


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@pytest.fixture
def secret_lab(tmp_path: Path) -> dict:
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    experiment = {
        "name": "sec",
        "steps": 2,
        "engine": "process",
        "command": [sys.executable, "-c", CHECK, str(TRAINER)],
        "container": {
            "gpus": "none",
            "env": {
                "HF_TOKEN": SECRETS["HF_TOKEN"],
                "MY_LOGIN": SECRETS["MY_LOGIN"],
                "Cloud_Credential": SECRETS["Cloud_Credential"],
                "EXPECTED_SHA256": json.dumps({name: sha(value) for name, value in SECRETS.items()}),
                "FAKE_SCENARIO": "steps",
            },
            "secret_env": ["MY_LOGIN"],
            "pass_env": ["GITHUB_TOKEN"],
        },
    }
    (experiments / "sec.yaml").write_text(json.dumps(experiment))
    (experiments / "sec-seeds.yaml").write_text("sweep: sec\nseeds: [1, 2]\n")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HARNESS_LOCK_DIR": str(tmp_path / "locks"),
        "GITHUB_TOKEN": SECRETS["GITHUB_TOKEN"],
        "COLUMNS": "200",
    }
    return {"root": tmp_path, "experiments": experiments, "captures": tmp_path / "capture", "env": env}


SET_ROUTES = [
    "--set",
    f"container.env.WANDB_API_KEY={SECRETS['WANDB_API_KEY']}",
    f"--set=container.env.DB_PASSWORD={SECRETS['DB_PASSWORD']}",
]


def dirs(secret_lab: dict, command: str) -> list[str]:
    found = []
    if command in ("run", "sweep", "show", "ls"):
        found += ["--experiments-dir", str(secret_lab["experiments"])]
    if command in ("run", "sweep", "status"):
        found += ["--capture-dir", str(secret_lab["captures"])]
    return found


def harness(secret_lab: dict, command: str, *args: str) -> subprocess.CompletedProcess:
    """A real `harness` process: its own command line is what the manifest records."""
    argv = [sys.executable, "-m", "harness", command, *args, *dirs(secret_lab, command)]
    return subprocess.run(
        argv, cwd=secret_lab["root"], env=secret_lab["env"], capture_output=True, text=True, timeout=120
    )


def cli(secret_lab: dict, command: str, *args: str) -> subprocess.CompletedProcess:
    """The CLI in this process (faster), its result shaped like a process's."""
    result = CliRunner().invoke(app, [command, *args, *dirs(secret_lab, command)], env=secret_lab["env"])
    return subprocess.CompletedProcess(command, result.exit_code, result.stdout, result.stderr)


def assert_no_secret(where: str, text: str) -> None:
    for name, value in SECRETS.items():
        assert value not in text, f"{name}'s value in clear in {where}"


@pytest.mark.integration
def test_secrets_are_stars_in_every_output_and_every_capture_file(secret_lab: dict) -> None:
    outputs = {
        "dry run": cli(secret_lab, "run", "sec", "--dry-run", *SET_ROUTES),
        "dry run json": cli(secret_lab, "run", "sec", "--dry-run", "--json", *SET_ROUTES),
        "show": cli(secret_lab, "show", "sec", *SET_ROUTES),
        "sweep dry run": cli(secret_lab, "sweep", "sec-seeds", "--dry-run", *SET_ROUTES),
        "sweep dry run json": cli(secret_lab, "sweep", "sec-seeds", "--dry-run", "--json", *SET_ROUTES),
        "run": harness(secret_lab, "run", "sec", *SET_ROUTES),
        "status": cli(secret_lab, "status"),
        "ls": cli(secret_lab, "ls"),
    }
    for what, done in outputs.items():
        assert done.returncode == 0, (what, done.stdout[-2000:], done.stderr[-2000:])
        assert_no_secret(what, done.stdout + done.stderr)

    spec = json.loads(outputs["dry run json"].stdout)
    for name in SECRETS:
        assert spec["env"][name] == "***"
    assert "HF_TOKEN=***" in outputs["dry run"].stdout and "-e HF_TOKEN " in outputs["dry run"].stdout
    assert "WANDB_API_KEY: '***'" in outputs["show"].stdout

    capture = secret_lab["captures"] / "sec"
    status = json.loads((capture / "status.json").read_text())
    assert status["state"] == "succeeded", status  # the trainer saw every value, through its environment
    files = [path for path in secret_lab["captures"].rglob("*") if path.is_file()]
    assert {"manifest.json", "status.json", "container.log", "metrics.jsonl"} <= {path.name for path in files}
    for path in files:
        assert_no_secret(str(path.relative_to(secret_lab["root"])), path.read_bytes().decode("utf-8", "replace"))

    manifest = json.loads((capture / "manifest.json").read_text())
    for name in SECRETS:
        assert manifest["env"][name] == "***" and manifest["launch_spec"]["env"][name] == "***"
    for name in ("HF_TOKEN", "MY_LOGIN", "WANDB_API_KEY", "DB_PASSWORD", "Cloud_Credential"):
        assert manifest["experiment"]["container"]["env"][name] == "***"
    assert "container.env.WANDB_API_KEY=***" in manifest["harness_argv"]
    assert manifest["experiment"]["container"]["env"]["FAKE_SCENARIO"] == "steps"  # only secrets are hidden


def test_errors_about_a_secret_never_quote_it(secret_lab: dict) -> None:
    done = cli(secret_lab, "run", "sec", "--dry-run", "--set", f"container.env.API_KEY=[{SECRETS['WANDB_API_KEY']}]")
    assert done.returncode == 2
    assert_no_secret("error", done.stdout + done.stderr)
    assert "--set container.env.API_KEY=***: " in done.stderr and "got ***" in done.stderr
    (secret_lab["experiments"] / "leak.yaml").write_text(
        f"name: leak\nsteps: 1\ncontainer: {{env: {{HF_TOKEN: [{SECRETS['HF_TOKEN']}]}}}}\n"
    )
    done = cli(secret_lab, "show", "leak")
    assert done.returncode == 2 and "container.env.HF_TOKEN" in done.stderr
    assert_no_secret("error", done.stdout + done.stderr)


def test_a_mount_may_not_read_a_secret(secret_lab: dict) -> None:
    (secret_lab["experiments"] / "mount.yaml").write_text(
        "name: mount\nsteps: 1\ncontainer: {volumes: ['${HF_TOKEN}:/data:ro']}\n"
    )
    done = cli(secret_lab, "run", "mount", "--dry-run")
    assert done.returncode == 2 and "reads the secret ${HF_TOKEN}" in done.stderr


@pytest.mark.integration
def test_the_finding_a_token_in_the_file_and_a_key_by_set_stay_out_of_the_manifest(secret_lab: dict) -> None:
    (secret_lab["experiments"] / "plainsec.yaml").write_text(
        json.dumps(
            {
                "name": "plainsec",
                "steps": 2,
                "engine": "process",
                "command": [sys.executable, "-u", str(TRAINER)],
                "container": {"gpus": "none", "env": {"HF_TOKEN": SECRETS["HF_TOKEN"]}},
            }
        )
    )
    done = harness(secret_lab, "run", "plainsec", "--set", f"container.env.WANDB_API_KEY={SECRETS['WANDB_API_KEY']}")
    assert done.returncode == 0, done.stderr
    manifest = (secret_lab["captures"] / "plainsec" / "manifest.json").read_text()
    assert_no_secret("manifest.json", manifest)
    assert json.loads(manifest)["experiment"]["container"]["env"] == {"HF_TOKEN": "***", "WANDB_API_KEY": "***"}
