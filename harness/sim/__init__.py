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
- cli: the program (exit codes, signals).
"""

from harness.sim.cli import main
from harness.sim.config import SimConfig, parse_argv
from harness.sim.params import DEFAULT_PARAMS, ModelParams

__all__ = ["DEFAULT_PARAMS", "ModelParams", "SimConfig", "main", "parse_argv"]
