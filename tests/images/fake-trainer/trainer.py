"""A stand-in for Miles's train.py that prints what Miles prints, per scenario.

Follows the lab entry protocol: the flags come in MILES_ARGS and
MILES_EXTRA_ARGS; the number of steps is --num-rollout. FAKE_SCENARIO picks
the behaviour: steps (default), oom, no_metrics, hang (after step 0 and the
first line of step 1), burst, ticks (FAKE_TICKS numbered lines `tick N`, one
every FAKE_TICK_S, then the steps: the guard's tests count them across a pause).
FAKE_GATE=PATH holds the last line until PATH exists, so a test decides when the
run ends (never how busy the machine is). FAKE_ECHO_ENV=NAME,... prints those
variables' values with each line of the hang (a careless trainer printing its secrets).
"""

import os
import shlex
import signal
import sys
import time

ARGS = shlex.split(os.environ.get("MILES_ARGS", "")) + shlex.split(os.environ.get("MILES_EXTRA_ARGS", ""))
SCENARIO = os.environ.get("FAKE_SCENARIO", "steps")
DELAY_S = float(os.environ.get("FAKE_DELAY_S", "0.05"))
ROLLOUT = "\x1b[36m(RolloutManager pid=311)\x1b[0m"
TRAIN = "\x1b[36m(MegatronTrainRayActor pid=412)\x1b[0m"


def flag(name, default):
    value = default
    for i, word in enumerate(ARGS[:-1]):
        if word == name:
            value = ARGS[i + 1]
    return value


STEPS = int(flag("--num-rollout", "2"))
FILTER = "--dynamic-sampling-filter-path" in ARGS


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def stamp():
    return time.strftime("[%Y-%m-%d %H:%M:%S]")


def argument_dump():
    say("-" * 24 + " arguments " + "-" * 24)
    for i, word in enumerate(ARGS):
        if word.startswith("--"):
            value = ARGS[i + 1] if i + 1 < len(ARGS) and not ARGS[i + 1].startswith("--") else True
            say(f"  {word[2:].replace('-', '_')} {'.' * 20} {value}")
    say("-" * 20 + " end of arguments " + "-" * 21)


def step(n):
    rollout = {
        "perf/rollout_time": 50.0 + n,
        "rollout/raw_reward_unfiltered": 0.6 + n / 100,
        "rollout/truncated_ratio": 0.02,
    }
    if FILTER:
        rollout["rollout/dynamic_filter/drop_zero_std_1"] = 10 + n
        rollout["rollout/dynamic_filter/drop_zero_std_0"] = 2
    else:
        rollout["rollout/zero_std/count_1"] = 9
        rollout["rollout/zero_std/count_0"] = 3
    say(f"{ROLLOUT} {stamp()} metrics.py:123 - perf {n}: {rollout!r}")
    time.sleep(DELAY_S)
    say(f"{TRAIN} {stamp()} log_utils.py:77 - rollout {n}: {{'rollout/raw_reward': {0.7 + n / 100}}}")
    for _ in range(2):  # Megatron prints each step line twice
        say(f"{TRAIN} {stamp()} log_utils.py:90 - step {n}: {{'train/step': {n}, 'train/loss': 0.1}}")
    time.sleep(DELAY_S)
    say(
        f"{TRAIN} {stamp()} train_metric_utils.py:40 - perf {n}: "
        f"{{'perf/train_time': 9.0, 'perf/step_time': {60.0 + n}}}"
    )


def on_sigterm(signum, frame):
    say("fake trainer: SIGTERM, shutting down")
    sys.exit(143)


if os.environ.get("FAKE_IGNORE_SIGTERM"):
    signal.signal(signal.SIGTERM, lambda s, f: say("fake trainer: ignoring SIGTERM"))
else:
    signal.signal(signal.SIGTERM, on_sigterm)

say(f"Running entrypoint for job raysubmit_fake: python3 train.py {shlex.join(ARGS)}")
argument_dump()
if SCENARIO == "no_metrics":
    say("nothing to train on")
    sys.exit(0)
if SCENARIO == "burst":
    lines = int(os.environ.get("FAKE_BURST_LINES", "100000"))
    for i in range(lines):
        sys.stdout.write(f'INFO:     127.0.0.1:5{i % 10000:04d} - "POST /generate HTTP/1.1" 200 OK line={i}\n')
        if i == lines // 2:
            sys.stdout.write("BIG " + "x" * (1024 * 1024) + " END\n")
    sys.stdout.flush()
if SCENARIO == "ticks":
    for i in range(int(os.environ.get("FAKE_TICKS", "100"))):
        say(f"tick {i}")
        time.sleep(float(os.environ.get("FAKE_TICK_S", "0.02")))
for n in range(STEPS):
    say(f"INFO noise line before step {n}")
    step(n)
    if SCENARIO == "oom" and n == 0:
        say("Traceback (most recent call last):")
        say('  File "/root/miles/train.py", line 90, in <module>')
        say("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
        sys.exit(1)
    if SCENARIO == "hang" and n == 0:
        say(f"{ROLLOUT} {stamp()} metrics.py:123 - perf 1: {{'perf/rollout_time': 55.5}}")  # step 1 never ends
        echoed = [name for name in os.environ.get("FAKE_ECHO_ENV", "").split(",") if name]
        while True:
            say("INFO still generating" + "".join(f" {name}={os.environ.get(name, '')}" for name in echoed))
            time.sleep(0.2)
gate = os.environ.get("FAKE_GATE")
while gate and not os.path.exists(gate):
    time.sleep(0.02)
say("training done")
