"""`make data`: the model and the data set from the Hugging Face hub, into MILES_LAB_DATA.

    python scripts/fetch-data.py MODEL_REPO MODEL_DIR DATASET_REPO DATASET_DIR

A directory already prepared (config.json, train.parquet) is left as it is, so
`make data MILES_LAB_DATA=<prepared dir>` works without the network. Anything
that goes wrong is one line on stderr and exit status 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

NEEDS = (
    "needs internet to reach the Hugging Face hub, or MILES_LAB_DATA pointing at a prepared directory "
    "(models/<model>/config.json and <data set>/train.parquet)"
)


def fail(message: str) -> None:
    print(f"make data: {message}", file=sys.stderr)
    raise SystemExit(1)


def main(model_repo: str, model_dir: str, dataset_repo: str, dataset_dir: str) -> None:
    model, dataset = Path(model_dir), Path(dataset_dir)
    if not ((model / "config.json").is_file() and (dataset / "train.parquet").is_file()):
        try:
            from huggingface_hub import snapshot_download
        except ImportError:
            fail(f"huggingface_hub is not installed (the Makefile installs it: that {NEEDS})")
        for repo, where, kind in ((model_repo, model, "model"), (dataset_repo, dataset, "dataset")):
            try:
                snapshot_download(repo, repo_type=kind, local_dir=str(where))
            except Exception as err:  # noqa: BLE001 - offline, refused, a name that does not exist: said in one line
                first = (str(err).strip().splitlines() or [type(err).__name__])[0]
                fail(f"cannot download {repo} ({type(err).__name__}: {first[:200]}): it {NEEDS}")
        if not ((model / "config.json").is_file() and (dataset / "train.parquet").is_file()):
            fail(f"no {model / 'config.json'} or {dataset / 'train.parquet'} after the download")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        fail("usage: fetch-data.py MODEL_REPO MODEL_DIR DATASET_REPO DATASET_DIR")
    main(*sys.argv[1:])
