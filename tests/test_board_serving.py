"""`harness board` serves only what its capture root holds, and never prints an address it does not serve.

- A link under `<root>/tensorboard` (to another root's runs, or to any file),
  there at the start or made while the board serves, is refused and said;
  the runs the root holds are served, those that start later too.
- A `--port` something else holds is an error before any address; an
  address is printed only once the TensorBoard started answers there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from harness.board.logdir import Served, served_files, sync
from harness.board.server import port_in_use, wait_until_serving
from support.timing import scaled

REPO = Path(__file__).resolve().parent.parent
LAB = REPO / "tests" / "data" / "captures" / "lab"
EVENTS = "events.out.tfevents.1.host"


def events_tree(root: Path, runs: list[str]) -> Path:
    for run in runs:
        (root / "tensorboard" / run).mkdir(parents=True)
        (root / "tensorboard" / run / EVENTS).write_bytes(b"events")
    return root / "tensorboard"


# --------------------------------------------------------------------------- which files are served


def test_only_event_files_reached_without_a_link_are_served(tmp_path: Path) -> None:
    logdir = events_tree(tmp_path / "root", ["plain/s1", "plain/s2"])
    other = events_tree(tmp_path / "other", ["x/s1"])
    os.symlink(other / "x", logdir / "evil")  # a run directory of another root
    (logdir / "sneaky" / "s1").mkdir(parents=True)
    os.symlink(other / "x" / "s1" / EVENTS, logdir / "sneaky" / "s1" / EVENTS)  # one file of it
    os.symlink("/etc/passwd", logdir / "plain" / "s1" / "events.out.tfevents.2.host")  # any file

    served = served_files(logdir, tmp_path / "root")

    assert served.files == {
        f"plain/s1/{EVENTS}": str((logdir / "plain" / "s1" / EVENTS).resolve()),
        f"plain/s2/{EVENTS}": str((logdir / "plain" / "s2" / EVENTS).resolve()),
    }
    assert sorted(served.refused) == ["evil", "plain/s1/events.out.tfevents.2.host", f"sneaky/s1/{EVENTS}"]
    assert "evil is a link (to " in served.refused["evil"] and "not served" in served.refused["evil"]


def test_a_tensorboard_directory_that_leads_out_of_the_root_is_refused_whole(tmp_path: Path) -> None:
    other = events_tree(tmp_path / "other", ["x/s1"])
    (tmp_path / "root").mkdir()
    os.symlink(other, tmp_path / "root" / "tensorboard")
    served = served_files(tmp_path / "root" / "tensorboard", tmp_path / "root")
    assert served.files == {} and "leads out of" in served.refused["."]


def test_sync_keeps_exactly_a_link_to_each_served_file(tmp_path: Path) -> None:
    logdir = events_tree(tmp_path / "root", ["a/s1", "b/s1"])
    farm = tmp_path / "farm"
    farm.mkdir()
    sync(farm, served_files(logdir, tmp_path / "root"))
    assert os.readlink(farm / "a" / "s1" / EVENTS) == str((logdir / "a" / "s1" / EVENTS).resolve())

    shutil.rmtree(logdir / "a")
    (farm / "planted").write_text("x")
    sync(farm, served_files(logdir, tmp_path / "root"))

    left = sorted(str(p.relative_to(farm)) for p in farm.rglob("*") if p.is_symlink() or p.is_file())
    assert left == [f"b/s1/{EVENTS}"]
    sync(farm, Served())
    assert not [p for p in farm.rglob("*") if p.is_symlink() or p.is_file()]


# --------------------------------------------------------------------------- the port and the answer


class Impostor(BaseHTTPRequestHandler):
    """Another server on the port: answers every request 200, as another TensorBoard would."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = json.dumps({"data_location": "/somewhere/else"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def impostor() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), Impostor)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_a_port_something_listens_on_is_in_use(impostor: int) -> None:
    assert port_in_use(impostor)


def test_another_server_answering_is_not_our_tensorboard(impostor: int, tmp_path: Path) -> None:
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        why = wait_until_serving(f"http://127.0.0.1:{impostor}/", alive, tmp_path, timeout_s=1.5)
    finally:
        alive.kill()
        alive.wait()
    assert why is not None and "something else answers" in why
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert "TensorBoard ended" in (wait_until_serving(f"http://127.0.0.1:{impostor}/", ended, tmp_path) or "")


@pytest.mark.integration
def test_a_second_board_on_a_busy_port_exits_non_zero_without_an_address(impostor: int, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="TensorBoard is not installed: pip install '.[board]' (make setup does)")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "board", "--capture-dir", str(tmp_path), "--port", str(impostor)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "TensorBoard on" not in done.stdout and "Ctrl-C" not in done.stdout
    assert f"port {impostor} on 127.0.0.1 is in use" in " ".join(done.stderr.split())


# --------------------------------------------------------------------------- served by a real TensorBoard


def runs_served(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=5) as answer:
        runs: list[str] = json.loads(answer.read())
        return runs


def wait_for(what: str, check, timeout_s: float) -> None:
    deadline = time.monotonic() + scaled(timeout_s)
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.integration
def test_the_board_serves_the_root_s_runs_and_never_a_link_out_of_it(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="TensorBoard is not installed: pip install '.[board]' (make setup does)")
    from harness.board.replay import rebuild

    root, other = tmp_path / "root", tmp_path / "other"
    shutil.copytree(LAB, root)
    shutil.copytree(LAB, other)
    rebuild(root)
    rebuild(other)
    shutil.rmtree(root / "tensorboard" / "plain-48")  # so that the other root's plain-48 could only come by the link
    os.symlink(other / "tensorboard" / "plain-48", root / "tensorboard" / "evil")
    port = a_free_port()
    board = subprocess.Popen(
        [sys.executable, "-m", "harness", "board", "--capture-dir", str(root), "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert board.stdout is not None and board.stderr is not None
        line = board.stdout.readline()
        assert line.startswith(f"TensorBoard on http://127.0.0.1:{port}/"), line
        wait_for("the root's runs", lambda: "plain/s1" in runs_served(port), 60)
        os.symlink(other / "tensorboard" / "plain-48", root / "tensorboard" / "late")  # made while it serves
        shutil.copytree(other / "tensorboard" / "plain", root / "tensorboard" / "newrun")  # a run that starts now
        wait_for("the run that started later", lambda: "newrun/s1" in runs_served(port), 60)
        time.sleep(scaled(5))  # two more reloads: time enough for a link to be followed, were it served

        served = runs_served(port)
        assert not [run for run in served if run.startswith(("evil", "late", "plain-48"))], served
    finally:
        board.terminate()
        _, err = board.communicate(timeout=30)
    said = " ".join(err.split())
    assert f"{root / 'tensorboard' / 'evil'} is a link (to {other / 'tensorboard' / 'plain-48'}): not served" in said
    assert f"{root / 'tensorboard' / 'late'} is a link" in said


def a_free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
