"""`--set KEY.PATH=VALUE` overrides and the deep merge of `extends`."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence, Tuple

import yaml

from harness.errors import HarnessError
from harness.experiments.flags import HARNESS_ENV, split_or_none
from harness.experiments.schema import ENV_MAPS, env_map_at
from harness.experiments.yamlfile import MAX_DEPTH, BoundedLoader, RawMapping, key_text, one_line
from harness.secrets import REDACTED, is_secret_flag, redact_userinfo, secret_flags


def deep_merge(parent: Mapping[object, object], child: Mapping[object, object]) -> RawMapping:
    """Child onto parent: mappings merge key by key; lists, strings and scalars replace."""
    merged = copy.deepcopy(dict(parent))
    for key, value in child.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


@dataclass(frozen=True)
class Override:
    """One `--set KEY.PATH=VALUE`: where it goes, its YAML-typed value, and the text as typed."""

    path: Tuple[str, ...]
    value: object  # as YAML reads the text (or the text itself)
    raw: str

    def hides_secrets(self, is_secret: Callable[[str], bool]) -> bool:
        """True when the value sets a secret's value (or a whole mapping that may hold one)."""
        args = ("miles", "args")
        env = env_map_at(self.path)
        if env is not None:
            deeper = self.path[len(env) :]
            return not deeper or is_secret(deeper[0]) or deeper[0] in HARNESS_ENV
        if self.path[:2] == args:
            return len(self.path) == 2 or is_secret_flag(self.path[2])
        if self.path == ("miles", "extra_args"):
            words = split_or_none(self.value)
            return words is None or bool(secret_flags(words))
        if self.path == ("command",):
            return not isinstance(self.value, list) or bool(secret_flags([str(word) for word in self.value]))
        return any(path[: len(self.path)] == self.path for path in (*ENV_MAPS, args))

    def quoted(self, is_secret: Callable[[str], bool]) -> str:
        """`--set KEY=VALUE` for messages: the value cut short, or *** for a secret."""
        value = REDACTED if self.hides_secrets(is_secret) else one_line(redact_userinfo(self.raw), 80)
        return f"--set {key_text(self.path)}={value}"


def parse_set(assignments: Sequence[str]) -> list[Override]:
    """`key.path=value` strings -> overrides with YAML-typed values."""
    parsed = []
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise HarnessError(f"--set {one_line(key, 80)}: expected KEY.PATH=VALUE, e.g. --set steps=2")
        if key.count(".") >= MAX_DEPTH:
            raise HarnessError(f"--set {one_line(key, 80)}: more than {MAX_DEPTH} keys deep")
        try:
            value = yaml.load(raw, Loader=BoundedLoader) if raw.strip() else ""
        except (yaml.YAMLError, ValueError, TypeError, OverflowError):
            value = raw  # not YAML: the text as typed
        parsed.append(Override(tuple(key.split(".")), value, raw))
    return parsed


def apply_set(data: RawMapping, overrides: Sequence[Override], is_secret: Callable[[str], bool]) -> RawMapping:
    """A copy of `data` with each override assigned."""
    result = copy.deepcopy(data)
    for override in overrides:
        if override.path[0] == "extends":
            raise HarnessError(
                f"{override.quoted(is_secret)}: `extends` picks which files are read and cannot be overridden; "
                "write a new experiment file"
            )
        node = result
        for depth, part in enumerate(override.path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = key_text(override.path[: depth + 1])
                raise HarnessError(f"{override.quoted(is_secret)}: {where} is not a mapping")
            node = child
        node[override.path[-1]] = copy.deepcopy(override.value)
    return result
