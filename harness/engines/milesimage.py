"""The image preflight: which Miles an image holds, and whether the run's Python paths load in it.

Miles imports the filter path (`--dynamic-sampling-filter-path`) only when
the first rollout starts, minutes into a run, after the model and the
engines have loaded. So before any Docker run (the simulator's own image
aside) the harness asks the image once, in a container of its own that
runs `python3 -c PROBE PATH...` (no network, no GPU, a second or two):

- which Miles it holds: the commit `make image` recorded
  (`/opt/miles-gb10-lab/miles-commit`), else the `miles` distribution's
  version, else `__version__` in `miles/__init__.py`;
- whether each dotted path a `*-path` flag passes can be loaded: its module
  found (`importlib.util.find_spec`, which imports only the packages above
  it) and the name defined at its top level, read from the source; only a
  module that defines names out of sight of its source (`from x import *`,
  a module `__getattr__`, definitions under `if`/`try`) is imported;
- whether this Miles prints `rollout/raw_reward_unfiltered`: judged from
  its source (the key appears in a `.py` file of the `miles` package), not
  by running it.

The answer is cached per image id under the harness's state directory
(`HARNESS_PREFLIGHT_DIR`, else `$XDG_STATE_HOME/miles-gb10-lab/image-checks`),
so a second run of the same image asks nothing. An entry names what it
checked (the image id, the probe's version, the paths asked) and is used only
for that; one that cannot be read (not a regular file, too large, torn, of
another shape) is absent. Only the probe's first answer is read, only the
head and tail of what the container prints are kept, and a path the answer
leaves out does not load. Deciding what the answer means (`judge`) is pure;
asking (`probe_image`) is the only side effect.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from harness.engines.base import Problem
from harness.fs.bounded import Unreadable, loads_json, read_json_file
from harness.fs.files import RefusedPath, write_json_atomic
from harness.fs.paths import state_dir
from harness.lab.milesargv import flag_values
from harness.lab.milesnames import FILTER_FLAG, WRITE_UP_MILES, ZERO_STD_FILTER_PATHS

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

COMMIT_FILE = "/opt/miles-gb10-lab/miles-commit"  # written by the lab image's build (`make image`)
SIM_LABEL = "org.miles-gb10-lab.sim"
PROBE_LABEL = "org.miles-gb10-lab.preflight"
PROBE_TIMEOUT_S = 25.0
PROBE_MARKER = "MILES-PREFLIGHT "
CACHE_VERSION = 2  # 2: an entry names the probe's version and the paths it asked
MAX_CACHE_BYTES = 1 << 20  # an entry is a few kB
MAX_PROBE_OUTPUT_BYTES = 1 << 20  # the probe prints one line of a few kB: an image that prints more is refused
UNANSWERED = "the probe's answer does not mention it"

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,100}(?:\.[A-Za-z_][A-Za-z0-9_]{0,100}){1,30}")
# A value like `model.pt` is a file, not a Python path.
_FILE_SUFFIXES = frozenset(
    "pt pth bin safetensors json jsonl yaml yml txt parquet csv tsv py sh npz npy pkl ckpt gguf arrow md".split()
)

PROBE = r"""
import ast, importlib, json, os, sys
from importlib import util
out = {"commit": None, "miles_version": None, "found": False, "prints_unfiltered_reward": None, "paths": {}}
try:
    with open(sys.argv[1]) as f:
        out["commit"] = f.read().strip() or None
except OSError:
    pass
try:
    from importlib.metadata import version
    out["miles_version"] = version("miles")
except Exception:
    pass
try:
    spec = util.find_spec("miles")
except Exception:
    spec = None
if spec is not None and spec.submodule_search_locations:
    out["found"] = True
    root = list(spec.submodule_search_locations)[0]
    if out["miles_version"] is None and spec.origin and spec.origin.endswith(".py"):
        try:
            for node in ast.parse(open(spec.origin, encoding="utf-8").read()).body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__version__" for t in node.targets):
                    if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                        out["miles_version"] = node.value.value
        except (OSError, SyntaxError, ValueError):
            pass
    prints = False
    for where, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                try:
                    with open(os.path.join(where, name), encoding="utf-8", errors="replace") as f:
                        if "raw_reward_unfiltered" in f.read():
                            prints = True
                            break
                except OSError:
                    pass
        if prints:
            break
    out["prints_unfiltered_reward"] = prints


def top_level(source):
    bound, hidden = set(), False
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                bound.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            bound.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    hidden = True
                else:
                    bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            hidden = True
    return bound, hidden or "__getattr__" in bound


for path in sys.argv[2:]:
    module, _, name = path.rpartition(".")
    try:
        found = util.find_spec(module)
        if found is None:
            raise ModuleNotFoundError("No module named " + repr(module))
        if found.origin and found.origin.endswith(".py"):
            bound, hidden = top_level(open(found.origin, encoding="utf-8").read())
            if name in bound:
                out["paths"][path] = None
                continue
            if not hidden:
                raise AttributeError("module " + repr(module) + " has no attribute " + repr(name))
        getattr(importlib.import_module(module), name)
        out["paths"][path] = None
    except BaseException as err:
        out["paths"][path] = type(err).__name__ + ": " + str(err)
print("MILES-PREFLIGHT " + json.dumps(out))
"""


@dataclass(frozen=True)
class PathFlag:
    """A dotted Python path the run passes, and the flag that passes it."""

    flag: str
    path: str


def path_flags(trainer_argv: Sequence[str]) -> list[PathFlag]:
    """Every `*-path` flag whose (last) value is a dotted Python path, in argv order."""
    found = []
    for flag, values in flag_values(list(trainer_argv)).items():
        if not flag.endswith("-path") or not values:
            continue
        value = values[-1]
        if _DOTTED.fullmatch(value) and value.rpartition(".")[2].lower() not in _FILE_SUFFIXES:
            found.append(PathFlag(flag, value))
    return found


def paths_to_probe(flags: Sequence[PathFlag]) -> list[str]:
    """The paths to ask about: the run's, and both zero-variance filter paths when the run sets a filter
    (so a refusal can name the one the image has)."""
    paths = [flag.path for flag in flags]
    if any(flag.flag == FILTER_FLAG for flag in flags):
        paths += [path for path in ZERO_STD_FILTER_PATHS if path not in paths]
    return paths


@dataclass
class ImageCheck:
    """What the probe found in one image (`paths`: path -> None when it loads, else the error)."""

    image_id: str
    commit: Optional[str] = None
    version: Optional[str] = None
    found: bool = False  # a `miles` package is there
    prints_unfiltered_reward: Optional[bool] = None
    paths: dict[str, Optional[str]] = field(default_factory=dict)

    def miles_name(self) -> str:
        """The image's Miles in words: its commit, else its version."""
        if self.commit:
            return f"Miles {self.commit}"
        if self.version:
            return f"Miles {self.version} (no commit recorded)"
        return "a Miles with no commit recorded and no version"

    def to_json(self) -> JSONObject:
        """The cache's entry: what was found, keyed to what was checked (the image, the probe, the paths asked)."""
        return {
            "version": CACHE_VERSION,
            "probe": probe_version(),
            "image_id": self.image_id,
            "asked": [*sorted(self.paths)],
            "commit": self.commit,
            "miles_version": self.version,
            "found": self.found,
            "prints_unfiltered_reward": self.prints_unfiltered_reward,
            "paths": dict(self.paths),
        }

    @classmethod
    def from_json(cls, data: object) -> Optional["ImageCheck"]:
        """The check `data` holds (the probe's answer, or a cache entry), or None when it is not one: any value of
        another type than the probe prints makes it none, never a path read as loading."""
        if not isinstance(data, dict):
            return None
        image_id, paths, found = data.get("image_id"), data.get("paths"), data.get("found")
        commit, version, unfiltered = (
            data.get("commit"),
            data.get("miles_version"),
            data.get("prints_unfiltered_reward"),
        )
        if not (
            isinstance(image_id, str)
            and isinstance(found, bool)
            and isinstance(paths, dict)
            and all(isinstance(error, str) or error is None for error in paths.values())
            and all(isinstance(value, str) or value is None for value in (commit, version))
            and (isinstance(unfiltered, bool) or unfiltered is None)
        ):
            return None
        return cls(
            image_id=image_id,
            commit=commit,
            version=version,
            found=found,
            prints_unfiltered_reward=unfiltered,
            paths={str(path): error for path, error in paths.items()},
        )


def probe_version() -> str:
    """The probe's version: a digest of its source, so an entry a changed probe did not write is never read."""
    return hashlib.sha256(PROBE.encode()).hexdigest()[:16]


def read_probe_output(image_id: str, stdout: str) -> Optional[ImageCheck]:
    """The probe's answer: the first line that starts with PROBE_MARKER, read (None when there is none, or it is
    not an answer). A second answer is never read: the probe prints one, last; what else prints one is not it."""
    for line in stdout.split("\n"):
        if line.startswith(PROBE_MARKER):
            try:
                data = loads_json(line[len(PROBE_MARKER) :].encode())
            except ValueError:
                return None
            return ImageCheck.from_json({**data, "image_id": image_id}) if isinstance(data, dict) else None
    return None


def judge(image: str, check: ImageCheck, flags: Sequence[PathFlag]) -> list[Problem]:
    """The refusals: each path the run passes that the image's Miles cannot load, in one line with its fixes.

    An image without a `miles` package is no Miles image to judge (a stand-in trainer): nothing is refused.
    """
    if not check.found:
        return []
    problems = []
    name = check.miles_name()
    for flag in flags:
        error = check.paths[flag.path] if flag.path in check.paths else UNANSWERED
        if error is None:
            continue
        if flag.flag == FILTER_FLAG and flag.path in ZERO_STD_FILTER_PATHS:
            other = next(p for p in ZERO_STD_FILTER_PATHS if p != flag.path)
            has_other = other in check.paths and check.paths[other] is None
            there = f"the path it has is {other}" if has_other else f"it has no {other} either"
            problems.append(
                Problem(
                    f"the image {image} holds {name}, which has no {flag.path} ({flag.flag}; {error}); {there}: "
                    f"set {flag.flag} {other} in the experiment, or build the image from Miles "
                    f"{WRITE_UP_MILES} (`make image MILES_COMMIT={WRITE_UP_MILES}`)"
                )
            )
        else:
            problems.append(
                Problem(
                    f"the image {image} holds {name}, which cannot load {flag.path} ({flag.flag}; {error}): "
                    "change the experiment, or build the image from a Miles that has it"
                )
            )
    return problems


def check_facts(check: Optional[ImageCheck], *, reason: Optional[str] = None, cached: bool = False) -> JSONObject:
    """The manifest's `miles` block: what the preflight found, or why it did not look."""
    if check is None:
        return {"checked": False, "reason": reason}
    facts: JSONObject = {
        "checked": True,
        "image_id": check.image_id,
        "commit": check.commit,
        "version": check.version,
        "miles_found": check.found,
        "prints_unfiltered_reward": check.prints_unfiltered_reward,
        "paths": {path: error or "ok" for path, error in check.paths.items()},
        "cached": cached,
    }
    return facts


def cache_dir() -> Path:
    """Where image checks are kept, one file per image id."""
    return state_dir("HARNESS_PREFLIGHT_DIR", "image-checks")


def cache_path(image_id: str) -> Path:
    """The file that keeps `image_id`'s check."""
    return cache_dir() / (re.sub(r"[^A-Za-z0-9_.-]", "_", image_id) + ".json")


def cached_check(image_id: str) -> Optional[ImageCheck]:
    """The check this probe kept for `image_id`: None when there is none, or what is there is not one (not a
    regular file, too large, torn or of another shape, of another image or probe, an answer missing)."""
    try:
        data = read_json_file(cache_path(image_id), MAX_CACHE_BYTES)
    except (FileNotFoundError, Unreadable):
        return None
    if not isinstance(data, dict) or (data.get("version"), data.get("probe")) != (CACHE_VERSION, probe_version()):
        return None
    check = ImageCheck.from_json(data)
    asked = data.get("asked")
    if check is None or check.image_id != image_id or not isinstance(asked, list) or sorted(check.paths) != asked:
        return None
    return check


def save_check(check: ImageCheck) -> None:
    """Keep the check for the next run of this image (a cache: failing to write it changes nothing)."""
    try:
        write_json_atomic(cache_path(check.image_id), check.to_json())
    except (OSError, RefusedPath):
        pass


# (exit code, stdout, stderr) of `python3 -c PROBE ARGS...` in the image; raises ProbeError when it cannot run.
ProbeRunner = Callable[[str, Sequence[str], float], "tuple[int, str, str]"]


class ProbeError(Exception):
    """The probe could not run in the image (no python3, the engine refused, too slow)."""


class ProbeFlood(Exception):
    """The probe's container printed more on `stream` than any answer takes: only its head and tail were kept."""

    def __init__(self, stream: str, total: int, head: bytes, tail: bytes) -> None:
        super().__init__(f"{total:,} bytes on {stream}")
        self.stream, self.total, self.head, self.tail = stream, total, head, tail


def flood_refusal(image: str, flood: ProbeFlood) -> str:
    """One line: the image printed too much to the preflight, how much, and how it began and ended."""

    def shown(data: bytes) -> str:
        return repr(data.decode("utf-8", "replace"))

    return (
        f"the image {image} printed {flood.total:,} bytes on {flood.stream} to the preflight (python3 -c PROBE, "
        f"whose answer is one line; at most {MAX_PROBE_OUTPUT_BYTES:,} bytes are read), beginning "
        f"{shown(flood.head[:60])} and ending {shown(flood.tail[-60:])}: check what python3 runs in the image"
    )


@dataclass
class Outcome:
    """One preflight of one image: the check (None when it could not be made), why not, whether it was cached."""

    check: Optional[ImageCheck]
    reason: Optional[str] = None
    cached: bool = False
    seconds: float = 0.0
    problem: Optional[Problem] = None  # the image is refused without a check (it printed too much)


def probe_image(image: str, image_id: str, paths: Sequence[str], run_probe: ProbeRunner) -> Outcome:
    """The check of `image` for `paths`: from the cache when it has them all, else asked (and cached)."""
    started = time.monotonic()
    known = cached_check(image_id)
    if known is not None and all(path in known.paths for path in paths):
        return Outcome(known, cached=True)
    wanted = sorted(set(paths) | (set(known.paths) if known else set()))
    try:
        code, stdout, stderr = run_probe(image, [COMMIT_FILE, *wanted], PROBE_TIMEOUT_S)
    except ProbeFlood as flood:
        return Outcome(
            None, reason=f"not checked: the image printed {flood}", problem=Problem(flood_refusal(image, flood))
        )
    except ProbeError as err:
        return Outcome(None, reason=f"not checked: {err}")
    check = read_probe_output(image_id, stdout)
    if check is None:
        tail = (stderr.strip().splitlines() or [f"exit code {code}"])[-1][:200]
        return Outcome(None, reason=f"not checked: python3 in the image gave no answer ({tail})")
    check.paths = {path: check.paths[path] for path in wanted if path in check.paths}  # only what was asked
    if len(check.paths) == len(wanted):  # an answer that left a path out is not kept: the next run asks again
        save_check(check)
    return Outcome(check, seconds=time.monotonic() - started)
