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
so a second run of the same image asks nothing. Deciding what the answer
means (`judge`) is pure; asking (`probe_image`) is the only side effect.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from harness.engines.base import Problem
from harness.fs.paths import state_dir
from harness.mileslog import keys

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

COMMIT_FILE = "/opt/miles-gb10-lab/miles-commit"  # written by the lab image's build (`make image`)
SIM_LABEL = "org.miles-gb10-lab.sim"
PROBE_LABEL = "org.miles-gb10-lab.preflight"
PROBE_TIMEOUT_S = 25.0
PROBE_MARKER = "MILES-PREFLIGHT "
CACHE_VERSION = 1

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
    from harness.lab.milesargv import flag_values

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
    if any(flag.flag == keys.FILTER_FLAG for flag in flags):
        paths += [path for path in keys.ZERO_STD_FILTER_PATHS if path not in paths]
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
        return {
            "version": CACHE_VERSION,
            "image_id": self.image_id,
            "commit": self.commit,
            "miles_version": self.version,
            "found": self.found,
            "prints_unfiltered_reward": self.prints_unfiltered_reward,
            "paths": dict(self.paths),
        }

    @classmethod
    def from_json(cls, data: object) -> Optional["ImageCheck"]:
        """The cached check, or None when it is not one (another version, a torn file)."""
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return None
        image_id, paths = data.get("image_id"), data.get("paths")
        if not isinstance(image_id, str) or not isinstance(paths, dict):
            return None
        commit, version, unfiltered = (
            data.get("commit"),
            data.get("miles_version"),
            data.get("prints_unfiltered_reward"),
        )
        return cls(
            image_id=image_id,
            commit=commit if isinstance(commit, str) else None,
            version=version if isinstance(version, str) else None,
            found=data.get("found") is True,
            prints_unfiltered_reward=unfiltered if isinstance(unfiltered, bool) else None,
            paths={str(k): (v if isinstance(v, str) else None) for k, v in paths.items()},
        )


def read_probe_output(image_id: str, stdout: str) -> Optional[ImageCheck]:
    """The probe's answer line, read; None when there is none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(PROBE_MARKER):
            try:
                data = json.loads(line[len(PROBE_MARKER) :])
            except ValueError:
                return None
            if not isinstance(data, dict):
                return None
            return ImageCheck.from_json({**data, "version": CACHE_VERSION, "image_id": image_id})
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
        error = check.paths.get(flag.path)
        if error is None:
            continue
        if flag.flag == keys.FILTER_FLAG and flag.path in keys.ZERO_STD_FILTER_PATHS:
            other = next(p for p in keys.ZERO_STD_FILTER_PATHS if p != flag.path)
            has_other = other in check.paths and check.paths[other] is None
            there = f"the path it has is {other}" if has_other else f"it has no {other} either"
            problems.append(
                Problem(
                    f"the image {image} holds {name}, which has no {flag.path} ({flag.flag}; {error}); {there}: "
                    f"set {flag.flag} {other} in the experiment, or build the image from Miles "
                    f"{keys.WRITE_UP_MILES} (`make image MILES_COMMIT={keys.WRITE_UP_MILES}`)"
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


def _cache_path(image_id: str) -> Path:
    return cache_dir() / (re.sub(r"[^A-Za-z0-9_.-]", "_", image_id) + ".json")


def cached_check(image_id: str) -> Optional[ImageCheck]:
    try:
        return ImageCheck.from_json(json.loads(_cache_path(image_id).read_text()))
    except (OSError, ValueError):
        return None


def save_check(check: ImageCheck) -> None:
    """Keep the check for the next run of this image (a cache: failing to write it changes nothing)."""
    path = _cache_path(check.image_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(check.to_json(), allow_nan=False))
        os.replace(tmp, path)
    except OSError:
        pass


# (exit code, stdout, stderr) of `python3 -c PROBE ARGS...` in the image; raises ProbeError when it cannot run.
ProbeRunner = Callable[[str, Sequence[str], float], "tuple[int, str, str]"]


class ProbeError(Exception):
    """The probe could not run in the image (no python3, the engine refused, too slow)."""


@dataclass
class Outcome:
    """One preflight of one image: the check (None when it could not be made), why not, whether it was cached."""

    check: Optional[ImageCheck]
    reason: Optional[str] = None
    cached: bool = False
    seconds: float = 0.0


def probe_image(image: str, image_id: str, paths: Sequence[str], run_probe: ProbeRunner) -> Outcome:
    """The check of `image` for `paths`: from the cache when it has them all, else asked (and cached)."""
    started = time.monotonic()
    known = cached_check(image_id)
    if known is not None and all(path in known.paths for path in paths):
        return Outcome(known, cached=True)
    wanted = sorted(set(paths) | (set(known.paths) if known else set()))
    try:
        code, stdout, stderr = run_probe(image, [COMMIT_FILE, *wanted], PROBE_TIMEOUT_S)
    except ProbeError as err:
        return Outcome(None, reason=f"not checked: {err}")
    check = read_probe_output(image_id, stdout)
    if check is None:
        tail = (stderr.strip().splitlines() or [f"exit code {code}"])[-1][:200]
        return Outcome(None, reason=f"not checked: python3 in the image gave no answer ({tail})")
    save_check(check)
    return Outcome(check, seconds=time.monotonic() - started)
