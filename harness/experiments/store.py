"""The experiment files of one directory: read within bounds, resolved through `extends`, validated once.

Every error names the file (or the `--set`), the key and the reason on one
line. Inside the harness the types are trusted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence, Tuple, TypeVar

from pydantic import BaseModel, ValidationError

from harness.errors import HarnessError, did_you_mean
from harness.experiments.flags import BASE_RUN_LABEL, OWNED_FLAGS, refuse_conflicts, split_or_none
from harness.experiments.naming import check_experiment_name, check_safe_name, makers_of
from harness.experiments.overrides import apply_set, deep_merge, parse_set
from harness.experiments.schema import Experiment, Sweep, env_map_at
from harness.experiments.yamlfile import RawMapping, key_text, load_mapping, one_line, shown
from harness.fs.paths import not_regular, outside_root
from harness.lab import milesargv
from harness.lab.milesnames import (
    DEPRECATED_FILTER_PATHS,
    FILTER_FLAG,
    OVER_SAMPLING_BATCH_SIZE_FLAG,
    ROLLOUT_BATCH_SIZE_FLAG,
)
from harness.secrets import REDACTED, SECRET_FLAG_HINT, is_secret_env, is_secret_flag, secret_flags

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

Model = TypeVar("Model", bound=BaseModel)
# Where a key was set, for messages: the key's path (as pydantic or the loader gives it) -> `FILE: key`.
Place = Callable[[Sequence[object]], str]


def _secret_test(data: Mapping[object, object]) -> Callable[[str], bool]:
    """Whether an env name is secret, from still-unvalidated data (its container.secret_env, if well formed)."""
    container = data.get("container")
    listed = container.get("secret_env") if isinstance(container, dict) else None
    names = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()
    return lambda name: is_secret_env(str(name), names)


@dataclass(frozen=True)
class Loaded:
    """A resolved experiment, the files it came from (child first), and warnings to show."""

    experiment: Experiment
    files: Tuple[Path, ...]
    warnings: Tuple[str, ...] = field(default_factory=tuple)


class ExperimentStore:
    """The experiment files of one directory, read on demand (a broken file hurts only its readers)."""

    def __init__(self, directory: Path, base_args: Optional[Sequence[str]] = None) -> None:
        self.directory = directory
        self._base_args = list(base_args) if base_args is not None else None
        self._read: dict[Path, RawMapping] = {}

    @property
    def base_args(self) -> list[str]:
        """The section-1.1 run's flags, read once."""
        if self._base_args is None:
            self._base_args = milesargv.read_base_args()
        return self._base_args

    def names(self) -> list[str]:
        """Stems of every *.yaml file, sorted."""
        if not self.directory.is_dir():
            raise HarnessError(f"{self.directory}: experiments directory not found")
        return sorted(p.stem for p in self.directory.glob("*.yaml"))

    def path(self, name: str) -> Path:
        """The file of experiment `name` (a name, never a path); unknown names list the known ones."""
        try:
            check_experiment_name(name)
        except ValueError as err:
            raise HarnessError(str(err)) from None
        path = self.directory / f"{name}.yaml"
        why = not_regular(path)
        if why:
            raise HarnessError(f"{path}: {why}; an experiment is a regular YAML file")
        self._refuse_leaving(path, f"{path}")
        if not path.is_file():
            hint = did_you_mean(name, self.names()) or "harness ls lists them"
            raise HarnessError(f"unknown experiment {name!r} in {self.directory} ({one_line(hint)})")
        return path

    def read(self, path: Path) -> RawMapping:
        """One file's mapping, read once per store (never mutated by the store)."""
        if path not in self._read:
            self._read[path] = load_mapping(path)
        return self._read[path]

    def is_sweep(self, name: str) -> bool:
        """True when the file is a sweep (`sweep:` + `seeds:`)."""
        return "sweep" in self.read(self.path(name))

    def load_sweep(self, name: str) -> Sweep:
        """A validated sweep file; its experiment is checked when loaded."""
        path = self.path(name)
        sweep = _validate(Sweep, self.read(path), lambda loc: f"{path}: {key_text(loc)}")
        if (sweep.name or name) != name:
            raise HarnessError(f"{path}: name: {sweep.name!r} does not match the file name {name!r}")
        return sweep

    def load(
        self, name: str, *, seed: Optional[int] = None, overrides: Sequence[str] = (), sweep: Optional[str] = None
    ) -> Loaded:
        """Resolve `extends`, apply a sweep file's `guard` block (`sweep`: its name), the `--set` overrides and the
        seed, validate everything."""
        chain = self._chain(name)
        merged: RawMapping = {}
        for _, data in reversed(chain):
            merged = deep_merge(merged, data)
        merged.pop("extends", None)
        child_path, child_data = chain[0]
        if sweep is not None:
            sweep_path = self.path(sweep)
            layer: RawMapping = {"guard": dict(self.load_sweep(sweep).guard)}
            merged = deep_merge(merged, layer)
            chain = [(sweep_path, layer), *chain]  # so a bad key of the sweep's guard block is named in its file
        if "extends" in child_data:
            merged["extends"] = child_data["extends"]
        assignments = parse_set(overrides)
        merged = apply_set(merged, assignments, _secret_test(merged))
        if seed is not None:
            merged["seed"] = seed
        is_secret = _secret_test(merged)

        def place(loc: Sequence[object]) -> str:
            """Where the key at `loc` was set, for messages: `--set KEY=VALUE`, else `FILE: key`."""
            keys = tuple(str(part) for part in loc)
            key = key_text(keys)
            if seed is not None and keys[:1] == ("seed",):
                return "--seed"  # given on the command line, for this run only
            for override in reversed(assignments):
                shared = min(len(keys), len(override.path))
                if shared and keys[:shared] == override.path[:shared]:
                    quoted = override.quoted(is_secret)
                    return quoted if override.path == keys else f"{quoted}: {key}"
            return f"{_first_file_with(chain, loc) or child_path}: {key}"

        _refuse_secret_flags(merged, place)
        experiment = _validate(Experiment, merged, place, is_secret)
        if experiment.name != name:
            raise HarnessError(f"{place(['name'])}: {experiment.name!r} does not match the file name {name!r}")
        self._check_one_capture(experiment, child_path)
        warnings = _check_trainer_flags(experiment, self.base_args, place)
        return Loaded(experiment, tuple(p for p, _ in chain), tuple(warnings))

    def check_variant_name(self, variant: str) -> None:
        """`--name VARIANT`: a safe run name that no experiment file makes (its captures would be mixed up)."""
        try:
            check_safe_name(variant)
        except ValueError as err:
            raise HarnessError(f"--name: {err}") from None
        for other, seed in makers_of(variant):
            path = self.directory / f"{other}.yaml"
            if path.is_file() and not self._is_sweep_file(path):
                how = "as its own run" if seed == 1 else f"with seed {seed}"
                raise HarnessError(
                    f"--name {variant}: {path} makes that run {how}; a variant needs a run name of its own"
                )

    def _chain(self, name: str) -> list[tuple[Path, RawMapping]]:
        """[(path, data)] from `name` up through its parents; paths, cycles and missing parents rejected."""
        path = self.path(name)
        chain = [(path, self.read(path))]
        seen = [name]
        while True:
            path, data = chain[-1]
            if "sweep" in data:
                where = f"{chain[-2][0]}: extends" if len(chain) > 1 else str(path)
                raise HarnessError(f"{where}: {seen[-1]!r} is a sweep file, not an experiment")
            if "extends" not in data or data["extends"] is None:
                return chain
            try:
                parent = check_experiment_name(data["extends"])
            except ValueError as err:
                raise HarnessError(f"{path}: extends: {err}") from None
            if parent in seen:
                raise HarnessError(f"{path}: extends: cycle in extends ({' -> '.join([*seen, parent])})")
            parent_path = self.directory / f"{parent}.yaml"
            why = not_regular(parent_path)
            if why:
                raise HarnessError(f"{path}: extends: {parent_path}: {why}")
            self._refuse_leaving(parent_path, f"{path}: extends: {parent}")
            if not parent_path.is_file():
                raise HarnessError(f"{path}: extends: parent experiment {parent!r} not found in {self.directory}")
            seen.append(parent)
            chain.append((parent_path, self.read(parent_path)))

    def _refuse_leaving(self, path: Path, where: str) -> None:
        """An experiment file is read only inside the experiments directory: a link that leads out is refused."""
        if os.path.lexists(path):
            if outside_root(self.directory, path) is not None:
                raise HarnessError(
                    f"{where}: refused: a link that leads out of the experiments directory (to "
                    f"{os.path.realpath(path)}); an experiment file lives in it"
                )

    def _check_one_capture(self, experiment: Experiment, path: Path) -> None:
        """Refuse a run name that another experiment file also makes: two runs would share one capture."""
        run = experiment.run_name
        for other, seed in makers_of(run):
            other_path = self.directory / f"{other}.yaml"
            if other == experiment.name or not other_path.is_file() or self._is_sweep_file(other_path):
                continue
            how = "as its own run" if seed == 1 else f"with seed {seed}"
            raise HarnessError(
                f"{path}: run {run} (seed {experiment.seed}) is also made by {other_path} {how}; two experiments "
                "would share one capture: rename one of them"
            )

    def _is_sweep_file(self, path: Path) -> bool:
        try:
            return "sweep" in self.read(path)
        except HarnessError:
            return False  # unreadable, but still named like a run: it would collide once fixed


def _first_file_with(chain: Sequence[tuple[Path, RawMapping]], loc: Sequence[object]) -> Optional[Path]:
    """The first file of the chain (child first) that sets the key at `loc`."""
    for path, data in chain:
        node: object = data
        for part in loc:
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            return path
    return None


def _refuse_secret_flags(data: Mapping[object, object], place: Place) -> None:
    """Refuse a secret given as a trainer flag, by every route a flag takes, before anything can show it.

    The trainer prints its whole argv when it starts, so no redaction could keep
    the value out of container.log: a secret reaches the trainer by environment only.
    """
    miles = data.get("miles")
    miles = miles if isinstance(miles, dict) else {}
    args = miles.get("args")
    for name, value in args.items() if isinstance(args, dict) else ():
        if is_secret_flag(str(name)) and value is not True and value is not False and value is not None:
            flag = "--" + one_line(str(name).lstrip("-"), 60)
            raise HarnessError(f"{place(['miles', 'args', name])}: {flag} {SECRET_FLAG_HINT}")
    sources = [(["miles", "extra_args"], split_or_none(miles.get("extra_args")))]
    command = data.get("command")
    if isinstance(command, list):
        sources.append((["command"], [str(word) for word in command]))
    for loc, words in sources:
        for name in secret_flags(words or []):
            raise HarnessError(f"{place(loc)}: {one_line(name, 60)} {SECRET_FLAG_HINT}")


def _check_trainer_flags(experiment: Experiment, base_args: Sequence[str], place: Place) -> list[str]:
    """Cross-field rules on the effective argv (base run + args + extra_args); returns warnings, raises on errors."""
    sources: list[tuple[str, milesargv.Flag]] = []
    for flag in milesargv.parse_flags(experiment.trainer_args(base_args)):
        name = flag.name[2:]
        if flag.name in OWNED_FLAGS:
            sources.append((place([OWNED_FLAGS[flag.name]]), flag))
        elif name in experiment.miles.args:
            sources.append((place(["miles", "args", name]), flag))
        else:
            sources.append((f"the base run ({BASE_RUN_LABEL})", flag))
    extra = place(["miles", "extra_args"])
    sources += [(extra, flag) for flag in milesargv.parse_flags(experiment.extra_words())]
    refuse_conflicts(sources)

    flags = {flag.name: list(flag.values) for _, flag in sources if flag.name}  # the last one wins, as in argparse
    where = {flag.name: source for source, flag in sources}

    def integer(flag: str) -> Optional[int]:
        values = flags.get(flag)
        if not values:
            return None
        try:
            return int(values[0])
        except ValueError:
            raise HarnessError(f"{where[flag]}: {flag} must be an integer, got {shown(values[0])}") from None

    batch = integer(ROLLOUT_BATCH_SIZE_FLAG)
    over = integer(OVER_SAMPLING_BATCH_SIZE_FLAG)
    if batch is not None and over is not None and over < batch:
        raise HarnessError(
            f"{where[OVER_SAMPLING_BATCH_SIZE_FLAG]}: {OVER_SAMPLING_BATCH_SIZE_FLAG} {over} is below "
            f"{ROLLOUT_BATCH_SIZE_FLAG} {batch}; Miles refuses it (it must be at least the batch size)"
        )
    filter_values = flags.get(FILTER_FLAG)
    path = filter_values[0] if filter_values else None
    warnings = []
    if path in DEPRECATED_FILTER_PATHS:
        warnings.append(
            f"{where[FILTER_FLAG]}: {path} is deprecated; use {DEPRECATED_FILTER_PATHS[path]} "
            "(the same filter in current Miles)"
        )
    return warnings


def _validate(
    model: type[Model],
    data: RawMapping,
    place: Place,
    is_secret: Callable[[str], bool] = lambda name: False,
) -> Model:
    """model(**data), with the first error as one line: where the key was set, and the reason."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        errors = err.errors()
        # A NaN or infinity in a union (a Miles flag) also fails every other member: say what matters.
        first = next((e for e in errors if e["type"] == "finite_number"), errors[0])
        loc = [
            part
            for part in first["loc"]
            if part != "[key]" and not (isinstance(part, str) and part.startswith("function-"))
        ]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        env_map = env_map_at(loc)
        secret = (env_map is not None and (len(loc) == len(env_map) or is_secret(str(loc[len(env_map)])))) or (
            loc[:2] == ["miles", "args"] and (len(loc) == 2 or is_secret_flag(str(loc[2])))
        )
        raise HarnessError(f"{place(loc)}: {one_line(_reason(first, model, loc, secret), 240)}{more}") from None


def _reason(error: ErrorDetails, model: type[BaseModel], loc: Sequence[object], secret: bool) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        hint = did_you_mean(str(loc[-1]) if loc else "", _known_keys(model, loc[:-1]))
        return "unknown key" + (f" ({hint})" if hint else " (README, Experiments, lists the keys)")
    if kind == "missing":
        return "required key is missing"
    message = str(error["msg"])
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind.endswith("_type") or kind.endswith("_parsing") or kind == "literal_error":
        got = REDACTED if secret else shown(error.get("input"))
        return f"{message[0].lower()}{message[1:]}, got {got}"
    return message


def _known_keys(model: type[BaseModel], loc: Sequence[object]) -> list[str]:
    """Field names of the (nested) model at `loc`, for 'unknown key' messages."""
    current: object = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        annotation = fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        current = next((c for c in candidates if hasattr(c, "model_fields")), None)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))
