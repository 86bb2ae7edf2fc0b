"""Facts a manifest records about where a run came from: code, host, driver."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from harness import __version__
from harness.engines.dockerapi import DockerApi, DockerApiError
from harness.jsontypes import JSONObject, JSONValue


def git_facts(directory: Path) -> JSONObject:
    """Commit sha and dirty flag of the checkout at `directory` (None when it is not one)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout if out.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "git_sha": sha.strip() if sha else None,
        "git_dirty": bool(status.strip()) if status is not None else None,
    }


def nvml_probe() -> JSONObject:
    """Driver version and GPU names through NVML; what failed is recorded, never raised."""
    try:
        import pynvml
    except ImportError as err:
        return {"available": False, "error": f"nvidia-ml-py not importable: {err}"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return {"available": False, "error": str(err)}
    unsupported: list[JSONValue] = []
    facts: JSONObject = {"available": True, "unsupported": unsupported}
    try:
        facts["driver_version"] = _text(pynvml.nvmlSystemGetDriverVersion())
        count = pynvml.nvmlDeviceGetCount()
        facts["gpus"] = [_text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))) for i in range(count)]
    except pynvml.NVMLError as err:
        unsupported.append(str(err))
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
    return facts


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def harness_facts() -> JSONObject:
    """Harness version, its command line, the host and the Python running it."""
    return {
        "harness_version": __version__,
        "harness_argv": list[JSONValue](sys.argv),
        "host": socket.gethostname(),
        "python": sys.version.split()[0],
    }


def version_line() -> str:
    """`harness --version`, on one line: the version, the code's git sha, Python, whether Docker and NVML answer."""
    code = git_facts(Path(__file__).resolve().parent.parent.parent)
    sha = code.get("git_sha")
    git = f" (git {str(sha)[:8]}{'-dirty' if code.get('git_dirty') else ''})" if sha else ""
    try:
        status, answer = DockerApi(timeout_s=2.0).get("/version")
        engine = answer.get("Version") if isinstance(answer, dict) else None
        docker = f"Docker {engine}" if status == 200 and engine else "no Docker"
    except DockerApiError:
        docker = "no Docker"
    nvml = nvml_probe()
    gpus = nvml.get("gpus")
    count = len(gpus) if isinstance(gpus, list) else 0
    plural = "s" if count != 1 else ""
    nvml_text = f"NVML {nvml.get('driver_version')} ({count} GPU{plural})" if nvml.get("available") else "no NVML"
    return f"harness {__version__}{git}, Python {sys.version.split()[0]}, {docker}, {nvml_text}"
