"""The images the Docker tests run: the registry-free base images, the fake trainer, the simulator's image.

Fixtures (registered in conftest.py): `python_image`, `busybox_image`,
`docker_build`, `fake_trainer`, `sim_image`. Each is built once a session
(cached layers are fine); what cannot be built here is a skip naming the command.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import pytest

from harness.sim.image import copied_sources, sim_digest, sim_image_tag
from support.timing import scaled

REPO_ROOT = Path(__file__).resolve().parents[2]
OFFLINE_IMAGES_SCRIPT = REPO_ROOT / "scripts" / "offline-images.sh"
OFFLINE_IMAGES_UNAVAILABLE = 69  # the script's exit code for "cannot be built on this machine"
FAKE_TRAINER_DIR = REPO_ROOT / "tests" / "images" / "fake-trainer"
STANDIN_DIR = REPO_ROOT / "tests" / "images" / "miles-standin"


def content_tag(directory: Path, only: Sequence[str] = (), build_args: Optional[Mapping[str, str]] = None) -> str:
    """12 hex of what a build context holds (`only`: those of its files and directories) and the build's arguments:
    another checkout's suite on the same Docker engine, whose build differs, builds and runs its own tag, never this
    one's, while a suite beside it with the same build shares the tag."""
    digest = hashlib.sha256(repr(sorted((build_args or {}).items())).encode())
    roots = [directory / name for name in only] if only else [directory]
    found = (path for root in roots for path in ([root] if root.is_file() else root.rglob("*")))
    files = {path for path in found if path.is_file() and "__pycache__" not in path.parts}  # bytecode: not built in
    for path in sorted(files):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def content_tagged(
    image: str, directory: Path, only: Sequence[str] = (), build_args: Optional[Mapping[str, str]] = None
) -> str:
    """`image` (a name and tag, such as miles-gb10-lab/lab:test) with the build's `content_tag` after its tag."""
    return f"{image}-{content_tag(directory, only, build_args)}"


def dockerfile_sources(dockerfile: Path) -> list[str]:
    """The Dockerfile and what its COPY and ADD lines take from the context: all of the context the image holds."""
    return [dockerfile.name, *copied_sources(dockerfile.read_text())]


FAKE_TRAINER_IMAGE = content_tagged("miles-gb10-lab/fake-trainer:test", FAKE_TRAINER_DIR)
STANDIN_IMAGE = content_tagged("miles-gb10-lab/miles-standin:test", STANDIN_DIR)


def lab_image_tag(image: str, miles_base: str) -> str:
    """A tag for the lab image (the checkout's Dockerfile) built on `miles_base` with the base's Miles kept."""
    return content_tagged(
        image, REPO_ROOT, dockerfile_sources(REPO_ROOT / "Dockerfile"), {"MILES_BASE": miles_base, "MILES_COMMIT": ""}
    )


def offline_image(kind: str) -> str:
    """The tag of a registry-free base image, built if missing; a skip naming the command if it cannot be."""
    script = ["bash", str(OFFLINE_IMAGES_SCRIPT), "--only", kind]
    built = subprocess.run(script, capture_output=True, text=True, timeout=scaled(1200))
    if built.returncode == OFFLINE_IMAGES_UNAVAILABLE:
        pytest.skip(built.stderr.strip().splitlines()[-1].removeprefix("offline-images: "))
    if built.returncode != 0:
        raise RuntimeError(f"scripts/offline-images.sh --only {kind} failed:\n{built.stderr[-3000:]}")
    return subprocess.run([*script, "--print-tags"], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="session")
def python_image() -> str:
    """miles-gb10-lab/python:3.11-bookworm: the base of the tests' trainer and Miles stand-in images."""
    return offline_image("python")


@pytest.fixture(scope="session")
def busybox_image() -> str:
    """miles-gb10-lab/busybox:stable."""
    return offline_image("busybox")


DockerBuild = Callable[..., str]


@pytest.fixture(scope="session")
def docker_build() -> DockerBuild:
    """Build an image with the docker CLI (cached layers are fine); fails the test with the log tail."""

    def build(context: Path, tag: str, build_args: Optional[dict[str, str]] = None) -> str:
        argv = ["docker", "build", "--quiet", "--force-rm", "--tag", tag]
        for name, value in (build_args or {}).items():
            argv += ["--build-arg", f"{name}={value}"]
        done = subprocess.run([*argv, str(context)], capture_output=True, text=True, timeout=scaled(900))
        if done.returncode != 0:
            pytest.fail(f"docker build of {tag} failed:\n{(done.stdout + done.stderr)[-3000:]}", pytrace=False)
        return tag

    return build


@pytest.fixture(scope="session")
def fake_trainer(python_image: str, docker_build: DockerBuild) -> str:
    """The fake trainer's image (tests/images/fake-trainer): the trainer a Docker lab runs."""
    return docker_build(FAKE_TRAINER_DIR, FAKE_TRAINER_IMAGE)


@pytest.fixture(scope="session")
def sim_image(python_image: str) -> str:
    """miles-gb10-lab/sim:<this checkout's simulator digest>, the image `run --sim` takes (scripts/sim-image.sh,
    which tags :latest too; cached layers are fine). Not :latest: another checkout's suite may have built it since."""
    built = subprocess.run(
        ["bash", "scripts/sim-image.sh"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=scaled(900)
    )
    if built.returncode != 0:
        pytest.fail(f"scripts/sim-image.sh failed:\n{built.stdout[-2000:]}{built.stderr[-2000:]}", pytrace=False)
    return sim_image_tag(sim_digest(REPO_ROOT))
