"""scripts/offline-images.sh: which Debian mirror it takes from apt's sources, and its images."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from support.machine import path_without

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = REPO_ROOT / "scripts" / "offline-images.sh"


def print_mirror(tmp_path: Path, os_release: str = "ID=debian\nVERSION_CODENAME=bookworm\n", **env: str):
    (tmp_path / "os-release").write_text(os_release)
    full_env = {key: value for key, value in os.environ.items() if key != "DEBIAN_MIRROR"}
    full_env.update(APT_SOURCES_DIR=str(tmp_path / "apt"), OS_RELEASE=str(tmp_path / "os-release"), **env)
    return subprocess.run(["bash", str(SCRIPT), "--print-mirror"], env=full_env, capture_output=True, text=True)


def sources(tmp_path: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = tmp_path / "apt" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_one_line_sources_give_the_debian_main_entry_for_bookworm(tmp_path):
    sources(
        tmp_path,
        {
            "sources.list": (
                "# deb http://commented.example/debian bookworm main\n"
                "deb-src http://src.example/debian bookworm main\n"
                "deb http://security.example/debian-security bookworm-security main\n"
                "deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://mirror.example/debian/ bookworm main contrib\n"
            ),
            "sources.list.d/thirdparty.list": "deb [ arch=amd64 ] https://vendor.example/linux/debian bookworm stable\n",
        },
    )

    done = print_mirror(tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "http://mirror.example/debian\n"


def test_deb822_sources_are_read_and_disabled_ones_skipped(tmp_path):
    sources(
        tmp_path,
        {
            "sources.list.d/debian.sources": (
                "Types: deb\n"
                "URIs: http://off.example/debian\n"
                "Suites: bookworm\n"
                "Components: main\n"
                "Enabled: no\n"
                "\n"
                "Types: deb-src deb\n"
                "# a comment inside the stanza\n"
                "URIs: https://mirror.example/debian\n"
                "Suites: bookworm bookworm-updates\n"
                "Components: main\n"
                "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
                "\n"
                "Types: deb\n"
                "URIs: https://security.example/debian-security\n"
                "Suites: bookworm-security\n"
                "Components: main\n"
            ),
            "sources.list.d/other.sources.disabled": (
                "Types: deb\nURIs: http://wrong.example/debian\nSuites: bookworm\nComponents: main\n"
            ),
        },
    )

    done = print_mirror(tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "https://mirror.example/debian\n"


def test_a_debian_host_of_another_release_lends_its_own_mirror(tmp_path):
    sources(
        tmp_path,
        {
            "sources.list.d/debian.sources": (
                "Types: deb\nURIs: http://mirror.example/debian\nSuites: trixie trixie-updates\nComponents: main\n"
            )
        },
    )

    assert print_mirror(tmp_path, "ID=debian\nVERSION_CODENAME=trixie\n").stdout == "http://mirror.example/debian\n"
    assert print_mirror(tmp_path, "ID=ubuntu\nVERSION_CODENAME=trixie\n").returncode != 0


def test_debian_mirror_overrides_the_sources(tmp_path):
    done = print_mirror(tmp_path, DEBIAN_MIRROR="http://local.example/debian")

    assert done.returncode == 0
    assert done.stdout == "http://local.example/debian\n"


def test_no_mirror_found_is_a_clear_error(tmp_path):
    sources(tmp_path, {"sources.list": "deb http://archive.example/ubuntu noble main\n"})

    done = print_mirror(tmp_path)

    assert done.returncode == 1
    assert done.stdout == ""
    assert "no Debian mirror for 'bookworm'" in done.stderr and "DEBIAN_MIRROR" in done.stderr


PYTHON_TAG = "miles-gb10-lab/python:3.11-bookworm"
BUSYBOX_TAG = "miles-gb10-lab/busybox:stable"
# An image reference in a test or a benchmark: a quoted name with the tag test, test-<what> or bench.
IMAGE_LITERAL = re.compile(r"""["']([a-z0-9][a-z0-9._/-]*:(?:test|bench)[a-z0-9._-]*)["']""")


def test_the_tags_are_the_project_s_own_and_the_dockerfiles_use_them():
    tags = subprocess.run(["bash", str(SCRIPT), "--print-tags"], capture_output=True, text=True).stdout.split()
    froms = {
        path.relative_to(REPO_ROOT): re.findall(r"^FROM (\S+)", path.read_text(), re.M)
        for path in sorted([*REPO_ROOT.glob("tests/images/*/Dockerfile"), *REPO_ROOT.glob("bench/images/*/Dockerfile")])
    }

    assert tags == [BUSYBOX_TAG, PYTHON_TAG]
    assert len(froms) >= 3
    assert froms == {path: [PYTHON_TAG] for path in froms}


def test_every_image_the_tests_and_benchmarks_build_is_under_the_project_name():
    literals = {
        (path.name, found)
        for path in [*REPO_ROOT.glob("tests/*.py"), *REPO_ROOT.glob("bench/*.py")]
        for found in IMAGE_LITERAL.findall(path.read_text())
    }

    assert len(literals) >= 4
    assert [literal for literal in sorted(literals) if not literal[1].startswith("miles-gb10-lab/")] == []


def build_without(tmp_path: Path, command: str, kind: str, tag: str) -> subprocess.CompletedProcess:
    """offline-images.sh --only KIND, to a trial tag, where `command` is not installed."""
    env = {**os.environ, "PATH": path_without(tmp_path, command), f"OFFLINE_{kind.upper()}_TAG": tag}
    return subprocess.run(["bash", str(SCRIPT), "--only", kind], env=env, capture_output=True, text=True, timeout=600)


def docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def trial_tag(request):
    """A tag beside the real ones, removed afterwards."""
    tag = f"miles-gb10-lab/{request.param}:trial-{os.getpid()}"
    yield tag
    docker("image", "rm", "--force", tag)


@pytest.mark.docker
@pytest.mark.parametrize("trial_tag", ["python"], indirect=True)
def test_without_debootstrap_the_python_image_is_made_of_the_host_s_own_python(tmp_path, trial_tag):
    built = build_without(tmp_path, "debootstrap", "python", trial_tag)

    assert built.returncode == 0, built.stderr
    assert "debootstrap is not installed" in built.stderr and "python3 of this machine" in built.stderr
    labels = json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", trial_tag).stdout)
    assert labels["org.miles-gb10-lab.offline-image"].startswith("host-python-3.")
    # what the tests' images need: RUN lines (a shell, chmod) and a Python with its C modules
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text(f"FROM {trial_tag}\nRUN chmod 0700 /root && echo built\n")
    assert docker("build", "--quiet", "--tag", f"{trial_tag}-child", str(tmp_path / "ctx")).returncode == 0
    docker("image", "rm", f"{trial_tag}-child")
    ran = docker(
        "run",
        "--rm",
        "--network=none",
        trial_tag,
        "python3",
        "-c",
        "import ctypes, hashlib, json, shlex, sqlite3, ssl, subprocess, zlib; "
        "print(subprocess.run(['sh', '-c', 'echo ok'], capture_output=True, text=True).stdout, end='')",
    )
    assert (ran.returncode, ran.stdout) == (0, "ok\n"), ran.stderr


@pytest.mark.docker
@pytest.mark.parametrize("trial_tag", ["busybox"], indirect=True)
def test_without_any_busybox_the_busybox_image_cannot_be_built_and_says_which_command_enables_it(tmp_path, trial_tag):
    built = build_without(tmp_path, "busybox", "busybox", trial_tag)

    assert built.returncode == 69, built.stderr
    assert built.stderr.splitlines()[-1].endswith("apt-get install busybox-static")
    assert docker("image", "inspect", trial_tag).returncode != 0


@pytest.mark.docker
def test_the_offline_images_run_without_a_network(busybox_image, python_image):
    for image, argv in ((busybox_image, ["sh", "-c", "echo ok"]), (python_image, ["python3", "-c", "print('ok')"])):
        done = docker("run", "--rm", "--network=none", image, *argv)
        assert done.stdout == "ok\n", done.stderr
