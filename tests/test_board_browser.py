"""`harness board` starts TensorBoard on localhost, and its page shows the runs in a real browser (headless Chromium).

Marked `browser`; skipped with one reason where Chromium (Debian's `chromium`
package) or TensorBoard is absent.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.board.replay import rebuild
from support.timing import scaled

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
LAB = REPO / "tests" / "data" / "captures" / "lab"


def chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("headless Chromium is not installed: sudo apt-get install chromium (Debian's package)")


def a_free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_harness_board_serves_the_runs_to_a_browser(tmp_path: Path) -> None:
    browser = chromium()
    pytest.importorskip("tensorboard", reason="TensorBoard is not installed: pip install '.[board]' (make setup does)")
    root = tmp_path / "capture"
    shutil.copytree(LAB, root)
    rebuild(root)
    port = a_free_port()
    board = subprocess.Popen(
        [sys.executable, "-m", "harness", "board", "--capture-dir", str(root), "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert board.stdout is not None
        line = board.stdout.readline()  # the address, once TensorBoard answers
        assert line.startswith(f"TensorBoard on http://127.0.0.1:{port}/"), (
            line,
            board.stderr.read() if board.poll() else "",
        )
        page = ""
        deadline = time.monotonic() + scaled(90)
        while time.monotonic() < deadline:
            shown = subprocess.run(
                [
                    browser,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    f"--user-data-dir={tmp_path / 'chromium'}",
                    "--virtual-time-budget=20000",
                    "--dump-dom",
                    f"http://127.0.0.1:{port}/#timeseries",
                ],
                capture_output=True,
                text=True,
                timeout=scaled(120),
            )
            page = shown.stdout
            if "plain-48/s2" in page:
                break
            time.sleep(1)
        for run in ("plain/s1", "plain-48/s1", "plain-48/s2", "e2b-dapo-filter/s1", "e6a-base/s1"):
            assert run in page, f"{run} not in the page ({len(page)} characters)"
    finally:
        board.terminate()
        try:
            board.wait(scaled(20))
        except subprocess.TimeoutExpired:
            board.kill()
            board.wait()
    assert board.returncode is not None
