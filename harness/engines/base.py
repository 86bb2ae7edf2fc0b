"""What every engine implements, and the facts it hands back: the RunHandle and Engine protocols."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Mapping, Optional, Protocol, Sequence

from harness.errors import ExitCode, HarnessError

if TYPE_CHECKING:
    from harness.engines.logstream import LogPosition
    from harness.engines.spec import LaunchSpec
    from harness.jsontypes import JSONObject

# Description.state: created (never started), running, paused, exited, gone (the engine lost it).
CREATED, RUNNING, PAUSED, EXITED, GONE = "created", "running", "paused", "exited", "gone"


class EngineUnavailable(HarnessError):
    """The engine cannot be reached (connection refused, the daemon restarting)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.ENGINE_UNAVAILABLE)


class RunGone(HarnessError):
    """What ran the trainer vanished from its engine while it ran: a container removed from outside, or a process
    run whose trainer and supervisor are gone with no end recorded. What it printed after the capture's last line
    is gone with it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.RUN_FAILED)


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

    def log_bursts(self, since: Optional["LogPosition"] = None, *, follow: bool = False) -> Iterator[list[str]]:
        """The lines of `logs`, in the groups they arrived in (never an empty one): the log pump writes a group
        to container.log at once."""

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

    def facts(self) -> JSONObject:
        """What the manifest records about the running thing (image id, digest, pid...)."""


class Engine(Protocol):
    """Starts launch specs and finds again what it started."""

    name: str

    def preflight(self, spec: "LaunchSpec") -> list[Problem]:
        """What would stop `spec` from starting (image, mounts, GPU runtime, command, the image's Miles); changes
        nothing."""

    def image_facts(self, spec: "LaunchSpec") -> Optional[JSONObject]:
        """What the preflight found in the image (its Miles), for the manifest; None where nothing was looked at."""

    def start(self, spec: "LaunchSpec", extra_labels: dict[str, str]) -> RunHandle:
        """Start the run; the harness's own labels (pid, host) come as `extra_labels`. NotStarted on failure."""

    def attach(self, id: str) -> RunHandle:
        """A handle on something running (HarnessError NOT_FOUND when there is no such thing)."""

    def list(self, labels: Mapping[str, Optional[str]]) -> Sequence[RunHandle]:
        """Everything this engine holds with these labels (value None: the label with any value)."""

    def facts(self) -> JSONObject:
        """Engine facts for the manifest (host, versions, GPU runtime)."""
