"""The secret rule, in one place: which values are never shown, and how they are hidden.

An environment variable is a secret when its name matches SECRET_NAME or it
is listed in `container.secret_env`; its value is shown as `***` in every
output and capture file. The password of a URL in any env value is hidden
too. A trainer flag whose name follows the same rule is refused when it
carries a value, since the trainer prints its whole argv into its log.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from harness.lab import milesargv

# An environment variable whose value is never shown: by its name, or listed in container.secret_env.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


REDACTED = "***"


# The user:password@ part of a URL (`https://user:pw@host/...`): shown as ***@ wherever an env value is shown.
URL_USERINFO = re.compile(r"(?<=://)[^/?#@\s]+@")


SECRET_FLAG_HINT = (
    "passes a secret on the trainer's command line, which the trainer prints in its log; pass it by environment "
    "instead (container.env, or container.pass_env from your shell, e.g. WANDB_API_KEY for W&B), which reaches "
    "the container only through its environment"
)


def is_secret_env(name: str, listed: Iterable[str] = ()) -> bool:
    """True when the value of environment variable `name` must never be shown: by its name, or `listed`."""
    return bool(SECRET_NAME.search(name)) or name in listed


def redact_userinfo(text: str) -> str:
    """`text` with the user:password part of every URL in it shown as ***."""
    return URL_USERINFO.sub(f"{REDACTED}@", text)


def userinfo_in(text: str) -> list[str]:
    """The user:password parts of the URLs in `text` (to find them in text that was written with them)."""
    return [match.group(0)[:-1] for match in URL_USERINFO.finditer(text)]


# Trainer flags that the secret rule's words would catch but that never hold a secret: data-set columns
# (`--input-key messages`) and token counts or tokenizers (`--max-tokens-per-gpu 9216`).
NOT_SECRET_FLAGS = {"input-key", "label-key", "metadata-key", "tool-key", "multimodal-keys"}


_NOT_SECRET_WORDS = re.compile(r"tokens|tokeni[sz]\w*", re.IGNORECASE)


# Miles's own secret flags, also caught when abbreviated (argparse expands `--wandb-k` to `--wandb-key`).
KNOWN_SECRET_FLAGS = ("wandb-key",)


def is_secret_flag(name: str) -> bool:
    """True when a flag's name (with or without dashes) follows the secret rule, like an env variable's."""
    bare = name.lstrip("-")
    if any(known.startswith(bare) and len(bare) > known.rfind("-") + 1 for known in KNOWN_SECRET_FLAGS):
        return True
    return bare not in NOT_SECRET_FLAGS and bool(SECRET_NAME.search(_NOT_SECRET_WORDS.sub("", bare)))


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
