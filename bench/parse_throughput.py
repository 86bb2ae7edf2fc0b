"""How fast the Miles log parser reads a log: a benchmark that prints its figures (not a timed test).

Two logs, each a `container.log` (Docker timestamp on every line):

- **one long run**: the start of a Ray job (the launch line, Miles's
  argument dump), then mostly noise (SGLang access and decode lines, Ray,
  vLLM and SGLang lines whose words hold "ft " (left, soft, draft: no `ft`
  lines), tqdm bars, timers, memory dumps), and around each step's metric
  lines the noise Miles prints at a rollout's gather: `ft event=...` lines
  and the first and last samples (model text);
- **a mix of whole runs**: several whole runs concatenated, as a capture
  directory's logs are when read together, so everything a run prints once
  recurs: the Ray job preamble, the launch line (`Running entrypoint for
  job ...`, the trainer's full argv), Miles's argument dump (hundreds of
  lines), start-up noise, 4 to 12 steps with 20 to 400 noise lines each
  (quiet and chatty SGLang), Megatron's doubled step lines or FSDP's single
  ones, both timestamp forms, ANSI-coloured Ray prefixes, eval lines, and an
  end that is a clean finish, an out-of-memory traceback or a cut.

For each it prints lines per second:

- end to end: a `harness parse-log FILE --json` process (`python -m harness`
  from this checkout), start-up included;
- in process, batch: `parse_file(path)` (chunked reader that skips noise);
- in process, live: `LogParser.feed(line)` on every line, as the runner does;

whether the last two read the same (compared as objects: the order of a
dict's keys does not count), then the CPU seconds of parse-log beside a bare
Python loop over the file's lines (a process that only reads them, as text):
each in turn, best of `--repeat`, so a busy machine weighs on both alike, and
parse-log's start-up alone (an empty log: what it costs before it reads a line).
`--against CHECKOUT` (repeatable) times parse-log as another checkout's code
in the same turns, e.g. a git worktree of a release:

    git worktree add --detach ../release <commit>
    .venv/bin/python bench/parse_throughput.py --lines 475000 --repeat 5 --against ../release

then `harness --help`: median wall time of 5 runs. Wall time is the figure;
CPU seconds are printed beside it, since a busy machine stretches wall time.

Goals: at least 500,000 lines/s end to end on both logs, on a 2-core machine;
parse-log's CPU at most 2.6 times the bare loop's; `--help` under 0.4 s.

    .venv/bin/python bench/parse_throughput.py [--lines 2000000] [--noise-per-step 400] [--log FILE]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.mileslog import ParsedLog

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RM = "(RolloutManager pid=2411)"
TA = "(MegatronTrainRayActor pid=2590)"


def rollout_perf(n: int, rng: random.Random) -> str:
    keys = {
        "perf/rollout_time": round(rng.uniform(50, 170), 3),
        "perf/tokens_per_gpu_per_sec": round(rng.uniform(1500, 2200), 2),
        "perf/longest_sample_tokens_per_sec": round(rng.uniform(20, 40), 2),
        "rollout/dynamic_filter/drop_zero_std_1": rng.randint(8, 36),
        "rollout/dynamic_filter/drop_zero_std_0": rng.randint(0, 12),
        "rollout/raw_reward_unfiltered": rng.random(),
        "rollout/zero_std/all_zero_percentage": 0.0,
        "rollout/zero_std/all_one_percentage": 0.0,
        "rollout/truncated_ratio": rng.random() / 10,
    }
    for stat in ("mean", "median", "max", "min"):
        keys[f"rollout/response_len/{stat}"] = round(rng.uniform(100, 8192), 1)
    for i in range(20):
        keys[f"rollout/extra/metric_{i}"] = rng.random()
    return f"{RM} [2026-10-02 09:14:03.512 rollout_manager] metrics.py:88 - perf {n}: {keys!r}"


def train_lines(n: int, rng: random.Random) -> list[str]:
    rollout = {
        "rollout/raw_reward": rng.random(),
        "rollout/rewards": 0.0,
        "rollout/response_lengths": 512.0,
        "rollout/truncated": 0.02,
        "rollout/log_probs": -0.4,
        "rollout/advantages": 0.0,
    }
    out = [f"{TA} [2026-10-02 09:14:05.101 actor_cell0_rank0] log_utils.py:40 - rollout {n}: {rollout!r}"]
    for m in (2 * n, 2 * n + 1):
        step = {
            "train/loss": rng.random() / 10,
            "train/pg_loss": rng.random() / 10,
            "train/entropy_loss": 0.3,
            "train/pg_clipfrac": 0.01,
            "train/ppo_kl": 0.0,
            "train/grad_norm": 0.3,
            "train/lr-pg_0": 1e-06,
            "train/step": m,
        }
        for where in ("model.py:512", "train_metric_utils.py:77"):  # Megatron prints each step line twice
            out.append(f"{TA} [2026-10-02 09:14:20.900 actor_cell0_rank0] {where} - step {m}: {step!r}")
    perf = {
        "perf/train_wait_time": 60.1,
        "perf/train_time": 21.9,
        "perf/actor_train_time": 15.2,
        "perf/update_weights_time": 3.1,
        "perf/sleep_time": 0.5,
        "perf/wake_up_time": 0.7,
        "perf/step_time": 82.0,
    }
    out.append(f"{TA} [2026-10-02 09:14:25.300 actor_cell0_rank0] train_metric_utils.py:120 - perf {n}: {perf!r}")
    return out


# Words in which "ft " occurs (left, soft, draft, shift, ...): Ray, SGLang, vLLM and the model's text print them
# in ordinary lines, which are no `ft key=value` lines.
_FT_WORD_LINES = (
    "{rm} [2026-10-02 09:13:{s:02d}.{ms:03d} rollout_manager] sglang_engine.py:210 - Decode batch. #running-req: {n}, "
    "#token: {tok}, token usage: 0.{u:02d}, accept len: 2.{u:02d}, draft tokens: 4, cuda graph: True, "
    "gen throughput (token/s): {tput:.2f}, #queue-req: 0",
    "{rm} [2026-10-02 09:13:{s:02d}.{ms:03d} rollout_manager] scheduler.py:1402 - KV cache pool: {tok} tokens left "
    "after the prefill of {n} requests",
    "(raylet) [2026-10-02 09:13:{s:02d},{ms:03d} I {pid} {pid}] worker_pool.cc:512: Raising the soft limit of open "
    "files from 1024 to 65536",
    "(VllmWorker rank=0 pid={pid}) INFO 10-02 09:13:{s:02d} [eagle.py:88] Loading draft model weights took 0.{u:02d} GiB",
    "{ta} [2026-10-02 09:14:{s:02d}.{ms:03d} actor_cell0_rank0] rope.py:77 - position shift of {n} tokens left "
    "as is for the packed batch",
    "(autoscaler +{s}s) Resized to {n} CPUs, 1 GPUs; {u} CPUs left idle after the soft reservation",
)


def noise_line(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.72:
        return f'{RM} INFO:     127.0.0.1:{rng.randint(40000, 60000)} - "POST /generate HTTP/1.1" 200 OK'
    if roll < 0.80:
        return (
            f"{RM} [2026-10-02 09:13:{rng.randint(10, 59)}.{rng.randint(100, 999)} rollout_manager] "
            f"sglang_engine.py:210 - Decode batch. #running-req: {rng.randint(1, 384)}, #token: "
            f"{rng.randint(1000, 90000)}, token usage: 0.{rng.randint(10, 99)}, gen throughput (token/s): "
            f"{rng.uniform(500, 2500):.2f}, #queue-req: 0"
        )
    if roll < 0.88:
        return rng.choice(_FT_WORD_LINES).format(
            rm=RM,
            ta=TA,
            s=rng.randint(10, 59),
            ms=rng.randint(0, 999),
            n=rng.randint(1, 384),
            tok=rng.randint(1000, 90000),
            u=rng.randint(10, 99),
            tput=rng.uniform(500, 2500),
            pid=rng.randint(100, 9999),
        )
    if roll < 0.93:
        bars = "\r".join(f"Rollout generation: {p:3d}%|{'#' * (p // 10):10s}| {p * 48 // 100}/48" for p in (0, 50, 100))
        return f"{RM} {bars}"
    if roll < 0.97:
        return f"{TA} [2026-10-02 09:14:21.000 actor_cell0_rank0] timer.py:24 - Timer train end (elapsed: {rng.random():.1f}s)"
    return (
        f"{TA} [2026-10-02 09:14:04.020 actor_cell0_rank0] memory_utils.py:41 - [Rank 0] Memory-Usage "
        f"before train: {{'gpu': '0', 'total_GB': 119.7, 'free_GB': {rng.uniform(10, 60):.1f}, 'used_GB': 79.5}}"
    )


def rollout_noise(n: int, rng: random.Random) -> tuple[list[str], list[str]]:
    """The noise Miles prints around rollout n's gather: (before the rollout perf line, after it): the `ft`
    lines, the first and last samples (model text, whose words hold "ft " and braces)."""
    stamp = f"[2026-10-02 09:13:{rng.randint(10, 59)}.{rng.randint(100, 999)} rollout_manager]"
    sample = (
        "['Q: Tom had {12} apples and gave 5 to his friend on the left. How many are left? A: 12 - 5 = 7 left "
        "after the soft draft.'], label: 7, reward: 1"
    )
    before = [
        f"{RM} {stamp} ft_utils.py:61 - ft event=gather_start rollout_id={n} rank=0",
        f"{RM} {stamp} sglang_rollout.py:318 - First rollout sample: {sample}",
    ]
    after = [
        f"{RM} {stamp} sglang_rollout.py:356 - Finish rollout: {sample}",
        f"{RM} {stamp} ft_utils.py:64 - ft event=gather_end rollout_id={n} rank=0 groups=32 dropped={rng.randint(0, 30)}",
    ]
    return before, after


def build_log(path: Path, lines: int, noise_per_step: int, seed: int = 7) -> int:
    """Write a container.log of about `lines` lines; returns the exact count."""
    from harness.lab.milesargv import read_base_args

    rng = random.Random(seed)
    written = 0
    step = 0
    with path.open("w", encoding="utf-8", newline="\n") as out:
        start = job_start(rng, "raysubmit_0000000000000001", read_base_args())
        while written < lines:
            block = [noise_line(rng) for _ in range(noise_per_step)]
            before, after = rollout_noise(step, rng)
            block[noise_per_step // 2 : noise_per_step // 2] = [*before, rollout_perf(step, rng), *after]
            block.extend(train_lines(step, rng))
            block[:0], start = start, []  # the run's start, before its first step
            for text in block:
                seconds = written // 1000
                out.write(
                    f"2026-11-29T{7 + seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}."
                    f"{written % 1000:03d}948044Z {text}\n"
                )
            written += len(block)
            step += 1
    return written


# ---- a mix of whole runs ----------------------------------------------------

_ARG_WORDS = (
    "rollout",
    "train",
    "eval",
    "actor",
    "critic",
    "ref",
    "sglang",
    "optimizer",
    "lr",
    "kl",
    "loss",
    "buffer",
    "data",
    "model",
    "tensor",
    "pipeline",
    "context",
    "expert",
    "micro",
    "global",
    "max",
    "min",
    "num",
    "use",
    "enable",
    "disable",
    "log",
    "save",
    "load",
    "seq",
    "length",
    "batch",
    "size",
)


def argument_dump(rng: random.Random, words: list[str]) -> list[str]:
    """Miles's dump of every argument (Megatron's and its own): about 700 sorted `name .... value` lines."""
    values: dict[str, object] = {}
    for flag, flag_values in zip(words, words[1:] + [""]):
        if flag.startswith("--"):
            values[flag[2:].replace("-", "_")] = (
                flag_values if flag_values and not flag_values.startswith("--") else True
            )
    name_rng = random.Random(1)  # the same argument names in every run, as one Miles version prints them
    while len(values) < 700:
        name = "_".join(name_rng.sample(_ARG_WORDS, name_rng.randint(2, 4)))
        roll = rng.random()
        values.setdefault(
            name,
            None
            if roll < 0.3
            else (rng.random() < 0.5)
            if roll < 0.45
            else rng.randint(0, 8192)
            if roll < 0.7
            else round(rng.uniform(0, 1), 4)
            if roll < 0.8
            else [rng.randint(1, 9) for _ in range(rng.randint(1, 4))]
            if roll < 0.85
            else f"/root/miles/{name}",
        )
    lines = ["------------------------ arguments ------------------------"]
    for name in sorted(values):
        lines.append(f"  {name} {'.' * max(3, 48 - len(name))} {values[name]}")
    lines.append("-------------------- end of arguments ---------------------")
    return lines


def job_start(rng: random.Random, job: str, words: list[str]) -> list[str]:
    """How a run's log begins: the Ray job preamble, the launch line with the trainer's argv, Miles's argument dump."""
    return [
        "Local node IP: 127.0.0.1",
        "Started a local Ray instance. View the dashboard at 127.0.0.1:8265",
        "Job submission server address: http://127.0.0.1:8265",
        "-------------------------------------------------------",
        f"Job '{job}' submitted successfully",
        "-------------------------------------------------------",
        "Next steps",
        "  Query the logs of the job:",
        f"    ray job logs {job}",
        "Tailing logs until the job exits (disable with --no-wait):",
        "2026-10-02 09:00:01,101\tINFO job_manager.py:530 -- Runtime env is setting up.",
        f"Running entrypoint for job {job}: python3 train.py {shlex.join(words)}",
        *argument_dump(rng, words),
    ]


def whole_run(rng: random.Random, run: int) -> list[str]:
    """The lines of one whole run, from the Ray job preamble to its end (no Docker prefix yet)."""
    from harness.lab.milesargv import read_base_args

    megatron = rng.random() < 0.5
    filter_on = rng.random() < 0.5
    colour = rng.random() < 0.5
    new_stamps = rng.random() < 0.7
    steps = rng.choice([4, 12, 12, 12])
    chatty = rng.random() < 0.5  # SGLang access and decode lines on, or quiet
    job = f"raysubmit_{run:016d}"
    words = read_base_args() + ["--seed", str(run), "--rollout-seed", str(run), "--num-rollout", str(steps)]
    if megatron:
        words[words.index("fsdp")] = "megatron"
    if filter_on:
        words += [
            "--dynamic-sampling-filter-path",
            "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter",
            "--over-sampling-batch-size",
            "48",
        ]
    actor = "MegatronTrainRayActor" if megatron else "FSDPTrainRayActor"
    rm_prefix, ta_prefix = f"(RolloutManager pid={2000 + run})", f"({actor} pid={3000 + run}, ip=172.17.0.2)"
    if colour:
        rm_prefix, ta_prefix = f"\x1b[36m{rm_prefix}\x1b[0m", f"\x1b[36m{ta_prefix}\x1b[0m"

    def stamp(proc: str, second: int) -> str:
        hms = f"{9 + second // 3600 % 12:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        return f"[2026-10-02 {hms}.{rng.randint(0, 999):03d} {proc}]" if new_stamps else f"[2026-10-02 {hms}]"

    out = job_start(rng, job, words)
    for i in range(150):  # start-up: SGLang server, weights, Megatron or FSDP init
        out.append(
            noise_line(rng).replace(RM, rm_prefix).replace(TA, ta_prefix)
            if i % 3
            else f"{ta_prefix} {stamp('actor_cell0_rank0', i)} initialize.py:{i} - init step {i} done"
        )
    second = 200
    for n in range(steps):
        if n == steps - 1 and run % 4 == 3:  # killed mid-rollout: the log just stops
            out += [noise_line(rng).replace(RM, rm_prefix) for _ in range(rng.randint(20, 400))]
            return out
        noise = rng.randint(200, 400) if chatty else rng.randint(20, 60)
        out += [noise_line(rng).replace(RM, rm_prefix).replace(TA, ta_prefix) for _ in range(noise)]
        second += rng.randint(50, 170)
        perf = rollout_perf(n, rng).replace(RM, rm_prefix)
        if not filter_on:
            perf = perf.replace("dynamic_filter/drop_zero_std", "zero_std/count")
        before, after = rollout_noise(n, rng)
        out += [line.replace(RM, rm_prefix) for line in before]
        out.append(perf.replace("[2026-10-02 09:14:03.512 rollout_manager]", stamp("rollout_manager", second)))
        out += [line.replace(RM, rm_prefix) for line in after]
        for line in train_lines(n, rng):
            if not megatron and "model.py:512" in line:
                continue  # FSDP prints each step line once
            out.append(line.replace(TA, ta_prefix))
        if n % 4 == 3:
            out.append(
                f"{rm_prefix} {stamp('rollout_manager', second)} metrics.py:140 - eval {n}: "
                f"{{'eval/gsm8k': {rng.random()!r}, 'eval/gsm8k/response_len/mean': {rng.uniform(100, 900)!r}}}"
            )
    if run % 4 == 2:  # out of memory at the end, as Ray reports it
        out += [
            f"{ta_prefix} Traceback (most recent call last):",
            f'{ta_prefix}   File "/root/miles/miles/backends/megatron_utils/actor.py", line 301, in train',
            f"{ta_prefix}     self.train_actor(rollout_id, rollout_data)",
            f"{ta_prefix} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
            "---------------------------------------",
            f"Job '{job}' failed",
            "---------------------------------------",
        ]
    else:
        out += [
            "---------------------------------------",
            f"Job '{job}' succeeded",
            "---------------------------------------",
        ]
    return out


def build_run_mix(path: Path, lines: int, seed: int = 11) -> int:
    """Write a container.log of whole runs concatenated until it has about `lines` lines; returns the count."""
    rng = random.Random(seed)
    written = run = 0
    with path.open("w", encoding="utf-8", newline="\n") as out:
        while written < lines:
            for text in whole_run(rng, run):
                seconds = written // 1000
                out.write(
                    f"2026-11-{1 + run % 28:02d}T{7 + seconds // 3600 % 16:02d}:{seconds // 60 % 60:02d}:"
                    f"{seconds % 60:02d}.{written % 1000:03d}948044Z {text}\n"
                )
                written += 1
            run += 1
    return written


def content(parsed: ParsedLog) -> dict[str, object]:
    """What a reading found, as plain objects: the `parse-log --json` document and what it leaves out of each step
    (its step lines, problems and line numbers), non-finite values as the document writes them."""
    from harness.mileslog.records import strict_json_metrics

    found: dict[str, object] = dict(parsed.to_json())
    found["step_records"] = [
        (
            [strict_json_metrics(payload) for payload in record.train_steps],
            [strict_json_metrics(payload) for payload in record.critic_steps],
            record.problems,
            record.lines,
        )
        for record in parsed.steps
    ]
    return found


def same_content(a: ParsedLog, b: ParsedLog) -> bool:
    """True when two readings found the same: compared as objects, so the order of a dict's keys does not count
    (line by line, the noise kinds come in the order first seen; in batch, in the order they are counted)."""
    return content(a) == content(b)


def count_lines(log: Path) -> int:
    with log.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def harness_command() -> list[str]:
    """`harness` as this checkout's code (run from the repository root), whatever is installed."""
    return [sys.executable, "-m", "harness"]


# The yardstick: a Python process that only reads the file's lines, as text.
BARE_LOOP = "import sys\nfor line in open(sys.argv[1], encoding='utf-8', errors='replace'):\n    pass"
# What parse-log costs before it reads a line: this checkout's parse-log of an empty log.
STARTUP = "start-up (this checkout, an empty log)"
GOAL_RATIO = 2.6


def timed(command: list[str], stdout: int = subprocess.DEVNULL, cwd: Path = REPO) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of a command; CPU time says more on a busy machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=stdout, cwd=cwd)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def end_to_end(log: Path, repeat: int, against: list[Path]) -> dict[str, tuple[float, float]]:
    """Best (wall, CPU) of `harness parse-log --json` here, in each other checkout, of the bare loop and of this
    checkout's start-up: each command in turn, `repeat` rounds, so that all of them meet the same minutes of a busy
    machine."""
    with tempfile.TemporaryDirectory(prefix="parse-bench-") as tmp:
        empty = Path(tmp) / "empty.log"
        empty.touch()
        commands: dict[str, tuple[list[str], Path]] = {
            "this checkout": (harness_command() + ["parse-log", str(log), "--json"], REPO),
            **{str(other): (harness_command() + ["parse-log", str(log), "--json"], other) for other in against},
            "bare loop": ([sys.executable, "-c", BARE_LOOP, str(log)], REPO),
            STARTUP: (harness_command() + ["parse-log", str(empty), "--json"], REPO),
        }
        best: dict[str, tuple[float, float]] = {}
        for _ in range(repeat):
            for name, (command, cwd) in commands.items():
                wall, cpu = timed(command, cwd=cwd)
                old_wall, old_cpu = best.get(name, (wall, cpu))
                best[name] = (min(wall, old_wall), min(cpu, old_cpu))
    return best


def measure(log: Path, lines: int, repeat: int, against: list[Path]) -> None:
    """Print the throughput figures for one log, and parse-log's CPU against the bare loop's."""
    from harness.mileslog import LogParser, parse_file

    size_mb = log.stat().st_size / 1e6
    processes = end_to_end(log, repeat, against)
    wall, cpu = processes["this checkout"]
    bare_cpu = processes["bare loop"][1]
    batch = batch_cpu = None
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        parsed = parse_file(log)
        elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - start_cpu
        batch = elapsed if batch is None else min(batch, elapsed)
        batch_cpu = elapsed_cpu if batch_cpu is None else min(batch_cpu, elapsed_cpu)
    with log.open(encoding="utf-8", errors="replace", newline="\n") as handle:
        text_lines = handle.read().split("\n")
    if text_lines and text_lines[-1] == "":
        text_lines.pop()
    live = None
    for _ in range(repeat):
        parser = LogParser()
        feed = parser.feed
        start = time.perf_counter()
        for line in text_lines:
            feed(line)
        parser.finish()
        elapsed = time.perf_counter() - start
        live = elapsed if live is None else min(live, elapsed)
    agree = same_content(parser.result(), parsed)
    del text_lines
    complete = sum(1 for record in parsed.steps if record.complete)
    print(
        f"  {lines:,} lines, {size_mb:.0f} MB; steps read: {len(parsed.steps)} ({complete} complete), "
        f"problems: {len(parsed.problems)}, noise: {parsed.noise}, line by line and batch agree: "
        f"{'yes' if agree else 'NO'}"
    )
    print(
        f"  end to end  (harness parse-log --json): {lines / wall:>12,.0f} lines/s  ({wall:.2f} s; "
        f"{lines / cpu:,.0f} lines per CPU second)"
    )
    print(
        f"  in process  (parse_file, batch)       : {lines / batch:>12,.0f} lines/s  ({batch:.2f} s; "
        f"{lines / batch_cpu:,.0f} lines per CPU second)"
    )
    print(f"  in process  (LogParser.feed per line) : {lines / live:>12,.0f} lines/s  ({live:.2f} s)")
    print(f"  CPU seconds, best of {repeat}, taken in turn (goal: parse-log at most {GOAL_RATIO} x the bare loop):")
    for name, (_, name_cpu) in processes.items():
        print(f"    {name:<40} {name_cpu:6.2f} s  {name_cpu / bare_cpu:5.2f} x the bare loop")


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--lines", type=int, default=2_000_000, help="size of each generated log (lines)")
    options.add_argument("--noise-per-step", type=int, default=400, help="noise lines between two steps (long run)")
    options.add_argument("--repeat", type=int, default=3, help="runs per figure (the best is kept)")
    options.add_argument("--log", type=Path, help="measure this log instead of generating the two")
    options.add_argument(
        "--against",
        type=Path,
        action="append",
        default=[],
        metavar="CHECKOUT",
        help="also time parse-log as another checkout's code (e.g. a git worktree of a release), in turn with this one",
    )
    args = options.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="parse-bench-"))
    try:
        print(f"cpus: {os.cpu_count()}; python {sys.version.split()[0]}")
        if args.log:
            print(f"{args.log}:")
            measure(args.log, count_lines(args.log), args.repeat, args.against)
        else:
            long_run, mix = tmp / "long-run.log", tmp / "run-mix.log"
            print("one long run (noise-heavy):")
            measure(long_run, build_log(long_run, args.lines, args.noise_per_step), args.repeat, args.against)
            long_run.unlink()
            print("a mix of whole runs (launch lines and argument dumps recur):")
            measure(mix, build_run_mix(mix, args.lines), args.repeat, args.against)
        help_times = [timed(harness_command() + ["--help"])[0] for _ in range(5)]
        print(f"harness --help median of 5: {statistics.median(help_times):.3f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
