"""The summary's figures as TensorBoard images: the TensorBoard run `summary`, rewritten when a summary is.

Every figure the summary draws (harness.summary.figures: the comparisons'
figures, and the across-seed figures where the summary has them, as
`planned_figures` lists them) is drawn once more and saved as a PNG image
(TensorBoard shows PNG, not SVG) under the tag `figures/<figure's file
name>`. The run's event file is replaced whole, so TensorBoard shows the
figures of the latest summary, each at step 0.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness.board.eventfile import EventFile, missing_writer
from harness.board.names import SUMMARY_RUN, TENSORBOARD_DIR_NAME
from harness.capture.files import describe_os_error
from harness.summary.figures import planned_figures
from harness.summary.svg import use_agg

if TYPE_CHECKING:
    from harness.summary.document import SummaryDocument

IMAGE_DPI = 100


def summary_images_dir(capture_root: Path) -> Path:
    """Where the summary's images are: `<capture root>/tensorboard/summary`."""
    return Path(capture_root) / TENSORBOARD_DIR_NAME / SUMMARY_RUN


def write_summary_images(capture_root: Path, document: SummaryDocument) -> int:
    """Draw every figure of `document` as an image into the `summary` TensorBoard run; returns how many.

    OSError when the event file cannot be written.
    """
    import io

    use_agg()
    images: list[tuple[str, bytes, int, int]] = []
    for planned in planned_figures(document, Path()):  # only each figure's name is used: no SVG is written
        figure = planned.draw()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=IMAGE_DPI)
        width, height = (int(round(v)) for v in figure.get_size_inches() * IMAGE_DPI)
        images.append((f"figures/{planned.path.stem}", buffer.getvalue(), width, height))
    directory = summary_images_dir(capture_root)
    old = [path for path in directory.glob("events.out.tfevents.*")] if directory.is_dir() else []
    events = EventFile(directory, Path(capture_root))
    now = time.time()
    try:
        for tag, png, width, height in images:
            events.image(tag, png, now, width, height)
    finally:
        events.close()
    for path in old:  # the new file is whole: the old figures go
        if path != events.path:
            path.unlink(missing_ok=True)
    return len(images)


def refresh_summary_images(capture_root: Path, document: SummaryDocument, *, changed: bool) -> list[str]:
    """The images of a summary just written, drawn when its figures `changed` or none are there yet.

    Never raises for the disk or for tensorboardX missing: a warning instead (the summary is written).
    """
    if missing_writer() is not None:
        return []  # no board here: nothing to say on every summary
    if not changed and any(summary_images_dir(capture_root).glob("events.out.tfevents.*")):
        return []
    try:
        write_summary_images(capture_root, document)
    except OSError as err:
        return [f"tensorboard: {describe_os_error(err, 'the summary images')}: the summary is written without them"]
    return []
