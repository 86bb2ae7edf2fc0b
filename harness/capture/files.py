"""Writing capture files so that no crash, power-off or full disk leaves half of something.

- JSON files are written to a temporary file in the same directory, fsynced,
  and renamed over the old one: a reader sees the old file or the new one.
- JSONL lines are appended whole and fsynced; a line that could not be
  written whole is cut off again, so the file always ends on a newline.
- Files are created with mode 0666 and the umask takes its part, as every
  other program's files do (a temporary file from `mkstemp` would be 0600).
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from pathlib import Path

# Errors that mean "the disk cannot take more" rather than a bug.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def write_json_atomic(path: Path, data: object) -> None:
    """Write `data` as strict JSON (no NaN), atomically (see `write_text_atomic`); what JSON lacks is a str."""
    write_text_atomic(path, json.dumps(data, indent=2, allow_nan=False, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temporary file, fsync it, rename it over `path`, fsync the directory: all or nothing."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """`write_text_atomic` for bytes already encoded."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = _create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _create_temporary(path: Path) -> tuple[Path, int]:
    """A new file beside `path`, created 0666 so the umask decides its mode."""
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue


def append_jsonl(path: Path, record: object) -> None:
    """Append one whole strict-JSON line and fsync; on failure the file is cut back to where it was."""
    append_line(path, json.dumps(record, allow_nan=False, default=str))


def append_line(path: Path, text: str) -> None:
    """Append `text` and a newline as one write, fsynced; never leaves part of the line behind."""
    data = text.encode("utf-8") + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        before = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):  # a short write: the disk filled up mid-line
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
            os.fsync(fd)
        except OSError:
            _truncate_quietly(fd, before)
            raise
    finally:
        os.close(fd)


def _truncate_quietly(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass  # the line stays torn; readers skip it and `cut_torn_tail` removes it


def cut_torn_tail(path: Path) -> int:
    """Cut a file back to its last newline (a line torn by a crash or a full disk); returns bytes removed."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        end = size
        while end > 0:
            start = max(0, end - 65536)
            chunk = os.pread(fd, end - start, start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        if end < size:
            os.ftruncate(fd, end)
            os.fsync(fd)
        return size - end
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` survive a power-off."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def describe_os_error(err: OSError, what: str) -> str:
    """`no space left on device writing container.log`: the reason first, in words a user acts on."""
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        reason = "no space left on device" if err.errno == errno.ENOSPC else "disk quota exceeded"
    else:
        reason = (err.strerror or str(err)).lower()
    return f"{reason} writing {what}"
