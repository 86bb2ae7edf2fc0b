"""Statistics that decide how many runs to make, and how many prompts a step submits.

`seeds`: the across-seed comparison of the summary (bootstrap interval,
Welch's t, probability of improvement, seeds needed); `power`: the power
analysis of `harness plan seeds`; `oversampling`: the over-sampling batch
size advice of `harness plan`; `adaptive` feeds the `adastop` package's
comparator interim by interim and rebuilds it from what was recorded;
`record` is the record of one adaptive comparison
(`<capture root>/decisions/<name>.jsonl`).
"""
