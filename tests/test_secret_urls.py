"""The URL-password rule (harness/secrets.py) over every value the harness shows, and against urllib.parse.

A URL's userinfo ends at the last `@` before its host: where urllib.parse can
read the URL the two agree; where it cannot (a password with an unencoded
`/`, `?` or `#`), the rule still finds the host. Every form the harness
writes or prints of a launch (dry run, JSON, manifest, `show`, errors) holds
the rule; the engine is handed the real values.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engines.spec import docker_run_command
from harness.experiments.store import ExperimentStore
from harness.run.plan import plan_runs
from harness.secrets import (
    MIN_KNOWN_CHARS,
    KnownSecrets,
    redact_userinfo,
    secrets_in,
    shown_json,
    shown_words,
)
from support.experiment_files import cli, one_error_line
from support.properties import examples

# --- the rule, by example -----------------------------------------------------------------------------

MISSED_BEFORE = [  # (URL, as shown): each kept its password in clear under the old rule
    ("http://u:s3cret/AAA9@proxy:3128", "http://***@proxy:3128"),
    ("git+https://u:s3cret#AAA10@github.com/lab/repo.git", "git+https://***@github.com/lab/repo.git"),
    ("//u:s3cretAAA12@host", "//***@host"),
    ("https://u:s3cret?AAA13@h.example/x?y=1", "https://***@h.example/x?y=1"),
    ("http://u:s3/cr@et@proxy:3128/path@x", "http://***@proxy:3128/path@x"),  # `/` and `@` in one password
    ("--proxy='http://u:s3cret/AAA14@proxy:3128'", "--proxy='http://***@proxy:3128'"),
    ("MIRROR=//tok3nAAA15@mirror.example/simple", "MIRROR=//***@mirror.example/simple"),
]


@pytest.mark.parametrize("url, shown", MISSED_BEFORE)
def test_a_password_with_a_slash_a_hash_or_no_scheme_is_hidden(url: str, shown: str) -> None:
    assert redact_userinfo(url) == shown


NOT_A_PASSWORD = [
    "https://packages.example/@types/node",  # an `@` in the path
    "http://localhost:8080/@scope/pkg?x=a@b#c@d",
    "http://[::1]:8080/x@y",
    "http://[fe80::1%25eth0]/a@b",
    "http://host:/x@y",  # an empty port is no port
    "http://u:ab/cd",  # no host after an `@`: nothing to hide
    "see /data//a:b@c",  # a `//` inside a path begins no URL
    "plain text with no url, a@b and x:y",
]


@pytest.mark.parametrize("text", NOT_A_PASSWORD)
def test_what_holds_no_password_is_left_as_written(text: str) -> None:
    assert redact_userinfo(text) == text


def test_the_secrets_of_a_url_are_its_userinfo_its_password_and_the_password_decoded() -> None:
    assert secrets_in("x https://user:p%40ssw0rd@h/") == ["user:p%40ssw0rd", "p%40ssw0rd", "p@ssw0rd"]
    assert secrets_in("https://ghp_tokenAAA16@github.com") == ["ghp_tokenAAA16"]


# --- the rule against urllib.parse, where the two should agree ------------------------------------------

SCHEME = st.from_regex(r"[a-z][a-z0-9+.-]{0,8}", fullmatch=True)
# What urllib reads as userinfo: anything but the authority's ends (/ ? #), blanks and brackets.
USERINFO_PART = st.text(
    alphabet=st.characters(blacklist_characters="/?#[]\\@", blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp", "Cf")),
    min_size=1,
    max_size=16,
)
HOST = st.one_of(
    st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?(\.[a-z]{2,6}){0,2}", fullmatch=True),
    st.ip_addresses(v=6).map(lambda address: f"[{address}]"),
)
PORT = st.one_of(st.just(""), st.integers(0, 65535).map(lambda port: f":{port}"))
# A path, query and fragment may hold `@` and `:` (but never `//`, which would begin a URL inside the URL).
TAIL = st.from_regex(r"(/[a-z0-9@:.~-]{0,8}){0,3}(\?[a-z0-9@:=&]{0,8})?(#[a-z0-9@:/]{0,8})?", fullmatch=True).filter(
    lambda tail: "//" not in tail
)


@st.composite
def readable_urls(draw: st.DrawFn) -> str:
    """URLs urllib.parse reads whole: with or without a userinfo (a user, a password with `@` and `:` in it)."""
    user = draw(st.one_of(st.just(None), USERINFO_PART))
    password = draw(st.one_of(st.just(None), st.lists(USERINFO_PART, min_size=1, max_size=3).map("@".join)))
    userinfo = "" if user is None else user + ("" if password is None else ":" + password) + "@"
    scheme = draw(st.one_of(st.just(""), SCHEME.map(lambda scheme: scheme + ":")))
    return f"{scheme}//{userinfo}{draw(HOST)}{draw(PORT)}{draw(TAIL)}"


@settings(max_examples=examples(400))
@given(url=readable_urls())
def test_the_rule_hides_exactly_the_userinfo_urllib_reads(url: str) -> None:
    parsed = urlsplit(url)
    parsed.port  # noqa: B018  (readable: urllib reads its port, so the two should agree on the whole URL)
    userinfo, at, _ = parsed.netloc.rpartition("@")
    expected = url.replace(f"//{userinfo}@", "//***@", 1) if at else url
    assert redact_userinfo(url) == expected


@settings(max_examples=examples(400))
@given(url=readable_urls(), before=st.sampled_from(["", "see ", "--url=", "url='", "(", "X=", "a\t"]))
def test_the_rule_is_the_same_inside_text(url: str, before: str) -> None:
    assert redact_userinfo(f"{before}{url} and more") == f"{before}{redact_userinfo(url)} and more"


def _reads_as_a_host(password: str) -> bool:
    """A password whose part before its first `/`, `?` or `#` is empty, digits, or holds an `@`, makes a URL that
    reads whole as host:port (or user:password@host) and a path: no rule can tell it from one (the module doc)."""
    head = re.split(r"[/?#]", password, maxsplit=1)[0]
    return not head or head.isdigit() or "@" in head


PASSWORD_ANYTHING = st.text(
    alphabet=st.one_of(
        st.sampled_from("/?#@:%!$&'()*+,;=.~-_09aZ"),
        st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp", "Cf"), blacklist_characters="\\"),
    ),
    min_size=1,
    max_size=16,
).filter(lambda password: not _reads_as_a_host(password))


@settings(max_examples=examples(400))
@given(
    user=USERINFO_PART.filter(lambda user: ":" not in user),
    password=PASSWORD_ANYTHING,
    host=HOST,
    port=PORT,
    tail=TAIL,
)
def test_a_password_urllib_cannot_read_is_hidden_and_the_host_kept(
    user: str, password: str, host: str, port: str, tail: str
) -> None:
    """Unencoded `/`, `?`, `#`, `@` or `:` in the password: none of it is shown, and the host is."""
    url = f"https://{user}:{password}@{host}{port}{tail}"
    assert redact_userinfo(url) == f"https://***@{host}{port}{tail}"


def test_what_no_rule_can_tell_from_a_host_is_read_as_urllib_reads_it() -> None:
    assert redact_userinfo("https://u:a@b/c@h/x") == "https://***@b/c@h/x"  # as urllib: host b, path /c@h/x
    assert redact_userinfo("http://u:1234/5@h") == "http://u:1234/5@h"  # as urllib: host u, port 1234


# --- known secrets in text the harness did not write ----------------------------------------------------


def test_known_secrets_are_masked_where_they_are_long_enough_to_be_told_from_words() -> None:
    known = KnownSecrets(["hf_abcdefgh1234", "short", "line-one-AAAA\nline-two-BBBB", "u:pw"])
    assert known.mask("token hf_abcdefgh1234 and short") == "token *** and short"
    assert known.mask("line-one-AAAA\n...\nline-two-BBBB") == "***\n...\n***"  # each line of a value
    assert known.mask("u:pw") == "u:pw" and len("short") < MIN_KNOWN_CHARS
    assert not KnownSecrets(["tiny"]) and KnownSecrets(["x" * MIN_KNOWN_CHARS])


@given(
    secret=st.text(alphabet="abcdefghXYZ0123456789_-", min_size=MIN_KNOWN_CHARS, max_size=24),
    lines=st.lists(st.text(alphabet="abc XYZ_-=:", max_size=30), min_size=1, max_size=6),
    where=st.data(),
)
def test_a_known_secret_is_masked_in_every_line_of_a_piece_as_line_by_line(secret: str, lines, where) -> None:
    index = where.draw(st.integers(0, len(lines) - 1))
    lines[index] += secret
    known = KnownSecrets([secret])
    masked = known.mask("\n".join(lines))
    assert secret not in masked
    assert masked.split("\n") == [known.mask(line) for line in lines]


def test_a_reopened_log_resumes_after_the_masked_lines_it_stored() -> None:
    """The lines a reopened stream sends again are known by how they were stored (masked), so none is saved twice."""
    from harness.engines.logstream import LogPosition

    known = KnownSecrets(["hf-secret-value-AAA27"])
    raw = [f"2026-01-01T00:00:0{i}.000000000Z line {i} hf-secret-value-AAA27" for i in range(3)]
    position = LogPosition.after(known.mask(line) for line in raw[:2])
    position.stored = known.mask
    assert [line for burst in position.new_bursts([raw]) for line in burst] == [raw[2]]


# --- shown words and JSON -----------------------------------------------------------------------------


def test_shown_words_hide_a_secret_flag_s_values_and_url_passwords() -> None:
    words = ["python3", "train.py", "--hf-token", "hfAAA17", "--db-pass=pwAAA18", "--load", "https://u:pAAA19@h/x"]
    assert shown_words(words) == [
        "python3",
        "train.py",
        "--hf-token",
        "***",
        "--db-pass=***",
        "--load",
        "https://***@h/x",
    ]


def test_shown_json_walks_every_string() -> None:
    data = {"a": ["//u:pwAAA20@h", {"b": "ray://u:pwAAA21@h:1"}], "n": 3, "t": True, "z": None}
    assert shown_json(data) == {"a": ["//***@h", {"b": "ray://***@h:1"}], "n": 3, "t": True, "z": None}


# --- every written and printed form of a launch, the engine's real values -----------------------------

URL_SECRETS = {
    "extra": "xyzSECRET1",  # in miles.extra_args, a flag's value
    "load": "pwLOADAAA22",  # in miles.args
    "env": "pwENVAAA23",  # an env value that is a URL (its variable's name says nothing)
    "command": "pwCMDAAA24",  # in `command`, a process run's words
    "volume": "tokVOLAAA25",  # a volume's host part, a token in a scheme-relative URL
}


@pytest.fixture
def url_lab(tmp_path: Path) -> Path:
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    experiment = {
        "name": "urls",
        "steps": 1,
        "engine": "process",
        "command": ["python3", "entry.py", "--mirror", f"http://u:{URL_SECRETS['command']}/x@mirror:3128"],
        "miles": {
            "args": {"ref-load": f"https://u:{URL_SECRETS['load']}@h/ckpt"},  # (--load is the harness's own)
            "extra_args": f"--wandb-host https://u:{URL_SECRETS['extra']}@h",
        },
        "container": {
            "gpus": "none",
            "env": {"PIP_INDEX_URL": f"git+https://u:s3#{URL_SECRETS['env']}@pypi.example/simple"},
            "volumes": [f"//{URL_SECRETS['volume']}@fileserver/share:/share:ro"],
        },
    }
    (experiments / "urls.yaml").write_text(json.dumps(experiment))
    return experiments


def assert_no_url_secret(where: str, text: str) -> None:
    for what, value in URL_SECRETS.items():
        assert value not in text, f"the {what} URL password in clear in {where}"


def test_the_engine_gets_every_real_value_and_every_shown_form_hides_them(url_lab: Path, tmp_path: Path) -> None:
    from harness.run.execute import build_manifest

    (plan,) = plan_runs(ExperimentStore(url_lab, base_args=[]), "urls", [], [], tmp_path / "capture", {})
    spec = plan.spec
    given = json.dumps([spec.trainer_argv, spec.command, dict(spec.env), [m.source for m in spec.mounts]])
    for value in URL_SECRETS.values():
        assert value in given  # the engine executes the spec: the trainer receives every real value

    manifest = build_manifest(
        spec, plan.experiment.to_dict(), time_scale=1.0, engine_facts={}, provenance={}, guard_facts=None
    )
    shown = {
        "manifest.json": json.dumps(manifest),
        "the JSON spec": json.dumps(spec.to_dict()),
        "the shown spec": repr(spec.shown()) + json.dumps(dict(spec.shown().env)),
        "docker run": shlex.join(docker_run_command(spec.shown())),
    }
    for where, text in shown.items():
        assert_no_url_secret(where, text)
    assert "--wandb-host https://***@h" in manifest["experiment"]["miles"]["extra_args"]
    assert manifest["trainer_argv"][-2:] == ["--wandb-host", "https://***@h"]
    assert manifest["experiment"]["container"]["volumes"] == ["//***@fileserver/share:/share:ro"]
    assert manifest["launch_spec"]["command"][-1] == "http://***@mirror:3128"
    # Its secret values are what the log pump masks in the trainer's output.
    assert {f"u:{URL_SECRETS['load']}", URL_SECRETS["load"], URL_SECRETS["volume"]} <= set(spec.secret_values())


@pytest.mark.parametrize("json_", [False, True], ids=["listing", "json"])
def test_the_dry_run_and_show_hide_every_url_password(url_lab: Path, json_: bool) -> None:
    done = cli(url_lab, "run", "urls", "--dry-run", *(["--json"] if json_ else []), "--capture-dir", "capture")
    assert done.exit_code == 0, done.output
    assert_no_url_secret("--dry-run", done.output)
    assert "https://***@h" in done.output
    shown = cli(url_lab, "show", "urls")
    assert shown.exit_code == 0, shown.output
    assert_no_url_secret("show", shown.output)


def test_the_dry_run_of_the_finding_hides_the_password_of_a_trainer_flag(url_lab: Path) -> None:
    load = "--set=miles.args.ref-load=https://u:pwSETAAA26@h/x"
    extra = "--set=miles.extra_args=--wandb-host https://u:xyzSECRET1@h"
    for done in (
        cli(url_lab, "run", "urls", "--dry-run", load, extra, "--capture-dir", "capture"),
        cli(url_lab, "show", "urls", load, extra),
    ):
        assert done.exit_code == 0, done.output
        assert "xyzSECRET1" not in done.output and "pwSETAAA26" not in done.output


# --- errors quote values: never a URL password, on any of their lines ------------------------------------

BAD_VALUES = [  # (key, a value it refuses, quoted in the error)
    ("container.volumes", "[https://u:xyzSECRET2@h:/w]"),
    ("container.shm_size", "https://u:xyzSECRET2@h"),
    ("container.gpus", "https://u:xyzSECRET2@h"),
    ("image", "https://u:xyzSECRET2@h"),
    ("container.volumes", "['//u:xyzSECRET2@h:/w']"),
    ("container.volumes", f"[http://u:xyzSECRET2/{'A' * 90}@h:/w]"),  # long: cut after the password is hidden
    ("miles.extra_args", "--wandb-host 'https://u:xyzSECRET2@h"),  # unclosed quote
]


@pytest.mark.parametrize("key, value", BAD_VALUES)
def test_an_error_never_echoes_a_url_password(exp_dir: Path, key: str, value: str) -> None:
    line = one_error_line(cli(exp_dir, "show", "parent", "--set", f"{key}={value}"))
    assert "xyzSECRET2" not in line and key in line


def test_an_error_in_a_file_never_echoes_a_url_password(exp_dir: Path) -> None:
    (exp_dir / "bad.yaml").write_text("name: bad\nsteps: 1\ncontainer: {volumes: ['https://u:xyzSECRET2@h:/w']}\n")
    line = one_error_line(cli(exp_dir, "show", "bad"))
    assert "xyzSECRET2" not in line and "container.volumes" in line
