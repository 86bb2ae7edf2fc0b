"""The simulated Miles trainer: a drop-in for Miles's `train.py` on any machine.

`python3 -m harness.sim [Miles flags] [--time-scale X]` (or `harness sim`)
takes Miles's command line, runs a model of Miles's rollout with the DAPO
filter over a model of the GB10 (docs/simulator.md), and prints the log Miles
would print, so everything downstream (capture, parser, summary, figures)
runs unchanged. Standard library only: it runs in a bare Python container.

- config: Miles's flags -> SimConfig (and Miles's refusal of O < B);
- params: every number of the model, with what it is calibrated against;
- model: prompts, pass rates, answers; engine: the throughput-bound engine;
- rollout: Miles's rollout loop and its metrics (pure);
- trainer: the run on a clock, printed by logfmt; clock: simulated or scaled;
- checkpoint: Miles's FSDP checkpoints (save, load, their fallbacks), holding the run's state;
- cli: the program (exit codes, signals); timescale: the time scales it runs at.

The names below load on first use, so the harness's CLI can read
`harness.sim.timescale` at startup without loading the simulator.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what __getattr__ loads, as the checker should see it
    from harness.sim.cli import main as main
    from harness.sim.config import SimConfig as SimConfig
    from harness.sim.config import parse_argv as parse_argv
    from harness.sim.params import DEFAULT_PARAMS as DEFAULT_PARAMS
    from harness.sim.params import ModelParams as ModelParams

_EXPORTS = {
    "main": "cli",
    "SimConfig": "config",
    "parse_argv": "config",
    "DEFAULT_PARAMS": "params",
    "ModelParams": "params",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness.sim' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"harness.sim.{_EXPORTS[name]}"), name)
