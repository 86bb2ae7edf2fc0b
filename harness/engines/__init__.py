"""Engines own the life of what they start (as TorchX's schedulers do); every engine hands back a RunHandle.

The runner, `recover`, `stop`, `logs` and the heat guard never know which
engine they drive: Docker (the docker SDK) for the lab image and any image
that follows the entry protocol, or a supervised process group for
bare-metal Miles installs and machines without Docker. Both implement the
whole life:

    engine.preflight(spec)  problems that would stop the run from starting (nothing is changed)
    engine.start(spec, labels) -> handle      the run, labelled; NotStarted if nothing started
    engine.attach(id) -> handle               a container id or name; a process run id or a pid
    engine.list(labels) -> [handle]           what this engine runs with those labels (a value None: any)
    handle.describe() -> Description          state, exit code, labels, times
    handle.logs(since, follow)                stamped lines `<RFC3339Nano> <text>` after a LogPosition
    handle.wait / pause / resume / is_paused / stop / kill / remove / facts

An engine that cannot be reached raises EngineUnavailable, never a library's
own exception.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Optional, Protocol

from harness.errors import ExitCode, HarnessError


def state_dir(override_env: str, leaf: str) -> Path:
    """The harness's per-user state directory `leaf` ($XDG_STATE_HOME/miles-gb10-lab/LEAF), or `$override_env`."""
    configured = os.environ.get(override_env)
    if configured:
        return Path(configured)
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "miles-gb10-lab" / leaf

if TYPE_CHECKING:
    from harness.engines.logstream import LogPosition
    from harness.launch import LaunchSpec

# Description.state: created (never started), running, paused, exited, gone (the engine lost it).
CREATED, RUNNING, PAUSED, EXITED, GONE = "created", "running", "paused", "exited", "gone"


class EngineUnavailable(HarnessError):
    """The engine cannot be reached (connection refused, the daemon restarting)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.ENGINE_UNAVAILABLE)


class NotStarted(HarnessError):
    """`start` failed and nothing runs: the capture records not_started."""


@dataclass(frozen=True)
class Problem:
    """Why a run would not start, with the hint that fixes it, and the exit code it fails with."""

    message: str
    exit_code: ExitCode = ExitCode.BAD_INPUT


@dataclass(frozen=True)
class Description:
    """What the engine says about one thing it runs."""

    id: str
    name: str
    state: str
    exit_code: Optional[int] = None
    labels: Mapping[str, str] = field(default_factory=dict)
    started_at: Optional[str] = None
    finished_at: Optional[str] = None

    @property
    def alive(self) -> bool:
        return self.state in (RUNNING, PAUSED)


class RunHandle(Protocol):
    """A started trainer: its log, its exit code, and the levers the harness pulls."""

    id: str

    def describe(self) -> Description:
        """Its state, exit code, labels and times, as the engine has them now."""

    def logs(self, since: Optional["LogPosition"] = None, *, follow: bool = False) -> Iterator[str]:
        """Lines `<RFC3339Nano UTC> <text>` not yet delivered at `since` (advanced as they come);
        with `follow`, until the output ends."""

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
        """Free what the run holds (the container, the process's record); only after logs and status are saved."""

    def facts(self) -> dict[str, Any]:
        """What the manifest records about the running thing (image id, digest, pid...)."""


class Engine(Protocol):
    """Starts launch specs and finds again what it started."""

    name: str

    def preflight(self, spec: "LaunchSpec") -> list[Problem]:
        """What would stop `spec` from starting (image, mounts, GPU runtime, command); changes nothing."""

    def start(self, spec: "LaunchSpec", extra_labels: dict[str, str]) -> RunHandle:
        """Start the run; the harness's own labels (pid, host) come as `extra_labels`. NotStarted on failure."""

    def attach(self, id: str) -> RunHandle:
        """A handle on something running (HarnessError NOT_FOUND when there is no such thing)."""

    def list(self, labels: Mapping[str, Optional[str]]) -> list[RunHandle]:
        """Everything this engine holds with these labels (value None: the label with any value)."""

    def facts(self) -> dict[str, Any]:
        """Engine facts for the manifest (host, versions, GPU runtime)."""


ENGINE_NAMES = ("docker", "process")


def engine_named(name: str) -> Engine:
    """The engine called `name`, with its default client."""
    if name == "process":
        from harness.engines.process import ProcessEngine

        return ProcessEngine()
    if name == "docker":
        from harness.engines.docker import DockerEngine

        return DockerEngine()
    raise HarnessError(f"unknown engine {name!r} (engines: {', '.join(ENGINE_NAMES)})")


def engine_for(spec: "LaunchSpec") -> Engine:
    """The engine a spec asks for, with its default client."""
    return engine_named(spec.engine)
