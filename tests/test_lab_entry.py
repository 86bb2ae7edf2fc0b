"""The lab image's entry without Docker: argv assembly, the data check, Ray's commands.

The last tests run entry.py as a script, as the image does, with the stand-in
`ray` and train.py of tests/images/miles-standin on this machine.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.lab import entry, milesargv
from support.timing import scaled

REPO_ROOT = Path(__file__).resolve().parent.parent
STANDIN = REPO_ROOT / "tests" / "images" / "miles-standin"
BASE = milesargv.read_base_args()
FILTER_ARGS = (
    "--dynamic-sampling-filter-path "
    "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter "
    "--over-sampling-batch-size 48"
)


def test_without_miles_args_the_base_run_comes_first_then_the_extra_words():
    words = entry.trainer_words({"MILES_EXTRA_ARGS": FILTER_ARGS})

    assert words == [*BASE, *FILTER_ARGS.split()]


@pytest.mark.parametrize("blank", ["", "   ", "\n"])
def test_blank_miles_args_mean_the_base_run(blank):
    assert entry.trainer_words({"MILES_ARGS": blank}) == BASE


def test_miles_args_replace_the_base_run_and_entry_arguments_come_last():
    env = {"MILES_ARGS": shlex.join(["--hf-checkpoint", "/m dir", "--lr", "1e-6"]), "MILES_EXTRA_ARGS": "--x 1"}

    assert entry.trainer_words(env, ["--y", "2"]) == [
        "--hf-checkpoint",
        "/m dir",
        "--lr",
        "1e-6",
        "--x",
        "1",
        "--y",
        "2",
    ]


def test_shell_syntax_in_the_extra_args_stays_literal():
    words = entry.trainer_words({"MILES_EXTRA_ARGS": """--x "a b" '$(touch /tmp/pwned)' ; rm -rf / # not a comment"""})

    assert words[len(BASE) :] == [
        "--x",
        "a b",
        "$(touch /tmp/pwned)",
        ";",
        "rm",
        "-rf",
        "/",
        "#",
        "not",
        "a",
        "comment",
    ]


@pytest.mark.parametrize("name", ["MILES_ARGS", "MILES_EXTRA_ARGS"])
def test_an_unbalanced_quote_is_a_usage_error_naming_the_variable(name):
    with pytest.raises(entry.EntryError) as caught:
        entry.trainer_words({name: "--x 'unclosed"})

    assert caught.value.exit_code == 2
    assert str(caught.value) == f"miles-gb10-lab: cannot split {name} like a shell: No closing quotation"


def test_the_data_check_passes_when_both_paths_exist():
    entry.check_data(BASE, exists=lambda path: True)


@pytest.mark.parametrize(
    "missing, message",
    [
        (
            "/data/models/Qwen3-0.6B",
            "miles-gb10-lab: model not found at /data/models/Qwen3-0.6B (--hf-checkpoint); "
            "fetch it on the GB10 host with 'make data'",
        ),
        (
            "/data/gsm8k/train.parquet",
            "miles-gb10-lab: data set not found at /data/gsm8k/train.parquet (--prompt-data); "
            "fetch it on the GB10 host with 'make data'",
        ),
    ],
)
def test_a_missing_model_or_data_set_names_the_path_and_make_data(missing, message):
    with pytest.raises(entry.EntryError) as caught:
        entry.check_data(BASE, exists=lambda path: path != missing)

    assert caught.value.exit_code == entry.EXIT_NO_DATA == 66
    assert str(caught.value) == message


def test_the_data_check_reads_the_last_occurrence_of_a_flag(tmp_path):
    words = [*BASE, "--hf-checkpoint", str(tmp_path), "--prompt-data", str(tmp_path)]

    entry.check_data(words)


def test_arguments_without_a_model_flag_are_a_usage_error():
    with pytest.raises(entry.EntryError) as caught:
        entry.check_data(["--prompt-data", "/data/x"], exists=lambda path: True)

    assert caught.value.exit_code == 2
    assert "(--hf-checkpoint)" in str(caught.value)


def test_ray_starts_a_local_head_with_the_actor_gpus():
    assert entry.ray_start_argv(BASE) == [
        "ray",
        "start",
        "--head",
        "--node-ip-address",
        "127.0.0.1",
        "--num-gpus",
        "1",
        "--disable-usage-stats",
    ]
    assert entry.ray_start_argv(["--actor-num-gpus-per-node", "2"])[6] == "2"
    assert entry.ray_start_argv([])[6] == "1"


def test_the_job_is_submitted_as_miles_scripts_do_with_the_ray_environment():
    argv = entry.job_submit_argv(["--lr", "1e-6"], "raysubmit_abc", {"RAY_DEDUP_LOGS": "1"})

    assert argv[:3] == ["ray", "job", "submit"]
    assert argv[argv.index("--") :] == ["--", "python3", "train.py", "--lr", "1e-6"]
    assert "--address=http://127.0.0.1:8265" in argv
    assert "--submission-id=raysubmit_abc" in argv
    runtime = next(word for word in argv if word.startswith("--runtime-env-json="))
    assert json.loads(runtime.split("=", 1)[1]) == {
        "env_vars": {"PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "1", "RAY_memory_monitor_refresh_ms": "0"}
    }


def test_submission_ids_look_like_rays_own():
    ids = {entry.new_submission_id() for _ in range(50)}

    assert len(ids) == 50
    assert all(re.fullmatch(r"raysubmit_[a-km-zA-HJ-NP-Z1-9]{16}", i) for i in ids)


def test_main_stops_before_ray_with_one_line_when_data_is_missing(capsys):
    code = entry.main([], {"MILES_EXTRA_ARGS": FILTER_ARGS})

    out = capsys.readouterr()
    assert code == 66
    assert out.out == ""
    assert out.err.count("\n") == 1 and "make data" in out.err


# --- entry.py run as a script, with the stand-in ray and train.py ------------------------------


@pytest.fixture
def entry_env(tmp_path: Path) -> dict[str, str]:
    """Environment for entry.py on this machine: stand-in ray on PATH, a Miles dir, data paths."""
    if shutil.which("python3") is None:
        pytest.skip("the stand-in ray runs `python3 train.py`")
    bin_dir, miles = tmp_path / "bin", tmp_path / "miles"
    bin_dir.mkdir()
    miles.mkdir()
    shutil.copy(STANDIN / "ray", bin_dir / "ray")
    (bin_dir / "ray").chmod(0o755)
    shutil.copy(STANDIN / "train.py", miles / "train.py")
    model, dataset = tmp_path / "models" / "m", tmp_path / "train.parquet"
    model.mkdir(parents=True)
    dataset.write_bytes(b"")
    words = milesargv.apply_overrides(BASE, {"hf-checkpoint": str(model), "prompt-data": str(dataset)})
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "MILES_DIR": str(miles),
        "MILES_ARGS": shlex.join(words),
        "RAY_STANDIN_DIR": str(tmp_path),
    }


def start_entry(env: dict[str, str], *args: str) -> subprocess.Popen:
    script = REPO_ROOT / "harness" / "lab" / "entry.py"
    return subprocess.Popen(
        [sys.executable, str(script), *args], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def standin_train(stdout: str) -> dict:
    line = next(line for line in stdout.splitlines() if line.startswith("STANDIN-TRAIN "))
    return json.loads(line.removeprefix("STANDIN-TRAIN "))


@pytest.mark.integration
def test_the_script_submits_train_py_in_the_miles_dir_and_nothing_is_evaluated(entry_env, tmp_path):
    sentinel = tmp_path / "evaluated"
    extra = f"--x \"a b\" '$(touch {sentinel})' ; touch {sentinel}"
    proc = start_entry({**entry_env, "MILES_EXTRA_ARGS": extra})
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 0, out + err
    words = shlex.split(entry_env["MILES_ARGS"])
    assert standin_train(out)["argv"] == [
        "train.py",
        *words,
        "--x",
        "a b",
        f"$(touch {sentinel})",
        ";",
        "touch",
        str(sentinel),
    ]
    assert standin_train(out)["cwd"] == entry_env["MILES_DIR"]
    assert not sentinel.exists()


@pytest.mark.integration
def test_the_script_exits_143_on_sigterm_after_stopping_the_job_and_ray(entry_env):
    proc = start_entry({**entry_env, "MILES_EXTRA_ARGS": "--standin-sleep 60"})
    lines: list[str] = []
    deadline = time.monotonic() + scaled(30)
    while not any(line.startswith("STANDIN-TRAIN") for line in lines):
        assert time.monotonic() < deadline and proc.poll() is None, lines
        lines.append(proc.stdout.readline())

    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)

    assert proc.returncode == 143
    assert "[ray stand-in] ray job stop" in out and "[ray stand-in] ray stop --force" in out
    assert "SIGTERM: stopping job raysubmit_" in err
    trainer = standin_train("".join(lines))["pid"]
    deadline = time.monotonic() + scaled(10)  # `ray job stop` terminated the job's process group
    while running(trainer):
        assert time.monotonic() < deadline, f"train.py (pid {trainer}) still runs"
        time.sleep(0.1)


def running(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
