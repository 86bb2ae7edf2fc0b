"""Engines execute launch specs; every engine hands back the same RunHandle.

The runner never knows which engine it drives: Docker (the docker SDK) for
the lab image and any image that follows the entry protocol, or a plain
process group for bare-metal Miles installs and machines without Docker.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Protocol

from harness.launch import LaunchSpec


class RunHandle(Protocol):
    """A started trainer: its log, its exit code, and the levers the harness pulls."""

    id: str

    def log_lines(self) -> Iterator[str]:
        """Every output line as `<RFC3339Nano UTC> <text>`, in order, until the output ends."""

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """The exit code, or None if still running after `timeout` seconds."""

    def pause(self) -> None:
        """Freeze every process of the run."""

    def resume(self) -> None:
        """Thaw what `pause` froze."""

    def is_paused(self) -> bool:
        """True while frozen."""

    def stop(self, grace_s: float) -> None:
        """SIGTERM, then SIGKILL after `grace_s` seconds; returns once it has exited."""

    def kill(self) -> None:
        """SIGKILL now."""

    def remove(self) -> None:
        """Free what the run holds (the container); only after logs and status are saved."""

    def facts(self) -> dict[str, Any]:
        """What the manifest records about the running thing (image id, digest, pid...)."""


class Engine(Protocol):
    """Starts a LaunchSpec."""

    name: str

    def start(self, spec: LaunchSpec, extra_labels: dict[str, str]) -> RunHandle:
        """Start the run; the harness's own labels (pid, host) come as `extra_labels`."""

    def facts(self) -> dict[str, Any]:
        """Engine facts for the manifest (host, versions, GPU runtime)."""


def engine_for(spec: LaunchSpec) -> Engine:
    """The engine a spec asks for, with its default client."""
    if spec.engine == "process":
        from harness.engines.process import ProcessEngine

        return ProcessEngine()
    from harness.engines.docker import DockerEngine

    return DockerEngine()
