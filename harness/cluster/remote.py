"""The engines of every Ray node as engines on the driver, so `harness recover --ray` is the local recover.

A small task per node lists what its engines hold under the harness's labels
(`inventory_task`); each object found becomes a `RemoteHandle`, whose levers
(describe, resume, stop, logs, remove...) are tasks pinned to that node.
`harness.run.settle` plans and acts on them exactly as on local containers and
process runs: it thaws, stops, saves the lines the driver's capture lacks,
re-reads the steps and records the end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional

from harness.cluster.connect import Node, NodeFacts
from harness.cluster.node import inventory_task, lever_task
from harness.engines import Description, EngineUnavailable
from harness.engines.spec import LABEL_RUN
from harness.errors import ExitCode, HarnessError

LEVER_TIMEOUT_S = 300


def _on(ray: Any, node: NodeFacts) -> Any:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {
        "num_cpus": 0,
        "max_retries": 0,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node.node_id, soft=False),
    }


def _description(data: Mapping[str, Any], node: NodeFacts) -> Description:
    return Description(
        id=data["id"],
        name=f"{data['name']} on {node.hostname}",
        state=data["state"],
        exit_code=data.get("exit_code"),
        labels=dict(data.get("labels") or {}),
        started_at=data.get("started_at"),
        finished_at=data.get("finished_at"),
    )


class NodeInventory:
    """What one node's engines hold under the harness's labels, asked once."""

    def __init__(
        self, ray: Any, node: Node, engine_names: tuple[str, ...], labels: Mapping[str, Optional[str]]
    ) -> None:
        self.ray = ray
        self.node = node.facts
        self.ref = ray.remote(inventory_task).options(**_on(ray, self.node)).remote(list(engine_names), dict(labels))
        self._found: Optional[dict[str, Any]] = None

    def found(self) -> dict[str, Any]:
        if self._found is None:
            try:
                _, self._found = self.ray.get(self.ref, timeout=LEVER_TIMEOUT_S)
            except Exception as err:  # the node died or hangs
                raise EngineUnavailable(f"node {self.node.name} did not answer ({type(err).__name__})") from None
        return self._found


class RemoteEngine:
    """One engine of one node, as `harness.run.settle` drives engines."""

    def __init__(self, ray: Any, inventory: NodeInventory, name: str) -> None:
        self.ray = ray
        self.inventory = inventory
        self.name = name

    def list(self, labels: Mapping[str, Optional[str]]) -> list["RemoteHandle"]:
        found = self.inventory.found().get(self.name)
        if isinstance(found, str):
            raise EngineUnavailable(f"on node {self.inventory.node.name}: {found}")
        node = self.inventory.node
        handles = [RemoteHandle(self.ray, node, self.name, _description(data, node)) for data in found or []]
        return [
            h
            for h in handles
            if all(k in h.described.labels and (v is None or h.described.labels[k] == v) for k, v in labels.items())
        ]

    def facts(self) -> dict[str, Any]:
        return {"engine": self.name, "ray": self.inventory.node.to_dict()}


@dataclass
class RemoteHandle:
    """An engine object on a node: each lever is a task on that node."""

    ray: Any
    node: NodeFacts
    engine: str
    described: Description

    @property
    def id(self) -> str:
        return self.described.id

    def _pull(self, action: str, *args: Any) -> Any:
        ref = self.ray.remote(lever_task).options(**_on(self.ray, self.node)).remote(self.engine, self.id, action, args)
        try:
            outcome, value = self.ray.get(ref, timeout=LEVER_TIMEOUT_S)
        except Exception as err:
            raise EngineUnavailable(f"node {self.node.name} did not answer ({type(err).__name__})") from None
        if outcome == "error":
            message, code = value
            raise HarnessError(
                f"on node {self.node.name}: {message}",
                ExitCode(code) if code in ExitCode._value2member_map_ else ExitCode.RUN_FAILED,
            )
        return value

    def describe(self) -> Description:
        self.described = _description(self._pull("describe"), self.node)
        return self.described

    def logs(self, since: Any = None, *, follow: bool = False) -> Iterator[str]:
        position = (since.last_stamp, list(since.lines_at_last)) if since is not None else (None, [])
        lines = self._pull("logs", *position)
        for line in lines:
            if since is not None:
                since.advance(line)
            yield line

    def log_bursts(self, since: Any = None, *, follow: bool = False) -> Iterator[list[str]]:
        """The lines of `logs`, as one group: the node sends them so."""
        lines = list(self.logs(since, follow=follow))
        if lines:
            yield lines

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        return self._pull("wait", timeout)

    def pause(self) -> None:
        self._pull("pause")

    def resume(self) -> None:
        self._pull("resume")

    def is_paused(self) -> bool:
        return bool(self._pull("is_paused"))

    def stop(self, grace_s: float) -> None:
        self._pull("stop", grace_s)

    def kill(self) -> None:
        self._pull("kill")

    def remove(self) -> None:
        self._pull("remove")

    def facts(self) -> dict[str, Any]:
        return {**self._pull("facts"), "ray": self.node.to_dict()}


def node_engines(ray: Any, nodes: list[Node], engine_names: tuple[str, ...]) -> list[RemoteEngine]:
    """Every engine of every node, their listings asked of all nodes at once."""
    engines = []
    for node in nodes:
        inventory = NodeInventory(ray, node, engine_names, {LABEL_RUN: None})
        engines += [RemoteEngine(ray, inventory, name) for name in engine_names]
    return engines
