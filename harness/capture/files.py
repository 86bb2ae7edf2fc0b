"""A capture's writes are the harness's one writer's (harness.fs.files): re-exported here for the capture's code.

Atomic JSON, whole appended lines, torn tails cut, only regular files and
only inside the capture root: the rules are in harness.fs.files.
"""

from __future__ import annotations

from harness.fs.files import (
    NO_SPACE,
    RefusedPath,
    append_jsonl,
    append_line,
    check_target,
    cut_torn_tail,
    describe_os_error,
    fsync_dir,
    open_append,
    prepare_directory,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)

__all__ = [
    "NO_SPACE",
    "RefusedPath",
    "append_jsonl",
    "append_line",
    "check_target",
    "cut_torn_tail",
    "describe_os_error",
    "fsync_dir",
    "open_append",
    "prepare_directory",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]
