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

`recover`, `status` and a run's look for leftovers list every engine, or
only those HARNESS_ENGINES names (`process`, or `docker,process`): a machine
whose Docker engine serves other projects too need not be asked.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Mapping, Optional

from harness.engines.base import (
    CREATED,
    EXITED,
    GONE,
    PAUSED,
    RUNNING,
    Description,
    Engine,
    EngineUnavailable,
    NotStarted,
    Problem,
    RunGone,
    RunHandle,
)
from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.engines.spec import LaunchSpec

__all__ = [
    "CREATED",
    "Description",
    "EXITED",
    "Engine",
    "EngineUnavailable",
    "GONE",
    "NotStarted",
    "PAUSED",
    "Problem",
    "RUNNING",
    "RunGone",
    "RunHandle",
    "ENGINE_NAMES",
    "ENGINES_ENV",
    "engine_for",
    "engine_named",
    "listed_engine_names",
]

ENGINE_NAMES = ("docker", "process")
ENGINES_ENV = "HARNESS_ENGINES"


def listed_engine_names(environ: Optional[Mapping[str, str]] = None) -> tuple[str, ...]:
    """The engines that recover, status and a run's leftover check may list: HARNESS_ENGINES (names separated
    by commas or spaces), else all of them; an unknown name is a one-line error."""
    raw = (os.environ if environ is None else environ).get(ENGINES_ENV, "")
    names = raw.replace(",", " ").split()
    if not names:
        return ENGINE_NAMES
    unknown = [name for name in names if name not in ENGINE_NAMES]
    if unknown:
        raise HarnessError(f"{ENGINES_ENV}={raw}: unknown engine {unknown[0]!r} (engines: {', '.join(ENGINE_NAMES)})")
    return tuple(dict.fromkeys(names))


def engine_named(name: str) -> Engine:
    """The engine called `name`, with its default client."""
    if name == "process":
        from harness.engines.process import ProcessEngine  # on demand: importing the package's protocols stays light

        return ProcessEngine()
    if name == "docker":
        from harness.engines.docker import DockerEngine  # on demand: importing the package's protocols stays light

        return DockerEngine()
    raise HarnessError(f"unknown engine {name!r} (engines: {', '.join(ENGINE_NAMES)})")


def engine_for(spec: "LaunchSpec") -> Engine:
    """The engine a spec asks for, with its default client."""
    return engine_named(spec.engine)
