"""TensorBoard itself, started on a capture root's event files, on this machine's loopback only.

TensorBoard is an optional extra (`pip install '.[board]'`); the harness
writes event files without it. `harness board` is TensorBoard's own page, not
a dashboard of the harness's.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Optional

DEFAULT_PORT = 6006
LOCALHOST = "127.0.0.1"
START_TIMEOUT_S = 120.0
INSTALL_HINT = "pip install '.[board]' in the harness's directory, or pip install tensorboard"


def tensorboard_missing() -> Optional[str]:
    """One line when TensorBoard cannot be started here, else None."""
    from importlib.util import find_spec

    if find_spec("tensorboard") is None:
        return f"TensorBoard is not installed: {INSTALL_HINT}"
    return None


def free_port(host: str = LOCALHOST, first: int = DEFAULT_PORT, tries: int = 100) -> int:
    """The first port from `first` on that nothing listens on at `host` (else one the kernel picks)."""
    for port in range(first, first + tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        picked: int = probe.getsockname()[1]
        return picked


def start_tensorboard(logdir: Path, port: int, log: IO[bytes], host: str = LOCALHOST) -> "subprocess.Popen[bytes]":
    """TensorBoard on `logdir` at http://host:port/, its own output to `log`."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(logdir),
            "--host",
            host,
            "--port",
            str(port),
            "--reload_interval",
            "2",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def port_in_use(port: int, host: str = LOCALHOST) -> bool:
    """Whether something already listens on (or holds) `port` at `host`: it cannot be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return True
        return False


def wait_until_serving(
    url: str, process: "subprocess.Popen[bytes]", logdir: Path, timeout_s: float = START_TIMEOUT_S
) -> Optional[str]:
    """None once the TensorBoard `process` started answers at `url`; else why not (it ended first, or `timeout_s`
    passed). Whatever else answers at `url` is not it: TensorBoard says which log directory it serves, and only
    one that serves `logdir` counts."""
    deadline = time.monotonic() + timeout_s
    other = False
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"TensorBoard ended (exit code {process.returncode})"
        try:
            with urllib.request.urlopen(url + "data/environment", timeout=2) as answer:
                if answer.status == 200:
                    if _serves(answer.read(), logdir):
                        return None
                    other = True
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(0.25)
    if other:
        return f"something else answers at {url}, not the TensorBoard started on {logdir}"
    return f"TensorBoard did not answer within {timeout_s:g} s"


def _serves(environment: bytes, logdir: Path) -> bool:
    """Whether TensorBoard's /data/environment names `logdir` as the data it serves."""
    import json

    try:
        location = json.loads(environment).get("data_location")
    except (ValueError, AttributeError):
        return False
    return isinstance(location, str) and os.path.realpath(location) == os.path.realpath(logdir)
