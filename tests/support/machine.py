"""What this machine has: a Docker engine that answers, a GPU, the commands on PATH.

`docker_unavailable` and `gpu_present` decide the `docker` and `gpu` markers'
skips (conftest.py); `path_without` hides commands from a subprocess.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from support.timing import scaled

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"


@functools.lru_cache(maxsize=None)
def docker_unavailable() -> Optional[str]:
    """Why Docker tests cannot run here, naming the command that enables them; None when an engine answers."""
    return docker_problem(os.environ.get("DOCKER_HOST") or None)


def docker_problem(host: Optional[str]) -> Optional[str]:
    """Why no Docker engine answers at `host` (None: the default one), naming the address tried and the fix."""
    if not shutil.which("docker"):
        return "no docker command: install Docker with `sudo apt-get install docker.io`"
    env = {name: value for name, value in os.environ.items() if name != "DOCKER_HOST"}
    if host:
        env["DOCKER_HOST"] = host
    where = f"DOCKER_HOST={host}" if host else f"the default address, {DEFAULT_DOCKER_HOST}"
    limit_s = scaled(20)
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=limit_s, env=env)
    except subprocess.TimeoutExpired:
        return f"`docker info` did not answer within {limit_s:g} s at {where}: check the engine with `docker info`"
    if info.returncode == 0:
        return None
    if "permission denied" in info.stderr.lower():
        return f"this user may not use the Docker engine at {where}: `sudo usermod -aG docker $USER`, then log in again"
    if host:
        socket = host.removeprefix("unix://") if host.startswith("unix://") else None
        missing = " (no such socket)" if socket is not None and not os.path.exists(socket) else ""
        return (
            f"no Docker engine answers at {where}{missing}: start that engine, or unset DOCKER_HOST for the default one"
        )
    return f"no Docker engine answers at {where}: start one with `sudo systemctl start docker` (or `sudo .ci/run`)"


def docker_host() -> str:
    """The engine the Docker tests use: DOCKER_HOST, else the default socket."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


@functools.lru_cache(maxsize=None)
def gpu_present() -> bool:
    """True when nvidia-smi lists at least one GPU."""
    if not shutil.which("nvidia-smi"):
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=scaled(20))
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def path_without(root: Path, *commands: str) -> str:
    """A PATH like this one in which `commands` do not exist: each directory shadowed by links to the rest."""
    shadows = []
    for index, directory in enumerate(os.environ["PATH"].split(os.pathsep)):
        if not os.path.isdir(directory):
            continue
        shadow = root / f"path{index}"
        shadow.mkdir(parents=True)
        for entry in os.scandir(directory):
            if entry.name not in commands:
                (shadow / entry.name).symlink_to(entry.path)
        shadows.append(str(shadow))
    return os.pathsep.join(shadows)


def regenerate_golden() -> bool:
    """REGEN_GOLDEN=1 rewrites golden files (and the tests that did so fail, on purpose)."""
    return os.environ.get("REGEN_GOLDEN") == "1"
