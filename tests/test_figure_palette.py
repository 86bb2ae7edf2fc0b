"""Colours and markers mean the same thing in every figure the harness draws (harness/summary/palette.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.summary import palette
from harness.summary.figures import draw_reward, draw_rollout_time
from harness.summary.summarize import summarize

if TYPE_CHECKING:  # matplotlib is loaded by the tests that draw, not by every worker that collects this module
    from matplotlib.figure import Figure

DATA = Path(__file__).resolve().parent / "data" / "captures"


def looks_by_gid(figure: Figure) -> dict[str, tuple[str, str, bool]]:
    """Each marked series of a figure: its gid's (colour, marker, filled)."""
    from matplotlib.colors import to_hex

    found = {}
    for axes in figure.axes:
        for line in axes.get_lines():
            gid, marker = line.get_gid(), str(line.get_marker())
            if gid and marker not in ("None", "", " "):
                filled = line.get_markerfacecolor() != "none"
                found[gid] = (to_hex(line.get_color()), marker, filled)
    return found


def test_no_two_roles_share_a_colour_and_marker():
    looks = palette.role_looks()
    keys = [(look.color, look.marker, look.filled) for look in looks.values()]
    assert len(set(keys)) == len(keys), looks


def test_line_roles_take_colours_no_marked_role_uses():
    marked = {look.color for name, look in palette.role_looks().items() if name not in ("difference", "throttled")}
    lines = palette.line_colors()
    assert len(set(lines.values())) == len(lines)
    assert not marked & {color for name, color in lines.items() if name != "band"}


def test_the_look_of_k_batches_depends_on_k_alone():
    assert palette.batches_look(1) != palette.batches_look(2)
    assert palette.batches_look(9) == palette.batches_look(6)  # six or more share the last look
    assert palette.STUDIED not in {palette.batches_look(k) for k in range(1, 8)}


@pytest.fixture(scope="module")
def lab_looks() -> dict[str, dict[str, tuple[str, str, bool]]]:
    document = summarize(DATA / "lab")
    (comparison,) = document.comparisons
    return {
        "rollout": looks_by_gid(draw_rollout_time(document, comparison)),
        "reward": looks_by_gid(draw_reward(document, comparison)),
    }


def _look(look: palette.Look) -> tuple[str, str, bool]:
    from matplotlib.colors import to_hex

    return (to_hex(look.color), look.marker, look.filled)


def test_each_series_of_the_write_up_figures_wears_its_role(lab_looks):
    rollout, reward = lab_looks["rollout"], lab_looks["reward"]
    assert rollout["rollout-batches-1"] == _look(palette.batches_look(1))
    assert rollout["rollout-batches-2"] == _look(palette.batches_look(2))
    assert rollout["rollout-baseline"] == _look(palette.BASELINE)
    assert reward["reward-baseline"] == _look(palette.BASELINE)
    assert reward["reward-run"] == _look(palette.STUDIED)


def test_one_look_never_means_two_things_across_figures(lab_looks):
    """In one figure a blue circle meant "one batch", in the next "the filter run": never again."""
    meaning: dict[tuple[str, str, bool], set[str]] = {}
    for looks in lab_looks.values():
        for gid, look in looks.items():
            role = gid.split("-", 1)[1]  # the figure's prefix off: batches-1, baseline, run
            meaning.setdefault(look, set()).add(role)
    shared = {look: roles for look, roles in meaning.items() if len(roles) > 1}
    assert not shared, f"one look, several meanings: {shared}"


def test_incomplete_steps_are_open_circles():
    document = summarize(DATA / "edge")
    comparison = next(c for c in document.comparisons if c.run == "old-filter")
    rollout = looks_by_gid(draw_rollout_time(document, comparison))
    assert rollout["rollout-incomplete"] == _look(palette.INCOMPLETE)
    assert not palette.INCOMPLETE.filled
