"""Random experiment files, names and overrides: never a traceback, a hang or an internal error.

Whatever a file holds (random YAML documents shaped like experiments, random
YAML-ish text, random bytes), every command that reads it ends with exit 0
or 2 and at most a one-line error, each within a time limit.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.main import get_command
from typer.testing import CliRunner

from harness.cli import app
from support.properties import examples

# Built once: CliRunner.invoke rebuilds the command tree on every call, which would dominate this test.
CLI = get_command(app)

TIME_LIMIT_S = 10.0  # a hang guard per command; typical commands take milliseconds
KEYS = [
    "name",
    "extends",
    "description",
    "seed",
    "steps",
    "image",
    "engine",
    "command",
    "miles",
    "container",
    "guard",
    "compare",
    "limits",
    "sweep",
    "seeds",
    "args",
    "extra_args",
    "env",
    "pass_env",
    "secret_env",
    "volumes",
    "gpus",
    "ulimits",
    "baseline",
    "baselines",
    "max_minutes",
    "sensor",
    "pause_at_c",
    "rollout-batch-size",
    "over-sampling-batch-size",
    "num-rollout",
    "HF_TOKEN",
    "<<",
]
TRICKY = [
    "--num-rollout",
    "--seed=3",
    "--over-sampling-batch-size=8",
    "--rollout-batch-size 64",
    "../x",
    "/abs/x",
    "./p",
    "summary",
    ".hidden",
    "p",
    "fz",
    "fz-s2",
    "[/x]",
    "[bold]",
    ":smile:",
    "${HF_TOKEN}:/x",
    "all",
    "none",
    "process",
    "docker",
    "2024-13-45",
    "'unclosed",
    "a\nb",
    "\x1b[2J",
    "é",
    "",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(),
    st.text(max_size=20),
    st.sampled_from(TRICKY),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), inner, max_size=4),
    ),
    max_leaves=16,
)
documents = st.dictionaries(st.sampled_from(KEYS), values, max_size=8).map(
    lambda doc: {"name": "fz", "steps": 2, "engine": "process", "command": ["true"], "extends": "p", **doc}
)
yamlish = st.lists(
    st.sampled_from(
        [
            *"ab:-[]{}&*!|>'\"#\n ,.?%@`\t01<",
            "name: fz\n",
            "steps: ",
            "&a ",
            "*a",
            "!!binary ",
            "!!python/tuple ",
            "<<: ",
            "\n  ",
        ]
    ),
    max_size=80,
).map("".join)

PARENT = "name: p\nsteps: 2\nengine: process\ncommand: ['true']\n"


def run_cli(args: list[str]) -> None:
    """The CLI in this process, as CliRunner runs it; any exception but SystemExit fails the test."""
    started = time.monotonic()
    with CliRunner().isolation(env={"COLUMNS": "120", "HARNESS_DEBUG": ""}) as (out, err, _):
        try:
            CLI.main(args=args, prog_name="harness")
            code = 0
        except SystemExit as exit_:
            code = exit_.code or 0
        stdout, stderr = out.getvalue().decode(errors="replace"), err.getvalue().decode(errors="replace")
    elapsed = time.monotonic() - started
    assert elapsed < TIME_LIMIT_S, (args, elapsed)
    # 0 accepted, 2 refused; 3: an accepted run's dry run whose pre-flight finds no engine, image or data here
    assert code in (0, 2, 3), (args, code, stdout[-1000:], stderr[-1000:])
    assert "Traceback" not in stdout + stderr and "internal error" not in stderr, stderr[-1500:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) <= 1, stderr[-1500:]


def every_command(content: bytes, name: str = "fz", overrides: tuple[str, ...] = ()) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        experiments = Path(tmp) / "experiments"
        experiments.mkdir()
        (experiments / "p.yaml").write_text(PARENT)
        (experiments / "fz.yaml").write_bytes(content)
        dirs = ["--experiments-dir", str(experiments)]
        capture = ["--capture-dir", str(Path(tmp) / "capture")]
        sets = [word for override in overrides for word in ("--set", override)]
        run_cli(["ls", *dirs])
        run_cli(["show", name, *dirs, *sets])
        run_cli(["run", name, "--dry-run", *dirs, *capture, *sets])
        run_cli(["run", name, "--dry-run", "--json", *dirs, *capture, *sets])
        run_cli(["sweep", name, "--seeds", "1", "2", "--dry-run", *dirs, *capture, *sets])


FUZZ = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(documents)
def test_random_experiment_documents(document: dict) -> None:
    every_command(yaml.safe_dump(document, allow_unicode=True).encode())


@FUZZ
@given(yamlish)
def test_random_yaml_text(text: str) -> None:
    every_command(text.encode())


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(content: bytes) -> None:
    every_command(content)


@FUZZ
@given(
    name=st.one_of(st.text(max_size=20), st.sampled_from(TRICKY)),
    overrides=st.lists(
        st.one_of(
            st.text(max_size=30),
            st.sampled_from(
                [
                    "steps=3",
                    "nosuch.key=1",
                    "container.env.HF_TOKEN=[1]",
                    "extends=../x",
                    "miles.args.seed=2",
                    "miles.extra_args=--num-rollout=9",
                    "container=5",
                    "guard.pause_at_c=1e999",
                    "description=*a",
                ]
            ),
        ),
        max_size=3,
    ),
)
def test_random_names_and_overrides(name: str, overrides: list[str]) -> None:
    every_command(PARENT.replace("name: p", "name: fz").encode(), name=name, overrides=tuple(overrides))
