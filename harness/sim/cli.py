"""`python3 -m harness.sim [Miles flags] [--time-scale X]`: the simulated trainer as a program.

Exit codes, as the trainer's job would give them: 0 when every rollout ran;
1 when Miles would refuse the flags (its AssertionError, printed as a
traceback followed by Ray's `Job '...' failed`), when the Miles stood in for
(`--miles`) has no module for the filter path (its ModuleNotFoundError at the
first rollout, the same way), when no batch could ever
fill (one answer per prompt with the filter: a ValueError, the same way),
when the filter could not fill a batch from a data set of prompts (a
RuntimeError, the same way), and when `--load` finds a checkpoint file Miles's
loader dies on (an empty tracker: its ValueError, the same way) or `--save`
cannot write one (its OSError, the same way), each with one line on stderr; 2 for a command line the
simulator cannot run (one line on stderr); 128 + N when signal N (SIGTERM,
SIGINT) stopped it, after Ray's `Job '...' was stopped` lines; killed by
SIGKILL where HARNESS_SIM_CRASH_AT names a moment of a save (a power cut).
"""

from __future__ import annotations

import os
import signal
import sys
from datetime import datetime
from types import FrameType
from typing import Callable, Mapping, Optional, Sequence, TextIO, Union

from harness.lab.milesnames import LOAD_FLAG, SAVE_FLAG
from harness.sim import logfmt
from harness.sim.clock import Stopped, make_clock
from harness.sim.config import MilesRefusal, SimUsageError, help_text, parse_argv, split_miles, split_time_scale
from harness.sim.params import DEFAULT_PARAMS, ModelParams
from harness.sim.rollout import RolloutStarved
from harness.sim.trainer import CheckpointUnreadable, CheckpointUnwritable, MissingFilter, SimRun, job_id_for

PROG = "harness sim"
EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_FAILED = 1
EXIT_USAGE = 2


# What signal.signal gives back: a Python handler, SIG_DFL or SIG_IGN, or None (a handler not set from Python).
_Handler = Union[Callable[[int, Optional[FrameType]], object], int, signal.Handlers, None]


class _StopFlag:
    """Signal handlers that record the first stop request; the clock checks it between ticks."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self._previous: dict[int, _Handler] = {}

    def __call__(self) -> Optional[int]:
        return self.signum

    def _handle(self, signum: int, _frame: object) -> None:
        if self.signum is None:
            self.signum = signum

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: no handlers, nothing to stop us but the caller
                return

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            if handler is not None:  # one not set from Python cannot be set back from it
                signal.signal(signum, handler)


def main(
    argv: Optional[Sequence[str]] = None,
    env: Optional[Mapping[str, str]] = None,
    stdout: Optional[TextIO] = None,
    stderr: Optional[TextIO] = None,
    params: ModelParams = DEFAULT_PARAMS,
) -> int:
    """Run the simulated trainer on these arguments; return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    if "-h" in argv or "--help" in argv:
        out.write(help_text())
        return EXIT_OK
    try:
        config = parse_argv(argv, dict(env))
    except SimUsageError as problem:
        err.write(f"{PROG}: {problem}\n")
        return EXIT_USAGE
    except MilesRefusal as refusal:
        return _refuse(argv, env, out, err, refusal)

    stop = _StopFlag()
    stop.install()
    clock = make_clock(config.time_scale, stop)
    writer = logfmt.LogWriter(out, clock.now, datetime.now())
    run = SimRun(config, params, clock, writer)
    try:
        writer.line(_banner(config.time_scale))
        run.run()
        return EXIT_OK
    except Stopped as stopped:
        name = signal.Signals(stopped.signum).name
        where = "before the first rollout" if run.current_step is None else f"in rollout {run.current_step}"
        writer.lines(logfmt.job_end_lines(run.job_id, "was stopped"))
        err.write(f"{PROG}: {name}: stopped {where}\n")
        return 128 + stopped.signum
    except RolloutStarved as starved:
        writer.lines(logfmt.rollout_failure_lines(run.job_id, f"RuntimeError: {starved}"))
        err.write(f"{PROG}: {starved}\n")
        return EXIT_FAILED
    except CheckpointUnreadable as broken:
        writer.lines(logfmt.checkpoint_failure_lines(run.job_id, broken.exception, broken.source))
        err.write(f"{PROG}: {LOAD_FLAG}: {broken.exception}\n")
        return EXIT_FAILED
    except CheckpointUnwritable as refused:
        writer.lines(logfmt.save_failure_lines(run.job_id, refused.exception))
        err.write(f"{PROG}: {SAVE_FLAG}: {refused.exception}\n")
        return EXIT_FAILED
    except MissingFilter as missing:
        writer.lines(logfmt.missing_module_lines(run.job_id, missing.module, run.rollout_actor.pid))
        err.write(f"{PROG}: {missing}\n")
        return EXIT_FAILED
    except BrokenPipeError:
        return EXIT_REFUSED
    finally:
        stop.restore()


def _banner(scale: float) -> str:
    if scale == 0:
        return f"{PROG}: the simulated Miles trainer; time scale 0: times are simulated seconds"
    return (
        f"{PROG}: the simulated Miles trainer; time scale {scale:g}: "
        f"times are measured wall seconds / {scale:g}, pauses included"
    )


def _refuse(argv: Sequence[str], env: Mapping[str, str], out: TextIO, err: TextIO, refusal: MilesRefusal) -> int:
    """The trainer's refusal of its arguments: launch line, traceback, `Job '...' failed`, a line on stderr; exit 1."""
    _, rest = split_miles(argv, dict(env))
    _, miles_argv = split_time_scale(rest, dict(env))
    job_id = job_id_for(miles_argv)
    writer = logfmt.LogWriter(out, lambda: 0.0, datetime.now())
    writer.lines(logfmt.launch_lines(job_id, miles_argv))
    writer.lines(logfmt.refusal_lines(job_id, f"{refusal.kind}: {refusal}", refusal.source))
    err.write(f"{PROG}: {refusal}\n")
    return EXIT_REFUSED
