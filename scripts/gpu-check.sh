#!/usr/bin/env bash
# The heat guard on a real NVIDIA GPU: what NVML answers, then a burn that the guard pauses.
#
#   1. prints `harness guard probe` (each NVML query with its answer, the
#      thresholds, the thermal zones);
#   2. measures the idle temperature (the hottest GPU, as the guard reads it);
#   3. runs a PyTorch matmul loop on every GPU for about DURATION_S seconds,
#      through the harness's process engine, guarded by NVML with pause_at_c
#      PAUSE_DELTA_C above the idle temperature, resume_at_c RESUME_DELTA_C
#      above it, and a short min_pause_s;
#   4. reports each pause window (when, how long, why) and how far the
#      temperature fell during it, from the run's pauses.jsonl and guard.jsonl.
# It exits 0 when the guard paused the burn at least once and the GPU cooled
# during a pause, 1 otherwise (or when there is no GPU), with the reason.
#
# Needs: an NVIDIA driver, and a python3 with PyTorch (CUDA) and nvidia-ml-py.
# Docker is not needed. The harness is installed into a virtual environment
# that also sees the machine's packages (--system-site-packages: its torch,
# nvidia-ml-py, typer, rich, pandas); what the machine lacks (pydantic, ...)
# comes from:
#   WHEELDIR=DIR   pip install --no-index --find-links DIR .   (no network)
#   otherwise      pip install .                                (a package index)
# To fill a WHEELDIR on a machine with network, for the GPU machine's Python
# version and CPU architecture (add --platform/--python-version when they differ):
#   pip download --dest wheels setuptools wheel ./miles-gb10-lab
#
# Usage: scripts/gpu-check.sh
#        scripts/gpu-check.sh --write-experiment DIR IDLE_C   (the experiment and burner only; for tests)
#        scripts/gpu-check.sh --report RUN_DIR                (the report of a capture only)
# Environment:
#   PYTHON          the python3 with PyTorch (default: python3)
#   DURATION_S      length of the burn in seconds (default: 120)
#   PAUSE_DELTA_C   pause_at_c above the idle temperature (default: 4)
#   RESUME_DELTA_C  resume_at_c above the idle temperature (default: 2)
#   MIN_PAUSE_S     the guard's min_pause_s (default: 5)
#   POLL_S          the guard's poll_s (default: 0.5)
#   GPU_CHECK_DIR   where the venv, the experiment and the capture go (default: a new temporary directory, kept)
#   VENV            a virtual environment that already has the harness (skips the install)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
DURATION_S=${DURATION_S:-120}
PAUSE_DELTA_C=${PAUSE_DELTA_C:-4}
RESUME_DELTA_C=${RESUME_DELTA_C:-2}
MIN_PAUSE_S=${MIN_PAUSE_S:-5}
POLL_S=${POLL_S:-0.5}
RUN=gpu-burn

say() { echo "gpu-check: $*" >&2; }
die() { say "$*"; exit 1; }

# The burner: a bf16 matmul loop on every GPU PyTorch sees, printing one
# Miles-shaped step every STEP seconds so the harness records steps as it
# does for a trainer (a pause shows as a longer step).
write_burner() {
    cat >"$1" <<'PY'
"""A GPU burner for scripts/gpu-check.sh: matmuls on every GPU, one Miles-shaped step every few seconds."""
import argparse
import sys
import time

ROLLOUT = "(RolloutManager pid=1)"
TRAIN = "(MegatronTrainRayActor pid=1)"


def step_lines(step, seconds, matmuls):
    """What Miles prints for one step, as the harness's parser reads it."""
    stamp = time.strftime("[%Y-%m-%d %H:%M:%S]")
    return [
        f"{ROLLOUT} {stamp} burn.py:1 - perf {step}: {{'perf/rollout_time': {seconds:.3f}, 'burn/matmuls': {matmuls}}}",
        f"{TRAIN} {stamp} burn.py:2 - rollout {step}: {{'rollout/raw_reward': 0.0}}",
        f"{TRAIN} {stamp} burn.py:3 - step {step}: {{'train/step': {step}}}",
        f"{TRAIN} {stamp} burn.py:4 - perf {step}: {{'perf/train_time': 0.0, 'perf/step_time': {seconds:.3f}}}",
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--size", type=int, default=8192)
    args, _ = parser.parse_known_args()
    import torch

    if not torch.cuda.is_available():
        print("burn: PyTorch sees no CUDA GPU", flush=True)
        return 1
    devices = [torch.device(f"cuda:{i}") for i in range(torch.cuda.device_count())]
    pairs = [(torch.randn(args.size, args.size, device=d, dtype=torch.bfloat16),
              torch.empty(args.size, args.size, device=d, dtype=torch.bfloat16)) for d in devices]
    print(f"burn: {len(devices)} GPU(s), {args.size}x{args.size} bf16 matmuls, {args.seconds:g} s", flush=True)
    step_s = args.seconds / args.steps
    for step in range(args.steps):
        began, matmuls = time.monotonic(), 0
        while time.monotonic() - began < step_s:  # frozen time counts: a paused step is a longer step
            for a, out in pairs:
                torch.matmul(a, a, out=out)
            matmuls += 1
            if matmuls % 16 == 0:
                for device in devices:
                    torch.cuda.synchronize(device)
        for device in devices:
            torch.cuda.synchronize(device)
        for line in step_lines(step, time.monotonic() - began, matmuls * len(devices)):
            print(line, flush=True)
    print("burn: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
PY
}

# The experiment: the process engine runs the burner, guarded by NVML around the idle temperature.
write_experiment() {
    local dir=$1 idle_c=$2 python=$3
    mkdir -p "$dir/experiments"
    write_burner "$dir/burn.py"
    "$python" - "$dir" "$idle_c" "$python" <<'PY'
import json, math, sys
from pathlib import Path
import os

directory, idle_c, python = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
duration_s = float(os.environ.get("DURATION_S", "120"))
steps = max(1, int(duration_s // 10))
pause_at = idle_c + float(os.environ.get("PAUSE_DELTA_C", "4"))
resume_at = idle_c + float(os.environ.get("RESUME_DELTA_C", "2"))
min_pause_s = float(os.environ.get("MIN_PAUSE_S", "5"))
experiment = {
    "name": "gpu-burn",
    "description": f"scripts/gpu-check.sh: matmuls on every GPU for {duration_s:g} s under the heat guard "
                   f"(idle {idle_c:g} C)",
    "steps": steps,
    "engine": "process",
    "command": [python, "-u", str(directory / "burn.py"), "--seconds", f"{duration_s:g}", "--steps", str(steps)],
    "container": {"gpus": "all"},
    "guard": {
        "sensor": "nvml", "pause_at_c": pause_at, "resume_at_c": resume_at,
        "poll_s": float(os.environ.get("POLL_S", "0.5")), "min_pause_s": min_pause_s,
        # Long enough to cool the few degrees back; a GPU that cannot is resumed rather than held.
        "max_pause_s": max(60.0, 4 * min_pause_s), "on_max_pause": "resume",
        "record_every_s": 1.0,
    },
    "limits": {"max_minutes": math.ceil(duration_s / 60) + 10},
}
(directory / "experiments" / "gpu-burn.yaml").write_text(json.dumps(experiment, indent=2, allow_nan=False) + "\n")  # JSON is YAML
PY
}

# The report: each pause window of the run, and the temperature's fall during it.
report() {
    local run_dir=$1 python=$2
    "$python" - "$run_dir" <<'PY'
import json, sys
from pathlib import Path

from harness.capture import read_status
from harness.fs.bounded import read_jsonl
from harness.capture.reader import read_pauses
from harness.times import format_time_us, parse_time_us

run_dir = Path(sys.argv[1])
found = read_status(run_dir)
if found.status is None:
    sys.exit(f"gpu-check: no run in {run_dir} ({found.broken or 'no status.json'})")
status = found.status
manifest = json.loads((run_dir / "manifest.json").read_text())
facts = manifest.get("guard") or {}
config = (manifest.get("experiment") or {}).get("guard") or {}
notes = []
windows = read_pauses(run_dir / "pauses.jsonl", notes)
samples = [(parse_time_us(s.get("t")), s.get("temp_c")) for s in read_jsonl(run_dir / "guard.jsonl")]
samples = [(t, c) for t, c in samples if t is not None and isinstance(c, (int, float))]
print(f"run {status.run}: {status.state}, {status.steps_complete}/{status.steps_expected} steps"
      + (f" ({status.error})" if status.error else ""))
gpus = ", ".join(str(d.get("name")) for d in facts.get("devices", []))
print(f"guard: sensor {facts.get('picked')}" + (f" ({gpus})" if gpus else "")
      + f", pause at {config.get('pause_at_c')} C, resume at {config.get('resume_at_c')} C, "
      f"min pause {config.get('min_pause_s')} s, a reading every {config.get('poll_s')} s")
hottest = max((c for _, c in samples), default=None)
print(f"temperature: {len(samples)} samples, hottest {hottest:.1f} C" if hottest is not None
      else "temperature: no samples")
print(f"{'window':>6}  {'start (UTC)':<15} {'length':>8}  {'peak':>7}  {'at resume':>9}  {'fall':>6}  reason")
cooled = 0
peaks = {parse_time_us(w.get("start")): w.get("peak_c") for w in read_jsonl(run_dir / "pauses.jsonl")}
for number, window in enumerate(windows, 1):
    end = window.end_us
    # The reading that paused it (taken just before the window opened), then those while paused.
    before = [(t, c) for t, c in samples if t < window.start_us][-1:]
    during = before + [(t, c) for t, c in samples if window.start_us <= t <= (end if end is not None else t)]
    recorded = peaks.get(window.start_us)
    temps = [c for _, c in during] + ([recorded] if isinstance(recorded, (int, float)) else [])
    peak = max(temps, default=None)
    last = during[-1][1] if during else None
    fall = peak - last if peak is not None and last is not None else None
    if fall is not None and fall > 0:
        cooled += 1
    length = f"{(end - window.start_us) / 1e6:.1f} s" if end is not None else "open"
    print(f"{number:>6}  {format_time_us(window.start_us)[11:26]:<15} {length:>8}  "
          f"{'-' if peak is None else f'{peak:.1f} C':>7}  {'-' if last is None else f'{last:.1f} C':>9}  "
          f"{'-' if fall is None else f'{fall:.1f} C':>6}  {window.reason}")
for note in notes:
    print(f"note: {note}")
if not windows:
    sys.exit("gpu-check: the guard never paused the burn: the GPU did not reach pause_at_c"
             + (f" (hottest {hottest:.1f} C)" if hottest is not None else ""))
if not cooled:
    sys.exit(f"gpu-check: {len(windows)} pause(s), but the temperature did not fall during any of them")
print(f"gpu-check: OK: {len(windows)} pause(s); the GPU cooled during {cooled} of them")
PY
}

case "${1:-}" in
    --write-experiment)
        [ $# -eq 3 ] || die "usage: $0 --write-experiment DIR IDLE_C"
        write_experiment "$2" "$3" "$PYTHON"
        exit 0 ;;
    --report)
        [ $# -eq 2 ] || die "usage: $0 --report RUN_DIR"
        report "$2" "$PYTHON"
        exit $? ;;
    "") ;;
    *) die "unknown argument $1 (usage: $0 [--report RUN_DIR | --write-experiment DIR IDLE_C])" ;;
esac

# --- a GPU, a driver, PyTorch that sees it ---------------------------------------------------------
command -v nvidia-smi >/dev/null 2>&1 \
    || die "no NVIDIA driver here (nvidia-smi not found): run this on a machine with an NVIDIA GPU"
nvidia-smi -L 2>/dev/null | grep -q '^GPU ' \
    || die "nvidia-smi lists no GPU: $(nvidia-smi -L 2>&1 | head -n 1)"
command -v "$PYTHON" >/dev/null 2>&1 || die "no $PYTHON (set PYTHON to the python3 that has PyTorch)"
"$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null \
    || die "PyTorch cannot use a GPU from $PYTHON (set PYTHON to one with a CUDA build of PyTorch)"

# --- the harness, in a virtual environment ---------------------------------------------------------
WORK=${GPU_CHECK_DIR:-$(mktemp -d -t gpu-check.XXXXXX)}
mkdir -p "$WORK"
if [ -n "${VENV:-}" ]; then
    [ -x "$VENV/bin/harness" ] || die "VENV=$VENV has no harness (bin/harness)"
else
    VENV=$WORK/venv
    if [ ! -x "$VENV/bin/harness" ]; then
        say "installing the harness into $VENV"
        "$PYTHON" -m venv --system-site-packages "$VENV"
        SRC=$WORK/src  # a clean copy: building from the checkout would leave build/ and egg-info in it
        rm -rf "$SRC" && mkdir -p "$SRC"
        cp -r "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/harness" "$SRC/"
        if [ -n "${WHEELDIR:-}" ]; then
            (cd "$SRC" && "$VENV/bin/pip" install --quiet --no-index --find-links "$WHEELDIR" .) \
                || die "pip could not install the harness from WHEELDIR=$WHEELDIR (see above for what is missing)"
        else
            (cd "$SRC" && "$VENV/bin/pip" install --quiet .) || die "pip could not install the harness (see above)"
        fi
    fi
fi
HPY=$VENV/bin/python
HARNESS=$VENV/bin/harness

# --- 1. what NVML answers ----------------------------------------------------------------------------
echo "== harness guard probe"
"$HARNESS" guard probe || die "harness guard probe found no temperature to read (above)"

# --- 2. the idle temperature, as the guard reads it (the hottest GPU) --------------------------------
IDLE_C=$("$HPY" - <<'PY'
import time
from harness.guard.nvml import NvmlSensor

sensor = NvmlSensor.open()
readings = []
for _ in range(10):
    sample = sensor.read()
    if sample is not None and sample.temp_c is not None:
        readings.append(sample.temp_c)
    time.sleep(0.5)
sensor.close()
print(max(readings) if readings else "")
PY
)
[ -n "$IDLE_C" ] || die "NVML gave no temperature while idle"
echo "== idle temperature: $IDLE_C C (pause at +$PAUSE_DELTA_C C, resume at +$RESUME_DELTA_C C)"

# --- 3. the guarded burn -----------------------------------------------------------------------------
write_experiment "$WORK" "$IDLE_C" "$HPY"
echo "== burning for $DURATION_S s under the guard (experiment: $WORK/experiments/$RUN.yaml)"
set +e
HARNESS_PROCESS_DIR=$WORK/processes "$HARNESS" run "$RUN" --force \
    --experiments-dir "$WORK/experiments" --capture-dir "$WORK/capture"
RUN_CODE=$?
set -e
[ -f "$WORK/capture/$RUN/status.json" ] || die "the run did not start (exit code $RUN_CODE, above)"

# --- 4. the pause windows and the fall in temperature ------------------------------------------------
echo "== pause windows"
report "$WORK/capture/$RUN" "$HPY"
echo "capture: $WORK/capture/$RUN"
