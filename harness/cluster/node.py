"""What runs on a Ray node besides a run (`runtask`): the pre-flight check, the engines' listing, a lever on one object.

Each function here is submitted by the driver as a Ray task (or, for
`SweepControl`, an actor) and imported by reference on the node, so the
node runs the harness installed there: its engines, its guard and its NVML.
A check or a lever imports no more than the engines: the run's own modules
load on a node only with a run (`runtask`).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Optional

from harness.cluster.rootcheck import checkpoint_root_problems
from harness.engines import engine_for, engine_named
from harness.engines.logstream import LogPosition
from harness.errors import HarnessError
from harness.fs.paths import state_dir


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


def check_task(spec: Any, root_token: Optional[str] = None) -> tuple[dict[str, str], list[str], list[str]]:
    """This node's facts and what would stop `spec` from starting here: what its engine's pre-flight lacks (each
    host's own copy: the image, the command, the mounts) and, for a run with checkpoints, whether it sees the
    checkpoint root the driver does (the one root they all share: the token file the driver wrote there)."""
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
