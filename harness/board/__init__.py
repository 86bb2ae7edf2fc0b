"""The board: every run's records where researchers already look (TensorBoard, and W&B offline).

A run's capture writes are fanned out, live, to its board (`live`, `session`),
turned into records by one translator (`translate`, `derive`, `hparams`) and
written as TensorBoard event files (`eventfile`) and, when asked, an offline
W&B run (`wandb`); the same translator replays a capture's files (`replay`),
so `harness export --format tensorboard` rebuilds what was written live.
`names` says where each run goes and what its values are called; `images`
puts the summary's figures on the board; `server` starts TensorBoard itself.
docs/tensorboard.md is the user's page.
"""
