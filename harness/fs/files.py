"""The one writer of every file the harness writes: only regular files, only inside its roots, never half of one.

Captures, the summary and its figures, the report, the export, the guard's
records, the board's event files, the process engine's state and lock files
are all written here. The rules:

- The target: a path that exists is replaced or appended to only when it is
  a regular file. A symbolic link, a FIFO, a device, a socket or a directory
  is refused with one line (`RefusedPath`) and left as it was:
  `--out /dev/full` never replaces /dev/full, `--out fifo` never becomes a
  file. The check is made when the file is opened (`O_NOFOLLOW`, then what
  the open file is) or, for a rename, again just before the rename.
- The root: a write given its root (`root=`, the capture root for a capture's
  files) happens only where the target, every link in its path resolved,
  lies inside the resolved root; a link that leads out of it is refused.
- Whole files (JSON, the summary, figures, the report, the export) are
  written to a temporary file in the same directory, fsynced, and renamed
  over the old one: a reader sees the old file or the new one.
- Lines (JSONL, logs) are appended whole and fsynced; a line that could not
  be written whole is cut off again, so the file always ends on a newline.
- Files are created with mode 0666 and the umask takes its part, as every
  other program's files do (a temporary file from `mkstemp` would be 0600).

Files a library makes: matplotlib (figures) and pyarrow (parquet) write into
memory and the bytes are written here; TensorBoard event files are encoded
with tensorboardX's protocol buffers and appended here (`open_append`); an
offline W&B run writes its own files, into a directory checked here first
(`prepare_directory`: a real directory inside the capture root).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Optional, Union

from harness.fs.paths import file_kind, outside_root

# Errors that mean "the disk cannot take more" rather than a bug.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

PathLike = Union[str, "os.PathLike[str]"]


class RefusedPath(OSError):
    """A path the harness will not write: not a regular file, a link, or outside its root. `str()` is one line."""

    def __init__(self, path: PathLike, reason: str) -> None:
        super().__init__(errno.EPERM, reason, str(path))
        self.path = Path(path)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"

    @property
    def message(self) -> str:
        return str(self)


def target_problem(path: PathLike) -> Optional[str]:
    """Why the harness must not write `path` (None: it is a regular file, or absent). Never follows a link."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None  # absent (a parent that is not a directory fails the write itself, with its own reason)
    except OSError as err:
        return f"cannot be looked at ({err.strerror or err})"
    if stat.S_ISLNK(mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return f"refused: it is a symbolic link (to {target}); the harness writes only regular files"
    if not stat.S_ISREG(mode):
        return f"refused: it is {file_kind(mode)}, not a regular file; the harness writes only regular files"
    return None


def check_target(path: PathLike, root: Optional[PathLike] = None) -> None:
    """Raise RefusedPath when `path` may not be written: see the module's rules."""
    why = target_problem(path)
    if why is None and root is not None:
        why = outside_root(root, path)
    if why is not None:
        raise RefusedPath(path, why)


def prepare_directory(directory: PathLike, root: Optional[PathLike] = None) -> Path:
    """`directory`, made with its parents; refused (RefusedPath) when it, or a link on the way, leaves `root`,
    or when it is something other than a directory."""
    directory = Path(directory)
    if root is not None:
        why = outside_root(root, directory)
        if why is not None:
            raise RefusedPath(directory, why)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        blocking = next(p for p in (directory, *directory.parents) if p.exists() or p.is_symlink())
        mode = os.lstat(blocking).st_mode
        kind = "a regular file" if stat.S_ISREG(mode) else file_kind(mode)
        raise RefusedPath(blocking, f"refused: it is {kind}, not a directory") from None
    return directory


def write_json_atomic(path: PathLike, data: object, *, root: Optional[PathLike] = None) -> None:
    """Write `data` as strict JSON (no NaN), atomically (see `write_text_atomic`); what JSON lacks is a str."""
    write_text_atomic(path, json.dumps(data, indent=2, allow_nan=False, default=str) + "\n", root=root)


def write_text_atomic(path: PathLike, text: str, *, root: Optional[PathLike] = None) -> None:
    """Write to a temporary file, fsync it, rename it over `path`, fsync the directory: all or nothing."""
    write_bytes_atomic(path, text.encode("utf-8"), root=root)


def write_bytes_atomic(path: PathLike, data: bytes, *, root: Optional[PathLike] = None) -> None:
    """`write_text_atomic` for bytes already encoded."""
    path = Path(path)
    prepare_directory(path.parent, root)
    check_target(path, root)
    tmp, fd = _create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        check_target(path, root)  # again, as close to the rename as can be: nothing else is ever replaced
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _create_temporary(path: Path) -> tuple[Path, int]:
    """A new file beside `path`, created 0666 so the umask decides its mode."""
    while True:
        tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o666)
        except FileExistsError:
            continue


def open_append(path: PathLike, *, root: Optional[PathLike] = None) -> int:
    """An fd appending to `path` (created 0666 less the umask), which is a regular file inside `root`.

    Never blocks on a FIFO and never opens a link: what is not a regular file is RefusedPath.
    """
    return _open_checked(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, root)


def open_for_update(path: PathLike, *, root: Optional[PathLike] = None) -> int:
    """An fd reading and writing `path` (created when absent), checked as `open_append` checks (lock files)."""
    return _open_checked(path, os.O_RDWR | os.O_CREAT, root)


def _open_checked(path: PathLike, flags: int, root: Optional[PathLike]) -> int:
    if root is not None:
        why = outside_root(root, path)
        if why is not None:
            raise RefusedPath(path, why)
    try:
        fd = os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
            why = target_problem(path)  # a link (ELOOP), a FIFO without a reader (ENXIO), a directory
            if why is not None:
                raise RefusedPath(path, why) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise RefusedPath(
                path, f"refused: it is {file_kind(mode)}, not a regular file; the harness writes only regular files"
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_jsonl(path: PathLike, record: object, *, root: Optional[PathLike] = None) -> None:
    """Append one whole strict-JSON line and fsync; on failure the file is cut back to where it was."""
    append_line(path, json.dumps(record, allow_nan=False, default=str), root=root)


def append_line(path: PathLike, text: str, *, root: Optional[PathLike] = None) -> None:
    """Append `text` and a newline, fsynced; never leaves part of the line behind."""
    data = text.encode("utf-8") + b"\n"
    fd = open_append(path, root=root)
    try:
        before = os.fstat(fd).st_size
        try:
            write_whole(fd, data)
            os.fsync(fd)
        except OSError:
            _truncate_quietly(fd, before)
            raise
    finally:
        os.close(fd)


def write_whole(fd: int, data: bytes) -> None:
    """Write all of `data`: a short write is followed by another for the rest (Linux writes at most about
    2 GiB at once), and one that writes nothing is a full disk (ENOSPC). The caller cuts back what a failure
    left."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def _truncate_quietly(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass  # the line stays torn; readers skip it and `cut_torn_tail` removes it


def cut_torn_tail(path: PathLike) -> int:
    """Cut a file back to its last newline (a line torn by a crash or a full disk); returns bytes removed."""
    try:
        fd = _open_checked(path, os.O_RDWR, None)
    except FileNotFoundError:
        return 0
    try:
        size = os.fstat(fd).st_size
        end = data_end(fd, size)  # a hole at the end (a power loss's NUL tail) is never read: it holds no newline
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


def data_end(fd: int, size: int) -> int:
    """Where the last data of a file of `size` bytes ends: after it is a hole (blocks never written, read as NUL
    bytes), which need not be read. `size` where the file system cannot say."""
    end = at = 0
    try:
        while at < size:
            at = os.lseek(fd, os.lseek(fd, at, os.SEEK_DATA), os.SEEK_HOLE)
            end = at
    except OSError as err:
        if err.errno != errno.ENXIO:  # ENXIO: no data after `at`
            return size
    return min(end, size)


def fsync_dir(directory: PathLike) -> None:
    """Make a rename or a new file in `directory` survive a power-off."""
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def describe_os_error(err: OSError, what: str) -> str:
    """`no space left on device writing container.log`: the reason first, in words a user acts on."""
    if isinstance(err, RefusedPath):  # it names the path refused; and what was being written, where that differs
        return str(err) if str(err.path) == str(what) else f"{err}; writing {what}"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        reason = "no space left on device" if err.errno == errno.ENOSPC else "disk quota exceeded"
    else:
        reason = (err.strerror or str(err)).lower()
    return f"{reason} writing {what}"
