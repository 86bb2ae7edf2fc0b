#!/usr/bin/env bash
# Build the sim image (Dockerfile.sim) on the Docker engine, without a registry:
# its Python base comes from scripts/offline-images.sh when it is missing
# (from this machine's python3 by default: seconds, where debootstrap takes
# a minute or more), then `docker build` (cached: instant when nothing changed).
#
# Usage: scripts/sim-image.sh [--best-effort]
#   --best-effort   where the image cannot be built (no Docker engine, no
#                   python3 to make the base from), say so in one line and exit
#                   0: `harness run --sim` then runs the simulator on the
#                   process engine (`make demo`, `make run SIM=1` use this)
# Environment:
#   SIM_PYTHON_FROM  how a missing Python base is made: host (default), auto or
#                    debootstrap (scripts/offline-images.sh --python-from)
set -euo pipefail
cd "$(dirname "$0")/.."

SIM_IMAGE=miles-gb10-lab/sim:latest # harness/run/simswap.py looks for this tag
SIM_PYTHON_FROM=${SIM_PYTHON_FROM:-host}
best_effort=0
case ${1:-} in
    --best-effort) best_effort=1 ;;
    "") ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "sim-image: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

cannot() {
    if [ $best_effort = 1 ]; then
        echo "sim-image: $*: simulated runs use the process engine instead"
        exit 0
    fi
    echo "sim-image: $*" >&2
    exit 1
}

command -v docker >/dev/null || cannot "no docker command (sudo apt-get install docker.io)"
docker info >/dev/null 2>&1 || cannot "no Docker engine answers (sudo systemctl start docker, or set DOCKER_HOST)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! bash scripts/offline-images.sh --only python --python-from "$SIM_PYTHON_FROM" >"$log" 2>&1; then
    cannot "no Python base image: $(tail -n 1 "$log" | sed 's/^offline-images: //')"
fi
if ! docker build --quiet --force-rm --file Dockerfile.sim --tag "$SIM_IMAGE" . >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    cannot "docker build -f Dockerfile.sim failed (its last lines above)"
fi
echo "sim-image: $SIM_IMAGE is built"
