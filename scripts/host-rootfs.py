#!/usr/bin/env python3
"""Write a tar of a small root file system made of this machine's own programs, for `docker import`.

    host-rootfs.py python            the Python running this script, its standard library,
                                     /bin/sh and a few core utilities
    host-rootfs.py busybox BUSYBOX   a busybox with a link for each of its applets

Every program is copied with the shared libraries it links, as ldd finds them,
at the paths they have on this machine (the top-level links of a merged /usr
are kept, so the dynamic loader finds them as it does here). Owners are root,
so it runs as any user. scripts/offline-images.sh uses it where debootstrap
cannot run (not installed, not root, no Debian mirror) or busybox is not
static. The tar goes to stdout; what it left out goes to stderr.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

# RUN lines in Dockerfiles need /bin/sh; the tests' and benchmarks' images use a few of these.
CORE_COMMANDS = ("sh", "cat", "chmod", "cp", "env", "id", "ln", "ls", "mkdir", "mv", "rm", "sleep")
# Not needed to run programs, and large: tests, GUI, build files, installed packages.
SKIPPED_DIRS = {
    "site-packages",
    "dist-packages",
    "test",
    "tests",
    "idle_test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
}
TOP_LEVEL_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
LDD_LINE = re.compile(r"^\s*(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)$")


class Rootfs:
    """Entries of a tar archive, in the order a root file system needs them (directories first)."""

    def __init__(self) -> None:
        self.links: dict[str, str] = {}
        self.files: dict[str, Path] = {}  # where in the image -> what on this machine
        self.texts: dict[str, tuple[bytes, int]] = {}
        self.dirs: dict[str, int] = {"tmp": 0o1777, "var/tmp": 0o1777, "root": 0o700, "etc": 0o755}

    def copy(self, host_path: Path, image_path: str | None = None) -> None:
        """Copy a host file (its target, when a link) to the same canonical path, or to `image_path`."""
        self.files[(image_path or canonical(host_path)).lstrip("/")] = host_path.resolve()

    def link(self, image_path: str, target: str) -> None:
        self.links[image_path.lstrip("/")] = target

    def text(self, image_path: str, content: str, mode: int = 0o644) -> None:
        self.texts[image_path.lstrip("/")] = (content.encode(), mode)

    def write(self, out: io.BufferedWriter) -> None:
        with tarfile.open(fileobj=out, mode="w|", format=tarfile.GNU_FORMAT) as tar:
            parents = {
                str(p)
                for name in [*self.files, *self.texts, *self.links, *self.dirs]
                for p in Path(name).parents
                if str(p) != "."
            }
            for name in sorted(parents | set(self.dirs)):
                if name in self.links:
                    continue
                tar.addfile(entry(name, tarfile.DIRTYPE, self.dirs.get(name, 0o755)))
            for name, target in sorted(self.links.items()):
                link = entry(name, tarfile.SYMTYPE, 0o777)
                link.linkname = target
                tar.addfile(link)
            for name, (content, mode) in sorted(self.texts.items()):
                info = entry(name, tarfile.REGTYPE, mode)
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
            for name, source in sorted(self.files.items()):
                info = entry(name, tarfile.REGTYPE, source.stat().st_mode & 0o7777)
                info.size = source.stat().st_size
                with source.open("rb") as data:
                    tar.addfile(info, data)


def entry(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid, info.gid, info.uname, info.gname = kind, mode, 0, 0, "root", "root"
    return info


def canonical(path: Path) -> str:
    """The path with its directory's links resolved and its own name kept (libc.so.6 stays libc.so.6)."""
    return str(path.parent.resolve() / path.name)


def shared_libraries(programs: list[Path]) -> tuple[set[Path], list[str]]:
    """The libraries (and the loader) that ldd lists for the programs, and the programs it could not satisfy."""
    libraries: set[Path] = set()
    unsatisfied: list[str] = []
    for start in range(0, len(programs), 200):
        chunk = programs[start : start + 200]
        done = subprocess.run(["ldd", *map(str, chunk)], capture_output=True, text=True)
        current = str(chunk[0])
        for line in done.stdout.splitlines():
            if not line.startswith(("\t", " ")) and line.endswith(":"):
                current = line[:-1]
            elif "not found" in line:
                unsatisfied.append(f"{current}: {line.strip()}")
            elif match := LDD_LINE.match(line):
                libraries.add(Path(match.group(1)))
    return libraries, unsatisfied


def with_libraries(rootfs: Rootfs, programs: list[Path]) -> None:
    """Copy the libraries the programs link; a program whose library is missing here is left out."""
    libraries, unsatisfied = shared_libraries(programs)
    for line in unsatisfied:
        program = line.split(":", 1)[0]
        print(f"host-rootfs: left out {program} (a library is missing here: {line.split(': ', 1)[1]})", file=sys.stderr)
        rootfs.files = {k: v for k, v in rootfs.files.items() if str(v) != str(Path(program).resolve())}
    for library in libraries:
        rootfs.copy(library)
    for name in TOP_LEVEL_LINKS:
        top = Path("/") / name
        if top.is_symlink() and name not in rootfs.dirs:
            rootfs.link(name, os.readlink(top))


def base_files(rootfs: Rootfs) -> None:
    rootfs.text("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
    rootfs.text("etc/group", "root:x:0:\nnogroup:x:65534:\n")


def python_rootfs() -> Rootfs:
    """The interpreter running this script, its standard library (no site-packages) and /bin/sh."""
    rootfs = Rootfs()
    base_files(rootfs)
    executable = Path(sys.executable).resolve()
    rootfs.copy(executable)
    for name in ("python3", "python"):
        if canonical(Path("/usr/local/bin") / name) != str(executable):
            rootfs.link(f"usr/local/bin/{name}", str(executable))
    programs = [executable]
    stdlib_dirs = {Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "platstdlib")}
    for stdlib in stdlib_dirs:
        for directory, subdirs, files in os.walk(stdlib):
            subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith("config-")]
            for name in files:
                path = Path(directory) / name
                if not path.exists():  # a dangling link
                    continue
                rootfs.copy(path)
                if name.endswith(".so") or ".so." in name:
                    programs.append(path.resolve())
    for command in CORE_COMMANDS:
        found = shutil.which(command, path=STD_PATH)
        if found:
            rootfs.copy(Path(found))
            programs.append(Path(found).resolve())
    if Path("/etc/ld.so.cache").is_file():  # where the loader looks first: the same paths as here
        rootfs.copy(Path("/etc/ld.so.cache"))
    with_libraries(rootfs, programs)
    return rootfs


def busybox_rootfs(busybox: Path) -> Rootfs:
    """A busybox at /bin/busybox with a link per applet (and its libraries, if it is not static)."""
    rootfs = Rootfs()
    base_files(rootfs)
    rootfs.dirs["bin"] = 0o755
    rootfs.copy(busybox, "bin/busybox")
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            rootfs.link(f"bin/{applet}", "busybox")
    with_libraries(rootfs, [busybox.resolve()])
    return rootfs


def main(argv: list[str]) -> int:
    if argv[:1] == ["python"] and len(argv) == 1:
        rootfs = python_rootfs()
    elif argv[:1] == ["busybox"] and len(argv) == 2:
        rootfs = busybox_rootfs(Path(argv[1]))
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    if sys.stdout.isatty():
        print("host-rootfs: not writing a tar to a terminal (pipe it into docker import)", file=sys.stderr)
        return 2
    rootfs.write(sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
