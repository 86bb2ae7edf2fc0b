"""One line of a Miles log: prefixes peeled off, metric lines recognised.

A metric line, as `docker logs` delivers it:

    [<RFC3339Nano> ][ESC..](Actor pid=N[, ip=...])[ESC..] [TIMESTAMP[ PROC]] FILE.py:L - KIND ID: {DICT}[ [repeated Kx across cluster]]

Only ` - KIND ID: {` counts, anywhere in the line once ANSI codes are gone;
the Miles timestamp (either form) is not needed to recognise it. Lines that
merely end in a dict (memory dumps) do not match. Everything here is string
slicing or anchored patterns without nested quantifiers, so a 1 MB line costs
linear time.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from harness.mileslog.pyrepr import PyDict, PyValue, ReprError, parse_dict_repr, parse_repr

KINDS = ("perf", "rollout", "step", "eval", "multi_turn", "critic-step")

_METRIC_HEAD = re.compile(r" - (perf|rollout|step|eval|multi_turn|critic-step) (-?\d{1,18}): \{")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_RAY_PREFIX = re.compile(
    r"\(([^()\n]{0,200}?pid=\d{1,10}[^()\n]{0,120}|(?:raylet|gcs_server|autoscaler|monitor)[^()\n]{0,120})\) ?"
)
_REPEAT = re.compile(r"[ \t]*\[repeated \d{1,12}x across cluster\][ \t]*")


@dataclass(frozen=True)
class MetricLine:
    """One ` - KIND ID: {...}` line, read."""

    kind: str
    id: int
    payload: PyDict | None  # None when it did not parse
    error: str | None  # why it did not parse
    trailing: str  # text after the dict other than a repeat suffix ("" normally)


def strip_ansi(text: str) -> str:
    """The text without ANSI escape sequences (colours)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


_ANSI_BYTES = re.compile(_ANSI.pattern.encode())


def strip_ansi_bytes(raw: bytes) -> bytes:
    """`strip_ansi` of undecoded text: the codes are ASCII, and so is every byte they may hold."""
    return _ANSI_BYTES.sub(b"", raw) if b"\x1b" in raw else raw


def split_ray_prefix(text: str) -> tuple[str, str]:
    """(source, rest): `(MegatronTrainRayActor pid=7, ip=...) x` -> ('MegatronTrainRayActor pid=7, ip=...', 'x').

    The source is "" for driver lines, which carry no prefix. The one space Ray
    adds after the prefix is removed; the line's own indentation is kept.
    """
    if not text.startswith("("):
        return "", text
    # The prefix holds no bracket, so it can only end at the first `)`: the few a log has are read once each.
    close = text.find(")", 0, _RAY_PREFIX_LONGEST)
    source = None if close < 0 else _ray_source(text[: close + 1])
    if source is None:
        return "", text
    return source, text[close + 2 if text.startswith(" ", close + 1) else close + 1 :]


_RAY_PREFIX_LONGEST = 1 + 200 + len("pid=") + 10 + 120 + 1  # what `_RAY_PREFIX` matches up to its `)`, at most


@functools.lru_cache(maxsize=256)
def _ray_source(head: str) -> str | None:
    """The source of a Ray prefix `head` that ends at its `)`, or None where it is no prefix."""
    m = _RAY_PREFIX.fullmatch(head)
    return None if m is None else m.group(1)


def find_metric(segment: str) -> re.Match[str] | None:
    """The ` - KIND ID: {` head in an ANSI-free segment, or None."""
    if ": {" not in segment:
        return None
    return _METRIC_HEAD.search(segment)


_KIND_AFTER_DASH = re.compile(f" - (?:{'|'.join(KINDS)}) ".encode())


_METRIC_HEAD_BYTES = re.compile(_METRIC_HEAD.pattern.encode())
_METRIC_HEAD_LONGEST = len(" - critic-step -: {") + 18


def may_end_metric_head(raw: bytes, brace: int) -> bool:
    """False when the `{` at `brace` of undecoded text without ANSI codes ends no ` - KIND ID: {` head: read as
    ASCII, as `find_metric` reads it once decoded (bytes beyond ASCII before it: perhaps digits of another script,
    which `find_metric` takes; True)."""
    start = max(brace - _METRIC_HEAD_LONGEST + 1, 0)
    if not raw[start:brace].isascii():
        return True
    return _METRIC_HEAD_BYTES.search(raw, start, brace + 1) is not None


def may_hold_metric(raw: bytes) -> bool:
    """False when the undecoded line holds no ` - KIND `: no metric head then, whatever else it holds (the head is
    ASCII, and decoding keeps every ASCII byte as it is)."""
    return _KIND_AFTER_DASH.search(raw) is not None


def read_metric(segment: str, head: re.Match[str]) -> MetricLine:
    """Read the payload that starts at the `{` of a metric head."""
    kind, ident = head.group(1), int(head.group(2))
    start = head.end() - 1
    try:
        payload, end = parse_dict_repr(segment, start)
    except ReprError as err:
        return MetricLine(
            kind,
            ident,
            None,
            f"payload does not parse: {err.reason} at character {err.column - start} of the payload",
            "",
        )
    rest = segment[end:]
    if rest and not rest.isspace():
        repeat = _REPEAT.match(rest)
        if repeat is not None:
            rest = rest[repeat.end() :]
        rest = rest.strip()
    else:
        rest = ""
    return MetricLine(kind, ident, payload, None, rest)


# ---- the argument dump ------------------------------------------------------

_ARG_LINE = re.compile(r"[ \t]*([A-Za-z_][A-Za-z0-9_]{0,200}) (\.*)(?: (.*))?")
_INT = re.compile(r"[-+]?\d{1,30}")
_FLOAT = re.compile(r"[-+]?(?:\d{1,30}\.\d{0,30}|\.\d{1,30}|\d{1,30})(?:[eE][-+]?\d{1,4})?")


def argument_marker(text: str) -> str | None:
    """'start' for `---- arguments ----`, 'end' for `---- end of arguments ----`, else None.

    String operations only: a line of a megabyte of dashes costs linear time.
    """
    stripped = text.rstrip()
    if not stripped.endswith("---"):
        return None
    head = stripped.rstrip("-").rstrip()
    if not head.endswith(" arguments"):
        return None
    head = head[: -len(" arguments")]
    kind = "start"
    if head.endswith(" end of"):
        head, kind = head[: -len(" end of")], "end"
    if not head.endswith("-"):
        return None
    before = head.rstrip("-")
    if before and not before[-1].isspace() and not before.endswith(")"):
        return None
    return kind


def read_argument(text: str) -> tuple[str, PyValue] | None:
    """(name, value) from `  name ........ value`, or None when the text has another shape."""
    m = _ARG_LINE.fullmatch(text.rstrip("\r\n"))
    if m is None:
        return None
    name, dots, value = m.group(1), m.group(2), m.group(3)
    if value is None:
        if not dots:
            return None
        value = ""
    return name, argument_value(value.strip())


def argument_value(text: str) -> PyValue:
    """A dumped value: None/True/False, int, float, a list/dict/tuple literal, else the string itself.

    A value that would hold a non-finite number (`1e999`, `[nan]`) stays the
    text Miles printed, as a bare `nan` or `inf` does: strict JSON has no
    such numbers, and the text loses nothing.
    """
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text) and any(c.isdigit() for c in text):
        number = float(text)
        return number if math.isfinite(number) else text
    if text[:1] in ("[", "{", "(") and text[-1:] in ("]", "}", ")"):
        try:
            value, end = parse_repr(text)
        except ReprError:
            return text
        if end == len(text):
            return value if _all_finite(value) else text
    return text


def _all_finite(value: PyValue) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_all_finite(item) for item in value)
    if isinstance(value, dict):
        return all(_all_finite(key) and _all_finite(item) for key, item in value.items())
    return True


# ---- evaluations skipped, and the noise lines ------------------------------------

SKIPPED_MARKER = " skipped: "
_EVAL_SKIPPED = re.compile(r"(?:^| - )eval (-?\d{1,18}) skipped: ")

# Lines Miles prints that are no metric, no dump, no failure: recognised, counted, never parsed.
# ft: the fault-tolerance `ft key=value ...` lines around each gather; progress: tqdm bars;
# first_rollout_sample / finish_rollout: the rollout's sample lines (model text: anything may be in them).
NOISE_KINDS = ("ft", "progress", "first_rollout_sample", "finish_rollout")
NOISE_MARKERS = ("First rollout sample", "Finish rollout", "%|", "ft ")
_FT = re.compile(r"(?:^|[ )])ft [A-Za-z_][A-Za-z0-9_.]{0,80}=")


def read_eval_skipped(segment: str) -> tuple[int, str] | None:
    """(N, reason) from `eval N skipped: REASON`, or None."""
    if SKIPPED_MARKER not in segment:
        return None
    m = _EVAL_SKIPPED.search(segment)
    if m is None:
        return None
    return int(m.group(1)), segment[m.end() :].strip()


def noise_kind(text: str) -> str | None:
    """Which noise line this is (one of NOISE_KINDS), or None: substring tests, and one anchored pattern for `ft`.

    `text` may still carry its Docker timestamp and Ray prefix. A traceback's
    frame or a dump's line (indented, once the prefixes are gone) is checked
    by the caller, which passes only what is no such line.
    """
    if "First rollout sample" in text:
        return "first_rollout_sample"
    if "Finish rollout" in text:
        return "finish_rollout"
    if "%|" in text:
        return "progress"
    if "ft " in text and _FT.search(text):
        return "ft"
    return None


_COUNTED = (("First rollout sample", "first_rollout_sample"), ("Finish rollout", "finish_rollout"), ("%|", "progress"))
# Counting over whole buffers (every line of a log passes here), each kind by what the regex engine finds fastest,
# a literal it can jump to: `_FT` has none (`(?:^|[ )])` makes it try every position, and "ft " occurs in ordinary
# words all over a log: left, soft, draft), so it is matched from its `ft ` and what precedes that is looked at
# after (a line's start, a space or a `)`; nothing at the buffer's start, as for `^`). A key holds no space, so
# no two matches overlap and the count is `_FT`'s. Both sample markers in one scan (neither holds the other's
# "Fi"); "%|" is too short for a substring search to skip ahead.
_FT_FROM_LITERAL = r"ft (?<![^\n )]ft )[A-Za-z_][A-Za-z0-9_.]{0,80}="
_FT_TEXT = re.compile(_FT_FROM_LITERAL)
_FT_BYTES = re.compile(_FT_FROM_LITERAL.encode())
_SAMPLES_BYTES = re.compile(rb"Fi(?:rst rollout sample|nish rollout)")
_PROGRESS_BYTES = re.compile(rb"%\|")


def count_noise(text: str) -> dict[str, int]:
    """The noise in lines nothing else reads, by kind: each kind's marker counted where it occurs (a tqdm line of
    three renders joined by carriage returns is three), `ft key=` where it starts a line or follows a space or `)`."""
    found = {kind: text.count(marker) for marker, kind in _COUNTED if marker in text}
    # "ft " in words (left, soft, draft) is common: the pattern runs only where a `ft ` may start one
    if text.startswith("ft ") or " ft " in text or ")ft " in text or "\nft " in text:
        ft = len(_FT_TEXT.findall(text))
        if ft:
            found["ft"] = ft
    return found


def count_noise_bytes(buf: bytes, start: int, stop: int) -> dict[str, int]:
    """`count_noise` of buf[start:stop] (whole lines) without decoding it: the same counts."""
    samples = _SAMPLES_BYTES.findall(buf, start, stop)
    finish = samples.count(b"Finish rollout")
    found = {
        "first_rollout_sample": len(samples) - finish,
        "finish_rollout": finish,
        "progress": len(_PROGRESS_BYTES.findall(buf, start, stop)),
    }
    found["ft"] = len(_FT_BYTES.findall(buf, start, stop))
    if start and buf[start - 1 : start] in (b" ", b")") and _FT_BYTES.match(buf, start, stop):
        found["ft"] -= 1  # what is before `start` is outside: a `ft ` right at it follows nothing, as `_FT` reads it
    return {kind: n for kind, n in found.items() if n}


# ---- the launch line and failures -------------------------------------------

LAUNCH_MARKER = "Running entrypoint for job "
TRACEBACK_MARKER = "Traceback (most recent call last)"
_JOB_FAILED = re.compile(r"Job '[^'\n]{0,300}' failed")


def read_launch(text: str) -> tuple[list[str] | None, str | None]:
    """(argv, problem) from `Running entrypoint for job <id>: <command>`."""
    import shlex

    at = text.find(LAUNCH_MARKER)
    if at < 0:
        return None, None
    rest = text[at + len(LAUNCH_MARKER) :]
    colon = rest.find(": ")
    if colon < 0:
        return None, "launch line without a command"
    command = rest[colon + 2 :].strip()
    try:
        return shlex.split(command), None
    except ValueError as err:
        return command.split(), f"launch command does not split like a shell line ({err}); split on spaces"


def exception_line(text: str) -> bool:
    """True for the last line of a traceback: `pkg.SomeError: message`, `KeyboardInterrupt`, `X(Y): ...`."""
    if not text or text[0] in " \t":
        return False
    name, colon, message = text.partition(":")
    if colon and message and not message.startswith(" "):
        return False
    if name.endswith(")"):
        paren = name.find("(")
        if paren <= 0 or not all(part.isidentifier() for part in name[paren + 1 : -1].split(".") if part):
            return False
        name = name[:paren]
    parts = name.split(".")
    last = parts[-1]
    if not all(part.isidentifier() for part in parts):
        return False
    # Exception classes are CapWords with a lower-case letter (OSError, KeyboardInterrupt):
    # `INFO:` access-log lines and `Note:` prose are not, or are filtered by the suffix rule.
    if not last[:1].isupper() or last.isupper():
        return False
    return last.endswith(("Error", "Exception", "Interrupt", "Exit", "Failure", "Died", "Timeout")) or "Error" in last


def is_oom(text: str) -> bool:
    """True when an exception line says the process ran out of memory."""
    return "OutOfMemory" in text or "out of memory" in text.lower()


_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z0-9_.]{1,300})'")
_NO_ATTRIBUTE = re.compile(r"AttributeError: module '([A-Za-z0-9_.]{1,300})' has no attribute '([A-Za-z0-9_]{1,200})'")


def missing_path(exception: str, path: str) -> bool:
    """True when an exception line says dotted `path` cannot be loaded: its module, a package above it, or the
    name in its module is missing (`ModuleNotFoundError: No module named ...`, `AttributeError: module ...`)."""
    m = _NO_MODULE.search(exception)
    if m is not None:
        module = m.group(1)
        return path.startswith(module + ".")
    m = _NO_ATTRIBUTE.search(exception)
    return m is not None and f"{m.group(1)}.{m.group(2)}" == path


def job_failed(text: str) -> str | None:
    """The `Job '...' failed` part of a `ray job submit` failure line, or None."""
    m = _JOB_FAILED.search(text)
    return m.group(0) if m else None
