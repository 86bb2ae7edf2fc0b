"""The step merger: metric lines in, one record per training step (and per evaluation) out.

`LogParser` reads the lines and hands each metric line to `StepMerger.metric`. Merging, per rollout id N:

- every `perf N`, `rollout N` and `multi_turn N` line merges its keys into
  step N; a key already present keeps its first value (a different value is
  a problem, an identical one is not);
- a `perf N` line with `perf/rollout_time` or `rollout/...` keys is the
  rollout side: its Docker time is `t_rollout_end`;
- a `perf N` line with `perf/step_time`, `perf/train_time` or the older
  `perf/total_train_time` is the train side: its Docker time is `t_step_end`,
  and step N is complete and emitted right then;
- `step M` (and `critic-step M`) lines wait until the next train-side `perf`
  line and belong to its step. Megatron prints each step line twice: a
  repeat of M with the same payload is dropped; a repeat with other values
  adds its new keys (conflicts are problems);
- `eval N` lines make evaluation records, apart from the training steps,
  and so does `eval N skipped: REASON` (the record's `skipped`);
- a line for a step that has already been emitted is a problem, not a change.

`finish()` emits the steps still open, marked incomplete. Step lines still
waiting then go to the step of the last `rollout N` line if it is open, else
to the highest open step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TypeGuard

from harness.mileslog.derive import derive_step_values
from harness.mileslog.keys import ends_step, is_rollout_side
from harness.mileslog.lines import MetricLine
from harness.mileslog.pyrepr import PyDict, PyValue
from harness.mileslog.records import EvalRecord, Metrics, Problem, StepRecord
from harness.times import format_time_us


@dataclass
class _SubStep:
    """One optimizer step (`step M`) or critic step, waiting for its rollout."""

    number: int
    payload: Metrics
    line: int
    pending: bool = True


@dataclass
class _OpenStep:
    step: int
    metrics: Metrics = field(default_factory=dict)
    key_lines: dict[str, int] = field(default_factory=dict)
    t_rollout_end: str | None = None
    saw_rollout_side: bool = False
    t_step_end: str | None = None
    train_steps: list[_SubStep] = field(default_factory=list)
    critic_steps: list[_SubStep] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)


class StepMerger:
    """The open steps, the finished records and every problem found (one about an open step listed on it too)."""

    def __init__(self) -> None:
        self._open: dict[int, _OpenStep] = {}
        self._done: set[int] = set()
        self.records: list[StepRecord] = []
        self._pending: dict[str, list[_SubStep]] = {"step": [], "critic-step": []}
        self._seen: dict[str, dict[int, _SubStep]] = {"step": {}, "critic-step": {}}
        self._last_rollout_id: int | None = None
        self.evals: dict[int, EvalRecord] = {}
        self.problems: list[Problem] = []

    def finish(self) -> list[StepRecord]:
        """The steps still open, marked incomplete, in step order (the step lines still waiting attached first)."""
        leftovers = self._pending["step"] + self._pending["critic-step"]
        if leftovers:
            target = self._last_rollout_id if self._last_rollout_id in self._open else max(self._open, default=None)
            if target is None:
                for sub in leftovers:
                    self.problem(sub.line, f"step line {sub.number}: no training step to attach it to")
            else:
                self._attach_pending(self._open[target])
        out = [self._emit(self._open[n], complete=False) for n in sorted(self._open)]
        self._open.clear()
        return out

    def metric(self, line: MetricLine, stamp_ns: int | None, n: int, out: list[StepRecord]) -> None:
        kind, ident = line.kind, line.id
        step_kind = kind in ("perf", "rollout", "multi_turn")
        if line.payload is None:
            reason = f"{kind} {ident}: {line.error}"
            if step_kind:
                if ident not in self._done:
                    self._open_step(ident).lines.append(n)
                self.problem(n, reason, ident)
            else:
                self.problem(n, reason)
            return
        if line.trailing:
            if step_kind and ident not in self._done:
                self._open_step(ident)  # so that the problem is listed on the step too
            self.problem(
                n,
                f"{kind} {ident}: text after the payload ignored: {line.trailing[:80]!r}",
                ident if step_kind else None,
            )
        payload = line.payload
        stamp = None if stamp_ns is None else format_time_us(stamp_ns // 1000)
        if kind == "step" or kind == "critic-step":
            self._sub_step(kind, ident, payload, n)
        elif kind == "eval":
            self._eval(ident, payload, stamp, n)
        else:
            self._merge(kind, ident, payload, stamp, n, out)

    def _open_step(self, ident: int) -> _OpenStep:
        step = self._open.get(ident)
        if step is None:
            step = self._open[ident] = _OpenStep(ident)
        return step

    def _merge(self, kind: str, ident: int, payload: PyDict, stamp: str | None, n: int, out: list[StepRecord]) -> None:
        label = f"{kind} {ident}"
        if ident in self._done:
            self.problem(n, f"{label} came after step {ident} was complete: ignored", ident)
            return
        step = self._open_step(ident)
        step.lines.append(n)
        if kind == "rollout":
            self._last_rollout_id = ident
        self._merge_keys(step.metrics, payload, label, n, ident, step.key_lines, step.problems)
        if kind != "perf":
            return
        if not step.saw_rollout_side and is_rollout_side(payload):
            step.saw_rollout_side = True
            step.t_rollout_end = stamp
        if ends_step(payload):
            step.t_step_end = stamp
            self._attach_pending(step)
            del self._open[ident]
            self._done.add(ident)
            out.append(self._emit(step, complete=True))

    def _sub_step(self, kind: str, number: int, payload: PyDict, n: int) -> None:
        seen = self._seen[kind]
        previous = seen.get(number)
        if previous is None:
            sub = seen[number] = _SubStep(number, _string_keys(payload), n)
            self._pending[kind].append(sub)
            return
        if _same_payload(previous.payload, payload):
            return  # Megatron's second print of the same step line
        if previous.pending:
            self._merge_keys(previous.payload, payload, f"{kind} {number}", n, None, None, None)
        else:
            self.problem(n, f"{kind} {number}: a different line after its training step was complete: ignored")

    def _attach_pending(self, step: _OpenStep) -> None:
        for kind, target in (("step", step.train_steps), ("critic-step", step.critic_steps)):
            pending = self._pending[kind]
            for sub in pending:
                sub.pending = False
                step.lines.append(sub.line)
            target.extend(pending)
            self._pending[kind] = []

    def _eval(self, ident: int, payload: PyDict, stamp: str | None, n: int) -> None:
        record = self.evals.get(ident)
        if record is None:
            self.evals[ident] = EvalRecord(ident, stamp, _string_keys(payload), [n])
            return
        record.lines.append(n)
        self._merge_keys(record.metrics, payload, f"eval {ident}", n, None, None, None)

    def eval_skipped(self, ident: int, reason: str, stamp_ns: int | None, n: int) -> None:
        record = self.evals.get(ident)
        if record is None:
            stamp = None if stamp_ns is None else format_time_us(stamp_ns // 1000)
            record = self.evals[ident] = EvalRecord(ident, stamp, {}, [])
        record.lines.append(n)
        record.skipped = reason

    def _emit(self, step: _OpenStep, complete: bool) -> StepRecord:
        metrics = step.metrics
        for subs in (step.train_steps, step.critic_steps):
            if subs:
                last = subs[-1]
                self._merge_keys(
                    metrics,
                    last.payload,
                    f"step line {last.number}",
                    last.line,
                    step.step,
                    step.key_lines,
                    step.problems,
                )
        record = StepRecord(
            step=step.step,
            complete=complete,
            t_rollout_end=step.t_rollout_end,
            t_step_end=step.t_step_end if complete else None,
            metrics=metrics,
            derived=derive_step_values(metrics),
            train_steps=[sub.payload for sub in step.train_steps],
            critic_steps=[sub.payload for sub in step.critic_steps],
            problems=step.problems,
            lines=sorted(step.lines),
        )
        self.records.append(record)
        return record

    def _merge_keys(
        self,
        into: Metrics,
        payload: PyDict | Metrics,
        label: str,
        n: int,
        ident: int | None,
        key_lines: dict[str, int] | None,
        problems: list[Problem] | None,
    ) -> None:
        if into.keys().isdisjoint(payload) and _all_str(payload):  # every key new: nothing to compare
            into.update(payload)
            if key_lines is not None:
                key_lines.update(dict.fromkeys(payload, n))
            return
        for key, value in payload.items():
            if not isinstance(key, str):
                key = repr(key)
            if key not in into:
                into[key] = value
                if key_lines is not None:
                    key_lines[key] = n
            elif not _same(into[key], value):
                where = f" on line {key_lines[key]}" if key_lines and key in key_lines else ""
                self.problem(
                    n,
                    f"{label}: {key} = {_short(value)} differs from {_short(into[key])} read{where}; kept the first",
                    ident,
                    problems,
                )

    def problem(self, n: int, reason: str, step: int | None = None, into: list[Problem] | None = None) -> None:
        """Record a problem; one about an open step is also listed on that step."""
        problem: Problem = {"line": n, "reason": reason}
        if step is not None:
            problem["step"] = step
            if into is None and step in self._open:
                into = self._open[step].problems
        if into is not None:
            into.append(problem)
        self.problems.append(problem)


def _short(value: PyValue, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _all_str(payload: PyDict | Metrics) -> TypeGuard[Metrics]:
    """True when every key is a str (checked in C: the per-key loops are the parser's hot spots)."""
    return set(map(type, payload)) <= _STR_ONLY


_STR_ONLY = {str}


def _string_keys(payload: PyDict | Metrics) -> Metrics:
    if _all_str(payload):
        return dict(payload)
    return {key if isinstance(key, str) else repr(key): value for key, value in payload.items()}


def _same(a: PyValue, b: PyValue) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - a comparison that cannot be made is a difference
        return False


def _same_payload(a: Metrics, b: PyDict) -> bool:
    other = _string_keys(b)
    if a.keys() != other.keys():
        return False
    # Equal values of the same types: one C-level comparison (Megatron prints every step line twice).
    if a == other and list(map(type, a.values())) == list(map(type, map(other.__getitem__, a))):
        return True
    return all(_same(a[key], other[key]) for key in a)
