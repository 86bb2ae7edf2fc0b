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

The password of a URL in any env value is hidden too, as `urllib.parse`
reads it: everything up to the last `@` of the authority. A trainer flag
whose name follows the same rule is refused when it carries a value, since
the trainer prints its whole argv into its log; flags that only look like
secrets (data-set columns such as `--input-key`, token counts such as
`--max-tokens-per-gpu`) are not.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

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


# The user:password@ part of a URL (`https://user:pw@host/...`): shown as ***@ wherever an env value is shown.
# As urllib.parse reads it: the authority ends at the first / ? # (or a blank), and its userinfo at its last @.
URL_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")


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


def redact_userinfo(text: str) -> str:
    """`text` with the user:password part of every URL in it shown as ***."""
    return URL_USERINFO.sub(f"{REDACTED}@", text)


def userinfo_in(text: str) -> list[str]:
    """The user:password parts of the URLs in `text` (to find them in text that was written with them)."""
    return [match.group(0)[:-1] for match in URL_USERINFO.finditer(text)]


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


def shown_env_value(secret: bool, value: str) -> str:
    """An env value as it may be shown: *** for a secret, else with the password of any URL in it as ***."""
    return REDACTED if secret else redact_userinfo(value)


def redact_text(text: str, secret_values: Sequence[str]) -> str:
    """`text` with every occurrence of a secret's value replaced by ***."""
    for value in secret_values:
        text = text.replace(value, REDACTED)
    return text
