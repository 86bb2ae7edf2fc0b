"""Joining a Ray cluster as its driver, and the nodes in it that can take a run."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from harness.cluster import import_ray
from harness.errors import ExitCode, HarnessError
from harness.fs.files import open_append, prepare_directory
from harness.fs.paths import state_dir
from harness.secrets import redact_text, redact_userinfo, secrets_in

CONNECT_TIMEOUT_S = 60


@dataclass(frozen=True)
class NodeFacts:
    """One Ray node as the manifest records it (`manifest.ray`)."""

    node_id: str
    node_ip: str
    hostname: str

    def to_dict(self) -> dict[str, str]:
        return {"node_id": self.node_id, "node_ip": self.node_ip, "hostname": self.hostname}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "NodeFacts":
        return cls(str(data.get("node_id") or "?"), str(data.get("node_ip") or "?"), str(data.get("hostname") or "?"))

    @property
    def name(self) -> str:
        """`spark-2 (10.0.0.2, node 5f3a9c1e0b7d)`: how messages name a node."""
        return f"{self.hostname} ({self.node_ip}, node {self.node_id[:12]})"


@dataclass(frozen=True)
class Node:
    """An alive node and what it offers."""

    facts: NodeFacts
    resources: Mapping[str, float]

    def can_take(self, request: Mapping[str, float]) -> bool:
        """Whether this node has (in total, busy or not) every resource a run's task asks for."""
        return all(self.resources.get(name, 0) >= amount for name, amount in request.items())


class RayOutput:
    """Ray's own log lines (a raylet's `[state-dump]`, `(raylet) accessor.cc:...`) go to a file, not among the
    harness's: the process's standard error is that file while Ray is joined, and the harness writes to a
    copy of the real one."""

    def __init__(self) -> None:
        self.path: Optional[Path] = None
        self._saved: Optional[int] = None
        self._stderr: Any = None

    def divert(self) -> Path:
        """From now on, what Ray writes to standard error goes to the file returned."""
        directory = state_dir("HARNESS_RAY_LOG_DIR", "ray")
        prepare_directory(directory)
        self.path = directory / f"driver-{os.getpid()}.log"
        sys.stderr.flush()
        self._saved = os.dup(2)
        self._stderr = sys.stderr
        log = open_append(self.path)
        os.dup2(log, 2)
        os.close(log)
        sys.stderr = os.fdopen(os.dup(self._saved), "w", buffering=1)
        return self.path

    def restore(self) -> None:
        """Standard error is the real one again."""
        if self._saved is None:
            return
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        sys.stderr.close()
        sys.stderr = self._stderr
        self._saved = None


RAY_OUTPUT = RayOutput()


def connect(address: str) -> Any:
    """Join the cluster at `address` (anything `ray.init` takes) as a driver; a one-line error if it cannot.

    Ray's own log lines go to a file from here on (RayOutput), named once on standard error.
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    path = RAY_OUTPUT.divert()
    print(f"Ray's own log lines go to {path}", file=sys.stderr, flush=True)
    try:
        # Workers' output stays on their hosts (the runs stream what matters), and Ray's INFO lines stay quiet.
        ray.init(
            address=address,
            log_to_driver=False,
            logging_level=logging.WARNING,
            configure_logging=True,
            namespace="miles-gb10-lab",
        )
    except Exception as err:  # ConnectionError, ValueError, RuntimeError: Ray's reasons vary by version
        RAY_OUTPUT.restore()
        raise HarnessError(
            f"cannot join the Ray cluster at {shown_address(address)!r}: {shown_address(_reason(err), address)}",
            ExitCode.ENGINE_UNAVAILABLE,
        ) from None
    return ray


def shown_address(text: str, address: Optional[str] = None) -> str:
    """A Ray address as it may be shown, its URL password as ***; or Ray's words about `address`, with that
    address's password hidden wherever they repeat it (whole, alone or decoded)."""
    return redact_userinfo(redact_text(text, secrets_in(address)) if address else text)


def _reason(err: Exception) -> str:
    """Ray's first line, in the harness's words where Ray names its own flags (`--address`) rather than ours."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if "Could not find any running Ray instance" in first:
        return (
            "no Ray cluster is running there; start one (`ray start --head`) or give its address "
            "with --ray HOST:PORT (or RAY_ADDRESS)"
        )
    return first


def disconnect() -> None:
    ray = import_ray()
    if ray.is_initialized():
        ray.shutdown()
    RAY_OUTPUT.restore()


def alive_nodes(ray: Any) -> list[Node]:
    """Every alive node, in a stable order (by host name, then id)."""
    nodes = []
    for entry in ray.nodes():
        if not entry.get("Alive"):
            continue
        facts = NodeFacts(
            entry["NodeID"], entry.get("NodeManagerAddress") or "?", entry.get("NodeManagerHostname") or "?"
        )
        nodes.append(Node(facts, dict(entry.get("Resources") or {})))
    return sorted(nodes, key=lambda node: (node.facts.hostname, node.facts.node_id))


def run_request(cluster: Any) -> dict[str, float]:
    """The resources one run's task asks for: one GPU, and the experiment's `cluster.resources`."""
    return {"GPU": 1.0, **({"CPU": float(cluster.num_cpus)} if cluster.num_cpus else {}), **cluster.resources}


def nodes_for(nodes: list[Node], request: Mapping[str, float]) -> list[Node]:
    """The nodes that can take a run asking for `request`."""
    return [node for node in nodes if node.can_take(request)]


def find_node(nodes: list[Node], node_id: Optional[str]) -> Optional[Node]:
    return next((node for node in nodes if node.facts.node_id == node_id), None)
