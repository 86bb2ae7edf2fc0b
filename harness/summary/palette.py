"""What each colour and marker means: one meaning in every figure the harness draws.

A reader who learns in one figure that grey squares are the baseline and a
green triangle is a step that needed one batch of prompts reads every other
figure the same way. So figures never take colours from the order in which
they happen to draw series (`C{i}`): each series asks this module for the
look of its role.

- the run or condition under study (the filter): blue, circles;
- the baseline (a run or condition without the filter): grey, squares;
- the spread of the baselines or seeds: a light band in the role's colour;
- a step that needed k batches of prompts: one colour and marker per k,
  whatever other k a figure shows (never blue circles, never grey squares);
- an incomplete step: an open circle, in no role's colour;
- a difference between conditions and its interval: a black diamond;
- the heat guard: pauses in red (shaded windows, the pause threshold),
  resumes in teal, thermal slowdowns as black crosses, and each
  temperature sensor its own colour, from a set no other role uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict


class LineStyle(TypedDict, total=False):
    """The keyword arguments of `Axes.plot` a look sets."""

    color: str
    marker: str
    mfc: str


@dataclass(frozen=True)
class Look:
    """How one role is drawn: a colour, a marker ("" for none) and whether the marker is filled."""

    color: str
    marker: str = ""
    filled: bool = True

    def line(self) -> LineStyle:
        """Keyword arguments for `Axes.plot`: colour, marker and its fill."""
        style: LineStyle = {"color": self.color, "marker": self.marker or "None"}
        if self.marker and not self.filled:
            style["mfc"] = "none"
        return style


STUDIED = Look("#1f77b4", "o")  # the run or condition under study
BASELINE = Look("#595959", "s")  # a baseline run or condition
BASELINE_BAND = "#cccccc"  # lowest to highest baseline
INCOMPLETE = Look("#9467bd", "o", filled=False)  # a step not in the means and medians
DIFFERENCE = Look("#000000", "D")  # a difference of means, with its interval
ZERO_LINE = "#4d4d4d"

PAUSED = "#d62728"  # a pause window, and the threshold that starts one
RESUMED = "#17becf"  # the threshold that ends a pause
THROTTLED = Look("#000000", "x")  # a thermal slowdown clock event

# A step that needed k batches of prompts: the look depends on k alone.
_BATCH_LOOKS = (
    Look("#2ca02c", "^"),
    Look("#ff7f0e", "D"),
    Look("#8c564b", "v"),
    Look("#e377c2", "P"),
    Look("#bcbd22", "X"),
    Look("#7f7f7f", "*"),
)

# Temperature sensors: the GPU first, then thermal zones in the order the record names them.
GPU_TEMPERATURE = "#08306b"
_ZONE_COLORS = ("#e6550d", "#31a354", "#756bb1", "#a6761d", "#636363", "#c51b8a", "#3182bd")


def batches_look(batches: int) -> Look:
    """The look of steps that needed `batches` batches of prompts (the last one for six or more)."""
    return _BATCH_LOOKS[min(max(batches, 1), len(_BATCH_LOOKS)) - 1]


def zone_color(index: int) -> str:
    """The colour of the `index`-th thermal zone a guard record names (from 0), repeating after seven."""
    return _ZONE_COLORS[index % len(_ZONE_COLORS)]


def role_looks() -> dict[str, Look]:
    """Every role with a marker, by name: no two share a colour and marker, so none can be read as another."""
    looks = {
        "studied": STUDIED,
        "baseline": BASELINE,
        "incomplete": INCOMPLETE,
        "difference": DIFFERENCE,
        "throttled": THROTTLED,
    }
    looks.update({f"batches-{k}": look for k, look in enumerate(_BATCH_LOOKS, start=1)})
    return looks


def line_colors() -> dict[str, str]:
    """The colours of roles drawn as lines or shading alone (thresholds, sensors, bands)."""
    colors = {"paused": PAUSED, "resumed": RESUMED, "gpu-temperature": GPU_TEMPERATURE, "band": BASELINE_BAND}
    colors.update({f"zone-{i}": color for i, color in enumerate(_ZONE_COLORS)})
    return colors
