"""How fast the heat guard freezes a run, and what it costs while it only watches.

1. Drill latency: a process group runs under the guard (`poll_s` 0.2, file
   sensor); the sensor file is flipped to a hot reading, and the time until
   every process of the group shows state T (stopped) in /proc is measured.
   Median and max over 20 drills. Goal: median under 0.3 s.
2. Idle cost: the guard polls a cool sensor every 1 s for a while; the CPU
   this process spends, as a share of one core. Goal: under 0.5%.

The Docker variant of the first figure (time to `docker inspect` showing the
container paused) comes with the guard's wiring into the runner.
Usage: python bench/guard_latency.py [--drills 20] [--idle-seconds 60] [--sensor file|sysfs|nvml|sim]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.engines.process import ProcessRun  # noqa: E402
from harness.experiments import GuardConfig  # noqa: E402
from harness.guard import GuardLoop  # noqa: E402
from harness.guard.sensors import FileSensor, Sensor, open_sensor  # noqa: E402


def group_stopped(pgid: int) -> bool:
    """True when every process of the group is in state T."""
    states = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                states.append(fields[0])
    return bool(states) and all(state == "T" for state in states)


def wait_until(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


def write_reading(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def start_group() -> ProcessRun:
    """A process group of two that only sleeps: a trainer stand-in costing no CPU."""
    script = "import subprocess, time; subprocess.Popen(['sleep', '3600']); time.sleep(3600)"
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, start_new_session=True)
    return ProcessRun(process)


def drills(count: int, poll_s: float, workdir: Path) -> list[float]:
    """Seconds from the file turning hot to the group stopped, per drill."""
    reading = workdir / "temp"
    write_reading(reading, "60")
    handle = start_group()
    config = GuardConfig(sensor=f"file:{reading}", poll_s=poll_s, min_pause_s=0.0)
    latencies = []
    try:
        with GuardLoop(handle, FileSensor(reading), config, pauses_path=workdir / "pauses.jsonl",
                       samples_path=workdir / "guard.jsonl") as guard:
            for _ in range(count):
                write_reading(reading, "60")
                if not wait_until(lambda: not guard.reading.paused and not group_stopped(handle.process.pid)):
                    raise SystemExit("the guard did not resume the group within 10 s")
                time.sleep(random.uniform(0.05, 0.05 + poll_s))  # land anywhere in the poll period
                write_reading(reading, "95")
                hot_at = time.monotonic()
                if not wait_until(lambda: group_stopped(handle.process.pid)):
                    raise SystemExit("the guard did not stop the group within 10 s")
                latencies.append(time.monotonic() - hot_at)
    finally:
        handle.kill()
        handle.process.wait()
    return latencies


def idle_cost(seconds: float, sensor: Sensor, workdir: Path) -> float:
    """This process's CPU seconds per wall second while the guard polls every 1 s."""
    handle = start_group()
    config = GuardConfig(sensor="file:unused", poll_s=1.0)
    try:
        with GuardLoop(handle, sensor, config, pauses_path=workdir / "idle-pauses.jsonl",
                       samples_path=workdir / "idle-guard.jsonl"):
            time.sleep(2.0)  # past the first poll and its imports
            cpu0, wall0 = time.process_time(), time.monotonic()
            time.sleep(seconds)
            cpu1, wall1 = time.process_time(), time.monotonic()
    finally:
        handle.kill()
        handle.process.wait()
    return (cpu1 - cpu0) / (wall1 - wall0)


def idle_sensor(kind: str, workdir: Path) -> Sensor:
    if kind == "file":
        write_reading(workdir / "cool", "55")
        return FileSensor(workdir / "cool")
    choice = open_sensor(GuardConfig(sensor=kind, pause_at_c=150.0, resume_at_c=140.0))
    if choice.sensor is None:
        raise SystemExit(f"sensor {kind}: not available here")
    return choice.sensor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drills", type=int, default=20)
    parser.add_argument("--poll-s", type=float, default=0.2, help="poll period during the drills")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--sensor", choices=["file", "sysfs", "nvml", "sim"], default="file",
                        help="sensor for the idle-cost figure (the drills use the file sensor)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="guard-bench-") as tmp:
        workdir = Path(tmp)
        latencies = drills(args.drills, args.poll_s, workdir)
        median = statistics.median(latencies)
        print(f"drill latency (file sensor hot -> process group stopped), poll_s {args.poll_s:g}, "
              f"{len(latencies)} drills: median {median:.3f} s, max {max(latencies):.3f} s "
              f"(goal: median < 0.3 s) {'OK' if median < 0.3 else 'MISSED'}")
        sensor = idle_sensor(args.sensor, workdir)
        try:
            share = idle_cost(args.idle_seconds, sensor, workdir)
        finally:
            sensor.close()
        print(f"idle cost ({args.sensor} sensor, poll_s 1, {args.idle_seconds:g} s): {100 * share:.3f}% of a core "
              f"(goal: < 0.5%) {'OK' if share < 0.005 else 'MISSED'}")
        return 0 if median < 0.3 and share < 0.005 else 1


if __name__ == "__main__":
    sys.exit(main())
