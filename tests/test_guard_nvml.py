"""The NVML sensor and `harness guard probe`, through the real nvidia-ml-py code path.

Here the library is tests/fake_nvml/fake_nvml.c, built with gcc and found
through LD_LIBRARY_PATH (nvidia-ml-py dlopens "libnvidia-ml.so.1", and the
loader reads LD_LIBRARY_PATH when a process starts, so each case runs in a
subprocess). It answers like a GB10 unless told otherwise. The `gpu` tests at
the end run the same code against the real library.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from support.lab import Lab

pytestmark = pytest.mark.integration  # a fake NVML library built with gcc; each query in a Python of its own

REPO = Path(__file__).resolve().parent.parent
FAKE_NVML_SOURCE = REPO / "tests" / "fake_nvml" / "fake_nvml.c"


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory holding the fake libnvidia-ml.so.1, built once per session."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not found: install the `gcc` package to build the fake NVML library")
    out = tmp_path_factory.mktemp("fake-nvml")
    built = subprocess.run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wl,-soname,libnvidia-ml.so.1",
            "-o",
            str(out / "libnvidia-ml.so.1"),
            str(FAKE_NVML_SOURCE),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    return out


class FakeGpu:
    """The fake library's state file and call log, and a way to run Python or the CLI against it."""

    def __init__(self, lib: Path, root: Path) -> None:
        self.lib = lib
        self.state = root / "nvml-state"
        self.calls_path = root / "nvml-calls"
        self.thermal_root = root / "thermal"
        self.thermal_root.mkdir()
        self.set(temperature_c=52)

    def set(self, **values: Any) -> None:
        """Replace the state file in one step; `temperature_c__1=88` is the line `temperature_c.1=88` (GPU 1 only)."""
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text("".join(f"{key.replace('__', '.')}={value}\n" for key, value in values.items()))
        tmp.replace(self.state)

    def calls(self) -> list[str]:
        return self.calls_path.read_text().split() if self.calls_path.exists() else []

    def env(self) -> dict[str, str]:
        return {**os.environ, **self.library_env()}

    def library_env(self) -> dict[str, str]:
        """What makes a process started now use the fake library."""
        return {
            "LD_LIBRARY_PATH": str(self.lib),
            "FAKE_NVML_STATE": str(self.state),
            "FAKE_NVML_CALLS": str(self.calls_path),
        }

    def python(self, code: str) -> Any:
        """Run `code` (which prints one JSON document last) against the fake library."""
        prelude = f"import json, sys\nSTATE = {str(self.state)!r}\nTHERMAL = {str(self.thermal_root)!r}\n"
        done = subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code)],
            cwd=REPO,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    def harness(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "harness", *args],
            cwd=REPO,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )


@pytest.fixture
def fake_gpu(fake_nvml_lib: Path, tmp_path: Path) -> FakeGpu:
    return FakeGpu(fake_nvml_lib, tmp_path)


READ = """
from dataclasses import asdict
from harness.guard.nvml import NvmlSensor
sensor = NvmlSensor.open()
reads = [asdict(sensor.read()) for _ in range({reads})]
facts = sensor.facts()
sensor.close()
print(json.dumps({{"reads": reads, "facts": facts}}))
"""


def test_nvml_sensor_reads_a_gb10_and_probes_unsupported_queries_once(fake_gpu: FakeGpu) -> None:
    fake_gpu.set(temperature_c=83, reasons="0x20", power_mw=35500)
    out = fake_gpu.python(READ.format(reads=5))
    assert {(r["temp_c"], r["reasons"], r["power_w"]) for r in out["reads"]} == {(83.0, 0x20, 35.5)}
    facts = out["facts"]
    assert facts["driver_version"] == "580.00-fake"
    [device] = facts["devices"]
    assert device["name"] == "NVIDIA GB10"
    assert device["queries"] == {
        "temperature": "OK",
        "clock_event_reasons": "OK",
        "power_usage": "OK",
        "threshold_slowdown": "NOT_SUPPORTED",
        "threshold_shutdown": "NOT_SUPPORTED",
        "threshold_gpu_max": "NOT_SUPPORTED",
        "margin_temperature": "NOT_SUPPORTED",
    }
    assert device["thresholds_c"] == {} and device["margin_c"] is None
    assert facts["unsupported"] == [
        "margin_temperature",
        "threshold_gpu_max",
        "threshold_shutdown",
        "threshold_slowdown",
    ]
    calls = fake_gpu.calls()
    assert not [c for c in calls if "MemoryInfo" in c]  # never asked, not even once
    assert calls.count("nvmlDeviceGetTemperatureThreshold") == 3  # probed once each, never polled
    assert calls.count("nvmlDeviceGetMarginTemperature") == 1
    assert calls.count("nvmlDeviceGetTemperatureV") == 6  # the probe, then five polls
    assert calls[-1] == "nvmlShutdown"


def test_nvml_one_failing_query_never_stops_the_others(fake_gpu: FakeGpu) -> None:
    out = fake_gpu.python("""
    from dataclasses import asdict
    from harness.guard.nvml import NvmlSensor
    def put(text):
        open(STATE, "w").write(text)
    put("temperature_c=70\\nreasons=0x40\\npower_mw=30000\\n")
    sensor = NvmlSensor.open()
    reads = []
    for fail in ("temperature", "reasons,power", "temperature,reasons,power", ""):
        put(f"temperature_c=71\\nreasons=0x40\\npower_mw=30000\\nfail={fail}\\n")
        sample = sensor.read()
        reads.append(None if sample is None else [sample.temp_c, sample.reasons, sample.power_w])
    print(json.dumps(reads))
    """)
    assert out == [[None, 0x40, 30.0], [71.0, None, None], None, [71.0, 0x40, 30.0]]


def test_nvml_a_datacenter_gpu_reports_thresholds_and_margin(fake_gpu: FakeGpu) -> None:
    fake_gpu.set(temperature_c=60, profile="full")
    out = fake_gpu.python(READ.format(reads=1))
    [device] = out["facts"]["devices"]
    assert device["name"] == "NVIDIA H200"
    assert device["thresholds_c"] == {"slowdown": 92.0, "shutdown": 95.0, "gpu_max": 87.0}
    assert device["margin_c"] == 32
    assert out["facts"]["unsupported"] == []
    assert not [c for c in fake_gpu.calls() if "MemoryInfo" in c]


def test_nvml_an_older_driver_falls_back_to_the_older_entry_points(fake_gpu: FakeGpu) -> None:
    fake_gpu.set(temperature_c=66, reasons="0x8", profile="old-driver")
    out = fake_gpu.python(READ.format(reads=3))
    assert {(r["temp_c"], r["reasons"]) for r in out["reads"]} == {(66.0, 0x8)}
    assert out["facts"]["devices"][0]["queries"]["temperature"] == "OK"
    calls = fake_gpu.calls()
    assert calls.count("nvmlDeviceGetTemperatureV") == 1 and calls.count("nvmlDeviceGetTemperature") == 4
    assert calls.count("nvmlDeviceGetCurrentClocksEventReasons") == 1
    assert calls.count("nvmlDeviceGetCurrentClocksThrottleReasons") == 4


def test_nvml_several_gpus_give_the_hottest_the_union_of_reasons_and_the_total_power(fake_gpu: FakeGpu) -> None:
    fake_gpu.set(devices=2, temperature_c=50, temperature_c__1=88, reasons="0x1", reasons__1="0x40", power_mw=20000)
    out = fake_gpu.python(READ.format(reads=1))
    assert [(r["temp_c"], r["reasons"], r["power_w"]) for r in out["reads"]] == [(88.0, 0x41, 40.0)]
    assert [d["index"] for d in out["facts"]["devices"]] == [0, 1]


MEMORY = """
import pynvml
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(0)
answers = []
for version in (None, pynvml.nvmlMemory_v2):
    try:
        answers.append(pynvml.nvmlDeviceGetMemoryInfo(handle, version).total)
    except pynvml.NVMLError_NotSupported:
        answers.append("NOT_SUPPORTED")
pynvml.nvmlShutdown()
print(json.dumps(answers))
"""


def test_nvml_fake_library_answers_memory_info_like_a_gb10(fake_gpu: FakeGpu) -> None:
    assert fake_gpu.python(MEMORY) == ["NOT_SUPPORTED", "NOT_SUPPORTED"]
    fake_gpu.set(profile="full")
    assert fake_gpu.python(MEMORY) == [141 << 30, 141 << 30]


OPEN = """
from pathlib import Path
from harness.guard.config import GuardConfig
from harness.errors import HarnessError
from harness.guard.sensors import open_sensor
try:
    choice = open_sensor(GuardConfig(sensor={sensor!r}, pause_at_c={pause_at}), thermal_root=Path(THERMAL))
except HarnessError as err:
    print(json.dumps({{"error": str(err)}}))
else:
    print(json.dumps({{"facts": choice.facts, "warnings": choice.warnings, "none": choice.sensor is None}}))
"""


def zone(root: Path, millidegrees: int) -> None:
    (root / "thermal_zone0").mkdir()
    (root / "thermal_zone0" / "type").write_text("acpitz\n")
    (root / "thermal_zone0" / "temp").write_text(f"{millidegrees}\n")


def test_nvml_auto_reads_nvml_and_the_zones_else_either_else_none_with_a_warning(fake_gpu: FakeGpu) -> None:
    zone(fake_gpu.thermal_root, 48000)
    picked = fake_gpu.python(OPEN.format(sensor="auto", pause_at=85))
    assert picked["facts"]["picked"] == "nvml+sysfs" and "tried" not in picked["facts"] and picked["warnings"] == []
    assert picked["facts"]["devices"][0]["name"] == "NVIDIA GB10" and picked["facts"]["zones"][0]["readable"]
    shutil.rmtree(fake_gpu.thermal_root / "thermal_zone0")
    picked = fake_gpu.python(OPEN.format(sensor="auto", pause_at=85))
    assert picked["facts"]["picked"] == "nvml" and "sysfs" in picked["facts"]["tried"]
    zone(fake_gpu.thermal_root, 48000)
    fake_gpu.set(driver="missing")
    picked = fake_gpu.python(OPEN.format(sensor="auto", pause_at=85))
    assert picked["facts"]["picked"] == "sysfs"
    assert picked["facts"]["tried"] == {"nvml": "NVML: Driver Not Loaded"}
    shutil.rmtree(fake_gpu.thermal_root / "thermal_zone0")
    off = fake_gpu.python(OPEN.format(sensor="auto", pause_at=85))
    assert off["none"] and off["facts"]["picked"] is None
    assert off["warnings"] == [
        "heat guard off: no sensor can read a temperature here "
        f"(nvml: NVML: Driver Not Loaded; sysfs: no readable thermal zone under {fake_gpu.thermal_root} (none))"
    ]
    named = fake_gpu.python(OPEN.format(sensor="nvml", pause_at=85))
    assert named == {"error": "guard.sensor nvml: NVML: Driver Not Loaded"}


def test_nvml_warns_when_the_gpu_would_throttle_before_the_guard_pauses(fake_gpu: FakeGpu) -> None:
    fake_gpu.set(temperature_c=60, profile="full")
    out = fake_gpu.python(OPEN.format(sensor="nvml", pause_at=93))
    assert out["warnings"] == [
        "guard.pause_at_c 93 C is at or above GPU 0's slowdown threshold 92 C: "
        "the GPU will throttle itself before the guard pauses the run"
    ]


def test_nvml_guard_probe_prints_each_query_and_exits_0(fake_gpu: FakeGpu) -> None:
    fake_gpu.set(temperature_c=83, reasons="0x20", power_mw=35500)
    zone(fake_gpu.thermal_root, 61500)
    done = fake_gpu.harness("guard", "probe", "--thermal-root", str(fake_gpu.thermal_root))
    assert done.returncode == 0, done.stderr
    lines = [" ".join(line.split()) for line in done.stdout.splitlines()]
    for expected in (
        "NVML: driver 580.00-fake, NVML 13.580.00-fake, 1 GPU(s)",
        "GPU 0: NVIDIA GB10 GPU-00000000-fake-0000-0000-000000000000",
        "temperature OK 83 C",
        "clock_event_reasons OK 0x20 (SwThermalSlowdown)",
        "power_usage OK 35.5 W",
        "threshold_slowdown NOT_SUPPORTED -",
        "threshold_shutdown NOT_SUPPORTED -",
        "threshold_gpu_max NOT_SUPPORTED -",
        "margin_temperature NOT_SUPPORTED -",
        "thermal_zone0 acpitz 61.5 C - pause_at_c 85 C",
        "sensor auto reads: nvml and sysfs",
    ):
        assert expected in lines, (expected, done.stdout)
    assert done.stderr == ""
    assert not [c for c in fake_gpu.calls() if "MemoryInfo" in c]


AUTO_DRILL = """
import os, subprocess, time
from pathlib import Path
from harness.engines.process import ProcessRun
from harness.guard import GuardLoop
from harness.guard.config import GuardConfig
from harness.guard.sensors import open_sensor

def stopped(pid):
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T"

def wait(check, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.005)
    return check()

soc = Path(THERMAL) / "thermal_zone0" / "temp"
handle = ProcessRun(subprocess.Popen(["sleep", "60"], start_new_session=True, stdout=subprocess.PIPE))
config = GuardConfig(sensor="auto", poll_s=0.05, min_pause_s=0.0)
choice = open_sensor(config, thermal_root=Path(THERMAL))
seen = {"picked": choice.facts["picked"]}
with GuardLoop(handle, choice.sensor, config, pauses_path=sys.argv[1] + "/pauses.jsonl",
               samples_path=sys.argv[1] + "/guard.jsonl") as guard:
    open(str(soc) + ".tmp", "w").write("96000\\n")
    os.replace(str(soc) + ".tmp", soc)
    seen["paused"] = wait(lambda: stopped(handle.id) and guard.reading.paused) and guard.reading.reason
choice.sensor.close()
handle.kill()
seen["samples"] = [json.loads(line) for line in open(sys.argv[1] + "/guard.jsonl")]
print(json.dumps(seen))
"""


def test_nvml_auto_on_a_gb10_pauses_for_its_cpu_side_while_the_gpu_reads_cool(
    fake_gpu: FakeGpu, tmp_path: Path
) -> None:
    # A host that heats the CPU side can reach a trip point while the GPU reads cool: auto watches both.
    fake_gpu.set(temperature_c=55)
    zone(fake_gpu.thermal_root, 60000)
    (fake_gpu.thermal_root / "thermal_zone0" / "type").write_text("soc\n")
    (fake_gpu.thermal_root / "thermal_zone0" / "trip_point_0_type").write_text("critical\n")
    (fake_gpu.thermal_root / "thermal_zone0" / "trip_point_0_temp").write_text("104500\n")
    seen = fake_gpu.python(AUTO_DRILL.replace("sys.argv[1]", repr(str(tmp_path))))
    assert seen["picked"] == "nvml+sysfs"
    assert seen["paused"] == "thermal_zone0 (soc) 96.0 C >= 94.5 C, 10 C below its critical point 104.5 C"
    hot = [s for s in seen["samples"] if s.get("zones", {}).get("thermal_zone0") == 96.0][0]
    assert (hot["gpu_c"], hot["temp_c"], hot["paused"]) == (55.0, 96.0, True)


def test_nvml_guard_probe_json(fake_gpu: FakeGpu) -> None:
    fake_gpu.set(temperature_c=70, profile="full")
    done = fake_gpu.harness("guard", "probe", "--thermal-root", str(fake_gpu.thermal_root), "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["temperature_readable_by"] == ["nvml"]
    assert found["nvml"]["devices"][0]["thresholds_c"] == {"slowdown": 92.0, "shutdown": 95.0, "gpu_max": 87.0}
    assert found["nvml"]["values"][0]["temperature"] == 70
    assert found["sysfs"] == {"root": str(fake_gpu.thermal_root), "zones": []}


def test_nvml_guard_probe_without_a_driver_exits_1_with_one_line(fake_gpu: FakeGpu) -> None:
    fake_gpu.set(driver="missing")
    done = fake_gpu.harness("guard", "probe", "--thermal-root", str(fake_gpu.thermal_root))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "error: no temperature can be read here: NVML: Driver Not Loaded; "
        f"sysfs: no thermal zones under {fake_gpu.thermal_root}"
    ]
    assert "NVML: unavailable: Driver Not Loaded" in done.stdout
    zone(fake_gpu.thermal_root, 45000)  # a thermal zone is enough
    assert fake_gpu.harness("guard", "probe", "--thermal-root", str(fake_gpu.thermal_root)).returncode == 0


DRILL = """
import os, subprocess, time
from harness.engines.process import ProcessRun
from harness.guard.config import GuardConfig
from harness.guard import GuardLoop
from harness.guard.nvml import NvmlSensor

def state_letter(pid):
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]

def wait(check):
    deadline = time.monotonic() + 5
    while not check() and time.monotonic() < deadline:
        time.sleep(0.005)
    return check()

def put(text):  # replace the state in one step, as a drill should
    open(STATE + ".tmp", "w").write(text)
    os.replace(STATE + ".tmp", STATE)

handle = ProcessRun(subprocess.Popen(["sleep", "60"], start_new_session=True, stdout=subprocess.PIPE))
sensor = NvmlSensor.open()
config = GuardConfig(sensor="nvml", poll_s=0.05, min_pause_s=0.0)
seen = {}
with GuardLoop(handle, sensor, config, pauses_path=sys.argv[1] + "/pauses.jsonl",
               samples_path=sys.argv[1] + "/guard.jsonl") as guard:
    put("temperature_c=88\\n")
    seen["paused"] = wait(lambda: state_letter(handle.id) == "T" and guard.reading.paused)
    put("temperature_c=77\\n")
    seen["resumed"] = wait(lambda: state_letter(handle.id) != "T" and not guard.reading.paused)
    put("temperature_c=60\\nreasons=0x40\\n")
    seen["throttle"] = wait(lambda: state_letter(handle.id) == "T" and guard.reading.paused) and guard.reading.reason
sensor.close()
seen["after_stop"] = state_letter(handle.id)
handle.kill()
seen["windows"] = [json.loads(line) for line in open(sys.argv[1] + "/pauses.jsonl")]
print(json.dumps(seen))
"""


def test_nvml_temperature_drill_pauses_and_resumes_a_process_group(fake_gpu: FakeGpu, tmp_path: Path) -> None:
    fake_gpu.set(temperature_c=60)
    code = DRILL.replace("sys.argv[1]", repr(str(tmp_path)))
    seen = fake_gpu.python(code)
    assert seen["paused"] is True and seen["resumed"] is True
    assert seen["throttle"] == "clock event HwThermalSlowdown"
    assert seen["after_stop"] != "T"  # the guard thawed it on the way out
    windows = seen["windows"]
    assert [(w["end"] is None, w["peak_c"]) for w in windows] == [
        (True, 88.0),
        (False, 88.0),
        (True, 60.0),
        (False, 60.0),
    ]
    assert windows[0]["reason"] == "GPU 88.0 C >= pause_at_c 85 C"


def test_nvml_a_temperature_drill_pauses_a_run_through_harness_run(fake_gpu: FakeGpu, lab: Lab) -> None:
    from harness.capture.reader import read_pauses
    from harness.engines import PAUSED, RUNNING

    fake_gpu.set(temperature_c=60)
    run = lab.experiment(
        "nvml-drill",
        scenario="ticks",
        steps=1,
        env={"FAKE_TICKS": "150", "FAKE_TICK_S": "0.02"},
        guard={"sensor": "nvml", "poll_s": 0.1, "min_pause_s": 0},
    )
    harness = lab.spawn("run", run, env=fake_gpu.library_env())

    def state_is(state: str) -> bool:
        return bool(lab.objects()) and lab.objects()[0].describe().state == state

    try:
        lab.wait_for(lambda: len(lab.log(run)) > 20 and lab.objects(), 60, "the first lines")
        fake_gpu.set(temperature_c=90)
        lab.wait_for(lambda: state_is(PAUSED), 10, "the pause at 90 C")
        fake_gpu.set(temperature_c=70)
        lab.wait_for(lambda: state_is(RUNNING), 10, "the resume at 70 C")
        fake_gpu.set(temperature_c=60, reasons="0x40")
        lab.wait_for(lambda: state_is(PAUSED), 10, "the pause on HW thermal slowdown")
        fake_gpu.set(temperature_c=60)
        out, _ = harness.communicate(timeout=120)
    finally:
        harness.kill()
    assert harness.returncode == 0, out
    windows = read_pauses(lab.captures / run / "pauses.jsonl", [])
    assert [w.reason for w in windows] == ["GPU 90.0 C >= pause_at_c 85 C", "clock event HwThermalSlowdown"]
    assert all(w.end_us is not None for w in windows)
    guard = json.loads((lab.captures / run / "manifest.json").read_text())["guard"]
    assert guard["guarded"] is True and guard["picked"] == "nvml" and guard["requested"] == "nvml"
    assert guard["devices"][0]["name"] == "NVIDIA GB10"
    assert guard["unsupported"] == [
        "margin_temperature",
        "threshold_gpu_max",
        "threshold_shutdown",
        "threshold_slowdown",
    ]
    assert not [c for c in fake_gpu.calls() if "MemoryInfo" in c]


def test_nvml_named_without_a_driver_stops_the_run_before_anything_starts(fake_gpu: FakeGpu, lab: Lab) -> None:
    fake_gpu.set(driver="missing")
    run = lab.experiment("nvml-blind", guard={"sensor": "nvml"})
    harness = lab.spawn("run", run, env=fake_gpu.library_env())
    out, _ = harness.communicate(timeout=60)
    assert harness.returncode == 2
    assert out.splitlines() == [f"error: run {run} not started: guard.sensor nvml: NVML: Driver Not Loaded"]
    assert not (lab.captures / run).exists() and lab.objects() == []


def real_nvml(code: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + textwrap.dedent(code)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
def test_nvml_sensor_on_the_real_library() -> None:
    out = real_nvml(READ.format(reads=3))
    assert all(r["temp_c"] is not None and 0 < r["temp_c"] < 120 for r in out["reads"])
    assert out["facts"]["devices"] and out["facts"]["driver_version"]


@pytest.mark.gpu
def test_nvml_guard_probe_on_the_real_library() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness", "guard", "probe"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "temperature" in done.stdout and "sensor auto picks: nvml" in done.stdout
