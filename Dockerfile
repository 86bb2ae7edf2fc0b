# The lab image: a Miles image plus the lab's entry (harness/lab/entry.py).
#
#   make image MILES_BASE=<a Miles image built for your GPU> [MILES_COMMIT=<sha>]
#
# A GB10 (sm_121, aarch64) needs a base built for it: see docs/lab-image.md.
# Builds with the classic builder and BuildKit alike; needs no network unless
# MILES_COMMIT names a commit the base's Miles checkout does not have yet.
# The Miles commit the image holds (the base's too, when MILES_COMMIT is empty
# and MILES_DIR is a git checkout) is recorded in /opt/miles-gb10-lab/miles-commit,
# where the harness's image preflight reads it.
ARG MILES_BASE=radixark/miles:latest
FROM ${MILES_BASE}

ARG MILES_BASE
# The Miles main the lab ran (it logs rollout/raw_reward_unfiltered).
# Empty keeps the base's Miles as it is.
ARG MILES_COMMIT=08752a12
ARG MILES_DIR=/root/miles

RUN set -eu; \
    if [ -n "${MILES_COMMIT}" ]; then \
        cd "${MILES_DIR}"; \
        git rev-parse --git-dir >/dev/null \
            || { echo "${MILES_DIR} is not a git checkout: build with MILES_COMMIT= to keep the base's Miles" >&2; exit 1; }; \
        if ! git cat-file -e "${MILES_COMMIT}^{commit}" 2>/dev/null; then \
            if [ "$(git rev-parse --is-shallow-repository)" = true ]; then \
                git fetch --quiet --unshallow origin; \
            else \
                git fetch --quiet origin; \
            fi; \
        fi; \
        git -c advice.detachedHead=false checkout --quiet "${MILES_COMMIT}"; \
        echo "Miles checked out at $(git rev-parse HEAD)"; \
        pip install --quiet --no-deps --no-build-isolation -e .; \
    fi; \
    test -f "${MILES_DIR}/train.py" \
        || { echo "no train.py in ${MILES_DIR}: is ${MILES_BASE} a Miles image? (set MILES_DIR otherwise)" >&2; exit 1; }; \
    mkdir -p /opt/miles-gb10-lab; \
    if git -C "${MILES_DIR}" rev-parse --verify --quiet HEAD >/dev/null 2>&1; then \
        git -C "${MILES_DIR}" rev-parse --short=8 HEAD > /opt/miles-gb10-lab/miles-commit; \
    fi

LABEL org.miles-gb10-lab.miles-base="${MILES_BASE}" \
      org.miles-gb10-lab.miles-commit="${MILES_COMMIT:-base}"

ENV MILES_DIR=${MILES_DIR} \
    PYTHONUNBUFFERED=1 \
    RAY_DEDUP_LOGS=0 \
    RAY_memory_monitor_refresh_ms=0

COPY harness/lab/ /opt/miles-gb10-lab/
WORKDIR ${MILES_DIR}
ENTRYPOINT ["python3", "/opt/miles-gb10-lab/entry.py"]
CMD []
