"""How fast the heat guard freezes a run, and what it costs while it only watches.

1. Docker drill latency: a container (busybox, sleeping) runs under the guard
   (`poll_s` 0.2, file sensor) through the Docker engine's handle; the sensor
   file is flipped to a hot reading, and the time until Docker reports the
   container paused (`docker inspect`: State.Paused) is measured. Median and
   max over 20 drills. Goal: median at most 0.3 s. Skipped, saying so, where no
   Docker engine answers or the image is missing.
2. Process drill latency: the same with a process group, until every process
   of the group shows state T (stopped) in /proc. Same goal.
2b. Zone drill latency: the same process group, guarded by the `sysfs` sensor
   on a fake thermal tree (a `soc` zone with a critical trip point at 104.5 C,
   so a pause point of 94.5 C); the zone's `temp` is flipped above its pause
   point while the GPU is nowhere in sight, until every process is stopped.
   Same goal: the zone's own limit freezes the run as fast as the GPU's does.
3. Idle cost: the guard polls a cool sensor every 1 s for a while; the CPU
   this process spends, as a share of one core. Goal: under 0.5%.

Each drill starts at a random point of the poll period, so the figures include
the wait for the next poll (on average half a period).
Usage: python bench/guard_latency.py [--drills 20] [--idle-seconds 60] [--sensor file|sysfs|nvml|sim]
       [--image miles-gb10-lab/busybox:stable]
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
from typing import Any, Callable, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.engines.process import ProcessRun  # noqa: E402
from harness.guard import GuardLoop  # noqa: E402
from harness.guard.config import GuardConfig  # noqa: E402
from harness.guard.samples import Sensor  # noqa: E402
from harness.guard.sensors import FileSensor, SysfsSensor, open_sensor  # noqa: E402


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
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
    )
    return ProcessRun(process)


def drills(
    count: int,
    poll_s: float,
    workdir: Path,
    handle: Any,
    frozen: Callable[[], bool],
    *,
    zone: bool = False,
) -> list[float]:
    """Seconds from the reading turning hot until `frozen()` says the engine reports it paused, per drill.

    `zone`: the reading is a fake thermal zone's `temp` (millidegrees), judged against its own trip point,
    rather than the file sensor's GPU temperature.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    if zone:
        reading = fake_zone(workdir / "thermal")
        config = GuardConfig(sensor="sysfs", poll_s=poll_s, min_pause_s=0.0)
        sensor: Sensor = SysfsSensor(workdir / "thermal", config=config)
        cool, hot = "60000", "96000"  # 96 C: above the soc zone's pause point (94.5 C), far above pause_at_c
    else:
        reading = workdir / "temp"
        write_reading(reading, "60")
        config = GuardConfig(sensor=f"file:{reading}", poll_s=poll_s, min_pause_s=0.0)
        sensor = FileSensor(reading)
        cool, hot = "60", "95"
    latencies = []
    with GuardLoop(
        handle, sensor, config, pauses_path=workdir / "pauses.jsonl", samples_path=workdir / "guard.jsonl"
    ) as guard:
        for _ in range(count):
            write_reading(reading, cool)
            if not wait_until(lambda: not guard.reading.paused and not frozen()):
                raise SystemExit("the guard did not resume the run within 10 s")
            time.sleep(random.uniform(0.05, 0.05 + poll_s))  # land anywhere in the poll period
            write_reading(reading, hot)
            hot_at = time.monotonic()
            if not wait_until(frozen):
                raise SystemExit("the guard did not freeze the run within 10 s")
            latencies.append(time.monotonic() - hot_at)
    if zone and not all("soc" in str(line) for line in (workdir / "pauses.jsonl").read_text().splitlines()):
        raise SystemExit("a zone drill's pause did not name the zone")
    return latencies


def fake_zone(root: Path) -> Path:
    """A thermal tree with one `soc` zone (critical trip point 104.5 C) at 60 C; its `temp` file."""
    zone = root / "thermal_zone0"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "type").write_text("soc\n")
    (zone / "trip_point_0_type").write_text("passive\n")
    (zone / "trip_point_0_temp").write_text("95000\n")
    (zone / "trip_point_1_type").write_text("critical\n")
    (zone / "trip_point_1_temp").write_text("104500\n")
    write_reading(zone / "temp", "60000")
    return zone / "temp"


def process_drills(count: int, poll_s: float, workdir: Path, *, zone: bool = False) -> list[float]:
    """Drills on a process group: until /proc shows every process stopped."""
    handle = start_group()
    try:
        return drills(count, poll_s, workdir, handle, lambda: group_stopped(handle.process.pid), zone=zone)
    finally:
        handle.kill()
        handle.process.wait()


def docker_drills(count: int, poll_s: float, workdir: Path, image: str) -> Optional[list[float]]:
    """Drills on a container through the Docker engine's handle: until `docker inspect` says Paused.

    None (with the reason printed) where no engine answers or the image is missing.
    """
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
        client.images.get(image)
    except Exception as err:  # noqa: BLE001 - a benchmark says why it skips and goes on
        print(f"docker drill latency: skipped ({type(err).__name__}: {err})")
        return None
    from harness.engines.docker import DockerEngine

    container = client.containers.run(image, ["sleep", "3600"], detach=True, labels={"guard-latency-bench": "1"})
    try:
        handle = DockerEngine(client).attach(container.id)
        return drills(
            count, poll_s, workdir, handle, lambda: bool(client.api.inspect_container(container.id)["State"]["Paused"])
        )
    finally:
        container.remove(force=True)


def idle_cost(seconds: float, sensor: Sensor, workdir: Path) -> float:
    """This process's CPU seconds per wall second while the guard polls every 1 s."""
    handle = start_group()
    config = GuardConfig(sensor="file:unused", poll_s=1.0)
    try:
        with GuardLoop(
            handle, sensor, config, pauses_path=workdir / "idle-pauses.jsonl", samples_path=workdir / "idle-guard.jsonl"
        ):
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
    parser.add_argument(
        "--sensor",
        choices=["file", "sysfs", "nvml", "sim"],
        default="file",
        help="sensor for the idle-cost figure (the drills use the file sensor)",
    )
    parser.add_argument(
        "--image",
        default="miles-gb10-lab/busybox:stable",
        help="image of the Docker drills' container (`make offline-images` builds it)",
    )
    args = parser.parse_args()

    met = True
    with tempfile.TemporaryDirectory(prefix="guard-bench-") as tmp:
        workdir = Path(tmp)
        for what, latencies in (
            (
                "docker drill latency (file sensor hot -> docker inspect: Paused)",
                docker_drills(args.drills, args.poll_s, workdir / "docker", args.image),
            ),
            (
                "process drill latency (file sensor hot -> every process of the group stopped)",
                process_drills(args.drills, args.poll_s, workdir / "process"),
            ),
            (
                "zone drill latency (a thermal zone past its own pause point -> every process of the group stopped)",
                process_drills(args.drills, args.poll_s, workdir / "zone", zone=True),
            ),
        ):
            if latencies is None:
                continue
            median = statistics.median(latencies)
            met = met and median <= 0.3
            print(
                f"{what}, poll_s {args.poll_s:g}, {len(latencies)} drills: median {median:.3f} s, "
                f"max {max(latencies):.3f} s (goal: median <= 0.3 s) {'OK' if median <= 0.3 else 'MISSED'}"
            )
        sensor = idle_sensor(args.sensor, workdir)
        try:
            share = idle_cost(args.idle_seconds, sensor, workdir)
        finally:
            sensor.close()
        print(
            f"idle cost ({args.sensor} sensor, poll_s 1, {args.idle_seconds:g} s): {100 * share:.3f}% of a core "
            f"(goal: < 0.5%) {'OK' if share < 0.005 else 'MISSED'}"
        )
        return 0 if met and share < 0.005 else 1


if __name__ == "__main__":
    sys.exit(main())
