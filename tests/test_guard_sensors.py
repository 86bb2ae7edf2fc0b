"""Sensors without a GPU: file, sysfs thermal zones (a temporary tree), the simulated model, and how they open."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.guard.config import GuardConfig, SimSensorConfig
from harness.guard.samples import PauseAware, SensorUnavailable
from harness.guard.sensors import FileSensor, SimSensor, SysfsSensor, open_sensor, probe_thermal_zones
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
    assert got is not None and got.temp_c is None  # never a NaN in a record


def test_sysfs_sensor_reads_the_hottest_readable_zone(tmp_path: Path) -> None:
    root = zones(tmp_path, 45000, 87500, None, 61250)
    sensor = SysfsSensor(root, wall)
    got = sensor.read()
    assert got is not None and got.temp_c == 87.5 and got.reasons is None
    assert sensor.facts()["zones"] == [
        {"zone": "thermal_zone0", "type": "acpitz-0", "readable": True},
        {"zone": "thermal_zone1", "type": "acpitz-1", "readable": True},
        {"zone": "thermal_zone2", "type": "acpitz-2", "readable": False},
        {"zone": "thermal_zone3", "type": "acpitz-3", "readable": True},
    ]
    (root / "thermal_zone1" / "temp").unlink()  # a zone that goes away is skipped, not fatal
    got = sensor.read()
    assert got is not None and got.temp_c == 61.25
    for zone in ("thermal_zone0", "thermal_zone3"):
        (root / zone / "temp").write_text("garbage")
    assert sensor.read() is None


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
