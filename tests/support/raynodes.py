"""Real Ray nodes on this machine (`ray.cluster_utils.Cluster`), each with directories of its own as a host has.

A head without GPUs and worker nodes that declare one GPU each (and, for a test
that steers a run to one of them, a resource named after the node). Each node
has its own process-engine root, its own copy of the captures and its own lock
directory; `node_env` adds what a module's nodes differ in.

`started_nodes` is the body of a module's `ray_cluster` fixture: Ray's sessions
in a directory of the cluster's own, not /tmp/ray, which every cluster on the
machine shares; whatever the cluster's nodes left running is killed after.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import pytest

OBJECT_STORE_BYTES = 80 * 1024 * 1024


class RayNodes:
    """A cluster: its address, its nodes by name, and each node's own directories."""

    def __init__(
        self,
        root: Path,
        names: Sequence[str] = ("a", "b"),
        *,
        resources: Optional[Mapping[str, Mapping[str, float]]] = None,
    ) -> None:
        from ray.cluster_utils import Cluster

        self.root = root
        self.cluster = Cluster(
            initialize_head=True,
            connect=False,
            head_node_args={
                "num_cpus": 1,
                "num_gpus": 0,
                "object_store_memory": OBJECT_STORE_BYTES,
                "include_dashboard": False,
            },
        )
        self.nodes: dict[str, Any] = {}
        for name in names:
            self.nodes[name] = self.cluster.add_node(
                num_cpus=1,
                num_gpus=1,
                object_store_memory=OBJECT_STORE_BYTES,
                resources=dict((resources or {}).get(name, {})),
                env_vars=self.node_env(name),
            )
        self.cluster.wait_for_nodes()
        self.address = self.cluster.address

    def home(self, name: str) -> Path:
        return self.root / f"node-{name}"

    def node_env(self, name: str) -> dict[str, str]:
        """The environment of node `name`'s Ray processes: its own directories."""
        home = self.home(name)
        home.mkdir(parents=True, exist_ok=True)
        return {
            "HARNESS_PROCESS_DIR": str(home / "processes"),
            "HARNESS_NODE_CAPTURE_DIR": str(home / "captures"),
            "HARNESS_LOCK_DIR": str(home / "locks"),
            "PATH": os.environ["PATH"],
        }

    def node_name_of(self, node_id: str) -> str:
        return next(name for name, node in self.nodes.items() if node.node_id == node_id)

    def node_copy(self, node_id: str, run: str) -> Path:
        return self.home(self.node_name_of(node_id)) / "captures" / run

    def process_runs(self, names: Optional[Sequence[str]] = None) -> list[Any]:
        """What the nodes' process engines hold (every node's, or those named)."""
        from harness.engines.process import ProcessEngine

        return [
            run
            for name in (names if names is not None else list(self.nodes))
            for run in ProcessEngine(self.home(name) / "processes").list({})
        ]

    def kill_leftovers(self) -> None:
        for run in self.process_runs():
            run.kill()
            run.wait(10)
            run.remove()


def started_nodes(
    tmp_path_factory: pytest.TempPathFactory, make: Callable[[Path], RayNodes] = RayNodes
) -> Iterator[RayNodes]:
    """A cluster for a module (`make(root)` starts it), shut down after; skipped where Ray is not installed."""
    # Here, not at import: collecting the module (as the fast tier does, to deselect it) costs no Ray import.
    pytest.importorskip("ray", reason="Ray is not installed: pip install '.[cluster]' runs the cluster tests")
    # Short: Ray's socket paths must fit in 107 bytes.
    ray_tmp = tempfile.mkdtemp(prefix="mgl-ray-")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_TMPDIR", ray_tmp)
        nodes = make(tmp_path_factory.mktemp("cluster"))
        try:
            yield nodes
        finally:
            nodes.kill_leftovers()
            nodes.cluster.shutdown()
    shutil.rmtree(ray_tmp, ignore_errors=True)
