"""The one writer (harness.fs.files): a target that is not a regular file, or is a link, is refused and left as it was.

Every kind of node a path can name is tried against every way the harness
writes: replacing a whole file, appending a line, a capture's writes, the
lock files, and the commands' `--out` (summary, export, report).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import stat
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner

from harness.capture import files as capture_files
from harness.cli import app

DATA = Path(__file__).resolve().parent / "data" / "captures"
runner = CliRunner()


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _chardev(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's numbers


def _socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()


def _directory(path: Path) -> None:
    path.mkdir()


def _link_to_file(path: Path) -> None:
    target = path.with_name("elsewhere.txt")
    target.write_text("keep me\n")
    path.symlink_to(target)


def _dangling_link(path: Path) -> None:
    path.symlink_to(path.with_name("nothing-here"))


NODES: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo,
    "device": _chardev,
    "socket": _socket,
    "directory": _directory,
    "link to a file": _link_to_file,
    "dangling link": _dangling_link,
}


def _identity(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_mode, info.st_ino


WRITES: dict[str, Callable[[Path], object]] = {
    "write_bytes_atomic": lambda path: capture_files.write_bytes_atomic(path, b"x"),
    "write_text_atomic": lambda path: capture_files.write_text_atomic(path, "x"),
    "write_json_atomic": lambda path: capture_files.write_json_atomic(path, {"a": 1}),
    "append_line": lambda path: capture_files.append_line(path, "x"),
    "append_jsonl": lambda path: capture_files.append_jsonl(path, {"a": 1}),
}


@pytest.mark.parametrize("node", NODES)
@pytest.mark.parametrize("write", WRITES)
def test_every_write_refuses_what_is_not_a_regular_file_and_leaves_it(tmp_path, node, write):
    target = tmp_path / "target"
    NODES[node](target)
    before = _identity(target)
    with pytest.raises(OSError) as raised:
        WRITES[write](target)
    assert _identity(target) == before, f"{write} replaced the {node}"
    assert "regular file" in str(raised.value) and "\n" not in str(raised.value)
    if node == "link to a file":
        assert (tmp_path / "elsewhere.txt").read_text() == "keep me\n"  # nothing written through the link
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_a_regular_file_is_still_replaced_and_appended_to(tmp_path):
    target = tmp_path / "ok.json"
    target.write_text("old")
    capture_files.write_json_atomic(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    lines = tmp_path / "ok.jsonl"
    capture_files.append_jsonl(lines, {"a": 1})
    capture_files.append_jsonl(lines, {"a": 2})
    assert lines.read_text() == '{"a": 1}\n{"a": 2}\n'


def test_a_write_given_its_root_stays_inside_it(tmp_path):
    from harness.fs.files import RefusedPath, write_json_atomic

    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "leak").symlink_to(outside)
    with pytest.raises(RefusedPath, match="leads out of"):
        write_json_atomic(root / "leak" / "status.json", {"a": 1}, root=root)
    assert list(outside.iterdir()) == []
    write_json_atomic(root / "inside" / "status.json", {"a": 1}, root=root)  # a plain path inside is fine


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_the_lock_files_are_never_a_link(tmp_path, where):
    from harness.capture.lock import CaptureLock, lock_path

    run = tmp_path / "root" / "r"
    run.parent.mkdir()
    victim = (run.parent if where == "inside" else tmp_path) / "victim"
    victim.write_text("keep me\n")
    lock = lock_path(run)
    lock.parent.mkdir()
    lock.symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link" if where == "inside" else "leads out of"):
        CaptureLock(run, {"pid": 1}).acquire(wait=False)
    assert victim.read_text() == "keep me\n"


def test_the_gpu_lock_is_never_a_link(tmp_path, monkeypatch):
    from harness.fs.filelock import open_lock_file

    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "gpu0.lock").symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        open_lock_file(tmp_path / "locks" / "gpu0.lock")
    assert victim.read_text() == "keep me\n"


def _captures(tmp_path: Path) -> Path:
    target = tmp_path / "lab"
    shutil.copytree(DATA / "lab", target)
    (target / "summary" / "miles-gb10-lab.json").unlink()  # a stale summary of the case
    return target


@pytest.mark.parametrize("node", ["fifo", "device", "link to a file"])
def test_summarize_out_is_refused_in_one_line_and_left_as_it_was(tmp_path, node):
    captures = _captures(tmp_path)
    out = tmp_path / "out"
    NODES[node](out)
    before = _identity(out)
    result = runner.invoke(app, ["summarize", "--capture-dir", str(captures), "--out", str(out), "--no-figures"])
    assert result.exit_code == 2, result.output
    assert "wrote" not in result.output and "Traceback" not in result.output
    assert _identity(out) == before


@pytest.mark.parametrize("node", ["fifo", "device", "socket", "dangling link"])
def test_export_out_is_refused_in_one_line_and_left_as_it_was(tmp_path, node):
    captures = _captures(tmp_path)
    out = tmp_path / "out.csv"
    NODES[node](out)
    before = _identity(out)
    result = runner.invoke(app, ["export", "--capture-dir", str(captures), "--format", "csv", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "wrote" not in result.output and "Traceback" not in result.output
    assert _identity(out) == before


def test_report_and_figures_refuse_a_node_in_their_place(tmp_path, monkeypatch):
    import matplotlib.figure

    captures = _captures(tmp_path)
    assert runner.invoke(app, ["summarize", "--capture-dir", str(captures), "--no-figures"]).exit_code == 0
    report = captures / "summary" / "report.md"
    os.mkfifo(report)
    result = runner.invoke(app, ["report", "--capture-dir", str(captures)])
    assert result.exit_code == 2 and "report.md" in result.output and "regular file" in result.output
    assert stat.S_ISFIFO(os.lstat(report).st_mode)
    report.unlink()
    assert runner.invoke(app, ["report", "--capture-dir", str(captures)]).exit_code == 0
    figures = sorted((captures / "summary").glob("*.svg"))
    assert {figure.name.split("-")[0] for figure in figures} >= {"guard", "reward", "rollout"}  # each kind
    made: list[object] = []  # drawing is most of a report's time: what cannot be written is refused undrawn
    figure_init = matplotlib.figure.Figure.__init__
    monkeypatch.setattr(
        matplotlib.figure.Figure, "__init__", lambda self, *a, **k: (made.append(self), figure_init(self, *a, **k))[1]
    )
    for figure in figures:
        drawn = figure.read_bytes()
        figure.unlink()
        os.mkfifo(figure)
        result = runner.invoke(app, ["report", "--capture-dir", str(captures)])
        assert result.exit_code == 2 and figure.name in result.output, result.output
        assert stat.S_ISFIFO(os.lstat(figure).st_mode) and made == [], figure.name
        figure.unlink()
        # put back as drawn: the next report has only the next node to refuse, no figure to draw again
        figure.write_bytes(drawn)


def test_the_default_summary_directory_may_not_lead_out_of_the_capture_root(tmp_path):
    captures = _captures(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(captures / "summary")
    (captures / "summary").symlink_to(elsewhere)
    result = runner.invoke(app, ["summarize", "--capture-dir", str(captures)])
    assert result.exit_code == 2, result.output
    assert "leads out of" in result.output
    assert list(elsewhere.iterdir()) == []


# --- short writes -----------------------------------------------------------------------------------------


def test_a_short_write_is_followed_by_one_for_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.fs import files

    real_write = os.write
    calls: list[int] = []

    def three_bytes_at_a_time(fd: int, data: bytes) -> int:  # as a write beyond what Linux takes at once
        calls.append(len(data))
        return real_write(fd, bytes(data[:3]))

    target = tmp_path / "log.txt"
    monkeypatch.setattr(files.os, "write", three_bytes_at_a_time)
    files.append_line(target, "a whole line")
    monkeypatch.undo()
    assert target.read_text() == "a whole line\n" and len(calls) == 5


def test_a_write_that_makes_no_progress_is_a_full_disk_and_the_line_is_cut_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.fs import files

    target = tmp_path / "log.txt"
    target.write_text("kept\n")
    real_write = os.write
    writes = iter([4, 0])  # four bytes, then nothing: the disk filled up mid-line

    def filling(fd: int, data: bytes) -> int:
        return real_write(fd, bytes(data[: next(writes)]))

    monkeypatch.setattr(files.os, "write", filling)
    with pytest.raises(OSError) as full:
        files.append_line(target, "a line too long for the disk")
    monkeypatch.undo()
    assert full.value.errno == errno.ENOSPC and target.read_text() == "kept\n"
