"""Every command of the harness, found in its typer app, and how to call each over a capture root: for the test that
runs them all over a root of broken files (tests/test_broken_roots.py).

`command_paths()` walks the app (a group whose callback runs without a subcommand, `harness guard`, is a command
too), so a command added later is called without this file changing: one that takes a capture root is given it,
one that takes a run is given each run of the root. A command whose arguments cannot be guessed from its
parameters needs a recipe in `RECIPES`; `invocations` names it otherwise.

`python tests/support/everycommand.py PLAN RESULTS` (in a process of its own) calls each invocation of PLAN
in-process, each under a timeout of its own (SIGALRM: a blocking open of a FIFO is interrupted too), and writes a
JSON line per invocation to RESULTS as it goes: its exit code, whether it hung, its output's tail. A server (`board`)
has served once its port answers, and is stopped SERVED_FOR_S later; the process a `harness guard --pid` call guards
ends GUARDED_S after the guard's first line in its record.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

Path_ = tuple[str, ...]
# Tokens a recipe uses, filled in by `invocations`: the capture root, the experiments directory, a run of the root.
ROOT, EXPERIMENTS, RUN, SLEEPER = "{root}", "{experiments}", "{run}", "{sleeper}"
SIM = ["--sim", "--sim-engine", "process", "--time-scale", "0.002", "--set", "steps=1"]
SERVER_PATHS = {("board",)}  # serve until stopped: stopped once it has served is how it should end
SERVED_FOR_S = 2.5  # how long a server serves once its port answers: past the board's first refresh (every 2 s)
GUARDED_S = 0.3  # how long the process a `guard --pid` call guards lives once the guard has started: 3 polls of 0.1 s
GUARD_START_S = 10.0  # the longest it waits for the guard's first line (a record the guard refuses: the call ends)
# The seconds one call may take, where it runs trainers (the demo runs ten on the simulator, then summarizes) or
# summarizes the root's hundred-odd runs and draws their figures (a guard figure a run: about 40 s on 2 busy cores).
SLOW_PATHS = {("demo",): 300.0, ("run",): 60.0, ("sweep",): 120.0, ("summarize",): 300.0, ("report",): 300.0}


def command_paths() -> list[Path_]:
    """Every command of the harness's app, as the words that name it (`("guard", "plot")`), hidden ones too."""
    import typer

    from harness.cli import app

    found: list[Path_] = []

    def walk(command: Any, path: Path_) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            found.append(path)
            return
        if path and getattr(command, "invoke_without_command", False):
            found.append(path)  # its callback is a command of its own (`harness guard --pid P`)
        for name, sub in sorted(subcommands.items()):
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def click_command(path: Path_) -> Any:
    import typer

    from harness.cli import app

    command = typer.main.get_command(app)
    for word in path:
        command = command.commands[word]
    return command


def _reading(runs: list[str], *stems: str) -> list[str]:
    """The runs whose broken file is one of `stems` (`guard` for guard.jsonl), and those whose attempts are odd:
    for a command that costs a second a call and reads only those files."""
    return [run for run in runs if not run.startswith(("cur-", "old-", "new-")) or run.split("-")[1] in stems]


def _run_recipe(path: Path_, runs: list[str], picked: list[str]) -> list[list[str]]:
    """`run`: a real run (the simulator, process engine) under each picked run's name, and a dry run of each run
    whose broken file a run reads."""
    real = [["run", "plain", *SIM, "--force", "--name", run, "--experiments-dir", EXPERIMENTS] for run in picked]
    dry = [
        ["run", "plain", "--dry-run", "--name", run, "--experiments-dir", EXPERIMENTS]
        for run in _reading(runs, "status", "manifest")
    ]
    return [[*argv, "--capture-dir", ROOT] for argv in real + dry]


RECIPES: dict[Path_, Callable[[Path_, list[str], list[str]], list[list[str]]]] = {
    ("run",): _run_recipe,
    ("sweep",): lambda path, runs, picked: [
        ["sweep", "plain", "--seeds", "1", "2", *SIM, "--force", "--name", picked[0]]
        + ["--experiments-dir", EXPERIMENTS, "--capture-dir", ROOT],
        ["sweep", "plain", "--seeds", "1", "2", "--dry-run", "--name", picked[1]]
        + ["--experiments-dir", EXPERIMENTS, "--capture-dir", ROOT],
    ],
    ("demo",): lambda path, runs, picked: [
        ["demo", "--steps", "1", "--time-scale", "0.002", "--sim-engine", "process"]
        + ["--experiments-dir", EXPERIMENTS, "--capture-dir", ROOT]
    ],
    ("sim",): lambda path, runs, picked: [["sim", "--num-rollout", "1", "--time-scale", "0"]],
    # Its plan reads the root's captures for seeds it may reuse; a real decision runs seeds, as `run` does above.
    ("decide",): lambda path, runs, picked: [
        ["decide", "plain", "e2b-dapo-filter", "--sim", "--dry-run", *more]
        + ["--experiments-dir", EXPERIMENTS, "--capture-dir", ROOT]
        for more in ([], ["--json"])
    ],
    ("show",): lambda path, runs, picked: [["show", "plain", "--experiments-dir", EXPERIMENTS]],
    ("ls",): lambda path, runs, picked: [["ls", "--experiments-dir", EXPERIMENTS]],
    ("parse-log",): lambda path, runs, picked: [
        ["parse-log", f"{ROOT}/.attempts/{run}/1/container.log", *more]
        for run in runs
        if run.startswith("cur-container-")
        for more in ([], ["--json"])
    ],
    ("guard",): lambda path, runs, picked: [
        ["guard", "--pid", SLEEPER, "--record", f"{ROOT}/.attempts/{run}/1", "--sensor", "sim", "--poll-s", "0.1"]
        for run in runs
        if run.startswith(("cur-guard-", "cur-pauses-"))
    ],
    ("guard", "probe"): lambda path, runs, picked: [["guard", "probe", "--thermal-root", f"{ROOT}/no-thermal"]],
    ("guard", "plot"): lambda path, runs, picked: [
        ["guard", "plot", run, "--capture-dir", ROOT] for run in _reading(runs, "status", "guard", "pauses")
    ],
    ("restore",): lambda path, runs, picked: (
        [["restore", run, number, "--capture-dir", ROOT] for run in runs for number in ("1", "2")]
        + [["restore", "ten-digits", "999999999", "--capture-dir", ROOT]]
    ),
    ("logs",): lambda path, runs, picked: [
        ["logs", run, *more, "--capture-dir", ROOT] for run in runs for more in ([], ["--attempt", "2"])
    ],
    ("stop",): lambda path, runs, picked: [["stop", run, "--timeout-s", "1", "--capture-dir", ROOT] for run in runs],
    # Each call summarizes the whole root (seconds): the root's broken runs are read by every call.
    ("plan", "over-sampling"): lambda path, runs, picked: [
        ["plan", "over-sampling", "--from-run", run, "--capture-dir", ROOT] for run in picked[:4]
    ],
    ("plan", "seeds"): lambda path, runs, picked: [
        ["plan", "seeds", "--effect", "0.02", "--from-runs", run, "--capture-dir", ROOT] for run in picked[:4]
    ],
    ("export",): lambda path, runs, picked: [
        ["export", "--format", fmt, "--capture-dir", ROOT] for fmt in ("parquet", "csv", "tensorboard")
    ],
    ("board",): lambda path, runs, picked: [["board", "--capture-dir", ROOT, "--port", str(_free_port())]],
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def invocations(path: Path_, runs: list[str], picked: list[str]) -> list[list[str]]:
    """The argument lists that call `path` over a root's `runs` (`picked`: the few a slow command is run on);
    ValueError when its parameters say too little."""
    recipe = RECIPES.get(path)
    if recipe is not None:
        return recipe(path, runs, picked)
    command = click_command(path)
    names = {param.name for param in command.params}
    required = [param.name for param in command.params if param.required]
    unknown = [name for name in required if name != "run"]
    if unknown:
        raise ValueError(f"harness {' '.join(path)} needs {', '.join(unknown)}: add a recipe to RECIPES")
    where = ["--capture-dir", ROOT] if "capture_dir" in names else []
    where += ["--experiments-dir", EXPERIMENTS] if "experiments_dir" in names else []
    if "run" in names:
        return [[*path, run, *where] for run in runs]
    return [[*path, *where]]


def filled(argv: list[str], root: Path, experiments: Path) -> list[str]:
    return [word.replace(ROOT, str(root)).replace(EXPERIMENTS, str(experiments)) for word in argv]


# --------------------------------------------------------------------------- the driver, in a process of its own


class Hung(BaseException):
    """An invocation ran past its timeout, or a server was stopped (a BaseException: the command's own error edge
    does not catch it)."""


def _alarm(signum: int, frame: object) -> None:
    raise Hung()


def _stop_once_served(port: int, served: threading.Event, done: threading.Event) -> None:
    """Set `served` once something answers on `port`, then SIGALRM the main thread SERVED_FOR_S later (unless the
    call is `done` first): the server is stopped as its timeout would stop it."""
    while not done.is_set():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        except OSError:
            done.wait(0.1)
            continue
        served.set()
        if not done.wait(SERVED_FOR_S):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGALRM)
        return


def _regular_size(path: Path) -> Optional[int]:
    try:
        found = os.lstat(path)  # never opened: a FIFO in its place must not hang the watch
    except OSError:
        return None
    return found.st_size if stat.S_ISREG(found.st_mode) else None


def _end_once_guarded(log: Path, before: Optional[int], sleeper: subprocess.Popen, done: threading.Event) -> None:
    """Kill `sleeper` GUARDED_S after the guard's first line in `log` (its size no longer `before`), or GUARD_START_S
    after the call began, unless it is `done` first: the guard is guarding before its target ends, however slow its
    start."""
    from support.timing import scaled  # here: the driver runs as a script, tests/ on its path only from __main__

    deadline = time.monotonic() + scaled(GUARD_START_S)
    while not done.is_set() and time.monotonic() < deadline and _regular_size(log) == before:
        done.wait(0.02)
    if not done.wait(GUARDED_S):
        sleeper.kill()


def drive(plan: dict[str, Any], results: Path) -> None:
    """Call each invocation of `plan` in this process, each under `timeout_s`; a JSON line per call to `results`."""
    from typer.testing import CliRunner

    from harness.cli import app

    signal.signal(signal.SIGALRM, _alarm)
    server = bool(plan.get("server"))
    with results.open("a") as out:
        for argv in plan["invocations"]:
            sleeper: Optional[subprocess.Popen] = None
            served, done = threading.Event(), threading.Event()
            if SLEEPER in argv:
                sleeper = subprocess.Popen(["sleep", "60"])
                argv = [word.replace(SLEEPER, str(sleeper.pid)) for word in argv]
                log = Path(argv[argv.index("--record") + 1]) / "guard.jsonl"
                watch = (log, _regular_size(log), sleeper, done)
                threading.Thread(target=_end_once_guarded, args=watch, daemon=True).start()
            if server:
                port = int(argv[argv.index("--port") + 1])
                threading.Thread(target=_stop_once_served, args=(port, served, done), daemon=True).start()
            started = time.monotonic()
            hung, code, output, error = False, None, "", None
            runner = CliRunner()
            signal.setitimer(signal.ITIMER_REAL, float(plan["timeout_s"]))
            try:
                result = runner.invoke(app, argv, env=plan.get("env"), catch_exceptions=True)
                code, output = result.exit_code, result.output
                if result.exception is not None and not isinstance(result.exception, SystemExit):
                    error = f"{type(result.exception).__name__}: {result.exception}"
            except Hung:
                hung = True
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                done.set()
                if sleeper is not None:
                    sleeper.kill()
                    sleeper.wait()
            record = {
                "argv": argv,
                "exit_code": code,
                "hung": hung and not served.is_set(),
                "served": served.is_set(),
                "exception": error,
                "seconds": round(time.monotonic() - started, 2),
                "output": output[-3000:],
            }
            out.write(json.dumps(record) + "\n")
            out.flush()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("COLUMNS", "1000")
    drive(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
