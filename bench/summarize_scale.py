#!/usr/bin/env python3
"""How the summarizer scales: synthetic captures of 10 and 100 runs x 100 and 1,000 steps, seeds, many runs.

Goals: `python summarize_miles.py` on 100 runs x 1,000 steps (100,000 step
rows) in at most 2 s end to end on 2 cores, growing about linearly; across
seeds (20 conditions x 5 seeds x 1,000 steps: the same 100,000 rows, grouped
so that every comparison is made across seeds), the across-seed part adding
at most 10% to that; 10,000 runs of one step each in at most 5 s and 500 MB
(peak, the whole process tree). Prints one table; nothing is asserted (the
test suite checks correctness). Run from the repository root:

    .venv/bin/python bench/summarize_scale.py [--repeat N] [--sizes 100x1000,20x5x1000,...] [--figures]
    .venv/bin/python bench/summarize_scale.py --sizes many      # 10,000 one-step runs: time and memory only

A size `RxS` is R runs of S steps, two experiments (`plain` and `filter`, every
other run; every seed a different one, so two conditions of R/2 seeds); `CxKxS`
is C conditions of K seeds of S steps (every other condition a filter one,
compared with the plain condition before it and the pool of three plain
conditions); `many` is 10,000 x 1 in the RxS layout.

Each run gets Miles-shaped metrics (about 30 keys a step: timers,
throughput, response lengths, the filter's drop keys or the zero-variance
counts) and a pause window every tenth step, half of them cutting a rollout,
some touching or overlapping; every other run is a filter run compared with
three baselines.

Columns (best of --repeat; seconds of wall time unless said):
- `read`: every capture read (`read_capture`: metrics.jsonl as columns);
- `summarize`: frames, rows, aggregates and comparisons, in this process;
- `seeds`: of that, the across-seed part (conditions, pooled figures, the
  across-seed comparisons with their bootstrap), scipy already imported;
  `scipy`: what importing what it needs costs a new process (best of 3);
- `serialize`, `write`: the JSON text, and the file written atomically;
- `e2e`: `python summarize_miles.py --no-figures` as a new process, start-up
  and the JSON file included (runs summarized in parallel where large);
  `e2e cpu`: the CPU seconds that process used (all its processes);
  `peak MB`: the most memory its process tree held at once (the sum of the
  proportional set sizes of the script and its workers, sampled every 10 ms
  or less often, so that the sampling takes at most about a twentieth of a
  core from the script it measures; or the largest resident set one of them
  reached since its exec, VmHWM, whichever is more);
- with --figures, for the largest size: the script with figures, first
  drawing them all, then again with nothing changed (every figure kept).

The machine's load is printed first: the figures are only as quiet as it.
The captures of each size are made and synced to disk before any is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.capture.files import write_bytes_atomic  # noqa: E402
from harness.capture.reader import find_runs, read_capture  # noqa: E402
from harness.summary.document import SummaryDocument  # noqa: E402
from harness.summary.serialize import dumps_summary  # noqa: E402
from harness.summary.summarize import summarize_captures  # noqa: E402
from harness.times import format_time_us, parse_time_us  # noqa: E402

T0 = parse_time_us("2026-11-29T08:00:00Z")


def stamp(seconds: float) -> str:
    return format_time_us(T0 + int(seconds * 1_000_000))


def make_run(
    root: Path,
    index: int,
    steps: int,
    rng: random.Random,
    *,
    name: str | None = None,
    experiment_name: str | None = None,
    seed: int | None = None,
    filtered: bool | None = None,
    compare: dict | None = None,
) -> None:
    """One synthetic run; by default run-<index>, the RxS layout (filter every other run, seed index + 1)."""
    if filtered is None:
        filtered = index % 2 == 1
    name = name or f"run-{index:03d}"
    run = root / name
    run.mkdir()
    if compare is None and filtered:
        compare = {"baseline": "run-000", "baselines": ["run-000", "run-002", "run-004"]}
    experiment = {
        "name": experiment_name or ("filter" if filtered else "plain"),
        "extends": None,
        "description": "synthetic",
        "seed": seed if seed is not None else index + 1,
        "steps": steps,
        "image": "x",
        "miles": {"args": {}, "extra_args": ""},
        "container": {},
        "guard": {},
        "compare": compare,
        "limits": {"max_minutes": 240},
    }
    (run / "manifest.json").write_text(
        json.dumps({"run": name, "run_id": name, "time_scale": 1, "experiment": experiment})
    )
    (run / "args.json").write_text(
        json.dumps(
            {
                "rollout_batch_size": 32,
                "over_sampling_batch_size": 48 if filtered else None,
                "n_samples_per_prompt": 8,
                "dynamic_sampling_filter_path": "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter"
                if filtered
                else None,
            }
        )
    )
    t = 5.0  # the container starts a few seconds after the harness wrote started_at
    lines, pauses = [], []
    for step in range(steps):
        rollout = rng.uniform(50, 170)
        t += rollout
        metrics = {
            "perf/rollout_time": rollout,
            "perf/tokens_per_gpu_per_sec": rng.uniform(800, 1200),
            "perf/longest_sample_tokens_per_sec": rng.uniform(20, 40),
            "perf/effective_tokens_per_gpu_per_sec": 900.0,
            "rollout/response_len/mean": rng.uniform(200, 600),
            "rollout/response_len/median": 300.0,
            "rollout/response_len/max": 1024,
            "rollout/response_len/min": 12,
            "rollout/truncated_ratio": rng.random() / 10,
            "rollout/raw_reward": rng.random(),
            "rollout/rewards": 0.0,
            "rollout/response_lengths": 400.0,
            "rollout/truncated": 0.01,
            "rollout/log_probs": -0.4,
            "rollout/ref_log_probs": -0.41,
            "rollout/advantages": 0.0,
            "rollout/returns": 0.0,
            "perf/train_wait_time": rollout,
            "perf/train_time": 30.0,
            "perf/actor_train_time": 20.0,
            "perf/update_weights_time": 4.0,
            "perf/sleep_time": 1.0,
            "perf/wake_up_time": 1.0,
            "perf/step_time": rollout + 30.0,
        }
        if filtered:
            metrics["rollout/dynamic_filter/drop_zero_std_1"] = rng.randint(8, 36)
            metrics["rollout/dynamic_filter/drop_zero_std_0"] = rng.randint(0, 12)
            metrics["rollout/raw_reward_unfiltered"] = rng.random()
        else:
            metrics["rollout/zero_std/count_0"] = rng.randint(0, 6)
            metrics["rollout/zero_std/count_1"] = rng.randint(6, 16)
        lines.append(
            json.dumps(
                {
                    "step": step,
                    "complete": True,
                    "t_rollout_end": stamp(t),
                    "t_step_end": stamp(t + 30.0),
                    "metrics": metrics,
                }
            )
        )
        if step % 10 == 3:  # a window cutting this rollout, and sometimes one overlapping it
            start = t - rng.uniform(0, rollout)
            pauses.append({"start": stamp(start), "end": None, "reason": "hot", "peak_c": 86.0})
            pauses.append({"start": stamp(start), "end": stamp(start + 40.0), "reason": "hot", "peak_c": 86.4})
            if step % 20 == 3:
                pauses.append(
                    {"start": stamp(start + 20.0), "end": stamp(start + 55.0), "reason": "hot", "peak_c": 87.0}
                )
        t += 30.0
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run / "pauses.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pauses))
    (run / "status.json").write_text(
        json.dumps(
            {
                "run": name,
                "run_id": name,
                "state": "succeeded",
                "exit_code": 0,
                "started_at": stamp(0),
                "ended_at": stamp(t),
                "steps_expected": steps,
                "steps_complete": steps,
                "error": None,
            }
        )
    )


def make_captures(root: Path, runs: int, steps: int) -> None:
    root.mkdir(parents=True)
    rng = random.Random(runs * 100_003 + steps)
    for i in range(runs):
        make_run(root, i, steps, rng)


def make_seeded_captures(root: Path, conditions: int, seeds: int, steps: int) -> None:
    """C conditions of K seeds: `cond-NN`, `cond-NN-sK`; odd conditions filter ones, each compared with the plain
    condition before it and with the pool of the three plain conditions before it."""
    root.mkdir(parents=True)
    rng = random.Random(conditions * 1_009 + seeds * 101 + steps)
    index = 0
    for c in range(conditions):
        experiment = f"cond-{c:02d}"
        filtered = c % 2 == 1
        compare = None
        if filtered:
            plains = [f"cond-{p:02d}" for p in range(c - 1, -1, -2)][:3]
            compare = {"baseline": plains[0], "baselines": plains}
        for k in range(1, seeds + 1):
            name = experiment if k == 1 else f"{experiment}-s{k}"
            make_run(
                root,
                index,
                steps,
                rng,
                name=name,
                experiment_name=experiment,
                seed=k,
                filtered=filtered,
                compare=compare,
            )
            index += 1


def best_of(repeat: int, fn):  # noqa: ANN001, ANN201
    times, value = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), value


def script(root: Path, *extra: str) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak MB of the process tree) of summarize_miles.py in a new process.

    Its CPU is its own and its workers' (wait4 on it alone, so no other child
    of the bench counts); its memory is sampled from /proc (see `tree_pss`).
    """
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, str(REPO / "summarize_miles.py"), "--capture-dir", str(root), *extra],
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        peak = 0
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            sampled = time.process_time()
            members = tree(process.pid)
            peak = max(peak, tree_pss(members), tree_high_water(members))
            # The sampler shares the cores it measures: a sample (a walk of /proc and each member's page tables)
            # costs milliseconds, so it sleeps SAMPLER_SHARE times that (at least 10 ms) to take at most about
            # 1/SAMPLER_SHARE of a core from the script. A member's own high water (VmHWM) misses nothing between.
            time.sleep(max(0.01, SAMPLER_SHARE * (time.process_time() - sampled)))
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode:
            errors.seek(0)
            raise RuntimeError(f"summarize_miles.py failed: {errors.read().decode()[-2000:]}")
    # Not the kernel's ru_maxrss: Linux carries it across exec, so a child started by this bench, which holds the
    # captures it made, would report the bench's own size (845 MB for 10,000 runs whose script peaked at 262 MB).
    return wall, usage.ru_utime + usage.ru_stime, peak / 1e6


SAMPLER_SHARE = 20


def tree_pss(members: list[int]) -> int:
    """Memory of `members` (a process and its descendants, `tree`) now: the sum of their proportional set sizes.

    Forked workers share the parent's pages until they write them; PSS counts
    a shared page once, split between its sharers, where summing resident
    sets would count it once per process. Resident sets where the kernel
    gives no PSS; 0 without /proc.
    """
    return sum(_memory(member) for member in members)


def tree(pid: int) -> list[int]:
    """The process and its descendants (Linux /proc; none without it)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))  # fields[1]: the parent's pid
    members, todo = [], [pid]
    while todo:
        current = todo.pop()
        members.append(current)
        todo += children.get(current, [])
    return members


def tree_high_water(members: list[int]) -> int:
    """The largest resident set any of `members` has reached since its exec (VmHWM), in bytes."""
    highest = 0
    for member in members:
        try:
            with open(f"/proc/{member}/status", "rb") as handle:
                for line in handle:
                    if line.startswith(b"VmHWM:"):
                        highest = max(highest, int(line.split()[1]) * 1024)
        except OSError:
            continue
    return highest


def _memory(pid: int) -> int:
    """One process's PSS (else RSS) in bytes; 0 once it is gone."""
    for name, key in (("smaps_rollup", b"Pss:"), ("status", b"VmRSS:")):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as handle:
                for line in handle:
                    if line.startswith(key):
                        return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0


SCIPY_PROBE = "import time, numpy; t = time.perf_counter(); from harness.stats.seeds import warm; warm(); print(time.perf_counter() - t)"


def scipy_import_s() -> float:
    """Seconds a new process (numpy already in) takes to import what the across-seed statistics need."""
    times = []
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", SCIPY_PROBE], cwd=REPO, capture_output=True, text=True, check=True)
        times.append(float(done.stdout.strip()))
    return min(times)


def seeds_part_s(document: SummaryDocument) -> tuple[float, int]:
    """(seconds, pairs of conditions compared) of the across-seed part for a summarized document, scipy imported."""
    from harness.summary.seeds import SeedComparisons, summarize_conditions

    start = time.perf_counter()
    grouped = summarize_conditions(document.runs)
    across = SeedComparisons(document.runs, grouped)
    made = set()
    for comparison in document.comparisons:  # the baselines a comparison names: those found and those missing
        names = [*comparison.reward.baselines, *comparison.reward.baselines_missing]
        for block in across.blocks(comparison.run, comparison.baseline, names):
            made.add(id(block))
    return time.perf_counter() - start, len(made)


MANY = "many"
MANY_RUNS = 10_000
SIZES_DEFAULT = "10x100,10x1000,100x100,100x1000,20x5x1000,many"


def parse_size(text: str) -> tuple[int, ...]:
    if text == MANY:
        return (MANY_RUNS, 1)
    return tuple(int(n) for n in text.split("x"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is shown")
    parser.add_argument(
        "--sizes",
        default=SIZES_DEFAULT,
        help=f"RxS (runs x steps), CxKxS (conditions x seeds x steps) or {MANY} (default: {SIZES_DEFAULT})",
    )
    parser.add_argument(
        "--figures",
        action="store_true",
        help="also time the script with figures on the largest size (first draw, then unchanged)",
    )
    args = parser.parse_args()
    sizes = args.sizes.split(",")

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{cores} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; best of {args.repeat}")
    print(f"scipy for the across-seed statistics: {scipy_import_s():.3f} s to import in a new process (numpy in)")
    print(
        f"{'size':>10} {'runs':>6} {'rows':>8} {'read s':>7} {'summarize s':>12} {'seeds s':>8} {'pairs':>6} "
        f"{'serialize s':>12} {'write s':>8} {'MB':>6} {'e2e s':>7} {'e2e cpu s':>10} {'peak MB':>8}"
    )
    e2e_of: dict[tuple[int, int], dict[int, float]] = {}  # (runs, steps) -> {seeds per condition: e2e s}
    for size in sizes:
        shape = parse_size(size)
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "gpu"
            if len(shape) == 3:
                make_seeded_captures(root, *shape)
                runs, steps = shape[0] * shape[1], shape[2]
            else:
                make_captures(root, *shape)
                runs, steps = shape
            # On disk before the clock starts, as a run's captures are long before they are summarized: else the
            # system's write-back of the files just made (50,000 for `many`) runs during the timing and the
            # summary's one fsync waits for it.
            os.sync()
            e2e = min((script(root, "--no-figures") for _ in range(args.repeat)), key=lambda t: t[0])
            e2e_of.setdefault((runs, steps), {})[shape[1] if len(shape) == 3 else 1] = e2e[0]
            data_mb = (root / "summary" / "miles-gb10-lab.json").stat().st_size / 1e6
            if size == MANY:  # time and memory end to end: a run at a time in-process would only repeat it
                print(
                    f"{size:>10} {runs:>6} {runs * steps:>8} {'':>7} {'':>12} {'':>8} {'':>6} {'':>12} {'':>8} "
                    f"{data_mb:>6.1f} {e2e[0]:>7.3f} {e2e[1]:>10.3f} {e2e[2]:>8.0f}",
                    flush=True,
                )
                continue
            run_dirs, _ = find_runs(root)
            read_s, captures = best_of(args.repeat, lambda: [read_capture(d) for d in run_dirs])
            summarize_s, summary = best_of(args.repeat, lambda: summarize_captures(captures))
            seeds = min((seeds_part_s(summary.document) for _ in range(args.repeat)), key=lambda t: t[0])
            serialize_s, data = best_of(args.repeat, lambda: dumps_summary(summary.document))
            out = root / "summary" / "bench.json"
            write_s, _ = best_of(args.repeat, lambda: write_bytes_atomic(out, data))
            rows = sum(len(r.steps) for r in summary.document.runs.values())
            print(
                f"{size:>10} {runs:>6} {rows:>8} {read_s:>7.3f} {summarize_s:>12.3f} {seeds[0]:>8.3f} {seeds[1]:>6} "
                f"{serialize_s:>12.3f} {write_s:>8.3f} {len(data) / 1e6:>6.1f} {e2e[0]:>7.3f} {e2e[1]:>10.3f} "
                f"{e2e[2]:>8.0f}",
                flush=True,
            )
            if args.figures and size == sizes[-1]:
                comparisons = len(summary.document.comparisons)
                first = script(root)
                again = min((script(root) for _ in range(args.repeat)), key=lambda t: t[0])
                print(
                    f"with figures ({2 * comparisons} SVGs and those across seeds): first {first[0]:.3f} s, then "
                    f"unchanged {again[0]:.3f} s (cpu {again[1]:.3f} s)"
                )
                shutil.rmtree(root / "summary")
    for (runs, steps), by_seeds in sorted(e2e_of.items()):
        # The same rows either way: what the many conditions add end to end is the across-seed part's cost
        # (the RxS layout has two conditions, one pair compared; CxKxS has C, each filter one compared twice).
        if 1 in by_seeds and len(by_seeds) > 1:
            for seeds, seconds in sorted(by_seeds.items())[1:]:
                added = (seconds / by_seeds[1] - 1) * 100
                print(
                    f"across seeds: {runs} runs of {steps} steps as {runs // seeds} conditions x {seeds} seeds, "
                    f"e2e {seconds:.3f} s against {by_seeds[1]:.3f} s as two experiments: {added:+.1f}% "
                    "(goal: at most +10%)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
