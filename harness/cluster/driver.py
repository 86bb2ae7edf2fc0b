"""A sweep over a Ray cluster, on the driver: check every node, decide each run under its capture's lock, submit,
and write each run's capture from the events its node streams back.

Every run is one task asking for one GPU (and the experiment's
`cluster.resources`), submitted at once in the sweep's order: Ray places at
most one run per GPU and queues the rest. A thread per run applies its
stream to the capture with `EventSink`, the same writes a local run makes;
the driver holds each capture's lock from the decision to the last write,
and records itself as the run's harness, so `status`, `stop`, `summary` and
`recover` read the capture as they read a local one.

A node lost mid-run (its raylet died, the host went away) ends only its run:
`interrupted`, with a reason naming the node, and its capture marked
incomplete (the host may still hold the trainer and the rest of its log:
`harness recover --ray` stops it and saves them once the host is back).
The other runs go on; `--retry` reruns the lost one.
"""

from __future__ import annotations

import os
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from harness.board.session import board_session
from harness.capture import Capture, CaptureLock, RunState, RunStatus, describe_os_error, this_host, utc_now
from harness.capture.attempts import Attempt, RunAttempts
from harness.capture.writer import EventSink, Forward
from harness.checkpoints.lineage import RESUME_NAME
from harness.cluster.connect import Node, NodeFacts, alive_nodes, nodes_for, run_request, shown_address
from harness.cluster.node import SweepControl, check_task
from harness.cluster.rootcheck import root_tokens
from harness.cluster.runtask import run_task
from harness.errors import ExitCode, HarnessError
from harness.mileslog import keys
from harness.run.context import RunContext, StopControl
from harness.run.decide import Decision
from harness.run.execute import LABEL_ATTEMPT, stop_request_reason  # `harness stop`'s reason
from harness.run.lifecycle import checkpoint_start, decide_on_capture, resume_busy
from harness.run.plan import Planned

WATCH_S = 0.2
CHECK_TIMEOUT_S = 120


@dataclass
class RayRun:
    """One run of the sweep, as the driver follows it."""

    plan: Planned
    decision: Decision
    status: Optional[RunStatus] = None  # as found before the run; then as written by the stream
    node: Optional[NodeFacts] = None
    error: Optional[str] = None  # why the node could not run it (said in one line)
    error_code: int = int(ExitCode.RUN_FAILED)
    lock_refusal: Optional[HarnessError] = None  # its capture's lock was not had (busy, or Ctrl-C while waiting)
    lost: bool = False  # its node (or its Ray worker) was lost mid-run
    cancelled: bool = False  # never placed: the sweep stopped first
    lines: int = 0  # log lines written to the driver's capture
    generator: Any = None
    lock: Optional[CaptureLock] = None
    sink: Optional[EventSink] = None
    write_error: Optional[str] = None
    stop_forwarded: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def run(self) -> str:
        return self.plan.spec.run

    attempt: Optional[Attempt] = None  # made on the driver with the run's first write
    attempt_number: Optional[int] = None  # its number, known when the run is submitted
    board: Optional[ExitStack] = None  # the run's board on the driver (TensorBoard events, W&B), while it is written
    board_put: Optional[Forward] = None

    @property
    def capture(self) -> Capture:
        """The attempt's capture once it is made; before, the run's (its current attempt)."""
        if self.attempt is not None:
            return Capture(self.attempt.directory, self.run)
        return Capture(Path(self.plan.spec.capture_dir))

    @property
    def state(self) -> str:
        """The run's state for the exit code and the table: its status, or `not run`."""
        if self.decision.action == "run" and (
            self.cancelled or self.status is None or self.status.state == RunState.RUNNING and self.error
        ):
            return "not run"
        return str(self.status.state) if self.status is not None else "not run"


def check_nodes(ray: Any, plans: Sequence[Planned], nodes: Sequence[Node], address: str) -> None:
    """Before anything starts: a task on every node that could take the runs checks its engine (the image is there,
    the mounts, the GPU runtime, the checkpoint root); a refusal is one line naming the node and what it lacks."""
    specs = {}
    for plan in plans:  # one check per distinct image or command, resource request and checkpoint root
        request = run_request(plan.experiment.cluster)
        root = plan.spec.checkpoint.root if plan.spec.checkpoint is not None else None
        specs.setdefault(
            (plan.spec.engine, plan.spec.image, plan.spec.command, tuple(sorted(request.items())), root),
            (plan, request),
        )
    with root_tokens([plan.spec for plan, _ in specs.values()]) as tokens:
        _check_each_node(ray, specs, nodes, address, tokens)


def _check_each_node(
    ray: Any,
    specs: dict[Any, tuple[Planned, dict[str, float]]],
    nodes: Sequence[Node],
    address: str,
    tokens: dict[str, str],
) -> None:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    pending = []
    for plan, request in specs.values():
        able = nodes_for(list(nodes), request)
        if not able:
            offered = "; ".join(f"{node.facts.hostname}: {_resources(node.resources)}" for node in nodes) or "none"
            raise HarnessError(
                f"run {plan.spec.run} not started: no node of the Ray cluster at {address} offers "
                f"{_resources(request)} (nodes: {offered})",
                ExitCode.ENGINE_UNAVAILABLE,
            )
        task = ray.remote(check_task)
        for node in able:
            strategy = NodeAffinitySchedulingStrategy(node.facts.node_id, soft=False)
            token = tokens.get(plan.spec.checkpoint.root) if plan.spec.checkpoint is not None else None
            options = task.options(num_cpus=0, scheduling_strategy=strategy, max_retries=0)
            pending.append((node, plan, options.remote(plan.spec, token)))
    refusals, copies = [], False
    for node, _plan, ref in pending:
        try:
            _, problems, unseen = ray.get(ref, timeout=CHECK_TIMEOUT_S)
        except Exception as err:  # the node died or hangs: it cannot be trusted with a run either
            problems, unseen = [f"its check did not answer ({type(err).__name__})"], []
        copies = copies or bool(problems)
        refusals += [f"node {node.facts.name}: {problem}" for problem in (*problems, *unseen)]
    if refusals:
        # The image and the command are each host's own copy; the checkpoint root is one, shared (its line says so)
        hint = " (each host needs its own copy: README, Several GPU hosts)" if copies else ""
        raise HarnessError("not started: " + "; ".join(dict.fromkeys(refusals)) + hint, ExitCode.ENGINE_UNAVAILABLE)


def _resources(resources: Any) -> str:
    return (
        ", ".join(
            f"{name} {amount:g}"
            for name, amount in sorted(resources.items())
            if not name.startswith("node:") and name not in ("memory", "object_store_memory")
        )
        or "nothing"
    )


@dataclass
class RaySweep:
    """Runs plans on the cluster `ray` is connected to; `run()` returns when every run has ended."""

    ray: Any
    address: str
    ctx: RunContext  # its provenance is the driver's; each node adds its own host and NVML facts
    board: Any
    failed_fast: bool = field(default=False, init=False)
    control: Any = field(default=None, init=False)
    _stop_sent: bool = field(default=False, init=False)
    _kill_sent: bool = field(default=False, init=False)

    @property
    def owner(self) -> dict[str, Any]:
        """Who holds the captures' locks, as `harness status` and recover name it."""
        return {"pid": os.getpid(), "host": this_host(), "ray": shown_address(self.address)}

    def run(self, plans: Sequence[Planned]) -> list[RayRun]:
        check_nodes(
            self.ray,
            [plan for plan in plans if self._would_run(plan)],
            alive_nodes(self.ray),
            shown_address(self.address),
        )
        self.control = self.ray.remote(SweepControl).options(num_cpus=0).remote()
        runs: list[RayRun] = []
        try:
            for plan in plans:
                runs.append(self._start(plan))
            while not all(run.done.wait(WATCH_S) for run in runs):
                self._watch(runs)
        finally:
            self._watch(runs)
            for run in runs:
                if not run.done.is_set():  # the driver is going down (an exception): nothing more is written
                    self._release(run)
        return runs

    def _would_run(self, plan: Planned) -> bool:
        """Whether the run would start as its capture is now (decided again, under its lock, before it does)."""
        return decide_on_capture(plan, self.ctx.options.mode).action == "run"

    # --- one run ----------------------------------------------------------------------------------

    def _start(self, plan: Planned) -> RayRun:
        """Take the capture's lock, decide, and submit the run's task (or skip it)."""
        spec = plan.spec
        capture = Capture(Path(spec.capture_dir))
        lock = CaptureLock(
            capture.directory, {**self.owner, "run": spec.run, "run_id": spec.run_id, "since": utc_now()}
        )
        if self.ctx.stop.requested or self.failed_fast:
            run = RayRun(plan, Decision(spec.run, "skip", self._why_not_started()))
            return self._skipped(run)
        try:
            if self.ctx.options.resume and not lock.try_acquire():  # as a resume here: never waited for
                raise resume_busy(spec.run, capture.directory)
            if not lock.held:
                lock.acquire(
                    wait=self.ctx.options.wait_for_gpu,
                    on_wait=self.ctx.reporter.warning,
                    cancelled=lambda: self.ctx.stop.requested,
                )
        except HarnessError as err:  # busy with --no-wait or --resume, or Ctrl-C while waiting: this run only
            run = RayRun(plan, Decision(spec.run, "skip", err.message), lock_refusal=err)
            self.ctx.reporter.decided(run.decision)
            return self._skipped(run)
        found = capture.status_read()
        decision = decide_on_capture(plan, self.ctx.options.mode, found)  # as a run here decides: one code path
        if decision.action == "run":
            try:  # the resume, decided here where the captures are (the node runs what was decided)
                plan = checkpoint_start(plan, self.ctx, found)
            except HarnessError as err:
                decision = Decision(spec.run, "skip", err.message, refused=True)
        spec = plan.spec
        run = RayRun(plan, decision, status=found.status, lock=lock)
        self.ctx.reporter.decided(decision)
        if decision.action == "skip":  # said by on_decision, as a local sweep says it; the board shows runs placed
            return self._skipped(run)

        argv = spec.trainer_argv
        self.board.add(
            spec.run, spec.steps_expected, keys.filter_setting(None, argv)[0], keys.rollout_batch_size(None, argv)
        )

        cluster = plan.experiment.cluster
        task = self.ray.remote(run_task).options(
            num_gpus=1,
            num_cpus=cluster.num_cpus,
            resources=dict(cluster.resources) or None,
            max_retries=0,
            num_returns="streaming",
            name=f"harness run {spec.run}",
        )
        # The trainer on the node is labelled with the attempt this driver will record, so that a recover from
        # here finds it; the driver makes that attempt with the run's first write (it holds the run's lock).
        run.attempt_number = RunAttempts(Path(spec.capture_dir)).next_number()
        labels = {**spec.labels, LABEL_ATTEMPT: str(run.attempt_number)}
        placed = replace(plan, spec=replace(spec, labels=labels))
        run.generator = task.remote(placed, self.ctx.options, self.ctx.code_facts(), self.control)
        threading.Thread(target=self._follow, args=(run,), name=f"follow-{spec.run}", daemon=True).start()
        return run

    def _skipped(self, run: RayRun) -> RayRun:
        self._release(run)
        run.done.set()
        return run

    def _why_not_started(self) -> str:
        if self.failed_fast:
            return "not started: an earlier run did not succeed (--fail-fast)"
        return "the sweep was interrupted"

    def _follow(self, run: RayRun) -> None:
        """Apply the run's stream to its capture until the run ends, its node is lost, or it is cancelled."""
        from ray.exceptions import RayError, TaskCancelledError

        try:
            for ref in run.generator:
                self._apply(run, self.ray.get(ref))
        except TaskCancelledError:
            if run.node is None:
                run.cancelled = True
                self.board.settled(run.run, "not run")
            else:
                self._lost(run, "it was cancelled as it started")
        except RayError as err:
            self._lost(run, _loss_reason(err))
        except Exception as err:  # a bug on this side: the run is stopped, the capture keeps what it has
            reason = f"the driver failed while following it: {type(err).__name__}: {err}"
            self._ask_stop(run, reason)
            self._lost(run, reason, on_node=False)
        finally:
            self._release(run)
            if run.decision.action == "run" and run.state != "succeeded":
                self.failed_fast = self.failed_fast or self.ctx.options.fail_fast
            run.done.set()

    def _apply(self, run: RayRun, batch: list) -> None:
        for event in batch:
            kind, _, payload = event
            if kind == "placed":
                run.node = NodeFacts.from_dict(payload)
                self.board.placed(run.run, run.node.hostname)
            elif kind == "note":
                self.ctx.reporter.note(f"[{run.node.hostname if run.node else '?'}] {payload}")
            elif kind == "end":
                pass
            elif kind == "error":
                run.error, run.error_code = str(payload.get("message")), int(payload.get("exit_code") or 1)
                self.board.settled(run.run, "not started" if run.sink is None else self.board.line(run.run).state)
            else:
                self._write(run, event)
                self.board.event(run.run, event)
        if run.sink is not None and run.write_error is None:
            try:
                run.sink.flush()
            except OSError as err:
                self._write_failed(run, err)

    def _write(self, run: RayRun, event: Any) -> None:
        if run.write_error is not None:
            return
        try:
            if run.sink is None:  # the run's first write: now the attempt is made, as a local run makes it
                attempts = RunAttempts(Path(run.plan.spec.capture_dir))
                run.attempt = attempts.new()
                assert run.attempt.number == run.attempt_number, "the run's lock keeps the number it was labelled with"
                run.capture.make_reserve()
                run.sink = EventSink(run.capture, on_status=lambda status: self._as_harness(run, status))
                run.sink.apply(event)
                if run.plan.checkpoints is None or run.plan.checkpoints.resume is None:
                    attempts.started(run.attempt)  # a resumed attempt: once its resume is verified (below)
                self._open_board(run)
            else:
                run.sink.apply(event)
                if event[1] == RESUME_NAME and isinstance(event[2], dict) and event[2].get("verified") is True:
                    assert run.attempt is not None
                    RunAttempts(Path(run.plan.spec.capture_dir)).started(run.attempt, why="its resume was verified")
            if run.board_put is not None:
                run.board_put(event)
        except OSError as err:
            self._write_failed(run, err)
            return
        except HarnessError as err:  # no space for the reserve: nothing of this run can be written here
            run.write_error = err.message
            self._ask_stop(run, f"the driver cannot write the capture: {err.message}")
            return
        if event[0] == "status":
            run.status = run.sink.last_status
            if run.status is not None and run.status.is_final and run.status.capture_complete:
                run.capture.drop_reserve()
            if run.status is not None and run.status.state == RunState.SUCCEEDED and run.attempt is not None:
                RunAttempts(Path(run.plan.spec.capture_dir)).succeeded(run.attempt)

    def _as_harness(self, run: RayRun, status: RunStatus) -> RunStatus:
        """The driver is the run's harness: its pid and host are the ones a capture's lock and recover check; the
        attempt is the driver's."""
        status.harness_pid, status.harness_host = os.getpid(), this_host()
        status.attempt = run.attempt.number if run.attempt is not None else status.attempt
        return status

    def _write_failed(self, run: RayRun, err: OSError) -> None:
        run.write_error = describe_os_error(err, f"the driver's capture of {run.run}")
        self.ctx.reporter.note(f"{run.run}: {run.write_error}: the run is stopped; the host's own copy keeps it all")
        self._ask_stop(run, f"the driver could not write the capture ({run.write_error})")

    def _lost(self, run: RayRun, reason: str, *, on_node: bool = True) -> None:
        """Record a run whose node (or Ray worker) was lost: interrupted, naming the node."""
        run.lost = True
        where = run.node.name if run.node is not None else "its node"
        message = f"lost on node {where}: {reason}" if on_node else reason
        self.ctx.reporter.note(f"{run.run}: {message}")
        self.board.settled(run.run, "lost")
        status = run.status if run.sink is not None else None
        if status is None or status.is_final:
            run.error = run.error or message
            return
        status.state, status.error, status.ended_at = RunState.INTERRUPTED, message, utc_now()
        status.capture_complete = False
        status.notes.append(
            f"the host may still hold the trainer and the rest of its log: once it is back in the "
            f"cluster, `harness recover --ray {shown_address(self.address)}` stops what is left and saves them"
        )
        self._final_write(run, status)

    def _final_write(self, run: RayRun, status: RunStatus) -> None:
        try:
            run.capture.write_status(status)
        except OSError as err:
            self.ctx.reporter.note(f"{run.run}: {describe_os_error(err, 'status.json')}")
        run.status = status

    def _open_board(self, run: RayRun) -> None:
        """The run's board on the driver, fed the events its capture is written with, as a local run's is."""
        stack = ExitStack()
        root = Path(run.plan.spec.capture_dir).parent
        resume = run.plan.checkpoints.resume if run.plan.checkpoints is not None else None
        resumes = (resume.from_attempt, resume.choice.next_rollout_id) if resume is not None else None
        export, warn = run.plan.experiment.export, self.ctx.reporter.warning
        board = stack.enter_context(board_session(run.run, root, export, warn, resumes))
        run.board, run.board_put = stack, board.forwarding(None)

    def _release(self, run: RayRun) -> None:
        if run.board is not None:
            run.board.close()  # drains the board and shows the run's current attempt
            run.board, run.board_put = None, None
        if run.sink is not None:
            try:
                run.sink.close()
            except OSError:
                pass
            run.lines = run.sink.lines
        status = run.status
        if run.write_error and run.sink is not None and status is not None:
            status.state = RunState.FAILED if status.state in (RunState.RUNNING, RunState.SUCCEEDED) else status.state
            status.error = f"{run.write_error}: the driver's capture stops there; the host's own copy has the rest"
            status.capture_complete = False
            status.ended_at = status.ended_at or utc_now()
            self._final_write(run, status)
        if run.sink is not None:
            try:
                run.capture.stop_request_path.unlink(missing_ok=True)
            except OSError:
                pass
        if run.lock is not None:
            run.lock.release()
            run.lock = None

    # --- the sweep ----------------------------------------------------------------------------------

    def _watch(self, runs: Sequence[RayRun]) -> None:
        """Pass Ctrl-C, `harness stop` and --fail-fast on to the runs."""
        stopping = self.ctx.stop.requested or self.failed_fast
        if self.ctx.stop.requested and self.control is not None and not self._stop_sent:
            self._stop_sent = True
            self.control.stop_all.remote(self.ctx.stop.state, self.ctx.stop.reason or self.ctx.stop.state)
        if self.ctx.stop.kill_requested and self.control is not None and not self._kill_sent:
            self._kill_sent = True
            self.control.kill_all.remote()
        for run in runs:
            if run.done.is_set() or run.generator is None:
                continue
            if stopping and run.node is None and not run.cancelled:
                run.cancelled = True
                self.ray.cancel(run.generator)
            elif run.node is not None and not run.stop_forwarded and run.capture.stop_request_path.exists():
                self._ask_stop(run, stop_request_reason(run.capture))

    def _ask_stop(self, run: RayRun, reason: str) -> None:
        if not run.stop_forwarded and self.control is not None:
            run.stop_forwarded = True
            self.control.stop_run.remote(run.run, reason)


def _loss_reason(err: Exception) -> str:
    from ray.exceptions import NodeDiedError, WorkerCrashedError

    if isinstance(err, NodeDiedError):
        return "the node died or went away (NodeDiedError)"
    if isinstance(err, WorkerCrashedError):
        return "the Ray worker running it died (WorkerCrashedError)"
    return f"Ray lost the task ({type(err).__name__})"


def sweep_exit_code(runs: Sequence[RayRun], stop: StopControl) -> ExitCode:
    """0 only when every run succeeded or was skipped as done; 130 when the user interrupted; 1 otherwise."""
    if stop.state == "interrupted":
        return ExitCode.INTERRUPTED
    for run in runs:
        if run.decision.action == "skip":
            if run.status is None or run.status.state != RunState.SUCCEEDED:
                return ExitCode.RUN_FAILED
        elif run.state != "succeeded":
            return ExitCode.RUN_FAILED
    return ExitCode.OK
