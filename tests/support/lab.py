"""A throwaway lab for run tests on either engine: experiments, captures, locks, the process engine's root.

Fixtures (registered in conftest.py): `lab` is a Lab on each engine in turn
(the Docker one marked `docker`), `docker_lab` and `process_lab` a Lab on one.
A lab's commands list only its own engine (HARNESS_ENGINES), so what else the
machine's Docker engine holds is never seen.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.engines.spec import LABEL_CAPTURE_DIR, LABEL_RUN, LABEL_RUN_ID, LaunchSpec
from support.images import FAKE_TRAINER_IMAGE
from support.timing import scaled, wait_until

REPO = Path(__file__).resolve().parents[2]
IMAGE = FAKE_TRAINER_IMAGE
TRAINER = REPO / "tests" / "images" / "fake-trainer" / "trainer.py"
STAMP_IN_LINE = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\]")


def docker_client(base_url: Optional[str] = None) -> Any:
    """A client of the engine at DOCKER_HOST, or at `base_url`."""
    import docker

    return docker.DockerClient(base_url=base_url, timeout=None) if base_url else docker.from_env(timeout=None)


class Lab:
    """Experiments, captures, locks and process runs under one temporary directory, for one engine."""

    def __init__(self, root: Path, engine: str) -> None:
        self.root = root
        self.engine = engine
        self.experiments = root / "experiments"
        self.captures = root / "capture"
        self.locks = root / "locks"
        self.processes = root / "processes"
        self.experiments.mkdir()
        self.env = {
            "HARNESS_LOCK_DIR": str(self.locks),
            "HARNESS_PROCESS_DIR": str(self.processes),
            "HARNESS_ENGINES": engine,  # recover, status and run list this engine only
        }

    # --- experiments ------------------------------------------------------------------------------

    def experiment(
        self,
        name: str,
        scenario: str = "steps",
        steps: int = 2,
        *,
        env: Optional[dict] = None,
        gpus: Any = "none",
        image: str = IMAGE,
        command: Optional[list] = None,
        volumes: Optional[list] = None,
        extra: str = "",
        init: bool = True,
        guard: Optional[dict] = None,
    ) -> str:
        container: dict[str, Any] = {"gpus": gpus, "env": {"FAKE_SCENARIO": scenario, **(env or {})}}
        data: dict[str, Any] = {
            "name": name,
            "steps": steps,
            "miles": {"extra_args": extra},
            "guard": guard or {"sensor": "none"},
        }
        if self.engine == "docker":
            container.update(shm_size="64m", ipc="private", volumes=volumes or [], ulimits={}, init=init)
            data["image"] = image
        else:
            data.update(engine="process", command=command or [sys.executable, "-u", str(TRAINER)])
        data["container"] = container
        (self.experiments / f"{name}.yaml").write_text(json.dumps(data))
        return name

    # --- driving the harness ------------------------------------------------------------------------

    def dirs(self) -> list[str]:
        return ["--experiments-dir", str(self.experiments), "--capture-dir", str(self.captures)]

    def cli(self, *args: str) -> Any:
        """A command that reads experiments and captures, run in-process."""
        return CliRunner().invoke(app, [*args, *self.dirs()], env=self.env)

    def capture_cli(self, *args: str) -> Any:
        """A command that reads captures only (status, logs, stop, recover)."""
        return CliRunner().invoke(app, [*args, "--capture-dir", str(self.captures)], env={**self.env, "COLUMNS": "300"})

    def spawn(
        self, *args: str, failpoint: Optional[str] = None, capture_only: bool = False, env: Optional[dict] = None
    ) -> subprocess.Popen:
        env = {**os.environ, **self.env, **({"HARNESS_FAILPOINT": failpoint} if failpoint else {}), **(env or {})}
        where = ["--capture-dir", str(self.captures)] if capture_only else self.dirs()
        return subprocess.Popen(
            [sys.executable, "-m", "harness", *args, *where],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def gate(self) -> tuple[dict[str, str], list[str], Path]:
        """A gate for the fake trainer: the env and volumes an experiment takes, and the file whose creation lets
        its runs end (FAKE_GATE), so a test decides when a run ends, never how busy the machine is."""
        directory = self.root / "gate"
        directory.mkdir(exist_ok=True)
        if self.engine == "docker":
            return {"FAKE_GATE": "/gate/open"}, [f"{directory}:/gate:ro"], directory / "open"
        return {"FAKE_GATE": str(directory / "open")}, [], directory / "open"

    # --- what the capture holds ----------------------------------------------------------------------

    def status(self, run: str) -> dict:
        return json.loads((self.captures / run / "status.json").read_text())

    def metrics(self, run: str) -> list[dict]:
        path = self.captures / run / "metrics.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def log(self, run: str) -> list[str]:
        path = self.captures / run / "container.log"
        return path.read_text().split("\n")[:-1] if path.exists() else []

    def attempts(self, run: str) -> list[tuple[int, str]]:
        """Each attempt of `run` (its number and state), oldest first; nothing a run makes is deleted."""
        from harness.capture import RunAttempts

        return [
            (attempt.number, str(found.status.state) if (found := attempt.status_read()).status else "broken")
            for attempt in RunAttempts(self.captures / run).all()
        ]

    # --- what the engine holds -----------------------------------------------------------------------

    def objects(self) -> list[Any]:
        """Handles on what the engine holds for this lab (containers, process runs)."""
        if self.engine == "docker":
            from harness.engines.docker import DockerEngine

            found = DockerEngine().list({LABEL_RUN: None})
        else:
            from harness.engines.process import ProcessEngine

            found = ProcessEngine(self.processes).list({LABEL_RUN: None})
        inside = str(self.root) + os.sep  # not a sibling test's root (test_x1 is a prefix of test_x10)
        return [h for h in found if h.describe().labels.get(LABEL_CAPTURE_DIR, "").startswith(inside)]

    def engine_lines(self, handle: Any) -> list[str]:
        """Every line the engine holds for a handle, stamped."""
        return list(handle.logs(follow=False))

    def wait_for(self, predicate: Callable[[], object], timeout_s: float = 60, what: str = "the lab") -> None:
        """Wait (scaled by HARNESS_TEST_SLOWDOWN) for `predicate()` to come true; an AssertionError naming `what`."""
        wait_until(predicate, timeout_s, what)

    def cleanup(self) -> None:
        for handle in self.objects():
            try:
                handle.kill()
            except Exception:
                pass
            try:
                handle.wait(scaled(10))
                handle.remove()
            except Exception:
                pass


def _lab_on(engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    lab = Lab(tmp_path, engine)
    for name, value in lab.env.items():  # handles made in the test process find the lab's runs too
        monkeypatch.setenv(name, value)
    yield lab
    lab.cleanup()


@pytest.fixture(
    params=[
        pytest.param("docker", marks=pytest.mark.docker),
        pytest.param("process", marks=pytest.mark.integration),
    ]
)
def lab(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    """A lab on each engine in turn."""
    if request.param == "docker":
        request.getfixturevalue("fake_trainer")
    yield from _lab_on(request.param, tmp_path, monkeypatch)


@pytest.fixture
def docker_lab(tmp_path: Path, fake_trainer: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    """A lab on the Docker engine."""
    yield from _lab_on("docker", tmp_path, monkeypatch)


@pytest.fixture
def process_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    """A lab on the process engine."""
    yield from _lab_on("process", tmp_path, monkeypatch)


def leftover_of_another_root(processes: Path, run: str, capture_dir: Path, *, alive: bool = False) -> Any:
    """A process run of `run` whose capture is `capture_dir` (another root's), as a killed suite leaves one:
    its trainer and supervisor killed, no end recorded (`alive`: still running, as another suite's is)."""
    from harness.engines import GONE
    from harness.engines.process import ProcessEngine

    labels = {LABEL_RUN: run, LABEL_RUN_ID: f"{run}-elsewhere", LABEL_CAPTURE_DIR: str(capture_dir)}
    spec = LaunchSpec(
        run=run,
        run_id=f"{run}-elsewhere",
        experiment=run,
        seed=1,
        engine="process",
        image="",
        command=("sleep", "600"),
        container_name=f"mgl-{run}-elsewhere",
        trainer_argv=(),
        env={},
        labels=labels,
        mounts=(),
        device_requests=(),
        shm_size="1g",
        ipc_mode="host",
        init=True,
        ulimits={},
        capture_dir=str(capture_dir),
        steps_expected=1,
        max_minutes=None,
    )
    handle = ProcessEngine(processes).start(spec, {})
    if not alive:
        started = json.loads(handle.state_path.read_text())
        os.kill(started["shim_pid"], signal.SIGKILL)
        os.killpg(started["pgid"], signal.SIGKILL)
        wait_until(lambda: handle.describe().state == GONE, 10, "the leftover's processes to be gone")
    return handle


class Output:
    """A spawned harness's output, read as it comes, so a test can wait for a line and still have all of it."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self._lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self._lines.extend(process.stdout or ()), daemon=True)
        self._reader.start()

    def text(self) -> str:
        return "".join(self._lines)

    def wait_for(self, text: str, timeout_s: float = 60) -> None:
        """Wait (scaled) until the output shows `text`."""
        wait_until(lambda: text in self.text() or self.process.poll() is not None, timeout_s, repr(text))
        assert text in self.text(), self.text()

    def finish(self, timeout_s: float = 120) -> str:
        """Everything it printed, once it has ended."""
        self.process.wait(scaled(timeout_s))
        self._reader.join(scaled(10))
        return self.text()


def masked(lines: Any) -> list[str]:
    """Lines with the trainer's own wall-clock stamps masked (they differ between two runs)."""
    return [STAMP_IN_LINE.sub("[T]", line) for line in lines]


def killed(process: subprocess.Popen, timeout_s: float = 60) -> str:
    """Wait (scaled) for a harness that a failpoint SIGKILLs; its output."""
    out, _ = process.communicate(timeout=scaled(timeout_s))
    assert process.returncode == -signal.SIGKILL, out
    return out


class UnixProxy:
    """A socket forwarder between the harness and the Docker engine: stopping it is the engine going away."""

    def __init__(self, target: str, path: Path) -> None:
        self.target = target
        self.path = path
        self._listener: Optional[socket.socket] = None
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def host(self) -> str:
        return f"unix://{self.path}"

    def start(self) -> None:
        self.path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        """Refuse new connections and cut the open ones, as a daemon that goes down does."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        self.path.unlink(missing_ok=True)
        with self._lock:
            for sock in self._open:
                for action in (lambda: sock.shutdown(socket.SHUT_RDWR), sock.close):
                    try:
                        action()
                    except OSError:
                        pass
            self._open = []

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
