"""Captures -> the lab's numbers: summary JSON, comparisons, figures, report, the step table.

One module per job (docs/summary.md, "How it is built"):

- `frames` (with `run_config`): one capture -> the run's checked facts, span, pause windows;
- `rows`: the step rows, a column at a time (`windows`: pause overlap, numpy);
- `aggregates`, `comparisons` (`verdict`: the reward sentences, one run's and across seeds);
- `seeds`: conditions (runs but for their seed), figures pooled over seeds,
  comparisons across seeds (the statistics: `harness.stats.seeds`);
- `document` (the typed document) and `serialize` (its JSON);
- `summarize`: all of it for a capture directory, each run on its own;
- `figures`, `report`, `export`: drawn from the typed document alone;
- `publish`: what the commands call; `sanity` and `notes`: the rules for values
  out of range and the sentences that say so.

Nothing here is imported by `harness --help`; numpy and matplotlib are loaded
only by the functions that compute or draw.
"""

from pathlib import Path

SUMMARY_FILE_NAME = "miles-gb10-lab.json"
SCHEMA_ID = "miles-gb10-lab/1"
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schema" / "miles-gb10-lab-1.schema.json"
