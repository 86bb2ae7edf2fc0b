"""How long the image preflight takes: asked (a container of the image), then cached (no container).

Builds a small image from the offline python image with a stub `miles`
package laid out like the public snapshot of August 2026 (only the older
filter path), then times `DockerEngine.preflight` on a launch spec that
passes the write-up's filter path: the first time it asks the image, the
second time it reads the cache. Prints both, and the one-line refusal.
Goal: well under 30 s asked, well under a second cached.

Needs a Docker engine and the offline python image (make offline-images).
Usage: python bench/image_preflight.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BASE = "miles-gb10-lab/python:3.11-bookworm"
IMAGE = "miles-gb10-lab/miles-public-2026-08:bench"
TREE = {
    "miles/__init__.py": '__version__ = "0.2.0"\n',
    "miles/rollout/__init__.py": "",
    "miles/rollout/filter_hub/__init__.py": "",
    "miles/rollout/filter_hub/dynamic_sampling_filters.py": "def check_reward_nonzero_std(args, samples):\n    return 1\n",
}


def build(context: Path) -> None:
    for name, text in TREE.items():
        path = context / "root-miles" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (context / "Dockerfile").write_text(f"FROM {BASE}\nCOPY root-miles/ /root/miles/\nWORKDIR /root/miles\n")
    subprocess.run(["docker", "build", "--quiet", "--tag", IMAGE, str(context)], check=True, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()

    from harness.engines.docker import DockerEngine
    from harness.experiments.store import ExperimentStore
    from harness.lab.milesnames import FILTER_PATH
    from harness.run.plan import plan_launch

    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        store = ExperimentStore(REPO / "experiments")
        experiment = store.load("e2b-dapo-filter").experiment
        spec = plan_launch(experiment, base_args=store.base_args, capture_root=tmp, project_root=str(REPO), environ={})
        from dataclasses import replace

        spec = replace(spec, image=IMAGE, mounts=(), device_requests=())
        assert FILTER_PATH in spec.trainer_argv
        asked, cached = [], []
        refusal = ""
        for i in range(options.repeat):
            os.environ["HARNESS_PREFLIGHT_DIR"] = str(Path(tmp) / f"cache-{i}")
            for into in (asked, cached):
                started = time.perf_counter()
                problems = DockerEngine().preflight(spec)
                into.append(time.perf_counter() - started)
                refusal = problems[0].message if problems else "(none)"
    print(f"image preflight of {IMAGE} ({options.repeat} runs):")
    print(f"  asked (one container):  median {statistics.median(asked):.2f} s, max {max(asked):.2f} s (goal < 30 s)")
    print(
        f"  cached (no container):  median {statistics.median(cached) * 1000:.1f} ms, max {max(cached) * 1000:.1f} ms"
    )
    print(f"  refusal: {refusal}")
    subprocess.run(["docker", "image", "rm", IMAGE], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
