"""scripts/offline-images.sh: which Debian mirror it takes from apt's sources, and its images."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

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
    sources(tmp_path, {
        "sources.list": (
            "# deb http://commented.example/debian bookworm main\n"
            "deb-src http://src.example/debian bookworm main\n"
            "deb http://security.example/debian-security bookworm-security main\n"
            "deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://mirror.example/debian/ bookworm main contrib\n"
        ),
        "sources.list.d/thirdparty.list": "deb [ arch=amd64 ] https://vendor.example/linux/debian bookworm stable\n",
    })

    done = print_mirror(tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "http://mirror.example/debian\n"


def test_deb822_sources_are_read_and_disabled_ones_skipped(tmp_path):
    sources(tmp_path, {
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
    })

    done = print_mirror(tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "https://mirror.example/debian\n"


def test_a_debian_host_of_another_release_lends_its_own_mirror(tmp_path):
    sources(tmp_path, {"sources.list.d/debian.sources": (
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: trixie trixie-updates\nComponents: main\n")})

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


def test_the_tags_are_the_names_the_dockerfiles_use():
    tags = subprocess.run(["bash", str(SCRIPT), "--print-tags"], capture_output=True, text=True).stdout.split()
    standin = (REPO_ROOT / "tests" / "images" / "miles-standin" / "Dockerfile").read_text()

    assert tags == ["busybox:stable", "python:3.11-slim-bookworm"]
    assert f"FROM {tags[1]}\n" in standin


@pytest.mark.docker
def test_the_offline_images_run_without_a_network(offline_images):
    busybox, python = offline_images
    for image, argv in ((busybox, ["sh", "-c", "echo ok"]), (python, ["python3", "-c", "print('ok')"])):
        done = subprocess.run(["docker", "run", "--rm", "--network=none", image, *argv],
                              capture_output=True, text=True, timeout=60)
        assert done.stdout == "ok\n", done.stderr
