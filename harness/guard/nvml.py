"""The NVML sensor: temperature, clock-event reasons and power of every GPU, via nvidia-ml-py.

What a GPU supports is probed once, when the sensor opens: each query is
OK, NOT_SUPPORTED or another NVML error, and a query that did not answer OK
is never asked again. One unsupported query never stops the others (GB10
answers NOT_SUPPORTED for memory info, the power limit and, on some drivers,
the temperature thresholds). Memory info is never queried at all.

With several GPUs a sample is the hottest temperature, the union of the
clock-event reasons and the summed power: the guard pauses the run when any
GPU is hot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Optional, Union

from harness.guard.samples import Sample, SensorUnavailable, WallClock, finite, wall_clock_us

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

# The queries read on every poll; the others are probed once, for the manifest and `guard probe`.
LIVE_QUERIES = ("temperature", "clock_event_reasons", "power_usage")
THRESHOLDS = {
    "slowdown": "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN",
    "shutdown": "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN",
    "gpu_max": "NVML_TEMPERATURE_THRESHOLD_GPU_MAX",
}
OK = "OK"
# An entry point this library or this nvidia-ml-py lacks: try the older one.
_TRY_NEXT = ("FUNCTION_NOT_FOUND", "ARGUMENT_VERSION_MISMATCH", "NOT_IN_PYNVML")


# nvidia-ml-py has no types: the module is a ModuleType, a GPU's handle an opaque object; its queries
# answer ctypes values, ints (temperatures, thresholds, milliwatts, reason masks) and bytes (names, versions).
Handle = object
Query = Callable[[Handle], object]
# An answer as recorded: bytes decoded, anything but a number or a string as its str (as the manifest writes it).
Answer = Union[int, float, str, None]


@dataclass(frozen=True)
class QueryResult:
    """One query's answer: OK with its value, or the NVML error name (NOT_SUPPORTED, GPU_IS_LOST...)."""

    status: str
    value: Answer = None


@dataclass(frozen=True)
class DeviceProbe:
    """What one GPU answered when probed."""

    index: int
    name: Optional[str]
    uuid: Optional[str]
    queries: dict[str, QueryResult]

    def thresholds_c(self) -> dict[str, float]:
        return {
            name: float(result.value)
            for name, result in ((n, self.queries[f"threshold_{n}"]) for n in THRESHOLDS)
            if result.status == OK and isinstance(result.value, (int, float))
        }


@dataclass(frozen=True)
class NvmlProbe:
    """What NVML answered on this machine: the driver, and each GPU's queries."""

    driver_version: Optional[str]
    nvml_version: Optional[str]
    devices: list[DeviceProbe] = field(default_factory=list)

    def unsupported(self) -> list[str]:
        """The queries some GPU did not answer OK, by name, once each."""
        return sorted({q for d in self.devices for q, r in d.queries.items() if r.status != OK})

    def can_read_temperature(self) -> bool:
        return any(d.queries["temperature"].status == OK for d in self.devices)

    def facts(self) -> JSONObject:
        return {
            "driver_version": self.driver_version,
            "nvml_version": self.nvml_version,
            "devices": [
                {
                    "index": d.index,
                    "name": d.name,
                    "uuid": d.uuid,
                    "queries": {q: r.status for q, r in d.queries.items()},
                    "thresholds_c": dict(d.thresholds_c()),
                    "margin_c": d.queries["margin_temperature"].value,
                }
                for d in self.devices
            ],
            "unsupported": list(self.unsupported()),
        }


def _candidates(pynvml: ModuleType) -> dict[str, list[Query]]:
    """Each query's entry points, newest first (an older driver or nvidia-ml-py lacks the newer one)."""

    def call(function: str, *args: object) -> Query:
        def query(handle: Handle) -> object:
            fn = getattr(pynvml, function, None)
            if fn is None:
                raise _NotInPynvml(function)
            return fn(handle, *args)

        return query

    gpu = pynvml.NVML_TEMPERATURE_GPU
    candidates = {
        "temperature": [call("nvmlDeviceGetTemperatureV", gpu), call("nvmlDeviceGetTemperature", gpu)],
        "clock_event_reasons": [
            call("nvmlDeviceGetCurrentClocksEventReasons"),
            call("nvmlDeviceGetCurrentClocksThrottleReasons"),
        ],
        "power_usage": [call("nvmlDeviceGetPowerUsage")],
    }
    for name, constant in THRESHOLDS.items():
        candidates[f"threshold_{name}"] = [call("nvmlDeviceGetTemperatureThreshold", getattr(pynvml, constant))]
    candidates["margin_temperature"] = [call("nvmlDeviceGetMarginTemperature")]
    return candidates


class _NotInPynvml(Exception):
    """This nvidia-ml-py has no such function."""


def _error_names(pynvml: ModuleType) -> dict[int, str]:
    prefix = "NVML_ERROR_"
    return {v: k[len(prefix) :] for k, v in vars(pynvml).items() if k.startswith(prefix) and isinstance(v, int)}


class _Nvml:
    """nvidia-ml-py with errors turned into status names; never lets one failed query raise."""

    def __init__(self, pynvml: ModuleType) -> None:
        self.pynvml = pynvml
        self.names = _error_names(pynvml)

    def status_of(self, err: Exception) -> str:
        if isinstance(err, _NotInPynvml):
            return "NOT_IN_PYNVML"
        if isinstance(err, self.pynvml.NVMLError):
            return self.names.get(err.value, f"NVML error {err.value}")
        return f"{type(err).__name__}: {err}"

    def ask(self, candidates: list[Query], handle: Handle) -> tuple[QueryResult, Optional[Query]]:
        """The first candidate that answers; else the most telling error."""
        status = "FUNCTION_NOT_FOUND"
        for query in candidates:
            try:
                return QueryResult(OK, _plain(query(handle))), query
            except Exception as err:  # noqa: BLE001 - every failure is a status, never a crash
                found = self.status_of(err)
                if found not in _TRY_NEXT:
                    return QueryResult(found), None
                status = found
        return QueryResult(status), None

    def text(self, function: str, *args: object) -> Optional[str]:
        try:
            value = _plain(getattr(self.pynvml, function)(*args))
        except Exception:  # noqa: BLE001 - an identity string is nice to have, never needed
            return None
        return None if value is None else str(value)


def _plain(value: object) -> Answer:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, (int, float, str)):
        return value
    return str(value)


def load_pynvml() -> ModuleType:
    """nvidia-ml-py initialised, or SensorUnavailable saying why (no package, no library, no driver)."""
    try:
        import pynvml
    except ImportError:
        raise SensorUnavailable("nvidia-ml-py is not installed") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        if err.value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
            raise SensorUnavailable("NVML: no NVIDIA driver (libnvidia-ml.so.1 not found)") from None
        raise SensorUnavailable(f"NVML: {err}") from None
    module: ModuleType = pynvml
    return module


def probe(pynvml: ModuleType) -> tuple[NvmlProbe, list[tuple[Handle, dict[str, Query]]]]:
    """Ask every GPU every query once; the probe, and per GPU its handle and the live queries that answered."""
    nvml = _Nvml(pynvml)
    candidates = _candidates(pynvml)
    devices: list[DeviceProbe] = []
    live: list[tuple[Handle, dict[str, Query]]] = []
    try:
        count = pynvml.nvmlDeviceGetCount()
    except pynvml.NVMLError as err:
        raise SensorUnavailable(f"NVML: cannot count GPUs: {err}") from None
    for index in range(count):
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError as err:
            devices.append(DeviceProbe(index, None, None, {q: QueryResult(nvml.status_of(err)) for q in candidates}))
            continue
        queries: dict[str, QueryResult] = {}
        answered: dict[str, Query] = {}
        for name, options in candidates.items():
            queries[name], chosen = nvml.ask(options, handle)
            if chosen is not None and name in LIVE_QUERIES:
                answered[name] = chosen
        devices.append(
            DeviceProbe(index, nvml.text("nvmlDeviceGetName", handle), nvml.text("nvmlDeviceGetUUID", handle), queries)
        )
        live.append((handle, answered))
    found = NvmlProbe(nvml.text("nvmlSystemGetDriverVersion"), nvml.text("nvmlSystemGetNVMLVersion"), devices)
    return found, live


def probe_nvml() -> NvmlProbe:
    """What NVML supports here (SensorUnavailable when it cannot start); shuts NVML down again."""
    pynvml = load_pynvml()
    try:
        return probe(pynvml)[0]
    finally:
        _shutdown(pynvml)


def _shutdown(pynvml: ModuleType) -> None:
    try:
        pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - nothing to do about a failed shutdown
        pass


class NvmlSensor:
    """Reads, on every poll, only the queries that answered OK when probed."""

    name = "nvml"

    def __init__(
        self,
        pynvml: ModuleType,
        found: NvmlProbe,
        live: list[tuple[Handle, dict[str, Query]]],
        wall_us: WallClock = wall_clock_us,
    ) -> None:
        self.probe = found
        self._pynvml = pynvml
        self._live = live
        self._wall_us = wall_us
        self._closed = False

    @classmethod
    def open(cls, wall_us: WallClock = wall_clock_us) -> "NvmlSensor":
        """Start NVML and probe; SensorUnavailable when no GPU can report a temperature."""
        pynvml = load_pynvml()
        try:
            found, live = probe(pynvml)
        except SensorUnavailable:
            _shutdown(pynvml)
            raise
        if not found.can_read_temperature():
            _shutdown(pynvml)
            if not found.devices:
                raise SensorUnavailable("NVML: no GPU")
            statuses = ", ".join(sorted({d.queries["temperature"].status for d in found.devices}))
            raise SensorUnavailable(f"NVML: temperature {statuses}")
        return cls(pynvml, found, live, wall_us)

    def read(self) -> Optional[Sample]:
        temps: list[float] = []
        reasons: Optional[int] = None
        powers: list[float] = []
        for handle, queries in self._live:
            temp = self._ask(queries, "temperature", handle)
            if isinstance(temp, (int, float)) and finite(float(temp)) is not None:
                temps.append(float(temp))
            mask = self._ask(queries, "clock_event_reasons", handle)
            if isinstance(mask, int):
                reasons = (reasons or 0) | int(mask)
            milliwatts = self._ask(queries, "power_usage", handle)
            if isinstance(milliwatts, (int, float)):
                powers.append(milliwatts / 1000.0)
        if not temps and reasons is None and not powers:
            return None
        return Sample(
            self._wall_us(),
            temp_c=max(temps) if temps else None,
            reasons=reasons,
            power_w=round(sum(powers), 3) if powers else None,
        )

    @staticmethod
    def _ask(queries: dict[str, Query], name: str, handle: Handle) -> object:
        query = queries.get(name)
        if query is None:
            return None
        try:
            return query(handle)
        except Exception:  # noqa: BLE001 - a failed poll is a missing field, the policy decides
            return None

    def facts(self) -> JSONObject:
        return self.probe.facts()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _shutdown(self._pynvml)
