"""Sensors without a GPU: file, sysfs thermal zones (a temporary tree), the simulated model, and how they open."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.guard.config import GuardConfig, SimSensorConfig
from harness.guard.samples import PauseAware, SensorUnavailable
from harness.guard.sensors import (
    FileSensor,
    SimSensor,
    SysfsSensor,
    open_sensor,
    probe_thermal_zones,
    zone_limit,
)
from support.fakes import FakeClock


def wall() -> int:
    return 1_700_000_000_000_000


def zones(root: Path, *temps: object) -> Path:
    """thermal_zone0..N under root: an int is millidegrees, a str is written as is, None makes `temp` unreadable."""
    for i, temp in enumerate(temps):
        zone = root / f"thermal_zone{i}"
        zone.mkdir(parents=True)
        (zone / "type").write_text(f"acpitz-{i}\n")
        if temp is None:
            (zone / "temp").mkdir()  # reading it fails, as a zone whose driver errors does
        else:
            (zone / "temp").write_text(f"{temp}\n")
    return root


def test_file_sensor_reads_a_temperature_and_an_optional_reasons_mask(tmp_path: Path) -> None:
    path = tmp_path / "temp"
    sensor = FileSensor(path, wall)
    assert sensor.read() is None  # no file yet: a missing reading
    path.write_text("84.5\n")
    got = sensor.read()
    assert got is not None and (got.temp_c, got.reasons, got.power_w, got.time_us) == (84.5, None, None, wall())
    path.write_text("70 0x20\n")
    got = sensor.read()
    assert got is not None and (got.temp_c, got.reasons) == (70.0, 0x20)
    for junk in ("", "hot", "80 reasons"):
        path.write_text(junk)
        assert sensor.read() is None, junk
    path.write_text("nan")
    got = sensor.read()
    assert got is not None and got.temp_c is None  # never a NaN in a record: a missing reading while it runs


@pytest.mark.parametrize("junk", ["nan", "inf", "-inf", "NaN 0x20", "Infinity"])
def test_a_file_sensor_reading_nan_or_inf_at_opening_is_refused_as_garbage_is(tmp_path: Path, junk: str) -> None:
    # Such a run used to start unguarded while its manifest said `guarded: true, readable: true`.
    path = tmp_path / "temp"
    path.write_text(junk + "\n")
    with pytest.raises(HarnessError) as err:
        open_sensor(GuardConfig(sensor=f"file:{path}"))
    first = junk.split()[0]
    assert str(err.value) == (
        f"guard.sensor file:{path}: {path} does not start with a temperature in C ({first!r} is not finite)"
    )


def trips(root: Path, zone: int, *points: tuple[str, object]) -> None:
    """trip_point_N_type/_temp of thermal_zone<zone>: (type, millidegrees) each."""
    for i, (kind, temp) in enumerate(points):
        (root / f"thermal_zone{zone}" / f"trip_point_{i}_type").write_text(f"{kind}\n")
        (root / f"thermal_zone{zone}" / f"trip_point_{i}_temp").write_text(f"{temp}\n")


def test_sysfs_sensor_reads_every_readable_zone_each_with_the_limit_its_trip_points_give(tmp_path: Path) -> None:
    root = zones(tmp_path, 45000, 87500, None, 61250)
    trips(root, 0, ("passive", 95000), ("critical", 104500))
    trips(root, 3, ("critical", 110000), ("hot", 90000))
    sensor = SysfsSensor(root, wall, GuardConfig(zone_margin_c=10, pause_at_c=85, resume_at_c=78))
    got = sensor.read()
    assert got is not None and got.temp_c is None and got.reasons is None  # no GPU here: the zones alone
    assert [(z.name, z.label, z.temp_c) for z in got.zones] == [
        ("thermal_zone0", "thermal_zone0 (acpitz-0)", 45.0),
        ("thermal_zone1", "thermal_zone1 (acpitz-1)", 87.5),
        ("thermal_zone3", "thermal_zone3 (acpitz-3)", 61.25),
    ]
    limits = {z.name: z.limit for z in got.zones}
    # the lowest hot or critical point, less the margin; resumed the guard's hysteresis (85 - 78) below that
    assert (limits["thermal_zone0"].pause_at_c, limits["thermal_zone0"].resume_at_c) == (94.5, 87.5)
    assert limits["thermal_zone0"].basis == "94.5 C, 10 C below its critical point 104.5 C"  # passive is not a limit
    assert (limits["thermal_zone3"].pause_at_c, limits["thermal_zone3"].trip_type) == (80.0, "hot")
    assert (limits["thermal_zone1"].pause_at_c, limits["thermal_zone1"].basis) == (85.0, "pause_at_c 85 C")
    assert got.hottest_c == 87.5
    facts = sensor.facts()["zones"]
    assert [(z["zone"], z["readable"]) for z in facts] == [
        ("thermal_zone0", True),
        ("thermal_zone1", True),
        ("thermal_zone2", False),
        ("thermal_zone3", True),
    ]
    assert facts[0]["trips"] == [{"type": "passive", "temp_c": 95.0}, {"type": "critical", "temp_c": 104.5}]
    (root / "thermal_zone1" / "temp").unlink()  # a zone that goes away is unread, not fatal
    got = sensor.read()
    assert got is not None and [z.temp_c for z in got.zones] == [45.0, None, 61.25]
    for zone in ("thermal_zone0", "thermal_zone3"):
        (root / zone / "temp").write_text("garbage")
    assert sensor.read() is None


def test_trip_points_a_driver_fills_with_garbage_set_no_limit(tmp_path: Path) -> None:
    root = zones(tmp_path, 50000)
    trips(root, 0, ("critical", 0), ("hot", 255000), ("critical", "n/a"))
    (zone,) = probe_thermal_zones(root)
    assert [(t.type, t.temp_c) for t in zone.trips] == [("critical", None), ("hot", None), ("critical", None)]
    assert zone_limit(zone, GuardConfig()).basis == "pause_at_c 85 C"  # judged as the GPU is


def test_the_zone_margin_moves_every_zone_s_pause_point(tmp_path: Path) -> None:
    root = zones(tmp_path, 50000)
    trips(root, 0, ("critical", 105000))
    (zone,) = probe_thermal_zones(root)
    assert zone_limit(zone, GuardConfig(zone_margin_c=20)).pause_at_c == 85.0
    assert zone_limit(zone, GuardConfig(zone_margin_c=0)).basis == "105 C, 0 C below its critical point 105 C"


def test_the_thermal_root_comes_from_harness_thermal_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = zones(tmp_path / "elsewhere", 52000)
    monkeypatch.setenv("HARNESS_THERMAL_ROOT", str(root))
    choice = open_sensor(GuardConfig(sensor="sysfs"))
    assert choice.sensor is not None and choice.facts["root"] == str(root)
    monkeypatch.setenv("HARNESS_THERMAL_ROOT", str(tmp_path / "nothing"))
    with pytest.raises(HarnessError, match="no readable thermal zone under .*nothing"):
        open_sensor(GuardConfig(sensor="sysfs"))


def test_auto_without_nvml_reads_the_zones_and_warns_of_one_already_past_its_pause_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.guard import nvml
    from harness.guard.samples import SensorUnavailable as Unavailable

    def no_driver(*args: object) -> object:
        raise Unavailable("NVML: no NVIDIA driver (libnvidia-ml.so.1 not found)")

    monkeypatch.setattr(nvml.NvmlSensor, "open", no_driver)
    root = zones(tmp_path / "t", 45000, 99000)
    trips(root, 1, ("critical", 104500))
    choice = open_sensor(GuardConfig(sensor="auto"), thermal_root=root)
    assert choice.sensor is not None and choice.facts["picked"] == "sysfs" and "nvml" in choice.facts["tried"]
    assert choice.warnings == [
        "thermal_zone1 (acpitz-1) reads 99.0 C, at or above its pause point 94.5 C "
        "(94.5 C, 10 C below its critical point 104.5 C): the run will be paused as soon as it starts"
    ]


def test_sysfs_zones_sort_by_number_and_none_readable_is_unavailable(tmp_path: Path) -> None:
    root = zones(tmp_path / "t", *([40000] * 11))
    assert [z.zone for z in probe_thermal_zones(root)][-2:] == ["thermal_zone9", "thermal_zone10"]
    with pytest.raises(SensorUnavailable, match="no readable thermal zone under .* \\(none\\)"):
        SysfsSensor(tmp_path / "empty")
    with pytest.raises(SensorUnavailable, match="\\(1 unreadable\\)"):
        SysfsSensor(zones(tmp_path / "bad", None))


def test_sim_heats_toward_hot_while_running_and_cools_toward_idle_while_paused() -> None:
    model = SimSensorConfig(start_c=45, idle_c=40, hot_c=95, heat_tau_s=30, cool_tau_s=15, throttle_at_c=87)
    clock = FakeClock()
    sensor = SimSensor(model, clock, wall)
    assert isinstance(sensor, PauseAware)
    clock.now = 30.0  # one time constant: 63% of the way from 45 to 95
    got = sensor.read()
    assert got is not None and got.temp_c == pytest.approx(95 - 50 * math.exp(-1), abs=0.01) and got.reasons == 0
    clock.now = 120.0
    hot = sensor.read()
    assert hot is not None and hot.temp_c > 87 and hot.reasons == 0x20  # reports a thermal slowdown, as GB10 would
    sensor.set_paused(True)
    clock.now = 135.0  # one cooling time constant later
    cooled = sensor.read()
    assert cooled is not None
    assert cooled.temp_c == pytest.approx(40 + (hot.temp_c - 40) * math.exp(-1), abs=0.01)
    sensor.set_paused(False)
    clock.now = 136.0
    warmer = sensor.read()
    assert warmer is not None and warmer.temp_c > cooled.temp_c


def test_sim_models_a_cpu_side_of_its_own_judged_against_a_critical_point() -> None:
    model = SimSensorConfig(cpu={"start_c": 60, "idle_c": 45, "hot_c": 100, "heat_tau_s": 40, "cool_tau_s": 150})
    clock = FakeClock()
    sensor = SimSensor(model, clock, wall, GuardConfig(zone_margin_c=10))
    (cpu,) = sensor.read().zones
    assert (cpu.name, cpu.label, cpu.temp_c) == ("sim_cpu", "CPU (sim)", 60.0)
    assert (cpu.limit.pause_at_c, cpu.limit.resume_at_c, cpu.limit.trip_c) == (95.0, 88.0, 105.0)
    clock.now = 40.0  # one heating time constant
    (cpu,) = sensor.read().zones
    assert cpu.temp_c == pytest.approx(100 - 40 * math.exp(-1), abs=0.01)
    sensor.set_paused(True)
    clock.now = 190.0  # one cooling time constant
    (cooled,) = sensor.read().zones
    assert cooled.temp_c == pytest.approx(45 + (cpu.temp_c - 45) * math.exp(-1), abs=0.01)
    assert sensor.facts()["zones"][0]["pause_at_c"] == 95.0


def test_sim_does_not_depend_on_how_often_it_is_read() -> None:
    model = SimSensorConfig()
    often, rarely = FakeClock(), FakeClock()
    a, b = SimSensor(model, often, wall), SimSensor(model, rarely, wall)
    for tick in range(1, 101):
        often.now = tick * 0.5
        a.read()
    rarely.now = 50.0
    assert a.read().temp_c == pytest.approx(b.read().temp_c, abs=0.01)


def test_sim_model_is_validated() -> None:
    with pytest.raises(ValueError, match="idle_c .* must be below hot_c"):
        SimSensorConfig(idle_c=90, hot_c=80)


def test_open_sensor_none_file_and_sim(tmp_path: Path) -> None:
    choice = open_sensor(GuardConfig(sensor="none"))
    assert choice.sensor is None and choice.facts == {"requested": "none", "picked": None} and not choice.warnings
    (tmp_path / "t").write_text("50")
    choice = open_sensor(GuardConfig(sensor=f"file:{tmp_path / 't'}"))
    assert choice.sensor is not None and choice.facts == {
        "requested": f"file:{tmp_path / 't'}",
        "picked": "file",
        "path": str(tmp_path / "t"),
        "readable": True,
    }
    choice = open_sensor(GuardConfig(sensor="sim", sim={"hot_c": 99.0}))
    assert choice.sensor is not None and choice.facts["picked"] == "sim"
    assert choice.facts["model"]["hot_c"] == 99.0


def test_open_sensor_sysfs_named_but_absent_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError) as err:
        open_sensor(GuardConfig(sensor="sysfs"), thermal_root=tmp_path)
    assert str(err.value) == f"guard.sensor sysfs: no readable thermal zone under {tmp_path} (none)"
    choice = open_sensor(GuardConfig(sensor="sysfs"), thermal_root=zones(tmp_path / "z", 50000))
    assert choice.sensor is not None and choice.facts["picked"] == "sysfs"


def test_open_sensor_file_that_cannot_be_read_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError) as err:
        open_sensor(GuardConfig(sensor=f"file:{tmp_path / 'absent'}"))
    assert str(err.value) == (
        f"guard.sensor file:{tmp_path / 'absent'}: cannot read {tmp_path / 'absent'}: No such file or directory"
    )
    (tmp_path / "junk").write_text("hot\n")
    with pytest.raises(HarnessError) as err:
        open_sensor(GuardConfig(sensor=f"file:{tmp_path / 'junk'}"))
    assert str(err.value) == (
        f"guard.sensor file:{tmp_path / 'junk'}: {tmp_path / 'junk'} does not start with a temperature in C ('hot')"
    )


def test_guard_probe_shows_each_zone_s_trip_points_and_where_the_guard_would_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from harness.cli import app
    from harness.guard import probe
    from harness.guard.samples import SensorUnavailable as Unavailable

    def no_driver() -> object:
        raise Unavailable("NVML: no NVIDIA driver (libnvidia-ml.so.1 not found)")

    monkeypatch.setattr(probe, "probe_nvml", no_driver)  # the zones alone, on any machine
    root = zones(tmp_path / "thermal", 45000, 61000)
    trips(root, 0, ("passive", 95000), ("critical", 104500))
    env = {"HARNESS_THERMAL_ROOT": str(root), "COLUMNS": "200"}
    shown = CliRunner().invoke(app, ["guard", "probe"], env=env)
    assert shown.exit_code == 0, shown.output
    lines = [" ".join(line.split()) for line in shown.output.splitlines()]
    assert f"thermal zones under {root}" in lines
    assert (
        "thermal_zone0 acpitz-0 45.0 C passive 95.0 C, critical 104.5 C 94.5 C, 10 C below its critical point 104.5 C"
        in lines
    )
    assert "thermal_zone1 acpitz-1 61.0 C - pause_at_c 85 C" in lines
    assert "sensor auto reads: sysfs" in lines
    found = json.loads(CliRunner().invoke(app, ["guard", "probe", "--json"], env=env).output)
    zone0 = found["sysfs"]["zones"][0]
    assert zone0["trips"] == [
        {"index": 0, "type": "passive", "temp_c": 95.0},
        {"index": 1, "type": "critical", "temp_c": 104.5},
    ]
    assert (zone0["pause_at_c"], zone0["resume_at_c"]) == (94.5, 87.5)
