"""The image preflight against fake images: which Miles they hold, and a missing filter path refused in one line.

The images are the fake trainer with a stub `miles` package laid out like
each Miles: the write-up's main (08752a12: both filter paths, prints the
unfiltered reward, its commit recorded as `make image` records it) and the
public snapshot of August 2026 (only the older filter path, no unfiltered
reward, a version and no commit). They run with `gpus: none`; a refusal
happens before any capture is made (how fast: bench/image_preflight.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.lab.milesnames import FILTER_PATH, FILTER_PATH_PUBLIC
from support.images import FAKE_TRAINER_IMAGE, content_tagged
from support.lab import Lab

WRITE_UP_IMAGE = "miles-gb10-lab/miles-08752a12:test"
PUBLIC_IMAGE = "miles-gb10-lab/miles-public-2026-08:test"

FILTER_SOURCE = """def {name}(args, samples, **kwargs):
    rewards = [sample.get_reward_value(args) for sample in samples]
    return len(set(rewards)) > 1
"""
WRITE_UP_TREE = {
    "miles/__init__.py": "",
    "miles/rollout/__init__.py": "",
    "miles/rollout/filter_hub/__init__.py": "",
    "miles/rollout/filter_hub/common_filters.py": FILTER_SOURCE.format(name="apply_reward_nonzero_std_filter"),
    "miles/rollout/filter_hub/dynamic_sampling_filters.py": (
        "from miles.rollout.filter_hub.common_filters import apply_reward_nonzero_std_filter as "
        "check_reward_nonzero_std  # deprecated alias\n"
    ),
    "miles/ray/__init__.py": "",
    "miles/ray/rollout.py": 'def log(d, r):\n    d["rollout/raw_reward_unfiltered"] = r\n',
    "miles/utils/__init__.py": "",
    "miles/utils/rewards.py": "def math_reward(answer, label):\n    return int(answer == label)\n",
}
PUBLIC_TREE = {
    "miles/__init__.py": '__version__ = "0.2.0"\n',
    "miles/rollout/__init__.py": "",
    "miles/rollout/filter_hub/__init__.py": "",
    "miles/rollout/filter_hub/dynamic_sampling_filters.py": FILTER_SOURCE.format(name="check_reward_nonzero_std"),
    "miles/ray/__init__.py": "",
    "miles/ray/rollout.py": 'def log(d, r):\n    d["rollout/raw_reward"] = r\n',
    "miles/utils/__init__.py": "",
    "miles/utils/rewards.py": "def math_reward(answer, label):\n    return int(answer == label)\n",
}


def build_fake_miles(root: Path, docker_build: Any, tag: str, tree: dict[str, str], commit: str | None) -> str:
    context = root / tag.replace("/", "_").replace(":", "_")
    for name, text in tree.items():
        path = context / "root-miles" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    lines = [f"FROM {FAKE_TRAINER_IMAGE}", "COPY root-miles/ /root/miles/"]
    if commit is not None:
        (context / "miles-commit").write_text(commit + "\n")
        lines.append("COPY miles-commit /opt/miles-gb10-lab/miles-commit")
    lines.append("WORKDIR /root/miles")
    (context / "Dockerfile").write_text("\n".join(lines) + "\n")
    return docker_build(context, content_tagged(tag, context))


@pytest.fixture(scope="module")
def fake_miles(fake_trainer: str, docker_build: Any, tmp_path_factory: Any) -> dict[str, str]:
    root = tmp_path_factory.mktemp("fake-miles")
    return {
        "write-up": build_fake_miles(root, docker_build, WRITE_UP_IMAGE, WRITE_UP_TREE, "08752a12"),
        "public": build_fake_miles(root, docker_build, PUBLIC_IMAGE, PUBLIC_TREE, None),
    }


def filter_flags(path: str) -> str:
    return f"--over-sampling-batch-size 48 --dynamic-sampling-filter-path {path}"


def nothing_made(lab: Lab, run: str) -> bool:
    return not (lab.captures / run).exists() and lab.objects() == []


@pytest.mark.docker
def test_a_missing_filter_path_is_refused_in_one_line_before_any_capture(docker_lab: Lab, fake_miles: dict) -> None:
    run = docker_lab.experiment("wrongmiles", image=fake_miles["public"], extra=filter_flags(FILTER_PATH))
    result = docker_lab.cli("run", run)  # its time: bench/image_preflight.py
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    line = result.stderr
    assert f"the image {fake_miles['public']} holds Miles 0.2.0 (no commit recorded)" in line
    assert f"which has no {FILTER_PATH}" in line  # the path that is missing
    assert f"the path it has is {FILTER_PATH_PUBLIC}" in line  # the path that exists
    assert f"set --dynamic-sampling-filter-path {FILTER_PATH_PUBLIC} in the experiment" in line  # fix 1
    assert "build the image from Miles 08752a12 (`make image MILES_COMMIT=08752a12`)" in line  # fix 2
    assert nothing_made(docker_lab, run)


@pytest.mark.docker
def test_the_path_the_image_has_runs_and_the_manifest_names_its_miles(docker_lab: Lab, fake_miles: dict) -> None:
    run = docker_lab.experiment("publicmiles", image=fake_miles["public"], extra=filter_flags(FILTER_PATH_PUBLIC))
    result = docker_lab.cli("run", run)
    assert result.exit_code == 0, result.output
    miles = json.loads((docker_lab.captures / run / "manifest.json").read_text())["miles"]
    assert miles["checked"] is True and miles["commit"] is None and miles["version"] == "0.2.0"
    assert miles["prints_unfiltered_reward"] is False  # judged by its source
    assert miles["paths"][FILTER_PATH_PUBLIC] == "ok"
    assert miles["paths"][FILTER_PATH].startswith("ModuleNotFoundError")


@pytest.mark.docker
def test_the_write_up_miles_is_named_by_its_commit_and_prints_the_unfiltered_reward(
    docker_lab: Lab, fake_miles: dict
) -> None:
    extra = filter_flags(FILTER_PATH) + " --rollout-submission-granularity group"
    run = docker_lab.experiment(
        "writeupmiles", image=fake_miles["write-up"], extra=extra, env={"MILES_USE_LEGACY_ROLLOUT_V1": "1"}
    )
    result = docker_lab.cli("run", run)
    assert result.exit_code == 0, result.output
    miles = json.loads((docker_lab.captures / run / "manifest.json").read_text())["miles"]
    assert (miles["commit"], miles["prints_unfiltered_reward"]) == ("08752a12", True)
    assert miles["paths"] == {FILTER_PATH: "ok", FILTER_PATH_PUBLIC: "ok"}  # the alias is a name bound by import
    assert miles["rollout_submission_granularity"] == "group"
    assert miles["MILES_USE_LEGACY_ROLLOUT_V1"] == "1"


@pytest.mark.docker
def test_any_other_python_path_the_run_passes_is_checked_too(docker_lab: Lab, fake_miles: dict) -> None:
    extra = "--custom-rm-path miles.utils.rewards.no_such_reward"
    run = docker_lab.experiment("badrm", image=fake_miles["write-up"], extra=extra)
    result = docker_lab.cli("run", run)
    assert result.exit_code == 2, result.output
    assert "holds Miles 08752a12, which cannot load miles.utils.rewards.no_such_reward (--custom-rm-path;" in (
        result.stderr
    )
    assert "AttributeError: module 'miles.utils.rewards' has no attribute 'no_such_reward'" in result.stderr
    assert nothing_made(docker_lab, run)


@pytest.mark.docker
def test_dry_run_shows_the_images_miles_and_the_refusal_and_a_second_look_is_cached(
    docker_lab: Lab, fake_miles: dict
) -> None:
    run = docker_lab.experiment("drymiles", image=fake_miles["public"], extra=filter_flags(FILTER_PATH))
    first = docker_lab.cli("run", run, "--dry-run")
    assert first.exit_code == 2, first.output  # the filter path the image lacks: refused, as the run would be
    assert any(
        line.startswith("warning: pre-flight: ") and f"which has no {FILTER_PATH}" in line
        for line in first.stderr.splitlines()
    )
    shown = next(line for line in first.stdout.splitlines() if line.startswith("miles "))
    assert "Miles version 0.2.0" in shown and "does not print rollout/raw_reward_unfiltered" in shown
    assert f"{FILTER_PATH}: ModuleNotFoundError" in shown and f"{FILTER_PATH_PUBLIC}: ok" in shown
    second = docker_lab.cli("run", run, "--dry-run", "--json")
    assert second.exit_code == 2, second.output
    miles = json.loads(second.stdout)["miles"]
    assert miles["cached"] is True and miles["version"] == "0.2.0"
    assert nothing_made(docker_lab, run)


def test_the_dry_runs_miles_lines_fit_the_width_a_path_per_line() -> None:
    from harness.cli.messages import message_lines
    from harness.cli.render import miles_text

    facts = {
        "checked": True,
        "miles_found": True,
        "commit": None,
        "version": "0.2.0",
        "prints_unfiltered_reward": False,
        "paths": {
            FILTER_PATH: "ModuleNotFoundError: No module named 'miles.rollout.filter_hub.common_filters'",
            FILTER_PATH_PUBLIC: "ok",
        },
    }
    first, *below = message_lines("miles           ", miles_text(facts), 100)
    assert first == "miles           Miles version 0.2.0, does not print rollout/raw_reward_unfiltered:"
    assert below[0].startswith(f"  {FILTER_PATH}: ModuleNotFoundError: ")  # each path starts a line of its own
    assert below[-1] == f"  {FILTER_PATH_PUBLIC}: ok"
    assert all(len(line) <= 100 for line in [first, *below])


@pytest.mark.docker
def test_an_image_without_miles_is_not_judged_and_runs(docker_lab: Lab) -> None:
    run = docker_lab.experiment("nomiles", extra=filter_flags(FILTER_PATH))  # the plain fake trainer
    result = docker_lab.cli("run", run)
    assert result.exit_code == 0, result.output
    miles = json.loads((docker_lab.captures / run / "manifest.json").read_text())["miles"]
    assert miles["checked"] is True and miles["miles_found"] is False
