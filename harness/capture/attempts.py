"""Every start of a run is an attempt with its own directory; the run's capture is the current one.

    <root>/<run>                      the run's capture, as the contract has it: a link to the current attempt
    <root>/.attempts/<run>/<n>/       attempt n's files (manifest.json, status.json, container.log, ...)
    <root>/.attempts/<run>/current.jsonl   each change of the current attempt: which, when, by what, and why
    <root>/.attempts/<run>/started.jsonl   each attempt made: its number and when (a number is never given twice)

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

An attempt's number is its directory's name: digits, any number of them,
no leading zero. Anything else in a run's attempts directory (`abc`, `01`,
a file, a link) is not an attempt: it is listed as foreign and left alone.
A new attempt takes the number after the largest one its directories, its
link and its records have ever used, so a number is never given to two
attempts, even when one was deleted by hand.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from harness.capture.files import append_jsonl, cut_torn_tail, fsync_dir
from harness.capture.reader import (
    ATTEMPTS_DIR,
    NAME_MAX,
    STATUS_NAME,
    StatusRead,
    attempt_number,
    is_run_name,
    read_status,
)
from harness.capture.records import RunState
from harness.errors import ExitCode, HarnessError
from harness.fs.bounded import MAX_JSON_BYTES, iter_jsonl
from harness.fs.paths import file_kind, outside_root
from harness.times import now_rfc3339

CHOICES_NAME = "current.jsonl"
STARTS_NAME = "started.jsonl"
RECORD_NAMES = (CHOICES_NAME, STARTS_NAME)  # the run's records, beside its attempts
MAX_RECORD_BYTES = MAX_JSON_BYTES  # a record holds a line per attempt: a few KiB; past this it is not a record
LEGACY = 0  # the number of a run's capture written before attempts: its own directory, current
NAMES_SHOWN = 5  # foreign names a line names before it counts the rest
RANGES_SHOWN = 8  # runs of attempt numbers a line names before it counts the rest


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


def numbers_said(numbers: Iterable[int]) -> str:
    """`1, 3-5002`: attempt numbers as runs of consecutive numbers, the first few, then how many more."""
    ordered = sorted(set(numbers))
    ranges: list[tuple[int, int]] = []
    for number in ordered:
        if ranges and number == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], number)
        else:
            ranges.append((number, number))
    # Two in a row are two numbers; three or more, a range.
    pieces = [[(low, low), (high, high)] if high == low + 1 else [(low, high)] for low, high in ranges]
    ranges = [piece for both in pieces for piece in both]
    said = [str(low) if low == high else f"{low}-{high}" for low, high in ranges[:RANGES_SHOWN]]
    rest = sum(high - low + 1 for low, high in ranges[RANGES_SHOWN:])
    return ", ".join(said) + (f" and {rest:,} more" if rest else "") if said else "none"


def _is_directory(path: Path) -> bool:
    """A directory itself, not a link to one (an attempt is never a link)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


@dataclass(frozen=True)
class Listing:
    """What a run's attempts directory holds: the attempts' numbers (sorted), the names that are not attempts, and
    why it could not be listed (None: it could, or it does not exist)."""

    numbers: list[int]
    foreign: list[str]
    problem: Optional[str] = None


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
        return self.listing().numbers

    def listing(self) -> Listing:
        """The attempts directory as it is: attempts, foreign names, or why it cannot be listed; never raises."""
        numbers: list[int] = []
        foreign: list[str] = []
        try:
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    number = attempt_number(entry.name)
                    if number is not None and entry.is_dir(follow_symlinks=False):
                        numbers.append(number)
                    elif entry.name not in RECORD_NAMES:
                        foreign.append(entry.name)
        except FileNotFoundError:
            return Listing([], [])
        except NotADirectoryError:
            return Listing([], [], f"{ATTEMPTS_DIR}/{self.run} is not a directory")
        except OSError as err:
            return Listing([], [], f"{ATTEMPTS_DIR}/{self.run} cannot be listed ({err.strerror or err})")
        return Listing(sorted(numbers), sorted(foreign))

    def foreign_line(self, listing: Optional[Listing] = None) -> Optional[str]:
        """One line on what the run's attempts directory holds that is not an attempt (None: nothing)."""
        listing = listing or self.listing()
        if listing.problem is not None:
            return f"{self.run}: {listing.problem}, so it holds no attempts: left alone"
        if not listing.foreign:
            return None
        count = len(listing.foreign)
        names = ", ".join(repr(name) for name in listing.foreign[:NAMES_SHOWN])
        more = f" and {count - NAMES_SHOWN:,} more" if count > NAMES_SHOWN else ""
        return (
            f"{self.run}: {ATTEMPTS_DIR}/{self.run} holds {count:,} foreign entr{'y' if count == 1 else 'ies'} "
            f"({names}{more}): not attempts (an attempt is a directory named by its number: 1, 2, ...); left alone"
        )

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
        number = self._linked_number(target)
        if number is None:
            return None
        attempt = Attempt(self.run, number, self.directory / str(number))
        return attempt if _is_directory(attempt.directory) else None

    def _linked_number(self, target: str) -> Optional[int]:
        """The attempt a link's target names (`.attempts/<run>/<n>`), None for any other target."""
        parts = Path(target).parts
        if len(parts) != 3 or parts[:2] != (ATTEMPTS_DIR, self.run):
            return None
        return attempt_number(parts[2])

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
        known = numbers_said(attempt.number for attempt in self.all())
        raise HarnessError(f"run {self.run} has no attempt {number} (attempts: {known})", ExitCode.NOT_FOUND)

    # --- acting (under the run's capture lock) ---------------------------------------------------

    def used_numbers(self) -> set[int]:
        """Every attempt number this run has used: its directories, its link, and its records (an attempt deleted
        by hand is still in them)."""
        listing = self.listing()
        # A file or link named as an attempt is not one, but its name is taken all the same.
        used = {*listing.numbers, *(n for n in map(attempt_number, listing.foreign) if n is not None)}
        try:
            linked = self._linked_number(os.readlink(self.run_path))
        except OSError:
            linked = None
        if linked is not None:
            used.add(linked)
        return used | self._recorded(RECORD_NAMES)

    def recorded_current(self) -> set[int]:
        """The attempts the record (current.jsonl) says were made current at some time."""
        return self._recorded((CHOICES_NAME,))

    def _recorded(self, names: tuple[str, ...]) -> set[int]:
        numbers: set[int] = set()
        for name in names:
            for _, line in iter_jsonl(self.directory / name, [], max_bytes=MAX_RECORD_BYTES):
                number = line.get("attempt")
                if isinstance(number, int) and not isinstance(number, bool) and number > 0:
                    numbers.add(number)
        return numbers

    def next_number(self) -> int:
        """The number `new` will give: one past every number used (under the run's lock, so nothing else takes it
        meanwhile)."""
        used = self.used_numbers()
        if used:
            return max(used) + 1
        return 2 if self._legacy_directory() else 1  # a legacy capture becomes attempt 1 first

    def record_problem(self) -> Optional[str]:
        """Why the run's records (current.jsonl, started.jsonl) cannot be read and appended to (None: they can)."""
        for name in RECORD_NAMES:
            try:
                found = os.lstat(self.directory / name)
            except FileNotFoundError:
                continue
            except OSError as err:
                return f"{ATTEMPTS_DIR}/{self.run}/{name} cannot be looked at ({err.strerror or err})"
            if not stat.S_ISREG(found.st_mode):
                kind = "a symbolic link" if stat.S_ISLNK(found.st_mode) else file_kind(found.st_mode)
                return f"{ATTEMPTS_DIR}/{self.run}/{name} is not a regular file (it is {kind})"
            if found.st_size > MAX_RECORD_BYTES:
                return (
                    f"{ATTEMPTS_DIR}/{self.run}/{name} is too large ({found.st_size:,} bytes; a record of attempts is "
                    "a few KiB)"
                )
        return None

    def _refuse_broken_records(self, because: str) -> None:
        why = self.record_problem()
        if why is not None:
            raise HarnessError(
                f"run {self.run}: {why}: {because}; move it aside (`harness history {self.run}` lists the attempts)"
            )

    def new(self) -> Attempt:
        """Make the next attempt's directory (a legacy capture is first moved in place to attempt 1); its number is
        recorded before the directory is made, so it is never given again."""
        self.refuse_leaving_root()
        self._migrate()
        self._refuse_broken_records("the numbers its attempts used cannot be known")
        number = self.next_number()
        if len(str(number)) > NAME_MAX:
            raise HarnessError(
                f"run {self.run}: the next attempt would be number {str(number)[:12]}... ({len(str(number)):,} "
                f"digits), too long for a directory's name: the records in {self.directory} say so; move them aside"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        starts = self.directory / STARTS_NAME
        cut_torn_tail(starts)  # a line torn by a power loss ends where it is: the record goes on after it
        append_jsonl(starts, {"attempt": number, "at": now_rfc3339()}, root=self.root)
        directory = self.directory / str(number)
        directory.mkdir()
        fsync_dir(self.directory)
        return Attempt(self.run, number, directory)

    def refuse_leaving_root(self) -> None:
        """A one-line HarnessError when this run's capture would be written anywhere but inside the capture root:
        `<root>/<run>` a link to anything but one of its attempts, or `.attempts` leading out of the root."""
        if self.run_path.is_symlink():
            target = os.readlink(self.run_path)
            if self._linked_number(target) is None:
                raise HarnessError(
                    f"{self.run_path} is a link to {target}, not to one of its attempts ({ATTEMPTS_DIR}/{self.run}/N); "
                    f"the harness writes a capture only inside {self.root}: move the link aside"
                )
        elif os.path.lexists(self.run_path) and not self.run_path.is_dir():
            raise HarnessError(f"{self.run_path} is not a directory, so not a run's capture: move it aside")
        why = outside_root(self.root, self.directory)
        if why is not None:
            raise HarnessError(f"{self.directory}: {why}; the capture of {self.run} would be written there")
        problem = self.listing().problem
        if problem is not None:
            raise HarnessError(f"run {self.run}: {problem}, so no attempt can be made there: move it aside")

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
        # Before the link changes: a change that cannot be recorded is not made.
        self._refuse_broken_records("which attempt is current cannot be recorded")
        target = Path(ATTEMPTS_DIR) / self.run / str(attempt.number)
        temporary = self.root / f".{self.run}.current-{os.getpid()}"
        if os.path.lexists(temporary):
            os.unlink(temporary)
        os.symlink(target, temporary)
        os.replace(temporary, self.run_path)
        fsync_dir(self.root)
        cut_torn_tail(self.choices_path)  # a line torn by a power loss ends where it is: the record goes on after it
        append_jsonl(
            self.choices_path, {"attempt": attempt.number, "at": now_rfc3339(), "by": by, "why": why}, root=self.root
        )

    def started(self, attempt: Attempt, why: str = "no attempt of the run had succeeded") -> None:
        """A new attempt shows as the run's capture from its start, unless an attempt that succeeded is current:
        that one stays current until this one has succeeded too. (A resumed attempt, once its resume is verified.)"""
        current = self.current()
        if current is not None and current.number != attempt.number:
            found = current.status_read().status
            if found is not None and found.state == RunState.SUCCEEDED:
                return
        self.make_current(attempt, by="harness run", why=why)

    def succeeded(self, attempt: Attempt, *, by: str = "harness run", why: str = "it succeeded") -> bool:
        """An attempt that succeeded becomes the run's capture, unless a newer attempt that succeeded is current
        (recover may settle an older one after it): the newest that succeeded is current. Whether it became so."""
        current = self.current()
        if current is not None and current.number > attempt.number:
            found = current.status_read().status
            if found is not None and found.state == RunState.SUCCEEDED:
                return False
        self.make_current(attempt, by=by, why=why)
        return True
