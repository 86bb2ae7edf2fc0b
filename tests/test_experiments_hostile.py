"""Experiment files that cannot hurt: each finding of the attack on the loader, as a test.

A hostile file must end in one short error line (exit 2), promptly, and never
reach outside the experiments directory, the harness's own flags or another
run's capture.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.experiments.store import ExperimentStore
from support.experiment_files import LONGEST_ERROR, PARENT, cli, one_error_line, planned, write

REPO = Path(__file__).resolve().parent.parent
BASE = ["--rollout-batch-size", "32", "--n-samples-per-prompt", "8", "--num-rollout", "12", "--seed", "1"]
# Generous: a hang guard, not a speed target (bench/hostile_experiments.py prints the figures).
HANG_GUARD_S = 20


def harness(directory: Path, *args: str) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess, killed (and the test failed) if it hangs.

    In process, a hang inside C code (repr or validation of an expanded bomb)
    cannot be interrupted, so the hang guard needs a process of its own.
    """
    return subprocess.run(
        [sys.executable, "-m", "harness", *args, "--experiments-dir", str(directory)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )


def one_error_line_of(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    assert len(lines[0]) <= LONGEST_ERROR, lines[0][:500]
    return lines[0]


# --- path escapes ------------------------------------------------------------------------


@pytest.mark.parametrize("parent", ["../outside/evil", "../../outside/evil", "./parent", "sub/parent", "ABSOLUTE"])
def test_extends_takes_a_name_never_a_path(exp_dir: Path, parent: str) -> None:
    outside = exp_dir.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "evil.yaml").write_text(
        "name: evil\nsteps: 1\nimage: evil:latest\ncontainer: {volumes: ['/:/host:rw']}\n"
    )
    (exp_dir / "sub").mkdir(exist_ok=True)
    write(exp_dir / "sub", "parent", PARENT)
    if parent == "ABSOLUTE":
        parent = str(outside / "evil")
    write(exp_dir, "child", f"name: child\nextends: {parent}\n")
    line = one_error_line(cli(exp_dir, "run", "child", "--dry-run"))
    assert "child.yaml: extends:" in line and "not an experiment name" in line
    assert "evil:latest" not in line


@pytest.mark.parametrize("name", ["../outside/evil", "/etc/passwd", "./parent", "sub/parent"])
def test_the_command_line_takes_a_name_never_a_path(exp_dir: Path, name: str) -> None:
    outside = exp_dir.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "evil.yaml").write_text("name: evil\nsteps: 1\n")
    line = one_error_line(cli(exp_dir, "run", name, "--dry-run"))
    assert "not an experiment name" in line


def test_a_sweep_names_its_experiment_never_a_path(exp_dir: Path) -> None:
    outside = exp_dir.parent / "outside"
    outside.mkdir()
    (outside / "evil.yaml").write_text("name: evil\nsteps: 1\n")
    write(exp_dir, "sw", "sweep: ../outside/evil\nseeds: [1, 2]\n")
    line = one_error_line(cli(exp_dir, "sweep", "sw", "--dry-run"))
    assert "sw.yaml: sweep:" in line and "not an experiment name" in line


# --- YAML bombs and bad files ------------------------------------------------------------


def alias_bomb(levels: int, width: int = 10, key: str = "description") -> str:
    lines = ["name: bomb", "steps: 1", "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{refs}]")
    lines.append(f"{key}: *a{levels - 1}")
    return "\n".join(lines) + "\n"


@pytest.mark.integration
@pytest.mark.parametrize("key", ["description", "extends"])
def test_an_alias_bomb_is_refused_promptly_in_one_short_line(exp_dir: Path, key: str) -> None:
    write(exp_dir, "bomb", alias_bomb(9, key=key))  # 10^9 strings once expanded
    line = one_error_line_of(harness(exp_dir, "show", "bomb"))
    assert "bomb.yaml" in line and "alias" in line


@pytest.mark.integration
def test_a_small_bomb_gives_a_short_message_not_the_expanded_input(exp_dir: Path) -> None:
    write(exp_dir, "bomb", alias_bomb(6))  # 10^6: small enough to expand, far too big to print
    line = one_error_line_of(harness(exp_dir, "show", "bomb"))
    assert "bomb.yaml" in line and line.count("lol") <= 20


@pytest.mark.integration
def test_deep_nesting_is_refused_in_one_line(exp_dir: Path) -> None:
    (exp_dir / "deep.yaml").write_text("name: deep\nsteps: 1\ndescription: " + "[" * 50_000 + "]" * 50_000 + "\n")
    line = one_error_line_of(harness(exp_dir, "show", "deep"))
    assert "deep.yaml" in line and "nested" in line


def test_an_oversized_file_is_refused_without_being_parsed(exp_dir: Path) -> None:
    (exp_dir / "huge.yaml").write_text("name: huge\nsteps: 1\ndescription: " + "x" * 20_000_000 + "\n")
    line = one_error_line(cli(exp_dir, "show", "huge"))
    assert "huge.yaml" in line and "larger than" in line


@pytest.mark.parametrize(
    "content",
    [b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe\x00\x00" * 64, "name: caf\xe9\nsteps: 1\n".encode("latin-1")],
    ids=["binary", "latin-1"],
)
def test_a_file_that_is_not_utf8_text_is_named_and_exits_2(exp_dir: Path, content: bytes) -> None:
    (exp_dir / "bad.yaml").write_bytes(content)
    line = one_error_line(cli(exp_dir, "show", "bad"))
    assert "bad.yaml" in line and "not UTF-8 text" in line


@pytest.mark.integration
def test_ls_marks_hostile_files_broken_and_lists_the_rest(exp_dir: Path) -> None:
    (exp_dir / "binary.yaml").write_bytes(b"\x00\xff\xfe" * 100)
    (exp_dir / "deep.yaml").write_text("name: deep\nsteps: 1\ndescription: " + "[" * 50_000 + "]" * 50_000 + "\n")
    write(exp_dir, "bomb", alias_bomb(9))
    write(exp_dir, "ok", "name: ok\nextends: parent\ndescription: Fine\n")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "ls", "--experiments-dir", str(exp_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "250"},
    )
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[2:]}  # piped: title, header, a line a file
    assert "broken" in rows["binary"] and "not UTF-8 text" in rows["binary"]
    assert "broken" in rows["deep"] and "broken" in rows["bomb"]
    assert "broken" not in rows["ok"] and "parent" in rows["ok"] and "broken" not in rows["parent"]
    assert all(len(line) <= 250 for line in done.stdout.splitlines())


# --- validation bypass: the harness's own flags ------------------------------------------------


@pytest.mark.parametrize(
    "args",
    ['{foo: [x, --num-rollout, "99"]}', '{colocate: "--num-rollout=99"}', '{foo: "--seed"}', "{lr: [-x]}"],
)
def test_no_value_in_miles_args_is_a_flag(exp_dir: Path, args: str) -> None:
    write(exp_dir, "sneak", f"name: sneak\nextends: parent\nmiles:\n  args: {args}\n")
    line = one_error_line(cli(exp_dir, "run", "sneak", "--dry-run"))
    assert "sneak.yaml: miles.args." in line and "flag" in line


@pytest.mark.parametrize("name", ["num-rollout=99", "foo bar", "a=b"])
def test_flag_names_are_plain_words(exp_dir: Path, name: str) -> None:
    write(exp_dir, "sneak", f"name: sneak\nextends: parent\nmiles:\n  args: {{'{name}': 1}}\n")
    line = one_error_line(cli(exp_dir, "run", "sneak", "--dry-run"))
    assert "sneak.yaml: miles.args" in line


@pytest.mark.parametrize(
    "extra",
    ["--num-rollout=99", "--seed=5", "--rollout-seed 5", "--foo --num-rollout 3"],
)
def test_owned_flags_cannot_come_through_extra_args_in_either_form(exp_dir: Path, extra: str) -> None:
    write(exp_dir, "sneak", f"name: sneak\nextends: parent\nmiles:\n  extra_args: '{extra}'\n")
    line = one_error_line(cli(exp_dir, "run", "sneak", "--dry-run"))
    assert "sneak.yaml: miles.extra_args:" in line and ("`steps`" in line or "`seed`" in line)


def test_owned_flags_cannot_be_set_through_args_with_a_hint(exp_dir: Path) -> None:
    write(exp_dir, "sneak", "name: sneak\nextends: parent\nmiles:\n  args: {rollout-seed: 4}\n")
    line = one_error_line(cli(exp_dir, "run", "sneak", "--dry-run"))
    assert "sneak.yaml: miles.args" in line and "`seed`" in line


def test_the_equals_form_reaches_the_over_sampling_check(exp_dir: Path) -> None:
    write(exp_dir, "small", "name: small\nextends: parent\nmiles:\n  extra_args: --over-sampling-batch-size=16\n")
    line = one_error_line(cli(exp_dir, "run", "small", "--dry-run"))
    assert "small.yaml: miles.extra_args:" in line
    assert "--over-sampling-batch-size 16 is below --rollout-batch-size 32" in line


def test_a_batch_size_in_the_equals_form_is_read_too(exp_dir: Path) -> None:
    write(
        exp_dir,
        "small",
        "name: small\nextends: parent\nmiles:\n  extra_args: --rollout-batch-size=64 --over-sampling-batch-size 48\n",
    )
    line = one_error_line(cli(exp_dir, "run", "small", "--dry-run"))
    assert "small.yaml: miles.extra_args" in line and "--rollout-batch-size" in line


def test_over_sampling_in_args_against_a_batch_size_in_the_equals_form(exp_dir: Path) -> None:
    write(
        exp_dir,
        "small",
        "name: small\nextends: parent\nmiles:\n  args: {rollout-batch-size: 64}\n"
        "  extra_args: --over-sampling-batch-size=48\n",
    )
    line = one_error_line(cli(exp_dir, "run", "small", "--dry-run"))
    assert "--over-sampling-batch-size 48 is below --rollout-batch-size 64" in line


def test_a_flag_given_twice_with_different_values_names_both_places(exp_dir: Path) -> None:
    write(exp_dir, "twice", "name: twice\nextends: parent\nmiles:\n  args: {lr: 2e-6}\n  extra_args: --lr=3e-6\n")
    line = one_error_line(cli(exp_dir, "run", "twice", "--dry-run"))
    assert "--lr" in line and "twice.yaml: miles.args.lr" in line and "twice.yaml: miles.extra_args" in line
    write(exp_dir, "twice", "name: twice\nextends: parent\nmiles:\n  extra_args: --eps-clip 0.3 --eps-clip=0.2\n")
    line = one_error_line(cli(exp_dir, "run", "twice", "--dry-run"))
    assert "--eps-clip" in line and "given twice" in line


def test_a_flag_given_twice_with_the_same_value_is_fine(exp_dir: Path) -> None:
    write(exp_dir, "same", "name: same\nextends: parent\nmiles:\n  args: {lr: 2e-6}\n  extra_args: --lr 2e-6\n")
    planned(cli(exp_dir, "run", "same", "--dry-run"))


# --- one capture per run ----------------------------------------------------------------------


def test_a_seed_run_and_an_experiment_of_that_name_collide(exp_dir: Path) -> None:
    write(exp_dir, "foo", "name: foo\nextends: parent\n")
    write(exp_dir, "foo-s2", "name: foo-s2\nextends: parent\n")
    line = one_error_line(cli(exp_dir, "sweep", "foo", "--seeds", "1", "2", "--dry-run"))
    assert "foo.yaml" in line and "foo-s2.yaml" in line and "foo-s2" in line
    line = one_error_line(cli(exp_dir, "run", "foo-s2", "--dry-run"))
    assert "foo.yaml" in line and "foo-s2.yaml" in line
    planned(cli(exp_dir, "run", "foo", "--dry-run"))  # seed 1 makes run foo: no collision
    with pytest.raises(Exception, match="foo-s2.yaml"):
        ExperimentStore(exp_dir, BASE).load("foo", seed=2)


def test_names_the_capture_tree_uses_are_not_experiment_names(exp_dir: Path) -> None:
    write(exp_dir, "summary", "name: summary\nextends: parent\n")
    line = one_error_line(cli(exp_dir, "run", "summary", "--dry-run"))
    assert "summary.yaml: name:" in line and "reserved" in line
    line = one_error_line(cli(exp_dir, "run", ".replaced", "--dry-run"))
    assert "not an experiment name" in line


# --- rich markup and blame --------------------------------------------------------------------


def test_values_print_exactly_as_written_in_the_dry_run(exp_dir: Path) -> None:
    # (An image reference cannot hold brackets: test_experiments_inputs refuses them.)
    write(
        exp_dir,
        "marked",
        "name: marked\nextends: parent\n"
        "description: 'a [red]b[/red] :smile:'\ncontainer: {volumes: ['/d[/x]:/data:ro'], env: {MODE: '[/y]'}}\n",
    )
    plan = planned(cli(exp_dir, "run", "marked", "--dry-run"))
    assert "/d[/x] -> /data" in plan
    assert "MODE=[/y]" in plan
    listed = cli(exp_dir, "ls")
    assert listed.exit_code == 0, listed.output
    assert "a [red]b[/red] :smile:" in listed.stdout
    line = one_error_line(cli(exp_dir, "run", "marked", "--dry-run", "--set", "image=:smile: [/x]", "--set", "steps=x"))
    assert line.startswith("error: --set steps=x: ")
    line = one_error_line(cli(exp_dir, "run", "marked", "--dry-run", "--set", "steps=':rocket: [/x]'"))
    assert ":rocket: [/x]" in line


def test_a_set_override_is_blamed_on_the_set(exp_dir: Path) -> None:
    line = one_error_line(cli(exp_dir, "run", "parent", "--dry-run", "--set", "nosuch.key=1"))
    assert line.startswith("error: --set nosuch.key=1: ")
    assert "unknown key" in line and "parent.yaml" not in line
    line = one_error_line(cli(exp_dir, "run", "parent", "--dry-run", "--set", "steps=many"))
    assert line.startswith("error: --set steps=many: ") and "integer" in line


def test_a_file_key_is_blamed_on_the_file(exp_dir: Path) -> None:
    write(exp_dir, "child", "name: child\nextends: parent\nnosuch: 1\n")
    line = one_error_line(cli(exp_dir, "run", "child", "--dry-run", "--set", "steps=2"))
    assert line.startswith(f"error: {exp_dir / 'child.yaml'}: nosuch: unknown key")


def test_a_nul_character_cannot_reach_an_environment_or_a_command_line(exp_dir: Path) -> None:
    write(exp_dir, "nul", 'name: nul\nextends: parent\ncontainer: {env: {HF_TOKEN: "a\\0b"}}\n')
    line = one_error_line(cli(exp_dir, "run", "nul", "--dry-run"))
    assert "nul.yaml: container.env.HF_TOKEN: contains a NUL character" in line
    write(exp_dir, "nul", 'name: nul\nextends: parent\nengine: process\ncommand: ["python3", "a\\0b"]\n')
    assert "nul.yaml: command.1: contains a NUL character" in one_error_line(cli(exp_dir, "run", "nul", "--dry-run"))


def test_long_keys_are_cut_short_in_messages(exp_dir: Path) -> None:
    write(exp_dir, "keys", "name: keys\nextends: parent\n" + "k" * 1000 + ": 1\n")
    assert "unknown key" in one_error_line(cli(exp_dir, "show", "keys"))
    write(exp_dir, "keys", "name: keys\nextends: parent\nmiles:\n  args:\n    " + "a" * 1000 + ": [--x]\n")
    assert "would be read as a flag" in one_error_line(cli(exp_dir, "show", "keys"))
    line = one_error_line(cli(exp_dir, "show", "parent", "--set", "a." * 3000 + "b=1"))
    assert "more than 32 keys deep" in line
