"""Miles-shaped log lines: Ray prefixes, Miles timestamps, metric dicts, the argument dump, Ray's job lines.

A metric line, as the simulator prints it (MILES-LOGS.md section 1):

    (RolloutManager pid=2411) [2026-10-02 09:14:03.512 rollout_manager] metrics.py:88 - perf 0: {...}

Timestamps use the newer Miles form `[YYYY-MM-DD HH:MM:SS.mmm procname]` in
local time, on the run's clock: the local time at start plus the clock's
simulated seconds, so the differences between timestamps agree with the perf
times printed beside them. Lines of the driver (`train.py` itself, and the
lines of `ray job submit`) have no Ray prefix. Each line is written whole and
flushed.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Iterable, Mapping, Protocol

RAY_DASHBOARD = "http://127.0.0.1:8265"
SGLANG_URLS = ["http://127.0.0.1:30000"]
_JOB_RULE = "-" * 42


@dataclass(frozen=True)
class Actor:
    """A Ray actor whose lines carry `(Name pid=N)` and its Miles process name."""

    name: str
    pid: int
    proc: str


class TextSink(Protocol):
    """Where the lines go: a text stream (stdout, a file, io.StringIO), or anything else that writes and flushes."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class LogWriter:
    """Writes lines to a text stream, one flushed line at a time, stamped on the run's clock."""

    def __init__(self, stream: TextSink, now: Callable[[], float], start: datetime) -> None:
        self._stream = stream
        self._now = now
        self._start = start

    def line(self, text: str) -> None:
        self._stream.write(text + "\n")
        self._stream.flush()

    def lines(self, texts: Iterable[str]) -> None:
        for text in texts:
            self.line(text)

    def moment(self) -> datetime:
        """The local time now on the run's clock: the start plus the clock's seconds."""
        return self._start + timedelta(seconds=self._now())

    def stamp(self, proc: str) -> str:
        moment = self.moment()
        return f"[{moment.strftime('%Y-%m-%d %H:%M:%S')}.{moment.microsecond // 1000:03d} {proc}]"

    def log(self, actor: Actor | None, where: str, message: str) -> None:
        """`(Actor pid=N) [stamp proc] where - message`; driver lines (actor None) have no prefix."""
        prefix = f"({actor.name} pid={actor.pid}) " if actor else ""
        self.line(f"{prefix}{self.stamp(actor.proc if actor else 'main')} {where} - {message}")

    def metric(self, actor: Actor | None, where: str, kind: str, ident: int, payload: Mapping[str, object]) -> None:
        """A `KIND ID: {...}` line; the payload printed as Python prints a dict, as Miles does."""
        self.log(actor, where, f"{kind} {ident}: {payload!r}")


def launch_lines(job_id: str, miles_argv: Iterable[str]) -> list[str]:
    """What `ray job submit` prints up to the job's own output, with its `Running entrypoint` line."""
    rule = "-" * 55
    return [
        f"Job submission server address: {RAY_DASHBOARD}",
        "",
        rule,
        f"Job '{job_id}' submitted successfully",
        rule,
        "",
        "Tailing logs until the job exits (disable with --no-wait):",
        f"Running entrypoint for job {job_id}: python3 train.py {shlex.join(miles_argv)}".rstrip(),
    ]


def dump_value(value: object) -> str:
    """A value as Megatron's argument dump prints it: str() of it (lists as their repr)."""
    return str(value)


def argument_dump_lines(dump: Iterable[tuple[str, object]]) -> list[str]:
    """Megatron/Miles's `_print_args`: names padded with dots to column 48, sorted, between rules."""
    lines = ["------------------------ arguments ------------------------"]
    for name, value in dump:
        lines.append(f"  {name} {'.' * max(1, 48 - len(name))} {dump_value(value)}")
    lines.append("-------------------- end of arguments ---------------------")
    return lines


def job_end_lines(job_id: str, status: str) -> list[str]:
    """`ray job submit`'s last lines: status is 'succeeded', 'failed' or 'was stopped'."""
    return [_JOB_RULE, f"Job '{job_id}' {status}", _JOB_RULE]


def refusal_lines(job_id: str, exception: str, source: str) -> list[str]:
    """A trainer that stopped while parsing its arguments: the traceback, then Ray's failure lines."""
    return failure_lines(
        job_id,
        exception,
        [
            ('  File "train.py", in <module>', "    args = parse_args()"),
            ('  File "miles/utils/arguments.py", in miles_validate_args', f"    {source}"),
        ],
    )


def rollout_failure_lines(job_id: str, exception: str) -> list[str]:
    """A trainer that stopped in a rollout: the traceback, then Ray's failure lines."""
    return failure_lines(
        job_id,
        exception,
        [
            (
                '  File "train.py", in train',
                "    rollout_data_ref = ray.get(rollout_manager.generate.remote(rollout_id))",
            ),
            (
                '  File "miles/rollout/sglang_rollout.py", in generate_rollout_async',
                "    while len(data) < target_data_size:",
            ),
        ],
    )


def checkpoint_failure_lines(job_id: str, exception: str, source: str) -> list[str]:
    """A trainer that died loading a checkpoint (a file its loader does not catch): the traceback, Ray's lines."""
    return failure_lines(
        job_id,
        exception,
        [
            ('  File "train.py", in train', "    start_rollout_id = ray.get(actor_model.async_init(args))"),
            ('  File "miles/backends/fsdp_utils/checkpoint.py", in load', f"    {source}"),
        ],
    )


def save_failure_lines(job_id: str, exception: str) -> list[str]:
    """A trainer that died writing a checkpoint: the traceback, then Ray's failure lines."""
    return failure_lines(
        job_id,
        exception,
        [
            ('  File "train.py", in train', "    actor_model.save_model(rollout_id)"),
            (
                '  File "miles/backends/fsdp_utils/checkpoint.py", in save',
                "    dcp.save(state_dict, checkpoint_id=path)",
            ),
        ],
    )


def failure_lines(job_id: str, exception: str, frames: Iterable[tuple[str, str]]) -> list[str]:
    """A Python traceback through `frames` ((file line, source line)) ending in `exception`, then Ray's lines."""
    return [
        "Traceback (most recent call last):",
        *(line for frame in frames for line in frame),
        exception,
        *job_end_lines(job_id, "failed"),
        "",
        "Status message: Job entrypoint command failed with exit code 1",
    ]


def missing_module_lines(job_id: str, module: str, rollout_pid: int) -> list[str]:
    """Miles failing to import the filter path at the first rollout: Ray's task error and the import's traceback,
    ending in Python's own `ModuleNotFoundError: No module named '...'`, then Ray's failure lines."""
    error = f"ModuleNotFoundError: No module named '{module}'"
    return [
        "Traceback (most recent call last):",
        '  File "/root/miles/train.py", line 106, in <module>',
        "    train(args)",
        '  File "/root/miles/train.py", line 72, in train',
        "    rollout_data_ref = ray.get(rollout_manager.generate.remote(rollout_id))",
        '  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 2822, in get',
        "    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)",
        '  File "/usr/local/lib/python3.12/dist-packages/ray/_private/worker.py", line 930, in get_objects',
        "    raise value.as_instanceof_cause()",
        f"ray.exceptions.RayTaskError(ModuleNotFoundError): ray::RolloutManager.generate() (pid={rollout_pid}, "
        "ip=127.0.0.1, actor_id=5b0a3f2e6c1d4e8f9a7b000001000000, repr=<miles.ray.rollout.RolloutManager object>)",
        '  File "/root/miles/miles/ray/rollout.py", line 95, in generate',
        "    data, metrics = self._get_rollout_data(rollout_id=rollout_id)",
        '  File "/root/miles/miles/rollout/sglang_rollout.py", line 421, in generate_rollout_async',
        "    dynamic_filter = load_function(args.dynamic_sampling_filter_path)",
        '  File "/root/miles/miles/utils/misc.py", line 18, in load_function',
        "    module = importlib.import_module(module_path)",
        '  File "/usr/lib/python3.12/importlib/__init__.py", line 90, in import_module',
        "    return _bootstrap._gcd_import(name[level:], package, level)",
        '  File "<frozen importlib._bootstrap>", line 1387, in _gcd_import',
        '  File "<frozen importlib._bootstrap>", line 1360, in _find_and_load',
        '  File "<frozen importlib._bootstrap>", line 1324, in _find_and_load_unlocked',
        error,
        *job_end_lines(job_id, "failed"),
        "",
        "Status message: Job entrypoint command failed with exit code 1",
    ]


def progress_line(done: int, total: int, elapsed_s: float) -> str:
    """One render of Miles's tqdm bar over the rollout's answers (`Rollout generation`), as a Ray actor prints it."""
    share = done / total if total else 1.0
    filled = int(share * 10)
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    left = (total - done) / rate if rate > 0 else 0.0
    return (
        f"Rollout generation: {int(share * 100):3d}%|{'#' * filled}{' ' * (10 - filled)}| {done}/{total} "
        f"[{_clock(elapsed_s)}<{_clock(left)}, {rate:5.2f}it/s]"
    )


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60:02d}:{whole % 60:02d}"
