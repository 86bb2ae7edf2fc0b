"""The summary reads captures through the one capture reader (harness.capture.reader).

Kept as the summary's import point; the reading itself, its rules and its
limits live in the capture package.
"""

from harness.capture.reader import SUMMARY_DIR_NAME, RunCapture, Skipped, find_runs, read_capture
from harness.capture.records import STATES
from harness.capture.records import PauseWindow as Pause
from harness.capture.records import StepRow as MetricsRow

__all__ = ["STATES", "SUMMARY_DIR_NAME", "MetricsRow", "Pause", "RunCapture", "Skipped", "find_runs", "read_capture"]
