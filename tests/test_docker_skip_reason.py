"""Where no Docker engine answers, the skip reason names the address that was tried and what to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.machine import docker_problem


@pytest.mark.skipif(not shutil.which("docker"), reason="no docker command: the reason is about that instead")
def test_a_docker_host_at_a_missing_socket_is_named_in_the_skip_reason(tmp_path: Path) -> None:
    host = f"unix://{tmp_path / 'no-engine.sock'}"
    reason = docker_problem(host)
    assert reason is not None
    assert f"DOCKER_HOST={host}" in reason and "no such socket" in reason and "unset DOCKER_HOST" in reason, reason
    assert "systemctl" not in reason  # starting the default engine would not help
