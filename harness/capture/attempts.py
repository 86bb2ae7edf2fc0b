"""Every start of a run is an attempt with its own directory; the run's capture is the current one.

    <root>/<run>                      the run's capture, as the contract has it: a link to the current attempt
    <root>/.attempts/<run>/<n>/       attempt n's files (manifest.json, status.json, container.log, ...)
    <root>/.attempts/<run>/current.jsonl   each change of the current attempt: which, when, by what, and why

The current attempt is the newest that succeeded, or the newest when none
has: a new attempt becomes current when it starts only if no succeeded one
is current, and when it succeeds. `harness restore` makes any attempt
current, and says who chose it. Nothing here deletes anything.

A capture root written before attempts existed holds the run's files in
`<root>/<run>/` itself: it is read as it is (one attempt, number 0, the
current one), and moved in place into `.attempts/<run>/1` when the run is
started again. Everything that reads a run through `<root>/<run>` (status,
the summary, the report) reads the current attempt without knowing of the
others. Changing which attempt is current swaps the link atomically
(a new link renamed over the old), under the run's capture lock.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from harness.capture.files import append_jsonl, fsync_dir
from harness.capture.reader import ATTEMPTS_DIR, STATUS_NAME, StatusRead, is_run_name, read_status
from harness.capture.records import RunState
from harness.errors import ExitCode, HarnessError
from harness.fs.paths import outside_root
from harness.times import now_rfc3339

CHOICES_NAME = "current.jsonl"
LEGACY = 0  # the number of a run's capture written before attempts: its own directory, current
_NUMBER = re.compile(r"[1-9][0-9]{0,8}")


def all_attempts(root: Path) -> list[Attempt]:
    """Every attempt of every run under a capture root (legacy captures as attempt 0), by run then number."""
    root = Path(root)
    names: set[str] = set()
    for parent in (root, root / ATTEMPTS_DIR):
        try:
            names.update(entry.name for entry in os.scandir(parent) if is_run_name(entry.name))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return [attempt for name in sorted(names) for attempt in RunAttempts(root / name).all()]


@dataclass(frozen=True)
class Attempt:
    """One start of a run: its number and its directory."""

    run: str
    number: int
    directory: Path

    @property
    def legacy(self) -> bool:
        """A capture from before attempts: the run's own directory."""
        return self.number == LEGACY

    def status_read(self) -> StatusRead:
        """Its status as found (typed, broken with the reason, or absent); never raises."""
        return read_status(self.directory)


class RunAttempts:
    """One run's attempts under a capture root: which there are, which is current, a new one, a new current."""

    def __init__(self, run_path: Path) -> None:
        self.run_path = Path(run_path)
        self.run = self.run_path.name
        self.root = self.run_path.parent
        self.directory = self.root / ATTEMPTS_DIR / self.run
        self.choices_path = self.directory / CHOICES_NAME

    # --- reading --------------------------------------------------------------------------------

    def all(self) -> list[Attempt]:
        """Every attempt, oldest first (a legacy capture alone, as attempt 0)."""
        attempts = [Attempt(self.run, number, self.directory / str(number)) for number in self._numbers()]
        if not attempts and self._legacy_directory():
            attempts.append(Attempt(self.run, LEGACY, self.run_path))
        return attempts

    def _numbers(self) -> list[int]:
        try:
            names = [entry.name for entry in os.scandir(self.directory) if entry.is_dir(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(int(name) for name in names if _NUMBER.fullmatch(name))

    def _legacy_directory(self) -> bool:
        """The run's own directory holds a capture from before attempts."""
        return (
            not self.run_path.is_symlink() and self.run_path.is_dir() and os.path.lexists(self.run_path / STATUS_NAME)
        )

    def current(self) -> Optional[Attempt]:
        """The attempt `<root>/<run>` shows, None when there is none (or the link points at no attempt)."""
        if self._legacy_directory():
            return Attempt(self.run, LEGACY, self.run_path)
        try:
            target = os.readlink(self.run_path)
        except OSError:
            return None
        parts = Path(target).parts
        if len(parts) == 3 and parts[:2] == (ATTEMPTS_DIR, self.run) and _NUMBER.fullmatch(parts[2]):
            attempt = Attempt(self.run, int(parts[2]), self.directory / parts[2])
            return attempt if attempt.directory.is_dir() else None
        return None

    def newer_than_current(self) -> list[Attempt]:
        """The attempts started after the current one (those that did not become current), oldest first."""
        current = self.current()
        floor = current.number if current is not None else -1
        return [attempt for attempt in self.all() if attempt.number > floor]

    def find(self, number: int) -> Attempt:
        """Attempt `number`, or one line naming the attempts there are."""
        for attempt in self.all():
            if attempt.number == number:
                return attempt
        known = ", ".join(str(attempt.number) for attempt in self.all()) or "none"
        raise HarnessError(f"run {self.run} has no attempt {number} (attempts: {known})", ExitCode.NOT_FOUND)

    # --- acting (under the run's capture lock) ---------------------------------------------------

    def next_number(self) -> int:
        """The number `new` will give (under the run's lock, so nothing else takes it meanwhile)."""
        numbers = self._numbers()
        if numbers:
            return numbers[-1] + 1
        return 2 if self._legacy_directory() else 1  # a legacy capture becomes attempt 1 first

    def new(self) -> Attempt:
        """Make the next attempt's directory (a legacy capture is first moved in place to attempt 1)."""
        self.refuse_leaving_root()
        self._migrate()
        number = self.next_number()
        directory = self.directory / str(number)
        directory.mkdir(parents=True)
        fsync_dir(self.directory)
        return Attempt(self.run, number, directory)

    def refuse_leaving_root(self) -> None:
        """A one-line HarnessError when this run's capture would be written anywhere but inside the capture root:
        `<root>/<run>` a link to anything but one of its attempts, or `.attempts` leading out of the root."""
        if self.run_path.is_symlink():
            target = os.readlink(self.run_path)
            parts = Path(target).parts
            if len(parts) != 3 or parts[:2] != (ATTEMPTS_DIR, self.run) or not _NUMBER.fullmatch(parts[2]):
                raise HarnessError(
                    f"{self.run_path} is a link to {target}, not to one of its attempts ({ATTEMPTS_DIR}/{self.run}/N); "
                    f"the harness writes a capture only inside {self.root}: move the link aside"
                )
        elif os.path.lexists(self.run_path) and not self.run_path.is_dir():
            raise HarnessError(f"{self.run_path} is not a directory, so not a run's capture: move it aside")
        why = outside_root(self.root, self.directory)
        if why is not None:
            raise HarnessError(f"{self.directory}: {why}; the capture of {self.run} would be written there")

    def _migrate(self) -> None:
        """A capture from before attempts becomes attempt 1, and current: nothing is lost or rewritten."""
        if self.run_path.is_symlink() or not self.run_path.is_dir():
            return
        if not self._legacy_directory():
            if any(self.run_path.iterdir()):
                raise HarnessError(
                    f"{self.run_path} is a directory without status.json, so not a capture; move it aside"
                )
            self.run_path.rmdir()  # an empty directory holds no capture (a start that made nothing)
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._numbers():
            raise HarnessError(
                f"{self.run_path} is a directory, and {self.directory} holds attempts too; move one of them aside"
            )
        first = self.directory / "1"
        self.run_path.rename(first)
        self.make_current(Attempt(self.run, 1, first), by="harness", why="the capture from before attempts")

    def make_current(self, attempt: Attempt, *, by: str, why: str) -> None:
        """Point `<root>/<run>` at `attempt` (atomically) and record the choice in current.jsonl."""
        if attempt.legacy:
            return  # it already is: a legacy capture is the run's own directory
        if self._legacy_directory():
            raise HarnessError(f"{self.run_path} is a capture from before attempts; start the run once to move it")
        if os.path.lexists(self.run_path) and not self.run_path.is_symlink():
            raise HarnessError(f"{self.run_path} is not a link to an attempt, so not replaced: move it aside")
        target = Path(ATTEMPTS_DIR) / self.run / str(attempt.number)
        temporary = self.root / f".{self.run}.current-{os.getpid()}"
        if os.path.lexists(temporary):
            os.unlink(temporary)
        os.symlink(target, temporary)
        os.replace(temporary, self.run_path)
        fsync_dir(self.root)
        append_jsonl(
            self.choices_path, {"attempt": attempt.number, "at": now_rfc3339(), "by": by, "why": why}, root=self.root
        )

    def started(self, attempt: Attempt) -> None:
        """A new attempt shows as the run's capture from its start, unless an attempt that succeeded is current:
        that one stays current until this one has succeeded too."""
        current = self.current()
        if current is not None and current.number != attempt.number:
            found = current.status_read().status
            if found is not None and found.state == RunState.SUCCEEDED:
                return
        self.make_current(attempt, by="harness run", why="no attempt of the run had succeeded")

    def succeeded(self, attempt: Attempt) -> None:
        """An attempt that succeeded becomes the run's capture."""
        self.make_current(attempt, by="harness run", why="it succeeded")
