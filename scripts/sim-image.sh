#!/usr/bin/env bash
# Build the sim image (Dockerfile.sim) on the Docker engine, without a registry:
# its Python base comes from scripts/offline-images.sh when it is missing
# (from this machine's python3 by default: seconds, where debootstrap takes
# a minute or more), then `docker build` (cached: instant when nothing changed).
# The image is labelled with the digest of the simulator it holds and tagged
# miles-gb10-lab/sim:<digest> as well as :latest (`python3 -m harness.sim.image`,
# the rule `harness run --sim` finds its image by): a run takes only the image
# of its checkout's simulator, and two checkouts on one engine keep their own.
#
# Usage: scripts/sim-image.sh [--best-effort | --print-tag]
#   --best-effort   where the image cannot be built (no Docker engine, no
#                   python3 to make the base from), say so in one line and exit
#                   0: `harness run --sim` then runs the simulator on the
#                   process engine (`make demo`, `make run SIM=1` use this)
#   --print-tag     print the tag this checkout's image has, build nothing
# Environment:
#   SIM_PYTHON_FROM  how a missing Python base is made: host (default), auto or
#                    debootstrap (scripts/offline-images.sh --python-from)
set -euo pipefail
cd "$(dirname "$0")/.."

SIM_PYTHON_FROM=${SIM_PYTHON_FROM:-host}
best_effort=0
case ${1:-} in
    --best-effort) best_effort=1 ;;
    --print-tag) exec python3 -m harness.sim.image --tag ;;
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
command -v python3 >/dev/null || cannot "no python3 to tell which simulator the image holds"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# --label org.miles-gb10-lab.sim-digest=<digest> --tag miles-gb10-lab/sim:<digest> --tag miles-gb10-lab/sim:latest
if ! options=$(python3 -m harness.sim.image 2>"$log"); then
    cannot "$(tail -n 1 "$log")"
fi
mapfile -t image_options <<<"$options"
if ! bash scripts/offline-images.sh --only python --python-from "$SIM_PYTHON_FROM" >"$log" 2>&1; then
    cannot "no Python base image: $(tail -n 1 "$log" | sed 's/^offline-images: //')"
fi
if ! docker build --quiet --force-rm --file Dockerfile.sim "${image_options[@]}" . >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    cannot "docker build -f Dockerfile.sim failed (its last lines above)"
fi
echo "sim-image: ${image_options[3]} is built (also tagged ${image_options[5]})"
