"""Experiment files: YAML -> a validated, typed Experiment (extends, overrides, seeds).

- `schema`: the typed models of an experiment file and a sweep file;
- `store`: the files of one directory, resolved through `extends`, `--set`
  and the seed, and validated once, with one-line errors;
- `flags`, `naming`, `overrides`, `yamlfile`: the rules the two share.

Everything is checked here, once, before anything starts; inside the harness
the types are trusted.
"""

from harness.experiments.schema import Experiment, Sweep
from harness.experiments.store import ExperimentStore, Loaded

__all__ = ["Experiment", "ExperimentStore", "Loaded", "Sweep"]
