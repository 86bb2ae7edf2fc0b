"""`harness board`: TensorBoard on the capture root's event files, on localhost; and the summary's images."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from typing_extensions import Annotated

from harness.cli.app import CaptureDirOrSim, SimCapturesOption, capture_root, command, note, stdout, warn

if TYPE_CHECKING:
    from harness.summary.document import SummaryDocument


@command("board")
def board_command(
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
    port: Annotated[
        Optional[int],
        typer.Option("--port", min=1, max=65535, help="Port on 127.0.0.1 [default: 6006, or the next free one]."),
    ] = None,
) -> None:
    """Start TensorBoard on the runs' event files (<capture dir>/tensorboard) on localhost and print its address.

    Every run writes its events there as it runs (docs/tensorboard.md); `harness export --format tensorboard`
    rebuilds them from the captures. Only what the capture root holds is served: a link under tensorboard/ is
    refused, with a warning. A --port something else holds is an error. TensorBoard is an optional extra:
    pip install '.[board]'. Ctrl-C stops it.
    """
    import signal
    import tempfile

    from harness.board.logdir import served_files
    from harness.board.names import TENSORBOARD_DIR_NAME
    from harness.board.server import LOCALHOST, free_port, port_in_use, tensorboard_missing
    from harness.errors import HarnessError

    missing = tensorboard_missing()
    if missing is not None:
        raise HarnessError(missing)
    root = capture_root(capture_dir, sim)
    logdir = root / TENSORBOARD_DIR_NAME
    served = served_files(logdir, root)
    if "." in served.refused:
        raise HarnessError(served.refused["."])
    for why in served.refused.values():
        warn(why)
    if not served.files:
        note(
            f"no events under {logdir} yet: runs write them as they run, and `harness export --format tensorboard"
            f"{' --sim' if sim else ''}` rebuilds them from the captures; TensorBoard shows them as they come"
        )
    if port is not None and port_in_use(port, LOCALHOST):
        raise HarnessError(
            f"port {port} on {LOCALHOST} is in use (something else listens there, perhaps another board): choose "
            "another --port, or leave it out for a free one"
        )
    chosen = port if port is not None else free_port(LOCALHOST)
    signal.signal(signal.SIGTERM, _stop)  # SIGTERM stops TensorBoard too, as Ctrl-C does
    with tempfile.TemporaryDirectory(prefix="harness-board-") as farm:
        _serve(root, logdir, Path(farm), served, chosen)
    return None


BOARD_REFRESH_S = 2.0  # how often the board's links follow the event files (TensorBoard reloads as often)


def _serve(root: Path, logdir: Path, farm: Path, served: Any, port: int) -> None:
    """TensorBoard on `farm`, kept in step with `logdir`, until Ctrl-C; an error line if it fails or stops."""
    import tempfile
    import time

    from harness.board.logdir import served_files, sync
    from harness.board.server import LOCALHOST, start_tensorboard, wait_until_serving
    from harness.errors import HarnessError

    url = f"http://{LOCALHOST}:{port}/"
    refused = set(served.refused)
    sync(farm, served)
    with tempfile.TemporaryFile() as log:
        process = start_tensorboard(farm, port, log)
        try:
            why = wait_until_serving(url, process, farm)
            if why is not None:
                raise HarnessError(f"TensorBoard did not start on {url}: {_last_line(log) or why}")
            console = stdout()
            console.print(f"TensorBoard on {url} (runs of {logdir}); Ctrl-C stops it")
            console.file.flush()
            while process.poll() is None:
                time.sleep(BOARD_REFRESH_S)
                served = served_files(logdir, root)
                for path, why in served.refused.items():
                    if path not in refused:
                        refused.add(path)
                        warn(why)
                sync(farm, served)
            raise HarnessError(
                f"TensorBoard stopped (exit code {process.returncode}): {_last_line(log) or 'no reason given'}"
            )
        except KeyboardInterrupt:
            pass
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except Exception:
                    process.kill()


def _last_line(log: Any) -> str:
    """The last line TensorBoard wrote to its log."""
    log.seek(0)
    said = log.read().decode("utf-8", "replace").strip().splitlines()
    return said[-1] if said else ""


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def summary_images(capture_dir: Path, document: "SummaryDocument", *, changed: bool) -> None:
    """The summary's figures as TensorBoard images (a warning if they cannot be written)."""
    from harness.board.images import refresh_summary_images

    for message in refresh_summary_images(capture_dir, document, changed=changed):
        warn(message)


def export_tensorboard(capture_dir: Path, hint: str) -> Any:
    """`harness export --format tensorboard`: every run's events rebuilt from its capture, and the summary's images."""
    from harness.board.eventfile import missing_writer
    from harness.board.names import TENSORBOARD_DIR_NAME
    from harness.board.replay import rebuild
    from harness.capture.files import describe_os_error
    from harness.errors import ExitCode, HarnessError
    from harness.summary.publish import no_runs_message

    why = missing_writer()
    if why is not None:
        raise HarnessError(why)
    if not Path(capture_dir).is_dir():
        raise HarnessError(f"no capture directory {capture_dir}{hint}", ExitCode.NOT_FOUND)
    try:
        rebuilt = rebuild(capture_dir)
    except OSError as err:
        raise HarnessError(describe_os_error(err, f"{capture_dir / TENSORBOARD_DIR_NAME}")) from None
    if not rebuilt.runs:
        raise HarnessError(
            "nothing to export: " + no_runs_message(f"under {capture_dir}", (), hint), ExitCode.NOT_FOUND
        )
    for message in rebuilt.notes:
        warn(message)
    for run, text in rebuilt.skipped_values.items():
        warn(f"{run}: {text}")
    images = _rebuild_images(capture_dir)
    console = stdout()
    console.print(
        f"wrote {capture_dir / TENSORBOARD_DIR_NAME} ({rebuilt.records} records of {len(rebuilt.runs)} runs"
        + (f", {images} summary figures" if images else "")
        + ")"
    )
    return None


def _rebuild_images(capture_dir: Path) -> int:
    """The summary's figures of the captures as they are now (0 when there is nothing to draw)."""
    from harness.board.images import write_summary_images
    from harness.capture.files import describe_os_error
    from harness.summary.publish import summarize_captures_in

    summary = summarize_captures_in(capture_dir)
    for message in summary.warnings:
        warn(message)
    if not summary.document.comparisons:
        return 0
    try:
        return write_summary_images(capture_dir, summary.document)
    except OSError as err:
        warn(f"tensorboard: {describe_os_error(err, 'the summary images')}")
        return 0
