"""Statistics that decide how many runs to make: the adaptive comparison of experiments across seeds.

`adaptive` feeds the `adastop` package's comparator interim by interim and
rebuilds it from what was recorded; `record` is the record of one adaptive
comparison (`<capture root>/decisions/<name>.jsonl`). The per-seed figures
and the fixed design's power stay in `harness.seedstats` for now.
"""
