"""A sensor read with a bounded wait: in a thread of its own, one read at a time, a blocked read a missing one.

The guard loop (harness.guard.loop) and the cooled start (harness.guard.start)
read through it, so a read that blocks (a FIFO, a wedged NVML call) never
holds up a pause, a thaw or a stop.
"""

from __future__ import annotations

import threading
import time
from typing import Optional, Union

from harness.guard.samples import Sample, Sensor

READ_WAIT_MIN_S = 0.2  # the shortest wait for a reading: a busy machine's slow read is not a missing one
STOP_CHECK_S = 0.05  # how often a wait for a reading looks whether the guard is stopping


class BoundedReader:
    """Reads a sensor in a thread of its own and waits a bounded time; one read at a time, never two."""

    def __init__(self, sensor: Sensor) -> None:
        self.sensor = sensor
        self._pending: Optional[threading.Thread] = None

    @property
    def hung(self) -> bool:
        """True while a read that was given up on has still not returned."""
        return self._pending is not None and self._pending.is_alive()

    def read(self, timeout_s: float, stopping: threading.Event) -> tuple[Optional[Sample], Optional[str]]:
        """The sample (None: no reading), and a problem worth a note (or None)."""
        if self.hung:
            return None, self._slow(timeout_s)
        box: list[Union[Sample, None, Exception]] = []

        def take() -> None:
            try:
                box.append(self.sensor.read())
            except Exception as err:  # noqa: BLE001 - a sensor must not raise; if it does, it is a missing reading
                box.append(err)

        self._pending = threading.Thread(target=take, name=f"sensor-{self.sensor.name}", daemon=True)
        self._pending.start()
        deadline = time.monotonic() + timeout_s
        while True:
            self._pending.join(max(0.0, min(STOP_CHECK_S, deadline - time.monotonic())))
            if box or time.monotonic() >= deadline or stopping.is_set():
                break
        if not box:
            return None, (None if stopping.is_set() else self._slow(timeout_s))
        self._pending = None
        found = box[0]
        if isinstance(found, Exception):
            return None, f"sensor {self.sensor.name} raised {type(found).__name__}: {found}"
        problem = getattr(self.sensor, "problem", None)  # a file sensor's "not a regular file"
        return found, (f"sensor {self.sensor.name}: {problem}" if found is None and problem else None)

    def _slow(self, timeout_s: float) -> str:
        return (
            f"sensor {self.sensor.name}: no answer within {timeout_s:g} s; a blocked read counts as a missing "
            "reading (and no other read starts until it returns)"
        )
