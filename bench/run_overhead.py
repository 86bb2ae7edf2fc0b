"""What the harness costs while a run talks: CPU per wall second, and line-to-record delay.

A container prints Miles-shaped lines at a set rate (default 2,000 lines/s for
60 s, a step every 400 lines) while `harness run` streams, stores and parses
them. Prints the harness's CPU seconds per wall second over the steady part
of the run (goal < 0.05) and the delay from a step's last line being printed
to its record landing in metrics.jsonl (goal: median < 0.2 s). The run's
TensorBoard events are written live, off the log pump's thread, as in every
run (docs/tensorboard.md): the figures include them, and the delay from a
step's record to its events on disk and their size are printed too;
`--board off` runs without them, to compare. With
`--engine process` the trainer runs as a process under the process engine's
supervisor, whose CPU (stamping and storing every line) is printed too.

Needs a Docker engine and the offline python image (make offline-images),
or nothing with `--engine process`.
Usage: python bench/run_overhead.py [--rate 2000] [--seconds 60] [--engine docker|process] [--board on|off]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IMAGE = "miles-gb10-lab/chatty-trainer:bench"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def supervisor_pid(processes: Path) -> int:
    """The process engine's supervisor of the one run under `processes`."""
    (state,) = processes.glob("*/state.json")
    return int(json.loads(state.read_text())["shim_pid"])


def watch_metrics(path: Path, arrivals: list[tuple[float, dict]], done: threading.Event) -> None:
    """Note when each metrics.jsonl record appears (polled every 5 ms)."""
    offset = 0
    while not done.is_set():
        if path.exists():
            with path.open() as handle:
                handle.seek(offset)
                data = handle.read()
            now = time.time()
            complete = data[: data.rfind("\n") + 1]
            offset += len(complete.encode())
            for line in complete.splitlines():
                arrivals.append((now, json.loads(line)))
        time.sleep(0.005)


def watch_board(board: Path, arrivals: dict[int, float], done: threading.Event) -> None:
    """Note when each step's first event lands in the run's event files (polled every 5 ms)."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    offsets: dict[Path, int] = {}
    while not done.is_set():
        for path in board.rglob("events.out.tfevents.*") if board.is_dir() else ():
            with path.open("rb") as handle:
                handle.seek(offsets.get(path, 0))
                data = handle.read()
            now, at = time.time(), 0
            while at + 12 <= len(data):
                (length,) = struct.unpack("<Q", data[at : at + 8])
                if at + 16 + length > len(data):
                    break
                event = Event.FromString(data[at + 12 : at + 12 + length])
                if event.summary.value and event.summary.value[0].tag == "perf/emitted_at":
                    arrivals.setdefault(event.step, now)
                at += 16 + length
            offsets[path] = offsets.get(path, 0) + at
        time.sleep(0.005)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=2000.0, help="lines per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the container talks")
    parser.add_argument("--step-every", type=int, default=400, help="lines between steps")
    parser.add_argument("--engine", choices=("docker", "process"), default="docker")
    parser.add_argument("--board", choices=("on", "off"), default="on", help="the run's TensorBoard events")
    args = parser.parse_args()

    chatty = REPO / "bench" / "images" / "chatty-trainer"
    if args.engine == "docker":
        subprocess.run(["bash", str(REPO / "scripts" / "offline-images.sh"), "--only", "python"], check=True)
        subprocess.run(["docker", "build", "-q", "-t", IMAGE, str(chatty)], check=True, stdout=subprocess.DEVNULL)
    steps = int(args.rate * args.seconds) // args.step_every
    env_of_trainer = {
        "CHATTY_RATE": str(args.rate),
        "CHATTY_SECONDS": str(args.seconds),
        "CHATTY_STEP_EVERY": str(args.step_every),
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "experiments").mkdir()
        if args.engine == "docker":
            experiment = {
                "image": IMAGE,
                "container": {
                    "gpus": "none",
                    "shm_size": "64m",
                    "ipc": "private",
                    "ulimits": {},
                    "env": env_of_trainer,
                },
            }
        else:
            experiment = {
                "engine": "process",
                "command": [sys.executable, "-u", str(chatty / "chatty.py")],
                "container": {"gpus": "none", "env": env_of_trainer},
            }
        experiment["export"] = {"tensorboard": args.board == "on"}
        (root / "experiments" / "chatty.yaml").write_text(json.dumps({"name": "chatty", "steps": steps, **experiment}))
        arrivals: list[tuple[float, dict]] = []
        on_board: dict[int, float] = {}
        done = threading.Event()
        watcher = threading.Thread(
            target=watch_metrics, args=(root / "capture" / "chatty" / "metrics.jsonl", arrivals, done)
        )
        watcher.start()
        board_dir = root / "capture" / "tensorboard"
        board_watcher = threading.Thread(target=watch_board, args=(board_dir, on_board, done))
        board_watcher.start()
        env = {**os.environ, "HARNESS_LOCK_DIR": str(root / "locks"), "HARNESS_PROCESS_DIR": str(root / "processes")}
        started = time.monotonic()
        harness = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness",
                "run",
                "chatty",
                "--experiments-dir",
                str(root / "experiments"),
                "--capture-dir",
                str(root / "capture"),
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(10)  # past start-up (imports, container creation)
        supervisor = supervisor_pid(root / "processes") if args.engine == "process" else None
        cpu_a, wall_a = cpu_seconds(harness.pid), time.monotonic()
        shim_a = cpu_seconds(supervisor) if supervisor else 0.0
        time.sleep(max(1.0, args.seconds - 15))
        cpu_b, wall_b = cpu_seconds(harness.pid), time.monotonic()
        shim_b = cpu_seconds(supervisor) if supervisor else 0.0
        _, stderr = harness.communicate()
        total_wall = time.monotonic() - started
        time.sleep(0.1)
        done.set()
        watcher.join()
        board_watcher.join()
        board_bytes = sum(p.stat().st_size for p in board_dir.rglob("events.out.tfevents.*"))
        status = json.loads((root / "capture" / "chatty" / "status.json").read_text())
        lines = sum(1 for _ in (root / "capture" / "chatty" / "container.log").open("rb"))

    delays = [at - row["metrics"]["perf/emitted_at"] for at, row in arrivals if "perf/emitted_at" in row["metrics"]]
    steady = (cpu_b - cpu_a) / (wall_b - wall_a)
    print(
        f"run: {status['state']}, {status['steps_complete']}/{status['steps_expected']} steps, "
        f"{lines} lines in container.log, {total_wall:.1f} s wall, exit {harness.returncode}"
    )
    if harness.returncode:
        print(stderr[-2000:])
    print(f"rate asked           {args.rate:.0f} lines/s for {args.seconds:.0f} s")
    print(f"harness CPU          {steady:.4f} CPU s per wall s over the steady {wall_b - wall_a:.0f} s (goal < 0.05)")
    if args.engine == "process":
        print(
            f"supervisor CPU       {(shim_b - shim_a) / (wall_b - wall_a):.4f} CPU s per wall s (stamping and "
            "storing every line, as dockerd does for a container)"
        )
    if delays:
        delays.sort()
        print(
            f"line -> record delay median {statistics.median(delays) * 1000:.1f} ms, "
            f"p95 {delays[int(0.95 * (len(delays) - 1))] * 1000:.1f} ms, max {delays[-1] * 1000:.1f} ms "
            f"over {len(delays)} steps (goal: median < 200 ms)"
        )
    if args.board == "on":
        recorded = {row["step"]: at for at, row in arrivals}
        lags = sorted(on_board[step] - recorded[step] for step in on_board if step in recorded)
        print(
            f"tensorboard          {len(on_board)} of {len(recorded)} steps on the board, {board_bytes / 1e6:.2f} MB of "
            "events, written off the pump's thread"
        )
        if lags:
            print(
                f"record -> event delay median {statistics.median(lags) * 1000:.1f} ms, "
                f"p95 {lags[int(0.95 * (len(lags) - 1))] * 1000:.1f} ms, max {lags[-1] * 1000:.1f} ms "
                "(from a step's line in metrics.jsonl to its events on disk)"
            )
    else:
        print("tensorboard          off (--board off)")
    return 0 if status["state"] == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
