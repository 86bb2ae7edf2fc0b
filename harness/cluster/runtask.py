"""A run's task on a Ray node: the run of a plan there, streamed back to the driver as batches of events.

`run_task` is submitted by the driver and imported by reference on the node,
so the node runs the harness installed there. It is a streaming generator. It
yields batches of events: first `("placed", "", node facts)`, then the
capture's writes as the runner makes them (harness.capture.writer),
`("note", "", text)` for what the user should see, and last
`("end", "", {...})` or `("error", "", {...})`. The runner writes the host's
own copy of the capture under `node.node_capture_root()`; the engine's labels
keep naming the driver's capture, so `harness recover --ray` finds the
trainer from the driver.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

from harness.cluster.node import node_capture_root, node_facts
from harness.errors import HarnessError
from harness.run.context import NullReporter, RunContext, StopControl
from harness.run.lifecycle import run_planned
from harness.run.provenance import nvml_probe

CONTROL_POLL_S = 0.5
_DONE = object()


class _ForwardReporter(NullReporter):
    """The reporter of a run on a node: notes and warnings go to the driver; steps, pauses and the end reach it
    as capture writes (`RunContext.forward`)."""

    def __init__(self, put: Callable[[Any], None]) -> None:
        self.put = put

    def note(self, message: str) -> None:
        self.put(("note", "", message))

    def warning(self, message: str) -> None:
        self.put(("note", "", message))

    def cooling(self, run: str, reading: Any) -> None:
        """The cooled start reaches the driver once it is over (a line per reading would flood the board)."""
        if reading.outcome is not None:
            self.put(("note", "", f"{run}: heat guard: {reading.describe()}"))


def run_task(plan: Any, options: Any, provenance: dict[str, Any], control: Any) -> Iterator[list]:
    """The run of `plan` on this node, as batches of events (see the module's docstring)."""
    facts = node_facts()
    yield [("placed", "", facts)]
    events: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
    stop = StopControl()
    node_dir = node_capture_root() / plan.spec.run
    local = replace(plan, spec=replace(plan.spec, capture_dir=str(node_dir)))
    node_provenance = {
        **provenance,
        "host": facts["hostname"],
        "driver_host": provenance.get("host"),
        "nvml": nvml_probe(),
        "ray": facts,
    }
    ending: list[tuple] = []

    def work() -> None:
        try:
            ending.append(_run_here(local, options, events.put, stop, node_provenance, facts["hostname"], node_dir))
        finally:
            events.put(_DONE)

    worker = threading.Thread(target=work, name=f"run-{plan.spec.run}", daemon=True)
    worker.start()
    watcher = threading.Thread(
        target=_watch_control, args=(control, plan.spec.run, stop, worker), name="control", daemon=True
    )
    watcher.start()
    try:
        yield from _batches(events)
    except KeyboardInterrupt:  # ray.cancel reached a task that had just started: stop the run properly
        stop.request("interrupted", "cancelled by the driver")
        worker.join()
        raise
    worker.join()
    yield ending or [("error", "", {"message": "the run ended without a result", "exit_code": 70})]


def _run_here(
    plan: Any,
    options: Any,
    put: Callable[[Any], None],
    stop: StopControl,
    provenance: dict[str, Any],
    host: str,
    node_dir: Path,
) -> tuple:
    """Run the plan on this node; its last event: how it ended, or the error that stopped it (one line)."""
    try:
        ctx = RunContext(
            # The driver decided, under the capture's lock; an automatic resume is the driver's to make (each
            # attempt is one the driver records), never the node's.
            options=replace(options, mode="force", auto_resume=0),
            reporter=_ForwardReporter(put),
            stop=stop,
            provenance=provenance,
            forward=put,
        )
        result = run_planned(plan, ctx)
        if result.decision.action == "skip":
            message = f"its copy on {host} ({node_dir}): {result.decision.reason}"
            return ("error", "", {"message": message, "exit_code": 1})
        return ("end", "", {"state": str(result.status.state) if result.status else None})
    except HarnessError as err:
        return ("error", "", {"message": err.message, "exit_code": int(err.exit_code)})
    except BaseException as err:  # a bug on the node: said in one line on the driver
        message = f"internal error on {host}: {type(err).__name__}: {err}"
        return ("error", "", {"message": message, "exit_code": 70})


def _batches(events: "queue.SimpleQueue[Any]") -> Iterator[list]:
    """The run's events a batch at a time (whatever came meanwhile goes in the same batch), until it is done."""
    done = False
    while not done:
        batch = [events.get()]
        while True:
            try:
                batch.append(events.get_nowait())
            except queue.Empty:
                break
        done = any(event is _DONE for event in batch)
        batch = [event for event in batch if event is not _DONE]
        if batch:
            yield batch


def _watch_control(control: Any, run: str, stop: Any, worker: threading.Thread) -> None:
    """Pass the driver's stop requests to the run, until it ends."""
    import ray

    while worker.is_alive():
        try:
            asked, kill = ray.get(control.asked.remote(run), timeout=30)
        except Exception:  # the driver's actor is gone or slow: the run goes on (Ray ends it with its driver)
            time.sleep(CONTROL_POLL_S * 4)
            continue
        if asked is not None:
            stop.request(*asked)
        if kill:
            stop.request_kill()
        time.sleep(CONTROL_POLL_S)
