"""Notes about steps: one sentence per problem, naming the steps (and the values) it was found in."""

from __future__ import annotations

from typing import Iterable, Sequence, Union

METRICS = "metrics.jsonl"  # the file a step's note names
SHOWN_VALUES = 3  # distinct values a note names before "and N more"


def shown(value: object) -> str:
    """A value as a note shows it: repr, with a long integer or string cut to its ends and its length."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        digits = str(abs(value))
        sign = "-" if value < 0 else ""
        return f"{sign}{digits[:6]}...{digits[-4:]} ({len(digits)} digits)"
    if isinstance(value, float):
        return repr(float(value))  # a numpy float as the Python float it is
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def steps_text(steps: Sequence[int]) -> str:
    """`steps 0-3, 5, 7-11` for a list of step ids (`step 4` for one)."""
    ordered = sorted(set(steps))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    word = "step" if len(ordered) == 1 else "steps"
    return f"{word} {', '.join(parts)}"


def values_text(values: Iterable[object]) -> str:
    """The distinct values, in the order found: `-5.0`, `1e+303, 2.0 and 4 more`."""
    distinct = list(dict.fromkeys(shown(v) for v in values))
    text = ", ".join(distinct[:SHOWN_VALUES])
    return text + (f" and {len(distinct) - SHOWN_VALUES} more" if len(distinct) > SHOWN_VALUES else "")


class RunNotes(list[str]):
    """A run's notes (a list of sentences, as the JSON holds them) that counts the flags among them.

    A flag is a note about a value out of range (docs/summary.md, "Sanity
    rules"): the commands warn about runs that have any.
    """

    flags = 0

    def flag(self, note: str) -> None:
        self.append(note)
        self.flags += 1


# Where a check comes among the checks of one step: a number, or (number, key) for one check per key.
Rank = Union[int, tuple[Union[int, str], ...]]
_Order = tuple[int, int, tuple[Union[int, str], ...]]  # (phase, first position, rank)


class StepNotes:
    """Collects the steps (and values) of each problem, so each problem is one note, not one per step.

    A problem is a sentence with `{steps}` (and optionally `{values}`) in it.
    Problems are found a column at a time, but the notes come out as if the
    steps had been read one by one: by `phase`, then by the first step (in
    row order) that has the problem, then by `rank` (the order the checks of
    one step are made in).
    """

    def __init__(self) -> None:
        self._found: dict[str, tuple[_Order, list[int], list[int], list[object]]] = {}
        self._flags: set[str] = set()

    def add(
        self,
        problem: str,
        positions: Sequence[int],
        steps: Sequence[int],
        values: Sequence[object] = (),
        *,
        phase: int = 0,
        rank: Rank = 0,
        flag: bool = False,
    ) -> None:
        """The problem is in the rows at `positions` (row order), whose step ids are `steps`.

        `flag`: the problem is a value out of range (see `RunNotes`).
        """
        if not len(positions):
            return
        if flag:
            self._flags.add(problem)
        first = min(positions)
        old = self._found.get(problem)
        if old is not None:
            first = min(first, old[0][1])
        order = (phase, first, rank if isinstance(rank, tuple) else (rank,))
        found = self._found.setdefault(problem, (order, [], [], []))
        found[1].extend(positions)
        found[2].extend(steps)
        found[3].extend(values)
        if found[0] != order:
            self._found[problem] = (order, found[1], found[2], found[3])

    def discard(self, problem: str) -> None:
        self._found.pop(problem, None)

    def __contains__(self, problem: str) -> bool:
        return problem in self._found

    def emit(self, notes: RunNotes) -> None:
        for problem, (_, positions, steps, values) in sorted(self._found.items(), key=lambda item: item[1][0]):
            ordered = [value for _, value in sorted(zip(positions, values), key=lambda pair: pair[0])]
            text = problem.format(steps=steps_text(steps), values=values_text(ordered))
            notes.flag(text) if problem in self._flags else notes.append(text)


# The order of the checks within one step of the step rows (see StepNotes): phase 0 reads the rollout
# times, phase 1 the rest of the step; notes come out as if the steps were read one by one.
CHECK_FLAGGED, CHECK_ROLLOUT, CHECK_ROLLOUT_END, CHECK_NON_FINITE = 0, 1, 2, 3
CHECK_GROUPS, CHECK_DROPS, CHECK_REWARD, CHECK_STEP_TIME, CHECK_INCOMPLETE = 0, 1, 2, 3, 4


class StepsFound:
    """The problems of one run's step rows, by row position (the step ids are looked up here)."""

    def __init__(self, steps: Sequence[int]) -> None:
        self.steps = steps
        self.notes = StepNotes()

    def add(
        self,
        problem: str,
        positions: Sequence[int],
        values: Sequence[object] = (),
        *,
        phase: int = 0,
        rank: Rank = 0,
        flag: bool = False,
    ) -> None:
        self.notes.add(
            problem, positions, [self.steps[i] for i in positions], values, phase=phase, rank=rank, flag=flag
        )
