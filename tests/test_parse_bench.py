"""The parser's benchmark (bench/parse_throughput.py) reads what Miles prints and checks what it measures: its logs
hold the noise real logs hold, and line by line and batch reading are compared by content, not by the order of
their keys."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from harness.mileslog import LogParser, ParsedLog, parse_file
from harness.mileslog.lines import count_noise

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("parse_throughput", REPO / "bench" / "parse_throughput.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line_by_line(log: Path) -> ParsedLog:
    parser = LogParser()
    with log.open(encoding="utf-8", errors="replace", newline="\n") as handle:
        for line in handle:
            parser.feed(line)
    return parser.result()


@pytest.mark.parametrize("shape", ["long run", "run mix"])
def test_the_bench_logs_hold_ft_lines_and_words_with_ft_in_them(bench: ModuleType, tmp_path: Path, shape: str) -> None:
    log = tmp_path / "bench.log"
    if shape == "long run":
        bench.build_log(log, 5000, 400)
    else:
        bench.build_run_mix(log, 5000)
    lines = log.read_text(encoding="utf-8").splitlines()
    ft_lines = [line for line in lines if " ft event=" in line]
    words = [line for line in lines if "ft " in line and not count_noise(line)]  # left, soft, draft: no noise
    assert ft_lines and len(words) > len(lines) // 50
    parsed = parse_file(log)
    assert parsed.noise["ft"] == len(ft_lines)
    assert parsed.noise["first_rollout_sample"] == parsed.noise["finish_rollout"] > 0


def test_line_by_line_and_batch_agree_by_content_whatever_the_order_of_keys(bench: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "bench.log"
    bench.build_log(log, 5000, 400)
    live, batch = line_by_line(log), parse_file(log)
    # The case in point: the two readings list the noise kinds in different orders (first seen, or counted at once).
    assert list(live.noise) != list(batch.noise)
    assert bench.same_content(live, batch)
    changed = parse_file(log)
    changed.noise["ft"] += 1
    assert not bench.same_content(live, changed)
    changed = parse_file(log)
    changed.steps[-1].train_steps[0]["train/loss"] = -1.0  # a step line the document leaves out
    assert not bench.same_content(live, changed)
