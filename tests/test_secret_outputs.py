"""Nothing in clear: a URL password or a secret's value, grepped for in every file and every output of real runs.

The trainer gets the real values (a wrapper checks them by hash before it
becomes the trainer); everything the harness writes or prints shows `***`:
the capture, the TensorBoard events, the offline W&B run, `--dry-run`,
`logs`, `show`, the live output, and what Ray's errors repeat.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.lab import Lab, killed

REPO = Path(__file__).resolve().parent.parent
TRAINER = REPO / "tests" / "images" / "fake-trainer" / "trainer.py"

pytestmark = pytest.mark.integration


def harness(cwd: Path, *args: str, env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
    """A real `harness` process: its own command line is what the manifest records."""
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def base_env(tmp_path: Path) -> dict:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "HARNESS_LOCK_DIR": str(tmp_path / "locks"),
        "HARNESS_PROCESS_DIR": str(tmp_path / "processes"),
        "HARNESS_RAY_LOG_DIR": str(tmp_path / "ray-logs"),
        "HARNESS_ENGINES": "process",
        "COLUMNS": "200",
    }


def files_holding(root: Path, secrets: dict) -> list[str]:
    """`path: name` for each file under `root` that holds a secret in clear (read as bytes: binary files too)."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(root)}: {name}" for name, value in secrets.items() if value.encode() in data]
    return found


# --- the finding: a URL password in a trainer flag, on the simulator with W&B ---------------------------

FLAG_SECRETS = {"extra_args": "xyzSECRET1", "rm_url": "pwRMURLAAA41"}
FLAG_SETS = [
    "--set",
    "miles.extra_args=--wandb-host https://u:xyzSECRET1@h",
    "--set",
    "miles.args.rm_url=https://u:pwRMURLAAA41@h/x",
    "--set",
    "steps=2",
]


def test_a_url_password_in_a_trainer_flag_is_in_clear_nowhere(tmp_path: Path) -> None:
    pytest.importorskip("wandb", reason="wandb is not installed: pip install '.[wandb]' (make setup does)")
    env = base_env(tmp_path)
    captures = tmp_path / "capture"
    where = ["--experiments-dir", str(REPO / "experiments"), "--capture-dir", str(captures)]
    sim = ["--sim", "--sim-engine", "process"]
    dry = harness(REPO, "run", "plain", *sim, "--dry-run", *FLAG_SETS, *where, env=env)
    dry_json = harness(REPO, "run", "plain", *sim, "--dry-run", "--json", *FLAG_SETS, *where, env=env)
    run = harness(REPO, "run", "plain", *sim, "--wandb", *FLAG_SETS, *where, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    logs = harness(REPO, "logs", "plain", "--capture-dir", str(captures), env=env)
    show = harness(REPO, "show", "plain", *FLAG_SETS, "--experiments-dir", str(REPO / "experiments"), env=env)
    for what, done in {"dry run": dry, "dry run json": dry_json, "run": run, "logs": logs, "show": show}.items():
        assert done.returncode == 0, (what, done.stderr[-2000:])
        for name, value in FLAG_SECRETS.items():
            assert value not in done.stdout + done.stderr, f"{name}'s password in clear in {what}"

    assert files_holding(captures, FLAG_SECRETS) == []
    names = {path.name for path in captures.rglob("*") if path.is_file()}
    assert {"manifest.json", "container.log", "debug.log"} <= names
    assert any(name.startswith("events.out.tfevents") for name in names)
    assert any(name.startswith("run-") and name.endswith(".wandb") for name in names)
    assert "--wandb-host https://***@h" in logs.stdout  # the trainer printed its argv: masked, and still read
    manifest = json.loads((captures / "plain" / "manifest.json").read_text())
    assert "https://***@h/x" in manifest["trainer_argv"]


# --- secrets the trainer prints back -----------------------------------------------------------------

ENV_SECRETS = {
    "HF_TOKEN": "hf-printed-SECRET-5a5a",  # secret by its name
    "PIP_INDEX_URL": "https://u:pipSECRETAAA42@pypi.example/simple",  # a URL password in a plain variable
}
PRINTED = {  # what must not be in clear anywhere the harness writes or prints
    "HF_TOKEN": ENV_SECRETS["HF_TOKEN"],
    "the pip password": "pipSECRETAAA42",
    "the flag password": "xyzSECRET1",
}
# Checks the trainer's environment and argv against hashes (printing no value), prints the secrets back as a
# careless trainer would, one of them in two writes with a pause between (two reads of the stream), then
# becomes the fake trainer (which prints its argv, the flag's URL among it).
PRINTER = """
import hashlib, json, os, sys, time
want = json.loads(os.environ["EXPECTED_SHA256"])
got = {k: hashlib.sha256(os.environ.get(k, "").encode()).hexdigest() for k in want}
if got != want or "--wandb-host https://u:xyzSECRET1@h" not in os.environ["MILES_EXTRA_ARGS"]:
    print("secret mismatch", flush=True)
    sys.exit(3)
print("token is " + os.environ["HF_TOKEN"], flush=True)
index = os.environ["PIP_INDEX_URL"]
print("index " + index + " password " + index.split(":")[2].split("@")[0], flush=True)
token = os.environ["HF_TOKEN"]
sys.stdout.write("again " + token[:7]); sys.stdout.flush(); time.sleep(0.5)
sys.stdout.write(token[7:] + " end\\n"); sys.stdout.flush()
os.execv(sys.executable, [sys.executable, "-u", sys.argv[1]])
"""


def test_secrets_the_trainer_prints_back_are_masked_where_the_harness_writes_its_output(tmp_path: Path) -> None:
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    sha = {name: hashlib.sha256(value.encode()).hexdigest() for name, value in ENV_SECRETS.items()}
    experiment = {
        "name": "printer",
        "steps": 2,
        "engine": "process",
        "command": [sys.executable, "-c", PRINTER, str(TRAINER)],
        "miles": {"extra_args": "--wandb-host https://u:xyzSECRET1@h"},
        "container": {"gpus": "none", "env": {**ENV_SECRETS, "EXPECTED_SHA256": json.dumps(sha)}},
        "export": {"tensorboard": True},
    }
    (experiments / "printer.yaml").write_text(json.dumps(experiment))
    env = base_env(tmp_path)
    captures = tmp_path / "capture"
    run = harness(
        tmp_path, "run", "printer", "--experiments-dir", str(experiments), "--capture-dir", str(captures), env=env
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]  # the trainer saw every real value
    logs = harness(tmp_path, "logs", "printer", "--capture-dir", str(captures), env=env)
    assert logs.returncode == 0, logs.stderr
    for what, text in {"the live output": run.stdout + run.stderr, "harness logs": logs.stdout}.items():
        for name, value in PRINTED.items():
            assert value not in text, f"{name} in clear in {what}"
    assert files_holding(captures, PRINTED) == []

    log = (captures / "printer" / "container.log").read_text()
    assert "token is ***" in log and "index https://***@pypi.example/simple password ***" in log
    assert "again *** end" in log  # a secret printed in two pieces, masked on its whole line
    assert "--wandb-host https://***@h" in log
    status = json.loads((captures / "printer" / "status.json").read_text())
    assert status["state"] == "succeeded" and status["steps_complete"] == 2  # the masked log still parsed


# --- a Ray address with a password ---------------------------------------------------------------------


@pytest.mark.parametrize("by_env", [False, True], ids=["--ray", "RAY_ADDRESS"])
def test_a_ray_address_never_prints_its_password(tmp_path: Path, by_env: bool) -> None:
    pytest.importorskip("ray", reason="Ray is not installed: pip install '.[cluster]' (make setup does)")
    env = base_env(tmp_path)
    # A Ray client that gives up at once on the closed port, instead of after 30 s.
    env.update(RAY_CLIENT_INITIAL_CONNECTION_TIMEOUT_S="1", RAY_CLIENT_MAX_CONNECTION_TIMEOUT_S="1")
    address = "http://u:xyzRAYPW3@127.0.0.1:1" if by_env else "ray://u:xyzRAYPW3@127.0.0.1:1"
    if by_env:
        env["RAY_ADDRESS"] = address
    where = ["--experiments-dir", str(REPO / "experiments"), "--capture-dir", str(tmp_path / "capture")]
    ray = [] if by_env else ["--ray", address]
    done = harness(tmp_path, "run", "plain", "--sim", "--sim-engine", "process", *ray, *where, env=env)
    assert done.returncode != 0
    shown = address.replace("u:xyzRAYPW3", "***")
    assert f"cannot join the Ray cluster at {shown!r}" in done.stderr, done.stderr
    assert "xyzRAYPW3" not in done.stdout + done.stderr
    assert files_holding(tmp_path, {"the Ray password": "xyzRAYPW3"}) == []


# --- what the harness saves or shows from the engine, once the harness that pumped the log is gone ------------


def test_lines_saved_or_shown_from_the_engine_after_the_harness_died_are_masked(lab: Lab) -> None:
    secrets = {
        "HF_TOKEN": "hf-echoed-SECRET-77c1",
        "PIP_INDEX_URL": "https://u:pipECHOAAA43@pypi.example/simple",
    }
    run = lab.experiment(
        "echo",
        scenario="hang",
        env={**secrets, "FAKE_ECHO_ENV": "HF_TOKEN,PIP_INDEX_URL"},
        extra="--wandb-host https://u:xyzSECRET1@h",
    )
    killed(lab.spawn("run", run, failpoint="mid-stream:20"))
    captured = lab.log(run)
    (handle,) = lab.objects()
    lab.wait_for(lambda: len(lab.engine_lines(handle)) > len(captured) + 3, what="the trainer to echo on")
    printed = {"HF_TOKEN": secrets["HF_TOKEN"], "the pip password": "pipECHOAAA43", "the flag password": "xyzSECRET1"}
    assert any(secrets["HF_TOKEN"] in line for line in lab.engine_lines(handle))  # the trainer did print it

    shown = lab.capture_cli("logs", run, "--timestamps")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert len(lines) > len(captured) + 3 and len(lines) == len(set(lines))  # the engine's lines after it, once
    assert "HF_TOKEN=*** PIP_INDEX_URL=https://***@pypi.example/simple" in shown.output
    for name, value in printed.items():
        assert value not in shown.output, f"{name} in clear in harness logs"

    result = lab.capture_cli("recover", "--grace-s", "2")
    assert result.exit_code == 0, result.output
    log = lab.log(run)
    assert len(log) > len(captured) + 3 and len(log) == len(set(log))  # saved once, the capture's lines not again
    assert files_holding(lab.captures, printed) == []
