"""What runs on a Ray node: a run's task, the pre-flight check, the engines' listing, and a lever on one object.

Each function here is submitted by the driver as a Ray task (or, for
`SweepControl`, an actor) and imported by reference on the node, so the
node runs the harness installed there: its engines, its guard and its NVML.

A run's task (`run_task`) is a streaming generator. It yields batches of
events: first `("placed", "", node facts)`, then the capture's writes as the
runner makes them (harness.capture.writer), `("note", "", text)` for what
the user should see, and last `("end", "", {...})` or `("error", "", {...})`.
The runner writes the host's own copy of the capture under
`node_capture_root()`; the engine's labels keep naming the driver's capture,
so `harness recover --ray` finds the trainer from the driver.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from harness.cluster.rootcheck import checkpoint_root_problems
from harness.errors import HarnessError
from harness.run.context import NullReporter

CONTROL_POLL_S = 0.5
_DONE = object()


def node_facts() -> dict[str, str]:
    """This node's id, address and host name (`manifest.ray`)."""
    import ray

    return {
        "node_id": ray.get_runtime_context().get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
        "hostname": socket.gethostname(),
    }


def node_capture_root() -> Path:
    """Where a node keeps its own copy of the runs it ran (HARNESS_NODE_CAPTURE_DIR, else the state directory)."""
    from harness.fs.paths import state_dir

    return state_dir("HARNESS_NODE_CAPTURE_DIR", "ray-captures")


class SweepControl:
    """The driver's requests to stop runs (Ctrl-C, `harness stop`, a second Ctrl-C), asked for by each run's task."""

    def __init__(self) -> None:
        self.every: Optional[tuple[str, str]] = None
        self.runs: dict[str, tuple[str, str]] = {}
        self.kill = False

    def stop_all(self, state: str, reason: str) -> None:
        self.every = self.every or (state, reason)

    def stop_run(self, run: str, reason: str) -> None:
        self.runs.setdefault(run, ("stopped", reason))

    def kill_all(self) -> None:
        self.kill = True

    def asked(self, run: str) -> tuple[Optional[tuple[str, str]], bool]:
        return self.runs.get(run) or self.every, self.kill


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
    from harness.run.context import RunContext, StopControl
    from harness.run.lifecycle import run_planned
    from harness.run.provenance import nvml_probe

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
            ctx = RunContext(
                # The driver decided, under the capture's lock; an automatic resume is the driver's to make (each
                # attempt is one the driver records), never the node's.
                options=replace(options, mode="force", auto_resume=0),
                reporter=_ForwardReporter(events.put),
                stop=stop,
                provenance=node_provenance,
                forward=events.put,
            )
            result = run_planned(local, ctx)
            if result.decision.action == "skip":
                ending.append(
                    (
                        "error",
                        "",
                        {
                            "message": f"its copy on {facts['hostname']} ({node_dir}): {result.decision.reason}",
                            "exit_code": 1,
                        },
                    )
                )
            else:
                ending.append(("end", "", {"state": str(result.status.state) if result.status else None}))
        except HarnessError as err:
            ending.append(("error", "", {"message": err.message, "exit_code": int(err.exit_code)}))
        except BaseException as err:  # a bug on the node: said in one line on the driver
            ending.append(
                (
                    "error",
                    "",
                    {"message": f"internal error on {facts['hostname']}: {type(err).__name__}: {err}", "exit_code": 70},
                )
            )
        finally:
            events.put(_DONE)

    worker = threading.Thread(target=work, name=f"run-{plan.spec.run}", daemon=True)
    worker.start()
    watcher = threading.Thread(
        target=_watch_control, args=(control, plan.spec.run, stop, worker), name="control", daemon=True
    )
    watcher.start()
    done = False
    try:
        while not done:
            batch = [events.get()]
            while True:  # whatever came meanwhile goes in the same batch
                try:
                    batch.append(events.get_nowait())
                except queue.Empty:
                    break
            done = any(event is _DONE for event in batch)
            batch = [event for event in batch if event is not _DONE]
            if batch:
                yield batch
    except KeyboardInterrupt:  # ray.cancel reached a task that had just started: stop the run properly
        stop.request("interrupted", "cancelled by the driver")
        worker.join()
        raise
    worker.join()
    yield ending or [("error", "", {"message": "the run ended without a result", "exit_code": 70})]


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


def check_task(spec: Any, root_token: Optional[str] = None) -> tuple[dict[str, str], list[str], list[str]]:
    """This node's facts and what would stop `spec` from starting here: what its engine's pre-flight lacks (each
    host's own copy: the image, the command, the mounts) and, for a run with checkpoints, whether it sees the
    checkpoint root the driver does (the one root they all share: the token file the driver wrote there)."""
    from harness.engines import engine_for

    try:
        problems = [problem.message for problem in engine_for(spec).preflight(spec)]
    except HarnessError as err:
        problems = [err.message]
    unseen = []
    if spec.checkpoint is not None and root_token is not None:
        unseen = checkpoint_root_problems(spec.checkpoint.root, root_token)
    return node_facts(), problems, unseen


def inventory_task(engine_names: list[str], labels: dict[str, Optional[str]]) -> tuple[dict[str, str], dict]:
    """This node's facts and, per engine, what it holds with `labels`: descriptions, or why it cannot be asked."""
    from harness.engines import engine_named

    found: dict[str, Any] = {}
    for name in engine_names:
        try:
            found[name] = [_description(handle.describe()) for handle in engine_named(name).list(labels)]
        except HarnessError as err:
            found[name] = err.message
    return node_facts(), found


def _description(description: Any) -> dict[str, Any]:
    return {
        "id": description.id,
        "name": description.name,
        "state": description.state,
        "exit_code": description.exit_code,
        "labels": dict(description.labels),
        "started_at": description.started_at,
        "finished_at": description.finished_at,
    }


def lever_task(engine_name: str, object_id: str, action: str, args: tuple) -> tuple[str, Any]:
    """Pull one lever on an engine object of this node: ("ok", result) or ("error", (message, exit code))."""
    from harness.engines import engine_named
    from harness.engines.logstream import LogPosition

    try:
        handle = engine_named(engine_name).attach(object_id)
        if action == "describe":
            return "ok", _description(handle.describe())
        if action == "logs":
            last_stamp, lines_at_last = args
            return "ok", list(handle.logs(LogPosition(last_stamp, lines_at_last), follow=False))
        if action in ("pause", "resume", "kill", "remove"):
            getattr(handle, action)()
            return "ok", None
        if action == "stop":
            handle.stop(*args)
            return "ok", None
        if action == "is_paused":
            return "ok", handle.is_paused()
        if action == "wait":
            return "ok", handle.wait(*args)
        if action == "facts":
            return "ok", handle.facts()
    except HarnessError as err:
        return "error", (err.message, int(err.exit_code))
    return "error", (f"unknown action {action!r}", 70)
