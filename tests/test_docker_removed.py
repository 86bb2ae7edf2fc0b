"""A container removed from outside while it runs is a removal, whichever the engine says first.

`docker rm -f` kills the container, then removes it: the harness's wait may
hear of the kill's exit (137) before the container is gone, or find it gone
first. Each order is driven here on the real engine, by holding the wait's
real answer until the removal is done, or by asking only after it.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Any, Callable, Iterator

import pytest

from harness.engines import RunGone
from harness.engines.docker import DockerEngine
from harness.engines.dockerrun import DockerRun
from support.timing import scaled

pytestmark = pytest.mark.docker

REMOVED = "its container was removed while it ran"


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=scaled(120))


@pytest.fixture
def running(busybox_image: str) -> Iterator[str]:
    """A running container of this test's own (removed at the end, if the test has not removed it)."""
    started = docker("run", "--detach", "--label", "org.miles-gb10-lab.test=removed", busybox_image, "sleep", "600")
    assert started.returncode == 0, started.stderr
    container = started.stdout.strip()
    yield container
    docker("rm", "--force", container)


class HeldWait:
    """The container's own `wait`, whose real answer is held until the test lets it through."""

    def __init__(self, wait: Callable[..., Any]) -> None:
        self.real = wait
        self.answered = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.real(*args, **kwargs)
        finally:
            self.answered.set()
            self.release.wait(scaled(60))


def held_handle(container: str) -> tuple[DockerRun, HeldWait]:
    handle = DockerEngine().attach(container)
    held = HeldWait(handle.container.wait)
    handle.container.wait = held  # type: ignore[method-assign]
    assert handle.wait(timeout=0) is None  # the waiter is asking
    return handle, held


def test_an_exit_heard_before_the_removal_shows_is_a_removal(running: str) -> None:
    handle, held = held_handle(running)
    assert docker("kill", running).returncode == 0  # what `docker rm -f` does first: the wait answers 137
    assert held.answered.wait(scaled(60))
    assert docker("rm", "--force", running).returncode == 0  # then it removes: done before the harness looks
    held.release.set()

    with pytest.raises(RunGone, match=f"^{REMOVED}$"):
        handle.wait(timeout=scaled(60))


def test_a_removal_heard_before_any_exit_is_a_removal(running: str) -> None:
    handle = DockerEngine().attach(running)
    assert docker("rm", "--force", running).returncode == 0

    with pytest.raises(RunGone, match=f"^{REMOVED}$"):
        handle.wait(timeout=scaled(60))


def test_a_kill_from_outside_that_leaves_the_container_is_an_exit_137(running: str) -> None:
    handle, held = held_handle(running)
    assert docker("kill", running).returncode == 0
    assert held.answered.wait(scaled(60))
    held.release.set()

    assert handle.wait(timeout=scaled(60)) == 137
