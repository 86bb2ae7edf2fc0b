"""Which simulator a sim image holds: a digest of Dockerfile.sim and of every file it copies.

`scripts/sim-image.sh` builds the image with the digest as a label and a tag
(`miles-gb10-lab/sim:<digest>`, beside `latest`), from the options
`python3 -m harness.sim.image` prints; `harness run --sim` runs only the image
whose label is this checkout's digest (harness.run.simswap). One rule for
both, so an image built from another simulator (before a `git pull`, or by
another checkout on the same Docker engine) is never taken for this one's,
and two checkouts on one engine each keep their own.

The files are those the build copies: each COPY source of Dockerfile.sim,
less what .dockerignore keeps out of the context (bytecode). Standard library
only: the script runs it with the machine's python3, before any set-up.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Sequence

SIM_REPOSITORY = "miles-gb10-lab/sim"
SIM_LATEST = f"{SIM_REPOSITORY}:latest"  # the documented name; it is whichever checkout built last
SIM_DIGEST_LABEL = "org.miles-gb10-lab.sim-digest"
DOCKERFILE = "Dockerfile.sim"
DOCKERIGNORE = ".dockerignore"
DIGEST_CHARS = 12


def checkout_root() -> Path:
    """The checkout this harness runs from: the directory of Dockerfile.sim and of the `harness` package."""
    return Path(__file__).resolve().parents[2]


def copied_sources(dockerfile: str) -> list[str]:
    """The context paths a Dockerfile's COPY and ADD lines take (their sources, without the destination)."""
    sources = []
    for line in dockerfile.splitlines():
        words = line.split()
        if len(words) > 2 and words[0].upper() in ("COPY", "ADD"):
            sources += [word for word in words[1:-1] if not word.startswith("--")]
    return sources


def ignored(relative: str, patterns: Sequence[str]) -> bool:
    """Whether .dockerignore's `patterns` keep `relative` (a context path, `/`-separated) out of the build context,
    as Docker reads them: a path is out when it or a directory above it matches, the last matching line deciding
    (a `!` line lets back in), and `**/` matching any directories."""
    from fnmatch import fnmatchcase

    parts = relative.split("/")
    prefixes = ["/".join(parts[: end + 1]) for end in range(len(parts))]

    def matches(path: str, pattern: str) -> bool:
        if pattern.startswith("**/"):
            words = path.split("/")
            return any(fnmatchcase("/".join(words[start:]), pattern[3:]) for start in range(len(words)))
        return fnmatchcase(path, pattern)

    out = False
    for line in patterns:
        pattern = line[1:] if line.startswith("!") else line
        pattern = pattern.strip().strip("/")
        if pattern and any(matches(prefix, pattern) for prefix in prefixes):
            out = not line.startswith("!")
    return out


def copied_files(root: Path) -> list[str]:
    """Dockerfile.sim and every file its build copies from `root`, as `/`-separated paths (Dockerfile.sim first)."""
    patterns = []
    if (root / DOCKERIGNORE).is_file():
        lines = (root / DOCKERIGNORE).read_text().splitlines()
        patterns = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    found = set()
    for source in copied_sources((root / DOCKERFILE).read_text()):
        top = root / source
        for path in [top] if top.is_file() else sorted(top.rglob("*")):
            relative = path.relative_to(root).as_posix()
            if path.is_file() and not ignored(relative, patterns):
                found.add(relative)
    return [DOCKERFILE, *sorted(found)]


def sim_digest(root: Optional[Path] = None) -> str:
    """The digest of the simulator a sim image built at `root` (default: this checkout) holds; OSError when a file
    cannot be read (no Dockerfile.sim: a harness installed without its checkout)."""
    import hashlib

    root = root or checkout_root()
    digest = hashlib.sha256()
    for name in copied_files(root):
        data = (root / name).read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()[:DIGEST_CHARS]


def sim_image_tag(digest: str) -> str:
    """The tag of the sim image that holds the simulator of `digest`."""
    return f"{SIM_REPOSITORY}:{digest}"


def build_options(root: Optional[Path] = None) -> list[str]:
    """`docker build` options for the sim image of `root`: its digest as a label, its digest's tag and `latest`."""
    digest = sim_digest(root)
    return ["--label", f"{SIM_DIGEST_LABEL}={digest}", "--tag", sim_image_tag(digest), "--tag", SIM_LATEST]


def main(argv: Sequence[str]) -> int:
    """`python3 -m harness.sim.image [--tag]`: the build's options, one a line (`--tag`: the digest's tag alone)."""
    if list(argv) not in ([], ["--tag"]):
        print(f"usage: python3 -m harness.sim.image [--tag]; got {' '.join(argv)}", file=sys.stderr)
        return 2
    try:
        lines = [sim_image_tag(sim_digest())] if argv else build_options()
    except OSError as err:
        print(f"the simulator's files cannot be read: {err}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
