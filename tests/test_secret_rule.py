"""The one secret rule (harness/secrets.py) over every env map of the schema, every spelling, every URL password.

The schema is walked, not listed: an env map added later is found by its
keys' type (`EnvName`), so it cannot miss the rule.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from harness.experiments.schema import EnvName, Experiment, redacted_experiment
from harness.experiments.store import ExperimentStore
from harness.lab import milesargv
from harness.secrets import is_secret_env, is_secret_flag, redact_userinfo
from support.experiment_files import cli, one_error_line

SECRET_VALUE = "s3cret-value-5e1f"


def _env_maps(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every mapping keyed by an environment variable name, anywhere in the schema (the test's own walk)."""
    found = []
    for name, field in model.model_fields.items():
        for kind in (field.annotation, *typing.get_args(field.annotation)):
            if typing.get_origin(kind) is dict and typing.get_args(kind)[0] == EnvName:
                found.append((*prefix, name))
            elif isinstance(kind, type) and issubclass(kind, BaseModel):
                found += _env_maps(kind, (*prefix, name))
    return found


ENV_MAPS = _env_maps(Experiment)


def test_the_walk_finds_every_env_map_the_schema_has_today():
    assert {("container", "env"), ("cluster", "env")} <= set(ENV_MAPS)


def test_every_field_named_like_an_env_map_is_keyed_by_env_names():
    """An env map whose keys are not EnvName would escape the walk: refused here."""

    def fields(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
        out = []
        for name, field in model.model_fields.items():
            out.append(((*prefix, name), field.annotation))
            for kind in (field.annotation, *typing.get_args(field.annotation)):
                if isinstance(kind, type) and issubclass(kind, BaseModel):
                    out += fields(kind, (*prefix, name))
        return out

    for path, annotation in fields(Experiment):
        if typing.get_origin(annotation) is dict and "env" in path[-1]:
            assert path in ENV_MAPS, f"{'.'.join(path)} is an env map whose keys are not EnvName"


def _experiment_with(path: tuple[str, ...], name: str) -> dict:
    data: dict = {"name": "sec", "steps": 1, "engine": "process", "command": ["python3"]}
    node = data
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = {name: SECRET_VALUE, "PLAIN_SETTING": "shown"}
    return data


@pytest.mark.parametrize("path", ENV_MAPS, ids=".".join)
def test_every_env_map_is_redacted_in_show_and_in_the_manifest(tmp_path: Path, path: tuple[str, ...]) -> None:
    from harness.run.execute import build_manifest
    from harness.run.plan import plan_runs

    experiments = tmp_path / "experiments"
    experiments.mkdir()
    (experiments / "sec.yaml").write_text(json.dumps(_experiment_with(path, "SERVICE_TOKEN")))
    shown = cli(experiments, "show", "sec")
    assert shown.exit_code == 0, shown.output
    assert SECRET_VALUE not in shown.output
    node = yaml.safe_load(shown.stdout)
    for part in path:
        node = node[part]
    assert node == {"SERVICE_TOKEN": "***", "PLAIN_SETTING": "shown"}

    store = ExperimentStore(experiments)
    (plan,) = plan_runs(store, "sec", [], [], tmp_path / "capture", {})
    assert SECRET_VALUE not in json.dumps(redacted_experiment(plan.experiment))
    manifest = build_manifest(
        plan.spec, plan.experiment.to_dict(), time_scale=1.0, engine_facts={}, provenance={}, guard_facts=None
    )
    assert SECRET_VALUE not in json.dumps(manifest)


@pytest.mark.parametrize("path", ENV_MAPS, ids=".".join)
def test_every_env_map_is_redacted_in_validation_errors(tmp_path: Path, path: tuple[str, ...]) -> None:
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    data = _experiment_with(path, "DB_PASSWD")
    node = data
    for part in path:
        node = node[part]
    node["DB_PASSWD"] = [SECRET_VALUE]  # not a string: the error must not quote it
    (experiments / "sec.yaml").write_text(json.dumps(data))
    line = one_error_line(cli(experiments, "show", "sec"))
    assert SECRET_VALUE not in line
    key = ".".join(path)
    set_line = one_error_line(cli(experiments, "show", "sec", "--set", f"{key}.DB_PASSWD=[{SECRET_VALUE}]"))
    assert SECRET_VALUE not in set_line


def test_a_secret_in_cluster_env_is_hidden_in_the_scale_out_plan(tmp_path: Path) -> None:
    from harness.cli.cluster import redacted_cluster_env
    from harness.run.plan import plan_runs

    experiments = tmp_path / "experiments"
    experiments.mkdir()
    (experiments / "sec.yaml").write_text(json.dumps(_experiment_with(("cluster", "env"), "NCCL_AUTH")))
    (plan,) = plan_runs(ExperimentStore(experiments), "sec", [], [], tmp_path / "capture", {})
    assert redacted_cluster_env(plan.experiment) == {"NCCL_AUTH": "***", "PLAIN_SETTING": "shown"}


# --- the name rule ---------------------------------------------------------------------------------

SECRET_NAMES = [
    "DB_PASSWD",
    "DB_PASS",
    "mysql_pass",
    "MYSQL_PWD",
    "PWD_FILE",
    "GITHUB_AUTH",
    "AUTH_HEADER",
    "SESSION_ID",
    "BROWSER_COOKIE",
    "SSH_PRIVATE_KEY",
    "PRIVATE_PEM",
    "HF_TOKEN",
    "WANDB_API_KEY",
    "APP_SECRET",
    "DB_PASSWORD",
    "GCP_CREDENTIALS",
    "dbPass",
    "Pass",
]
NOT_SECRET_NAMES = ["HOME", "BYPASS_CACHE", "COMPASS_DIR", "PASSIVE_MODE", "AUTHOR_NAME", "NCCL_SOCKET_IFNAME"]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_the_widened_name_rule_catches_common_spellings(name: str) -> None:
    assert is_secret_env(name)


@pytest.mark.parametrize("name", NOT_SECRET_NAMES)
def test_the_name_rule_leaves_words_that_only_contain_a_short_one(name: str) -> None:
    assert not is_secret_env(name)


def test_no_flag_of_the_base_run_is_taken_for_a_secret() -> None:
    flags = [flag.name for flag in milesargv.parse_flags(milesargv.read_base_args()) if flag.name]
    assert flags and not [flag for flag in flags if is_secret_flag(flag)]


@pytest.mark.parametrize(
    "flag",
    ["input-key", "label-key", "reward-key", "eval-reward-key", "max-tokens-per-gpu", "rollout-max-response-len"],
)
def test_flags_that_only_look_like_secrets_are_not(flag: str) -> None:
    assert not is_secret_flag(flag)


@pytest.mark.parametrize("flag", ["wandb-key", "hf-token", "db-passwd", "api-auth", "session-cookie"])
def test_secret_flags_by_the_same_rule(flag: str) -> None:
    assert is_secret_flag(flag)


SEPARATORS = st.sampled_from(["_", "-", "."])
WORD = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=6)
SECRET_WORD = st.sampled_from(
    [
        "TOKEN",
        "KEY",
        "SECRET",
        "PASSWORD",
        "CREDENTIAL",
        "PASSWD",
        "PASS",
        "PWD",
        "AUTH",
        "COOKIE",
        "SESSION",
        "PRIVATE",
    ]
)


@given(before=st.lists(WORD, max_size=2), secret=SECRET_WORD, after=st.lists(WORD, max_size=2), sep=SEPARATORS)
def test_a_name_with_a_secret_word_is_secret_in_any_case_and_place(before, secret, after, sep) -> None:
    name = sep.join([*before, secret, *after])
    assert is_secret_env(name) and is_secret_env(name.lower())


@given(
    name=st.builds(lambda *parts: "_".join(parts), st.sampled_from(["DB", "APP", "X"]), SECRET_WORD),
    value=st.text(min_size=4, max_size=40).filter(lambda v: "\x00" not in v and v.strip()),
)
def test_a_secret_s_value_is_never_in_the_redacted_experiment(name: str, value: str) -> None:
    experiment = Experiment.model_validate(
        {"name": "x", "steps": 1, "container": {"env": {name: value}}, "cluster": {"env": {name: value}}}
    )
    data = redacted_experiment(experiment)
    assert data["container"]["env"] == {name: "***"} and data["cluster"]["env"] == {name: "***"}


# --- URL passwords ---------------------------------------------------------------------------------


def test_a_password_with_at_signs_is_hidden_up_to_the_last_at_of_the_authority() -> None:
    assert redact_userinfo("https://admin:Pa@SECRET@db.example/x") == "https://***@db.example/x"
    assert redact_userinfo("postgres://u:p@ss@h:5432/db?x=a@b") == "postgres://***@h:5432/db?x=a@b"
    assert redact_userinfo("see https://a:b@h/ and https://c:d@e@k/") == "see https://***@h/ and https://***@k/"


USERINFO = st.text(
    alphabet=st.characters(blacklist_characters="/?#\\[]", blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")),
    min_size=1,
    max_size=20,
)
HOST = st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z]{2,4})?", fullmatch=True)


@given(user=USERINFO, password=USERINFO, host=HOST, path=st.from_regex(r"(/[a-z0-9@]{0,6}){0,3}", fullmatch=True))
def test_the_password_urllib_reads_is_never_shown(user: str, password: str, host: str, path: str) -> None:
    url = f"https://{user}:{password}@{host}{path}"
    parsed = urlsplit(url)
    shown = redact_userinfo(url)
    assert shown == f"https://***@{parsed.hostname}{path}"
    assert f"{user}:{password}" not in shown
