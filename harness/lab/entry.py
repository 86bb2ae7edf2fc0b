"""The lab image's entry: check the data, start Ray, submit Miles's train.py to it.

Standard library only: the image runs this file as `python3 entry.py` next to
`milesargv.py`, `milesnames.py` and `base-run.args`. The trainer's argv is

    python3 train.py <MILES_ARGS, or the base run> <MILES_EXTRA_ARGS> <entry arguments>

MILES_ARGS and MILES_EXTRA_ARGS are split like a shell splits words and never
evaluated. The command goes through `ray job submit` as Miles's own scripts
do; the entry streams its output and exits with its exit code.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import string
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from harness.lab import milesargv, milesnames
else:
    try:
        from . import milesargv, milesnames  # imported as harness.lab.entry
    except ImportError:
        import milesargv  # run as a script in the image, next to this file
        import milesnames

PROG = "miles-gb10-lab"
EXIT_USAGE = 2
EXIT_NO_DATA = 66  # EX_NOINPUT
RAY_ADDRESS = "http://127.0.0.1:8265"
# Set for the job as well as for the container: Ray's workers get them either way.
JOB_ENV_DEFAULTS = {
    "PYTHONUNBUFFERED": "1",
    "RAY_DEDUP_LOGS": "0",
    "RAY_memory_monitor_refresh_ms": "0",  # Ray misreads GB10's unified memory
}
DATA_FLAGS = ((milesnames.HF_CHECKPOINT_FLAG, "model"), (milesnames.PROMPT_DATA_FLAG, "data set"))
# Ray's own submission id alphabet (ray.dashboard.modules.job.job_manager).
_ID_CHARS = sorted(set(string.ascii_letters + string.digits) - set("IloO0"))


class EntryError(Exception):
    """A one-line reason to stop before starting anything, with its exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def split_words(name: str, value: str) -> list[str]:
    """Split an environment variable like a shell would, without evaluating it."""
    try:
        return shlex.split(value)
    except ValueError as err:
        raise EntryError(f"{PROG}: cannot split {name} like a shell: {err}", EXIT_USAGE) from None


def trainer_words(
    env: Mapping[str, str], argv: Sequence[str] = (), base_file: Path = milesargv.BASE_RUN_FILE
) -> list[str]:
    """train.py's arguments: MILES_ARGS (or the base run), then MILES_EXTRA_ARGS, then argv."""
    miles_args = env.get("MILES_ARGS", "")
    if miles_args.strip():
        words = split_words("MILES_ARGS", miles_args)
    else:
        words = milesargv.read_base_args(base_file)
    return [*words, *split_words("MILES_EXTRA_ARGS", env.get("MILES_EXTRA_ARGS", "")), *argv]


def check_data(words: Sequence[str], exists: Callable[[str], bool] = os.path.exists) -> None:
    """Stop with one line naming what is missing when the model or data set is not there."""
    values = milesargv.flag_values(words)
    for flag, what in DATA_FLAGS:
        paths = values.get(flag)
        if not paths:
            raise EntryError(f"{PROG}: the trainer arguments name no {what} ({flag})", EXIT_USAGE)
        for path in paths:
            if not exists(path):
                raise EntryError(
                    f"{PROG}: {what} not found at {path} ({flag}); fetch it on the GB10 host with 'make data'",
                    EXIT_NO_DATA,
                )


def ray_start_argv(words: Sequence[str]) -> list[str]:
    """A one-node Ray head with as many GPUs as the actor asks for (default 1)."""
    gpus = (milesargv.flag_values(words).get(milesnames.ACTOR_NUM_GPUS_PER_NODE_FLAG) or ["1"])[0]
    return ["ray", "start", "--head", "--node-ip-address", "127.0.0.1", "--num-gpus", gpus, "--disable-usage-stats"]


def job_env(env: Mapping[str, str]) -> dict[str, str]:
    return {key: env.get(key, default) for key, default in JOB_ENV_DEFAULTS.items()}


def job_submit_argv(words: Sequence[str], submission_id: str, env: Mapping[str, str]) -> list[str]:
    """`ray job submit ... -- python3 train.py WORDS`: Ray quotes each word for its shell."""
    runtime_env = json.dumps({"env_vars": job_env(env)}, sort_keys=True, allow_nan=False)
    return [
        "ray",
        "job",
        "submit",
        f"--address={RAY_ADDRESS}",
        f"--submission-id={submission_id}",
        f"--runtime-env-json={runtime_env}",
        "--",
        "python3",
        "train.py",
        *words,
    ]


def new_submission_id() -> str:
    """An id shaped like Ray's own (`raysubmit_` + 16 characters), known before submitting."""
    return "raysubmit_" + "".join(secrets.choice(_ID_CHARS) for _ in range(16))


class Runner:
    """Runs Ray's commands in the Miles directory; a SIGTERM or SIGINT stops the job."""

    def __init__(self, miles_dir: str) -> None:
        self.miles_dir = miles_dir
        self.child: Optional[subprocess.Popen[bytes]] = None
        self.stopped_by: Optional[int] = None

    def on_signal(self, signum: int, _frame: object) -> None:
        self.stopped_by = self.stopped_by or signum
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)

    def call(self, argv: Sequence[str], timeout: Optional[float] = None) -> int:
        self.child = subprocess.Popen(list(argv), cwd=self.miles_dir)
        try:
            return self.child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.child.kill()
            return self.child.wait()
        finally:
            self.child = None

    def run(self, words: Sequence[str], env: Mapping[str, str]) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.on_signal)
        submission_id = new_submission_id()
        code = self.call(ray_start_argv(words))
        if code != 0 and not self.stopped_by:
            print(f"{PROG}: ray start failed with exit code {code}", file=sys.stderr)
            return code
        if not self.stopped_by:
            code = self.call(job_submit_argv(words, submission_id, env))
        if self.stopped_by:
            return self.stop(submission_id, self.stopped_by)
        return code

    def stop(self, submission_id: str, signum: int) -> int:
        """After signal `signum`: stop the job and Ray (each bounded in time), exit 128 + signal."""
        name = signal.Signals(signum).name
        print(f"{PROG}: {name}: stopping job {submission_id} and Ray", file=sys.stderr)
        self.call(["ray", "job", "stop", f"--address={RAY_ADDRESS}", submission_id], timeout=60)
        self.call(["ray", "stop", "--force"], timeout=60)
        return 128 + signum


def main(argv: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None) -> int:
    env = os.environ if env is None else env
    argv = sys.argv[1:] if argv is None else argv
    try:
        words = trainer_words(env, argv)
        check_data(words)
    except EntryError as err:
        print(err, file=sys.stderr)
        return err.exit_code
    return Runner(env.get("MILES_DIR") or "/root/miles").run(words, env)


if __name__ == "__main__":
    sys.exit(main())
