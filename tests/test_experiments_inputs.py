"""Input that got past the checks: abbreviated trainer flags, numbers too big for a name, image references.

Each case is one the attack found, plus other members of its class: every
flag the harness reads or sets, every number that becomes part of a name,
every way an image reference can be something else.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.experiments.flags import HARNESS_FLAGS, refused_flag
from support.experiment_files import cli, one_error_line, write
from support.properties import examples

HARNESS_DIR = Path(__file__).resolve().parent.parent / "harness"
FULL_NAME = "write the full flag name"


# --- abbreviated trainer flags -----------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        "--rollout-batch 64 --over-sampling-batch-size 48",
        "--over-sampling 8",
        "--n-samples 4",
        "--dynamic-sampling-filter=x.y",
        "--rm-t deepscaler",
        "--hf-check /data/m",
        "--actor-num-gpus 2",
    ],
)
def test_an_abbreviated_flag_in_extra_args_is_refused(exp_dir: Path, extra: str) -> None:
    write(exp_dir, "abbr", f"name: abbr\nextends: parent\nmiles:\n  extra_args: '{extra}'\n")
    line = one_error_line(cli(exp_dir, "show", "abbr"))
    assert "abbr.yaml: miles.extra_args:" in line and FULL_NAME in line


@pytest.mark.parametrize("flag", ["rollout-batch", "over-sampling", "n-samples-per", "colocat"])
def test_an_abbreviated_flag_in_args_is_refused(exp_dir: Path, flag: str) -> None:
    write(exp_dir, "abbr", f"name: abbr\nextends: parent\nmiles:\n  args: {{{flag}: 64}}\n")
    line = one_error_line(cli(exp_dir, "show", "abbr"))
    assert f"abbr.yaml: miles.args.{flag}:" in line and FULL_NAME in line


@pytest.mark.parametrize("word", ["--rollout-batch", "--over-sampling=8", "--see", "--num-roll"])
def test_an_abbreviated_flag_in_the_command_is_refused(exp_dir: Path, word: str) -> None:
    write(
        exp_dir,
        "abbr",
        f"name: abbr\nsteps: 1\nengine: process\ncommand: [python3, train.py, '{word}', '8']\n",
    )
    line = one_error_line(cli(exp_dir, "show", "abbr"))
    assert "abbr.yaml: command:" in line
    assert FULL_NAME in line or "`seed`" in line or "`steps`" in line


def test_a_command_that_runs_a_trainer_bare_may_name_its_flags_in_full(exp_dir: Path) -> None:
    words = "[python3, train.py, --num-rollout, '2', --rollout-batch-size, '8', --seed, '1']"
    write(exp_dir, "bare", f"name: bare\nsteps: 2\nengine: process\ncommand: {words}\n")
    shown = cli(exp_dir, "show", "bare")
    assert shown.exit_code == 0, shown.output


@pytest.mark.parametrize("assignment", ["miles.args.rollout-batch=64", "miles.extra_args=--over-sampling 8"])
def test_an_abbreviated_flag_given_with_set_is_refused(exp_dir: Path, assignment: str) -> None:
    line = one_error_line(cli(exp_dir, "run", "parent", "--dry-run", "--set", assignment))
    assert "--set miles." in line and FULL_NAME in line


def test_ls_marks_the_abbreviation_broken_rather_than_show_the_wrong_figures(exp_dir: Path) -> None:
    write(exp_dir, "abbr", "name: abbr\nextends: parent\nmiles:\n  extra_args: '--over-sampling 8'\n")
    listed = cli(exp_dir, "ls")
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.stdout.splitlines() if line.lstrip("│ ").startswith("abbr"))
    assert "broken" in row and "8 for 32" not in row
    assert "32 for 32" in listed.stdout  # parent still listed


@pytest.mark.parametrize(
    "flag", ["--rollout-batch-size", "--rollout-num-gpus", "--rollout-num-gpus-per-engine", "--lr", "--seedling", "-s"]
)
def test_full_names_and_other_flags_pass(flag: str) -> None:
    assert refused_flag(flag) is None


def test_a_prefix_of_several_flags_names_them() -> None:
    refused = refused_flag("--rollout")
    assert refused is not None and FULL_NAME in refused and "--rollout-batch-size" in refused


def test_every_strict_prefix_of_a_flag_the_harness_reads_or_sets_is_refused() -> None:
    for flag in HARNESS_FLAGS:
        for end in range(3, len(flag)):
            prefix = flag[:end]
            if prefix in HARNESS_FLAGS:
                continue  # a full name of its own: argparse takes it as it is
            assert refused_flag(prefix) is not None, prefix


def _flag_literals(path: Path) -> set[str]:
    """Every `--flag` string in a module, whole words only."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"--[a-z][a-z0-9-]*", node.value):
                found.add(node.value)
    return found


# The modules that read or set the trainer's flags, and the words in them that are not Miles flags.
TRAINER_FLAG_READERS = {
    "lab/milesnames.py": set(),
    "experiments/flags.py": set(),
    "experiments/store.py": {"--name", "--set"},
    "summary/run_config.py": set(),
    "mileslog/keys.py": set(),
    "lab/entry.py": {"--head", "--node-ip-address", "--num-gpus", "--disable-usage-stats", "--force"},
    "sim/config.py": set(),
}


@pytest.mark.parametrize("module", sorted(TRAINER_FLAG_READERS))
def test_every_flag_the_harness_reads_or_sets_is_in_the_list(module: str) -> None:
    literals = _flag_literals(HARNESS_DIR / module) - TRAINER_FLAG_READERS[module]
    assert literals <= set(HARNESS_FLAGS), sorted(literals - set(HARNESS_FLAGS))


def test_the_cluster_s_trainer_flags_are_in_the_list() -> None:
    for flag in ("--colocate", "--rollout-num-gpus", "--actor-num-nodes", "--actor-num-gpus-per-node"):
        assert flag in HARNESS_FLAGS


# --- numbers that become names -----------------------------------------------------------

SEED_RANGE = "1 to 4294967295"


@pytest.mark.parametrize("seed", ["9" * 300, str(2**32), "0", "-1"])
def test_a_seed_out_of_the_32_bit_range_is_one_line_naming_the_file(exp_dir: Path, seed: str) -> None:
    write(exp_dir, "big", f"name: big\nextends: parent\nseed: {seed}\n")
    line = one_error_line(cli(exp_dir, "show", "big"))
    assert "big.yaml: seed:" in line and SEED_RANGE in line and "32-bit" in line
    assert len(line) < 300


def test_the_largest_seed_is_taken(exp_dir: Path) -> None:
    write(exp_dir, "big", f"name: big\nextends: parent\nseed: {2**32 - 1}\n")
    shown = cli(exp_dir, "show", "big")
    assert shown.exit_code == 0, shown.output
    assert f"seed: {2**32 - 1}" in shown.stdout


@pytest.mark.parametrize("route", ["--seed", "--set"])
def test_a_huge_seed_from_the_command_line_is_refused(exp_dir: Path, route: str) -> None:
    args = ["--seed", "9" * 300] if route == "--seed" else ["--set", "seed=" + "9" * 300]
    done = cli(exp_dir, "run", "parent", "--dry-run", *args)
    line = one_error_line(done)
    assert SEED_RANGE in line or "seed" in line


def test_a_sweep_s_huge_seed_is_refused(exp_dir: Path) -> None:
    write(exp_dir, "sw", f"sweep: parent\nseeds: [1, {'9' * 300}]\n")
    line = one_error_line(cli(exp_dir, "sweep", "sw", "--dry-run"))
    assert "sw.yaml: seeds" in line and SEED_RANGE in line


def test_a_number_beyond_python_s_digit_limit_is_one_plain_line(exp_dir: Path) -> None:
    write(exp_dir, "huge", "name: huge\nextends: parent\nseed: " + "9" * 5000 + "\n")
    line = one_error_line(cli(exp_dir, "show", "huge"))
    assert "huge.yaml" in line and "set_int_max_str_digits" not in line and "digits" in line


def test_ls_lists_the_other_files_when_a_seed_is_huge(exp_dir: Path) -> None:
    write(exp_dir, "big", "name: big\nextends: parent\nseed: " + "9" * 300 + "\n")
    write(exp_dir, "other", "name: other\nextends: parent\n")
    listed = cli(exp_dir, "ls")
    assert listed.exit_code == 0, listed.output
    assert "internal error" not in listed.output
    lines = listed.stdout.splitlines()
    assert any("big" in line and "broken" in line for line in lines)
    assert any(line.lstrip("│ ").startswith("other") for line in lines)
    assert any(line.lstrip("│ ").startswith("parent") for line in lines)


def test_steps_are_bounded(exp_dir: Path) -> None:
    write(exp_dir, "many", "name: many\nextends: parent\nsteps: " + "9" * 300 + "\n")
    line = one_error_line(cli(exp_dir, "show", "many"))
    assert "many.yaml: steps:" in line and "1000000" in line and "9" * 100 not in line


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("container.ulimits", "{memlock: " + "9" * 300 + "}"),
        ("container.gpus", "[" + "9" * 300 + "]"),
        ("container.shm_size", "'" + "9" * 300 + "g'"),
    ],
)
def test_other_numbers_docker_reads_are_bounded(exp_dir: Path, key: str, value: str) -> None:
    section, field = key.split(".")
    write(exp_dir, "big", f"name: big\nextends: parent\n{section}:\n  {field}: {value}\n")
    line = one_error_line(cli(exp_dir, "show", "big"))
    assert f"big.yaml: {key}" in line and "9" * 100 not in line
    assert "64-bit" in line or "0 to 255" in line


# --- image references ---------------------------------------------------------------------


REFUSED_IMAGES = [
    "--privileged",
    "-v",
    "miles gb10",
    "Miles-GB10-Lab:latest",
    "miles-gb10-lab:",
    "miles-gb10-lab:-x",
    "miles-gb10-lab:" + "t" * 129,
    "miles-gb10-lab@sha256:abc",
    "a" * 256,
    "miles..lab",
    "miles-gb10-lab:latest\n--privileged",
    "",
    "/miles",
    "miles/",
    "host:port/x",
    "[::1]:5000/lab:latest",
]
TAKEN_IMAGES = [
    "miles-gb10-lab:latest",
    "miles-gb10-lab",
    "miles-gb10-lab/sim:latest",
    "ubuntu",
    "library/ubuntu:22.04",
    "nvcr.io/nvidia/pytorch:25.01-py3",
    "localhost:5000/a_b__c/d-e:v1.0",
    "Registry.Example.com/team/app:TAG_1",
    "miles@sha256:" + "a" * 64,
    "miles:latest@sha256:" + "0123456789abcdef" * 4,
]


@pytest.mark.parametrize("image", REFUSED_IMAGES)
def test_an_image_that_is_not_a_docker_reference_is_refused_in_one_line(exp_dir: Path, image: str) -> None:
    (exp_dir / "img.yaml").write_text(yaml.safe_dump({"name": "img", "extends": "parent", "image": image}))
    line = one_error_line(cli(exp_dir, "run", "img", "--dry-run"))
    assert "img.yaml: image:" in line and "Docker image reference" in line
    assert "docker run" not in line


@pytest.mark.parametrize("image", TAKEN_IMAGES)
def test_docker_references_pass(exp_dir: Path, image: str) -> None:
    (exp_dir / "img.yaml").write_text(yaml.safe_dump({"name": "img", "extends": "parent", "image": image}))
    shown = cli(exp_dir, "show", "img")
    assert shown.exit_code == 0, shown.output


@pytest.mark.docker
@pytest.mark.integration
def test_the_engine_agrees_with_the_grammar() -> None:
    """Docker's own parser, asked about each reference: refused ones are an invalid reference format to it too."""
    import subprocess

    from harness.experiments.naming import check_image

    for image in [*REFUSED_IMAGES, *TAKEN_IMAGES]:
        if not image or image[0] in "-/" or image.endswith("/") or "\n" in image:
            continue  # the command line reads these otherwise, and a / at either end is lost in the request's URL
        done = subprocess.run(["docker", "image", "inspect", "--", image], capture_output=True, text=True, timeout=60)
        invalid = "invalid reference format" in done.stderr or "must not be more than 255" in done.stderr
        try:
            check_image(image)
            taken = True
        except ValueError:
            taken = False
        assert taken != invalid, (image, done.stderr.strip())


def _argparse_reading(word: str) -> str | None:
    """The flag Python's argparse (as Miles uses it: abbreviations allowed) reads `word` as, among the base run's flags
    and the harness's; None when it reads none (unknown, or ambiguous)."""
    import argparse

    from harness.lab import milesargv

    class Quiet(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise ValueError(message)

    parser = Quiet(add_help=False)
    names = {flag.name for flag in milesargv.parse_flags(milesargv.read_base_args()) if flag.name} | set(HARNESS_FLAGS)
    for name in sorted(names):
        parser.add_argument(name, dest=name, nargs="?")
    try:
        known, _ = parser.parse_known_args([word, "1"])
    except ValueError:
        return None  # ambiguous: Miles would stop, which the harness refuses before that
    return next((name for name, value in vars(known).items() if value is not None), None)


@given(
    st.one_of(
        st.sampled_from(HARNESS_FLAGS).flatmap(lambda flag: st.integers(3, len(flag)).map(lambda end: flag[:end])),
        st.from_regex(r"--[a-z][a-z-]{0,20}", fullmatch=True),
    )
)
@settings(max_examples=examples(300))
def test_no_word_argparse_would_expand_to_a_harness_flag_gets_past(word: str) -> None:
    read_as = _argparse_reading(word)
    if read_as in HARNESS_FLAGS and read_as != word:
        assert refused_flag(word) is not None, (word, read_as)
