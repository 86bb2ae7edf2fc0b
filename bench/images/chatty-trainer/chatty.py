"""Print CHATTY_RATE x CHATTY_SECONDS SGLang-style noise lines at CHATTY_RATE per second,
and after every CHATTY_STEP_EVERY of them one Miles step (perf, rollout, step, perf) whose
train-side perf line carries the wall time it was printed (perf/emitted_at)."""

import os
import sys
import time

RATE = float(os.environ.get("CHATTY_RATE", "2000"))
SECONDS = float(os.environ.get("CHATTY_SECONDS", "60"))
STEP_EVERY = int(os.environ.get("CHATTY_STEP_EVERY", "400"))
PREFIX = "\x1b[36m(RolloutManager pid=311)\x1b[0m [2026-11-29 10:00:00.123 rollout_manager] "
TRAIN = "\x1b[36m(MegatronTrainRayActor pid=412)\x1b[0m [2026-11-29 10:00:00.123 actor_cell0_rank0] "
out = sys.stdout
total = int(RATE * SECONDS)
start = time.monotonic()
printed = step = 0
while printed < total:
    due = min(total, int((time.monotonic() - start) * RATE))
    while printed < due:
        printed += 1
        out.write(
            f'[2026-11-29 10:00:00] INFO:     127.0.0.1:5{printed % 10000:04d} - "POST /generate HTTP/1.1" 200 OK\n'
        )
        if printed % STEP_EVERY:
            continue
        out.write(
            f"{PREFIX}metrics.py:123 - perf {step}: {{'perf/rollout_time': 88.7, "
            f"'rollout/dynamic_filter/drop_zero_std_1': 20, 'rollout/dynamic_filter/drop_zero_std_0': 4, "
            f"'rollout/raw_reward_unfiltered': 0.68, 'rollout/response_len/mean': 512.0}}\n"
        )
        out.write(f"{TRAIN}log_utils.py:77 - rollout {step}: {{'rollout/raw_reward': 0.71}}\n")
        out.write(f"{TRAIN}log_utils.py:90 - step {step}: {{'train/step': {step}, 'train/loss': 0.1}}\n")
        out.write(
            f"{TRAIN}train_metric_utils.py:40 - perf {step}: {{'perf/train_time': 9.0, "
            f"'perf/step_time': 97.7, 'perf/emitted_at': {time.time()!r}}}\n"
        )
        out.flush()
        step += 1
    out.flush()
    time.sleep(0.005)
print("chatty: done", flush=True)
