"""The image preflight's parts without Docker: which paths it asks about, what the answer means, the cache,
and the probe itself run by this machine's Python against stub `miles` trees laid out like each version."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import pytest

from harness.engines import milesimage
from harness.engines.milesimage import ImageCheck, PathFlag, judge, path_flags, paths_to_probe, probe_image
from harness.lab.milesargv import read_base_args
from harness.lab.milesnames import FILTER_FLAG, FILTER_PATH, FILTER_PATH_PUBLIC

PUBLIC = ImageCheck(
    "sha256:public",
    version="0.2.0",
    found=True,
    prints_unfiltered_reward=False,
    paths={
        FILTER_PATH: "ModuleNotFoundError: No module named 'miles.rollout.filter_hub.common_filters'",
        FILTER_PATH_PUBLIC: None,
    },
)


def test_every_dotted_path_flag_is_checked_and_files_and_other_flags_are_not() -> None:
    argv = [
        "python3",
        "train.py",
        *read_base_args(),
        "--dynamic-sampling-filter-path",
        "a.b.old",
        "--dynamic-sampling-filter-path",
        FILTER_PATH,  # the last one wins, as in argparse
        "--custom-rm-path",
        "my_rewards.score",
        "--rollout-function-path",
        "/abs/file/path.py",
        "--load-path",
        "checkpoint.pt",
        "--eval-function-path",
        "plain",
    ]
    assert path_flags(argv) == [PathFlag(FILTER_FLAG, FILTER_PATH), PathFlag("--custom-rm-path", "my_rewards.score")]
    assert path_flags(["python3", "train.py", *read_base_args()]) == []


def test_with_a_filter_both_filter_paths_are_asked_about() -> None:
    assert paths_to_probe([PathFlag(FILTER_FLAG, FILTER_PATH)]) == [FILTER_PATH, FILTER_PATH_PUBLIC]
    assert paths_to_probe([PathFlag("--custom-rm-path", "m.f")]) == ["m.f"]


def test_a_missing_filter_path_is_one_line_naming_the_miles_both_paths_and_the_two_fixes() -> None:
    (problem,) = judge("lab:latest", PUBLIC, [PathFlag(FILTER_FLAG, FILTER_PATH)])
    assert "\n" not in problem.message and problem.exit_code == 2
    assert problem.message.startswith("the image lab:latest holds Miles 0.2.0 (no commit recorded), which has no ")
    assert FILTER_PATH in problem.message and f"the path it has is {FILTER_PATH_PUBLIC}" in problem.message
    assert f"set {FILTER_FLAG} {FILTER_PATH_PUBLIC} in the experiment" in problem.message
    assert "`make image MILES_COMMIT=08752a12`" in problem.message
    assert judge("lab:latest", PUBLIC, [PathFlag(FILTER_FLAG, FILTER_PATH_PUBLIC)]) == []


def test_a_miles_named_by_its_commit_and_one_without_any_name() -> None:
    assert ImageCheck("x", commit="08752a12", version="0.3").miles_name() == "Miles 08752a12"
    assert ImageCheck("x").miles_name() == "a Miles with no commit recorded and no version"


def test_an_image_without_miles_is_not_judged() -> None:
    check = ImageCheck("x", found=False, paths={FILTER_PATH: "ModuleNotFoundError: No module named 'miles'"})
    assert judge("miles-gb10-lab/fake:test", check, [PathFlag(FILTER_FLAG, FILTER_PATH)]) == []


class Prober:
    """A probe that answers from a fixed check, counting its calls."""

    def __init__(self, check: ImageCheck) -> None:
        self.check, self.calls = check, []

    def __call__(self, image: str, argv: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        data = {**self.check.to_json(), "paths": {p: self.check.paths.get(p) for p in argv[1:]}}
        import json

        return 0, "noise\n" + milesimage.PROBE_MARKER + json.dumps(data) + "\n", ""


def test_a_check_is_asked_once_per_image_and_paths_and_kept(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("HARNESS_PREFLIGHT_DIR", str(tmp_path))
    prober = Prober(PUBLIC)
    first = probe_image("lab", "sha256:public", [FILTER_PATH, FILTER_PATH_PUBLIC], prober)
    assert first.check is not None and not first.cached and first.check.paths == PUBLIC.paths
    again = probe_image("lab", "sha256:public", [FILTER_PATH_PUBLIC], prober)
    assert again.cached and len(prober.calls) == 1
    more = probe_image("lab", "sha256:public", ["m.f"], prober)  # a new path: asked, with the ones known
    assert not more.cached and prober.calls[-1][1:] == sorted([FILTER_PATH, FILTER_PATH_PUBLIC, "m.f"])
    assert probe_image("lab", "sha256:other", [FILTER_PATH_PUBLIC], prober).cached is False  # another image id


def test_a_probe_that_cannot_run_or_answer_leaves_the_image_unchecked(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("HARNESS_PREFLIGHT_DIR", str(tmp_path))

    def no_python(image: str, argv: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
        raise milesimage.ProbeError("python3 does not start in busybox: executable file not found")

    outcome = probe_image("busybox", "sha256:b", [FILTER_PATH], no_python)
    assert outcome.check is None and outcome.reason == (
        "not checked: python3 does not start in busybox: executable file not found"
    )
    silent = probe_image("odd", "sha256:o", [FILTER_PATH], lambda *a: (1, "", "Traceback...\nSyntaxError: x\n"))
    assert silent.check is None and silent.reason == "not checked: python3 in the image gave no answer (SyntaxError: x)"
    assert milesimage.check_facts(None, reason=silent.reason) == {"checked": False, "reason": silent.reason}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.integration
def test_the_probe_reads_each_layout_from_its_source_without_running_it(tmp_path: Path) -> None:
    # -I leaves the working directory off sys.path: put it back as the image's WORKDIR is
    write_tree(
        tmp_path / "write-up",
        {
            "miles/__init__.py": "",
            "miles/rollout/__init__.py": "",
            "miles/rollout/filter_hub/__init__.py": "",
            "miles/rollout/filter_hub/common_filters.py": (
                "import no_such_heavy_dependency  # never imported by the probe\n"
                "def apply_reward_nonzero_std_filter(args, samples): return True\n"
            ),
            "miles/rollout/filter_hub/dynamic_sampling_filters.py": (
                "from .common_filters import apply_reward_nonzero_std_filter as check_reward_nonzero_std\n"
            ),
            "miles/utils/metrics.py": "KEY = 'rollout/raw_reward_unfiltered'\n",
            "miles/utils/lazy.py": "def __getattr__(name):\n    raise AttributeError(name)\n",
        },
    )
    (tmp_path / "commit").write_text("08752a12\n")
    probe = milesimage.PROBE.replace("import ast,", "import sys; sys.path.insert(0, ''); import ast,", 1)
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            probe,
            str(tmp_path / "commit"),
            FILTER_PATH,
            FILTER_PATH_PUBLIC,
            "miles.utils.lazy.thing",
            "miles.nothing.here",
        ],
        cwd=tmp_path / "write-up",
        capture_output=True,
        text=True,
        timeout=60,
    )
    check = milesimage.read_probe_output("local", done.stdout)
    assert check is not None, done.stderr
    assert (check.commit, check.found, check.prints_unfiltered_reward) == ("08752a12", True, True)
    assert check.paths[FILTER_PATH] is None and check.paths[FILTER_PATH_PUBLIC] is None
    assert check.paths["miles.utils.lazy.thing"] == "AttributeError: thing"  # a module __getattr__: imported
    assert check.paths["miles.nothing.here"] == "ModuleNotFoundError: No module named 'miles.nothing'"

    write_tree(
        tmp_path / "public",
        {
            "miles/__init__.py": '__version__ = "0.2.0"\n',
            "miles/rollout/__init__.py": "",
            "miles/rollout/filter_hub/__init__.py": "",
            "miles/rollout/filter_hub/dynamic_sampling_filters.py": "def check_reward_nonzero_std(a, s): return 1\n",
        },
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe, str(tmp_path / "no-commit"), FILTER_PATH, FILTER_PATH_PUBLIC],
        cwd=tmp_path / "public",
        capture_output=True,
        text=True,
        timeout=60,
    )
    check = milesimage.read_probe_output("local", done.stdout)
    assert check is not None, done.stderr
    assert (check.commit, check.version, check.prints_unfiltered_reward) == (None, "0.2.0", False)
    assert check.paths[FILTER_PATH] == "ModuleNotFoundError: No module named 'miles.rollout.filter_hub.common_filters'"
    assert check.paths[FILTER_PATH_PUBLIC] is None
