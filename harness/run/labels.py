"""The labels the runner puts on what an engine runs, beside the engine's own (harness.engines.spec): read back by
`harness recover` to know which harness, attempt and choice an object belongs to."""

from __future__ import annotations

from harness.engines.spec import LABEL_PREFIX

LABEL_HARNESS_PID = f"{LABEL_PREFIX}.harness-pid"
LABEL_HARNESS_HOST = f"{LABEL_PREFIX}.harness-host"
LABEL_KEEP = f"{LABEL_PREFIX}.keep"  # `--keep`: recover never removes it
LABEL_ATTEMPT = f"{LABEL_PREFIX}.attempt"  # which attempt of the run it is (harness.capture.attempts)
