"""The secret rule, in one place: which values are never shown, and how they are hidden.

An environment variable is a secret when its name says so (`secret_by_name`)
or it is listed in `container.secret_env`; its value is shown as `***` in
every output and capture file, whichever env map of the experiment holds it
(`container.env`, `cluster.env`: every mapping the schema keys by variable
name). The name rule, in any case:

- the name contains TOKEN, KEY, SECRET, PASSWORD, PASSWD, PASSPHRASE,
  CREDENTIAL, COOKIE, SESSION or PRIVATE anywhere (`HF_TOKEN`,
  `SSH_PRIVATE_KEY`, `DB_PASSWD`);
- or one of its words is PASS, PWD or AUTH (`DB_PASS`, `MYSQL_PWD`,
  `GITHUB_AUTH`, `dbPass`): words are split at `_`, `-`, `.` and case
  changes, so `BYPASS`, `PASSIVE`, `COMPASS` and `AUTHOR` are not secrets.

A trainer flag whose name follows the same rule is refused when it carries a
value, since the trainer prints its whole argv into its log; flags that only
look like secrets (data-set columns such as `--input-key`, token counts such
as `--max-tokens-per-gpu`) are not. Where one is shown all the same, its
values are `***` (`shown_words`).

The user:password of a URL is hidden in every value the harness writes or
prints (`redact_userinfo`): env values, trainer flags and their values,
`command`, volumes, the Ray address, warnings and errors. A URL starts at
`scheme://`, or at a `//` that begins a word (scheme-relative). Its userinfo
ends at the last `@` before the host:

- where `urllib.parse` can read the URL, as it reads it: the authority ends at
  the first `/`, `?` or `#` (or a blank), and its userinfo at its last `@`;
- where it cannot, because what follows the authority's first `:` is no port
  (`http://u:s3cret/x@proxy:3128`, `git+https://u:pw#x@host/repo`), the
  password holds a `/`, `?` or `#`: the userinfo runs to the first `@` of the
  word that a host name (and a port) follows, up to the end of the authority.

What no rule can tell from a host and a path is left as a URL reader reads it:
a user name (or a token without a `:`) holding a `/`, `?` or `#`, and a password
of digits alone followed by a `/` (`http://u:1234/5@h` reads as port 1234).

The trainer's own output is not the harness's text: in it, the values the
harness knows to be secret (`LaunchSpec.secret_values`: the secrets' values,
the URL passwords it passed) are masked wherever they appear
(`KnownSecrets`), if they are at least `MIN_KNOWN_CHARS` long (a shorter one
would hide ordinary words of the log).
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Optional, Sequence, TypeVar
from urllib.parse import unquote

from harness.lab import milesargv

# An environment variable whose value is never shown, by its name: a part anywhere in it, or a whole word of it.
SECRET_PARTS = (
    "TOKEN",
    "KEY",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "COOKIE",
    "SESSION",
    "PRIVATE",
)
SECRET_WORDS = frozenset({"PASS", "PWD", "AUTH"})
SECRET_NAME = re.compile("|".join(SECRET_PARTS), re.IGNORECASE)
# The words of a name: runs of capitals (HTTP in HTTPAuth), capitalised or lower-case words, digits.
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


REDACTED = "***"


# What may come just before the `//` of a URL: its scheme's `:`, or (scheme-relative, `//u:pw@host`) a word's start.
_BEFORE_URL = frozenset(":\"'`=(<[{,;|")  # or a blank
_BLANK = re.compile(r"\s")
_AUTHORITY_END = re.compile(r"[/?#]")
# An `@` that a host follows (a name or a bracketed address, then a port or none), and then the authority's end.
_HOST_AFTER_AT = re.compile(r"@(?:[\w.~%-]+|\[[0-9A-Za-z:.%]*\])(?::[0-9]*)?(?![\w@:.~%-])")

SECRET_FLAG_HINT = (
    "passes a secret on the trainer's command line, which the trainer prints in its log; pass it by environment "
    "instead (container.env, or container.pass_env from your shell, e.g. WANDB_API_KEY for W&B), which reaches "
    "the container only through its environment"
)


def secret_by_name(name: str) -> bool:
    """True when a name (an environment variable's, a flag's) says its value is a secret (see the module's rule)."""
    return bool(SECRET_NAME.search(name)) or any(word.upper() in SECRET_WORDS for word in _WORDS.findall(name))


def is_secret_env(name: str, listed: Iterable[str] = ()) -> bool:
    """True when the value of environment variable `name` must never be shown: by its name, or `listed`."""
    return secret_by_name(name) or name in listed


def _port_unreadable(authority: str) -> bool:
    """True when an authority without `@` is no host[:port] (`urllib.parse` refuses its port or its brackets): what
    follows its first `:` is a password."""
    if authority.startswith("["):
        host, closed, port = authority[1:].partition("]")
        if not closed or "[" in host or not (port == "" or port.startswith(":")):
            return True
        port = port[1:]
    elif "[" in authority or "]" in authority:
        return True
    else:
        port = authority.partition(":")[2]
    return bool(port) and not (port.isdigit() and port.isascii())


def userinfo_spans(text: str) -> list[tuple[int, int]]:
    """Where the user:password part of each URL in `text` is (start, end), by the module's URL rule."""
    if "//" not in text:  # the usual text: no URL, found quickly
        return []
    spans: list[tuple[int, int]] = []
    found = text.find("//")
    while found >= 0:
        begin, found = found + 2, text.find("//", found + 1)
        before = text[begin - 3] if begin > 2 else " "
        if (before not in _BEFORE_URL and not before.isspace()) or (spans and begin < spans[-1][1]):
            continue  # inside a word (a path's `//`), or inside the userinfo just found
        blank = _BLANK.search(text, begin)
        word = text[begin : blank.start() if blank else len(text)]
        cut = _AUTHORITY_END.search(word)
        authority = word[: cut.start()] if cut else word
        at = authority.rfind("@")
        if at >= 0:
            spans.append((begin, begin + at))
        elif cut is not None and _port_unreadable(authority):
            host = _HOST_AFTER_AT.search(word, cut.start())
            if host is not None:
                spans.append((begin, begin + host.start()))
    return spans


def redact_userinfo(text: str) -> str:
    """`text` with the user:password part of every URL in it shown as *** (the module's URL rule)."""
    spans = userinfo_spans(text)
    if not spans:
        return text
    pieces, last = [], 0
    for start, end in spans:
        pieces += [text[last:start], REDACTED]
        last = end
    return "".join(pieces) + text[last:]


def userinfo_in(text: str) -> list[str]:
    """The user:password parts of the URLs in `text` (to find them in text that was written with them)."""
    return [text[start:end] for start, end in userinfo_spans(text)]


def secrets_in(text: str) -> list[str]:
    """What a program given `text` may print of its URL passwords: each user:password, its password, and the
    password percent-decoded (as a URL reader hands it on)."""
    found = []
    for userinfo in userinfo_in(text):
        password = userinfo.partition(":")[2]
        found += [userinfo, *([password, unquote(password)] if password else [])]
    return list(dict.fromkeys(found))


def secret_values_of(env: Mapping[str, str], words: Iterable[str], listed: Iterable[str] = ()) -> list[str]:
    """The secret values a program given `env` and `words` (argv, mounts) holds, longest first: each secret env
    variable's value (by its name, or `listed`) and every URL password in an env value or a word."""
    names = set(listed)
    values = {value for name, value in env.items() if value and is_secret_env(name, names)}
    values.update(secret for value in [*env.values(), *words] for secret in secrets_in(value))
    return sorted(values, key=len, reverse=True)


# Trainer flags that the secret rule's words would catch but that never hold a secret: data-set columns
# (`--input-key messages`) and token counts or tokenizers (`--max-tokens-per-gpu 9216`).
NOT_SECRET_FLAGS = {
    "input-key",
    "label-key",
    "metadata-key",
    "tool-key",
    "multimodal-keys",
    "reward-key",
    "eval-input-key",
    "eval-label-key",
    "eval-reward-key",
}


_NOT_SECRET_WORDS = re.compile(r"tokens|tokeni[sz]\w*", re.IGNORECASE)


# Miles's own secret flags, also caught when abbreviated (argparse expands `--wandb-k` to `--wandb-key`).
KNOWN_SECRET_FLAGS = ("wandb-key",)


def is_secret_flag(name: str) -> bool:
    """True when a flag's name (with or without dashes) follows the secret rule, like an env variable's."""
    bare = name.lstrip("-")
    if any(known.startswith(bare) and len(bare) > known.rfind("-") + 1 for known in KNOWN_SECRET_FLAGS):
        return True
    return bare not in NOT_SECRET_FLAGS and secret_by_name(_NOT_SECRET_WORDS.sub("", bare))


def secret_flags(words: Sequence[str]) -> list[str]:
    """Names of the flags in `words` (`--f v` or `--f=v`) that follow the secret rule and carry a value."""
    return [
        flag.name for flag in milesargv.parse_flags(words) if flag.name and flag.values and is_secret_flag(flag.name)
    ]


def shown_words(words: Sequence[str]) -> list[str]:
    """Argv words as they may be shown: a secret flag's values as ***, every URL password as ***."""
    shown = []
    for flag in milesargv.parse_flags(words):
        secret = bool(flag.name) and bool(flag.values) and is_secret_flag(flag.name)
        for index, word in enumerate(flag.words):
            if secret and index == 0 and "=" in word:
                word = f"{word.partition('=')[0]}={REDACTED}"
            elif secret and index > 0:
                word = REDACTED
            shown.append(redact_userinfo(word))
    return shown


def shown_env_value(secret: bool, value: str) -> str:
    """An env value as it may be shown: *** for a secret, else with the password of any URL in it as ***."""
    return REDACTED if secret else redact_userinfo(value)


Data = TypeVar("Data")


def shown_json(data: Data, known: Optional["KnownSecrets"] = None) -> Data:
    """JSON-ready data (a copy) with every string in it shown by the URL rule, and `known` secrets masked."""
    if isinstance(data, str):
        text = redact_userinfo(data)
        return known.mask(text) if known else text  # type: ignore[return-value]
    if isinstance(data, dict):
        return {key: shown_json(value, known) for key, value in data.items()}  # type: ignore[return-value]
    if isinstance(data, (list, tuple)):
        return [shown_json(value, known) for value in data]  # type: ignore[return-value]
    return data


def redact_text(text: str, secret_values: Sequence[str]) -> str:
    """`text` with every occurrence of a secret's value replaced by ***."""
    for value in secret_values:
        text = text.replace(value, REDACTED)
    return text


MIN_KNOWN_CHARS = 8


class KnownSecrets:
    """The secret values the harness passed, masked wherever they appear in text it did not write (the trainer's
    output, the engine's facts of its run): each line of a value at least MIN_KNOWN_CHARS long, the longest first."""

    def __init__(self, values: Iterable[str]) -> None:
        pieces = {piece for value in values for piece in value.splitlines() if len(piece) >= MIN_KNOWN_CHARS}
        self.values = tuple(sorted(pieces, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self.values)

    def mask(self, text: str) -> str:
        """`text` with each known secret as ***; no line of a value spans two lines, so a text is masked as its
        lines would be one by one."""
        for value in self.values:
            if value in text:  # a scan in C; the replace (a copy) only where a secret is
                text = text.replace(value, REDACTED)
        return text
