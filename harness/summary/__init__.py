"""Captures -> the lab's numbers: summary JSON, comparisons, figures, report.

The pieces, each usable alone (see docs/summary.md for the rules):

- `times`: RFC 3339 timestamps -> integer microseconds (pure).
- `windows`: union of pause windows and their overlap with rollouts (pure, numpy).
- `captures`: read one capture directory tolerantly, with notes.
- `summarize`: captures -> the `miles-gb10-lab/1` document (a dict); writes it.
- `verdict`: the reward verdict sentence (pure).
- `figures`: the two SVG figures, from the document alone.
- `report`: report.md, from the document alone.

Nothing here is imported by `harness --help`; pandas, numpy and matplotlib
are loaded only by the modules that compute or draw.
"""

from pathlib import Path

SUMMARY_FILE_NAME = "miles-gb10-lab.json"
SCHEMA_ID = "miles-gb10-lab/1"
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schema" / "miles-gb10-lab-1.schema.json"
