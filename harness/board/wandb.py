"""An offline W&B run from the same records as TensorBoard's (`export: {wandb: offline}`, or `--wandb`).

The run directory goes under `<capture root>/wandb/` and nothing is ever
sent: the run is made in offline mode, without git facts, code or system
metrics, and without any API key in its process's environment (the secrets
rule: a key is never in the capture). `wandb sync <dir>` uploads it, if and
when the user chooses.

What goes where: each step's Miles metrics and the summary's values against
`rollout_id`; the guard's samples against `guard/wall_time` (seconds since
the epoch); the hyperparameters as the run's config; each text (state, pause,
the reward's source) as the latest value in the run's summary.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Optional, Protocol, Sequence

from harness.board.names import GUARD_PREFIX
from harness.board.records import Hparams, Record, Scalar, SessionEnd, Text
from harness.fs.files import prepare_directory
from harness.secrets import is_secret_env

WANDB_DIR_NAME = "wandb"
PROJECT = "miles-gb10-lab"
_STEP_AXIS = "rollout_id"
_GUARD_AXIS = GUARD_PREFIX + "wall_time"
_ENV_LOCK = threading.Lock()  # the environment is the process's: one run's start at a time


class _Summary(Protocol):
    def __setitem__(self, key: str, value: object) -> None: ...


class _Run(Protocol):
    """What this module uses of a W&B run."""

    @property
    def summary(self) -> _Summary: ...

    def log(self, data: dict[str, object]) -> None: ...
    def define_metric(self, name: str, step_metric: Optional[str] = None) -> object: ...
    def finish(self) -> None: ...


def wandb_missing() -> Optional[str]:
    """Why no offline W&B run can be written here, or None."""
    from importlib.util import find_spec

    if find_spec("wandb") is None:
        return "wandb is not installed (pip install '.[wandb]')"
    return None


def _is_secret(name: str) -> bool:
    return is_secret_env(name) or name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE")


class WandbSink:
    """One offline W&B run; started with the run's hyperparameters, finished at the run's end."""

    name = "wandb"

    def __init__(self, capture_root: Path, board_run: str) -> None:
        self.root = Path(capture_root)
        self.directory = self.root / WANDB_DIR_NAME / board_run
        # Said when it fails. Nothing rebuilds a W&B run from a capture (`harness export --format tensorboard`
        # rebuilds TensorBoard's events only): only a run with --wandb writes one.
        self.lost = (
            "no offline W&B run for it from here; the run, its capture and its TensorBoard events go on. Nothing "
            f"rebuilds a W&B run from a capture: once {self.root / WANDB_DIR_NAME} is a directory inside the capture "
            "root, running it again with --wandb (`harness run EXPERIMENT --force --wandb`, or the sweep's) writes one"
        )
        self.board_run = board_run
        self._run: Optional[_Run] = None
        self._axes: set[str] = set()

    def write(self, records: Sequence[Record]) -> None:
        for record in records:
            if isinstance(record, Hparams):
                self._start(record)
        run = self._run
        if run is None:
            return
        steps: dict[int, dict[str, object]] = {}
        for record in records:
            if isinstance(record, Scalar):
                guard = record.tag.startswith(GUARD_PREFIX)
                self._axis(record.tag, _GUARD_AXIS if guard else _STEP_AXIS)
                if guard:
                    run.log({_GUARD_AXIS: record.wall_time, record.tag: record.value})
                else:
                    steps.setdefault(record.step, {_STEP_AXIS: record.step})[record.tag] = record.value
            elif isinstance(record, Text):
                run.summary[record.tag] = record.text
            elif isinstance(record, SessionEnd):
                for values in steps.values():
                    run.log(values)
                steps = {}
                run.summary["run/final_state"] = record.state
        for values in steps.values():
            run.log(values)

    def close(self) -> None:
        run, self._run = self._run, None
        if run is not None:
            run.finish()

    def _axis(self, tag: str, axis: str) -> None:
        if tag not in self._axes:
            self._axes.add(tag)
            if self._run is not None:
                self._run.define_metric(tag, step_metric=axis)

    def _start(self, record: Hparams) -> None:
        if self._run is not None:
            return

        # W&B writes its files itself: its directory is checked first (a directory, inside the capture root).
        prepare_directory(self.directory, self.root)
        import wandb

        condition = self.board_run.split("/")[0]
        with _ENV_LOCK:
            hidden = {name: os.environ.pop(name) for name in list(os.environ) if _is_secret(name)}
            os.environ["WANDB_MODE"] = "offline"
            try:
                run: _Run = wandb.init(
                    dir=str(self.directory),
                    project=PROJECT,
                    name=self.board_run,
                    group=condition,
                    config=dict(record.values),
                    mode="offline",
                    reinit="create_new",
                    settings=wandb.Settings(
                        disable_git=True,
                        save_code=False,
                        x_disable_stats=True,
                        x_disable_meta=True,
                        console="off",
                        silent=True,
                    ),
                )
            finally:
                os.environ.update(hidden)
        run.define_metric(_STEP_AXIS)
        run.define_metric(_GUARD_AXIS)
        self._run = run
