"""Runs on the simulator: the same experiment, with the simulated trainer where Miles would run.

`run --sim` and `sweep --sim` load, validate and plan an experiment exactly
as a real run does, then swap what only a GB10 has:

- the trainer: the sim image built from this checkout (Dockerfile.sim, the
  lab entry's protocol with the simulator in place of Ray and Miles; found by
  the digest of what it holds, harness.sim.image), or, where no Docker
  engine answers or that image is not built, the same entry as a supervised
  process (`python3 -m harness.sim.entry`, reading the same MILES_ARGS and
  MILES_EXTRA_ARGS);
- no GPU request (so no GPU lock either), no bind mounts (the simulator reads
  no model and no data set) and no raised ulimits (it pins no memory);
- HARNESS_SIM_TIME_SCALE in the environment, and the same time scale in the
  manifest, so the summary converts pause windows to the trainer's seconds;
- the experiment's own heat guard on the simulated GB10: the `sim` sensor,
  every time in it on the simulator's clock (trainer seconds x time scale),
  so pauses fall as they would on a GB10 (a GB10's sensor reads nothing here),
  and a cooled start (SIM_START_BELOW_C) where the experiment names none, so
  every simulated run, `run --sim`, `sweep --sim` or the demo's, starts alike
  and the summary may pool them as seeds of one condition.

Everything else (flags, seeds, run names, guard thresholds, compare,
limits, the capture format, the summary) is the experiment's own. `simulated` is pure;
`choose_target` asks the Docker engine one question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Optional

from harness.engines.dockerapi import DockerApi, DockerApiError
from harness.errors import ExitCode, HarnessError
from harness.sim.config import TIME_SCALE_ENV
from harness.sim.image import SIM_DIGEST_LABEL, SIM_LATEST, sim_digest, sim_image_tag
from harness.sim.timescale import time_scale_problem

if TYPE_CHECKING:  # the schema (pydantic) for the checker only: the CLI reads this module's constants at startup
    from pathlib import Path

    from harness.experiments.schema import Experiment
    from harness.guard.config import GuardConfig

# The sim image's documented name, and what a process-engine run records as its image; a run on Docker takes the
# tag of this checkout's simulator digest (harness.sim.image), never `latest`, which is whichever checkout built last.
SIM_IMAGE = SIM_LATEST
OTHER_SIMULATOR = (
    "the sim image on the engine holds another simulator than this checkout's; `make sim-image` builds this one"
)
SIM_ENTRY_MODULE = "harness.sim.entry"
# Wall seconds per simulated second, for `run --sim`, `sweep --sim` and the demo alike (so a demo's capture is
# the capture `run --sim` would make, and each reuses the other's). With the heat guard pausing every run, each
# pause window spans the freeze by the time `docker pause` and `docker unpause` take (about 20 ms each), which
# reads as about two seconds of the trainer's time per pause at 0.01, so pause-free rollout times read about 5%
# short on Docker (less as a process); at 0.02, half that. At 0.01 a plain 12-step run (about 38 simulated minutes,
# pauses included) takes about 25 s and the filter's (about 58) about 40 s: "well under a minute" for any entry
# point on the simulator; `--time-scale 0.02` (SIM_TIME_SCALE=0.02) halves the bias for twice the time.
DEFAULT_TIME_SCALE = 0.01
# The guard's poll in wall seconds, at least: the sensor is a formula, but each poll takes the harness's time.
MIN_POLL_S = 0.05
# Every simulated run waits until every temperature of the simulated GB10 is below this before it starts (unless its
# experiment names its own start_below_c): its CPU side starts warm (the host was busy), and a run that started warm
# pauses sooner, so its times would not be like those of a run that started cool.
SIM_START_BELOW_C = 55.0

SimEngine = Literal["docker", "process"]
SIM_ENGINE_CHOICES = ("auto", "docker", "process")
# What the engine holds of sim images: this checkout's (by its digest), only another simulator's, or none.
SimImageFound = Literal["this", "another", "none"]


@dataclass(frozen=True)
class SimTarget:
    """Where simulated runs go: which engine (and why), at which time scale."""

    engine: SimEngine
    time_scale: float
    python: str  # the interpreter the process engine runs the simulator's entry with
    reason: str
    image: str = SIM_IMAGE

    @property
    def command(self) -> list[str]:
        """The process engine's command: the sim image's entry, run by this harness's Python."""
        return [self.python, "-m", SIM_ENTRY_MODULE]

    def describe(self) -> str:
        """One line: what runs the simulator, why, and at which time scale."""
        where = (
            f"the sim image {self.image} on Docker"
            if self.engine == "docker"
            else f"the process engine ({' '.join(self.command)})"
        )
        return f"simulator: {where}, time scale {self.time_scale:g} ({self.reason}); no GPU, no GPU lock, no data mount"


def check_time_scale(time_scale: float) -> float:
    """A run's time scale, in the simulator's range (harness.sim.timescale); 0 is `harness sim`'s alone."""
    problem = time_scale_problem(time_scale, zero_allowed=False)
    if problem is not None:
        raise HarnessError(
            f"--time-scale {time_scale:g}: {problem} (a run's pause windows are converted with it); "
            "`harness sim --time-scale 0` prints a log as fast as it can"
        )
    return time_scale


def choose_target(
    requested: str,
    time_scale: float,
    python: str,
    api: Optional[DockerApi] = None,
    root: Optional["Path"] = None,
) -> SimTarget:
    """The engine for simulated runs: `docker`, `process`, or `auto` (Docker where the sim image of this checkout's
    simulator is there); `root`: the checkout whose simulator runs (default: this harness's)."""
    check_time_scale(time_scale)
    if requested not in SIM_ENGINE_CHOICES:
        raise HarnessError(f"--sim-engine {requested!r}: choose one of {', '.join(SIM_ENGINE_CHOICES)}")
    if requested == "process":
        return SimTarget("process", time_scale, python, f"--sim-engine {requested}")
    try:
        digest = sim_digest(root)
    except OSError as err:
        cannot = f"this harness's simulator cannot be matched to a sim image ({err.strerror or err}: {err.filename})"
        if requested == "docker":
            raise HarnessError(f"--sim-engine docker: {cannot}", ExitCode.ENGINE_UNAVAILABLE) from None
        return SimTarget("process", time_scale, python, cannot)
    image = sim_image_tag(digest)
    api = api or DockerApi()
    try:
        found = find_sim_image(api, image, digest)
    except DockerApiError as err:
        if requested == "docker":  # the run's preflight says the engine does not answer, with its exit code
            return SimTarget("docker", time_scale, python, f"--sim-engine {requested}", image)
        return SimTarget("process", time_scale, python, str(err))
    engine, reason = sim_engine_for(requested, found, api.host)
    return SimTarget(engine, time_scale, python, reason, image if engine == "docker" else SIM_IMAGE)


def find_sim_image(api: DockerApi, image: str, digest: str) -> SimImageFound:
    """Whether the engine holds `image` labelled with `digest` (this checkout's simulator), else any sim image."""
    info = api.image_inspect(image)
    if info is not None:
        config = info.get("Config")
        labels = config.get("Labels") if isinstance(config, dict) else None
        if isinstance(labels, dict) and labels.get(SIM_DIGEST_LABEL) == digest:
            return "this"
        return "another"  # the tag was put on another image
    return "none" if api.image_inspect(SIM_IMAGE) is None else "another"


def sim_engine_for(requested: str, found: SimImageFound, host: str) -> tuple[SimEngine, str]:
    """The engine for `--sim-engine auto|docker` given the sim images the engine at `host` holds, and why (pure);
    HarnessError where Docker was asked for and this checkout's image is not there."""
    if found == "this":
        return "docker", (f"the Docker engine at {host}" if requested == "auto" else f"--sim-engine {requested}")
    why = (
        OTHER_SIMULATOR
        if found == "another"
        else f"{SIM_IMAGE} is not on the Docker engine at {host}; `make sim-image` builds it"
    )
    if requested == "docker":
        raise HarnessError(f"--sim-engine docker: {why}", ExitCode.ENGINE_UNAVAILABLE)
    return "process", why


def simulated(experiment: "Experiment", target: SimTarget) -> "Experiment":
    """`experiment` with the simulator as its trainer (pure; validated again, so the result is a real Experiment)."""
    container = experiment.container.model_copy(
        update={
            "gpus": "none",
            "volumes": [],
            "ulimits": {},
            "env": {**experiment.container.env, TIME_SCALE_ENV: repr(float(target.time_scale))},
        }
    )
    command = None if target.engine == "docker" else list(target.command)
    swapped = experiment.model_copy(
        update={
            "container": container,
            "guard": simulated_guard(experiment.guard, target.time_scale),
            "image": target.image,
            "engine": target.engine,
            "command": command,
        }
    )
    return type(experiment).model_validate(swapped.model_dump(mode="json"))


def simulated_guard(guard: "GuardConfig", time_scale: float) -> "GuardConfig":
    """A guard on the simulated GB10: the `sim` sensor, its times in wall seconds, a cooled start (pure)."""

    def wall(seconds: float, floor: float = 0.0) -> float:
        return max(seconds * time_scale, floor)

    poll_s = wall(guard.poll_s, MIN_POLL_S)
    cpu = guard.sim.cpu
    return guard.model_copy(
        update={
            "sensor": "sim",
            "poll_s": poll_s,
            "min_pause_s": wall(guard.min_pause_s),
            "max_pause_s": wall(guard.max_pause_s),
            "record_every_s": wall(guard.record_every_s, poll_s),  # never below the poll: a sample per poll at most
            "start_timeout_s": wall(guard.start_timeout_s),
            "start_below_c": SIM_START_BELOW_C if guard.start_below_c is None else guard.start_below_c,
            "sim": guard.sim.model_copy(
                update={
                    "heat_tau_s": wall(guard.sim.heat_tau_s),
                    "cool_tau_s": wall(guard.sim.cool_tau_s),
                    "cpu": cpu.model_copy(
                        update={"heat_tau_s": wall(cpu.heat_tau_s), "cool_tau_s": wall(cpu.cool_tau_s)}
                    ),
                }
            ),
        }
    )
