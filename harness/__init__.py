"""miles-gb10-lab: run, guard and summarize Miles RL experiments on an NVIDIA GB10."""

__version__ = "0.1.0"
