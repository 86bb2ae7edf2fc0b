"""The write-up's two figures, drawn from the summary document alone (SVG, matplotlib Agg).

For each comparison (a run with a `compare` block):

- `rollout-time-<run>.svg` (figure 3.2): rollout seconds per step with the
  pause time taken out; the run's steps marked by the batches of prompts they
  needed, against the baseline's steps and the baseline's median.
- `reward-<run>.svg` (figure 3.3): mean reward per step, the run's reward
  (before the filter, for a filter run) against the baseline, with the band
  between the lowest and highest baseline run at each step.

Titles state the claim the numbers support, captions say what is plotted and
over how many steps and seeds, axes carry units. Text stays text in the SVG
(`svg.fonttype: none`) so it can be read and searched, and each series has a
stable id (`gid`) so tests and readers can find it. Output is deterministic:
no date in the metadata, a fixed hash salt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional

STEP_LABEL = "step (Miles rollout id)"
ROLLOUT_LABEL = "rollout time, pause time taken out (s)"
REWARD_LABEL = "mean reward per answer (score, 0 to 1)"
_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]


def figure_paths(out_dir: Path, run: str) -> dict[str, Path]:
    """Where the two figures of one comparison go."""
    return {"rollout_time": out_dir / f"rollout-time-{run}.svg", "reward": out_dir / f"reward-{run}.svg"}


def _word(n: int) -> str:
    return _WORDS.get(n, str(n))


def _batches(n: int) -> str:
    return f"{_word(n)} batch" if n == 1 else f"{_word(n)} batches"


def _seed_text(run_doc: Mapping[str, Any]) -> str:
    steps = run_doc["aggregates"]["steps"]
    seed = run_doc.get("seed")
    return f"{steps} steps" + (f" with seed {seed}" if seed is not None else "")


def rollout_time_text(document: Mapping[str, Any], comparison: Mapping[str, Any]) -> tuple[str, str]:
    """(title, caption) of the rollout-time figure: the claim the ratios support."""
    run = comparison["run"]
    baseline = comparison["baseline"]
    run_doc = document["runs"][run]
    base_doc = document["runs"].get(baseline)
    groups = comparison["by_batches"]
    ratios = [(int(k), v["ratio"]) for k, v in groups.items() if v["ratio"] is not None]
    if ratios and len(ratios) == 1:
        (k, ratio), = ratios
        title = f"Every step needed {_batches(k)} of prompts and took {ratio:.1f}x the rollout time without the filter"
    elif ratios:
        (k0, r0), rest = ratios[0], ratios[1:]
        title = f"Steps that needed {_batches(k0)} of prompts took {r0:.1f}x the rollout time without the filter, " + (
            ", ".join(f"{_batches(k)} {r:.1f}x" for k, r in rest)
        )
    elif base_doc is None:
        title = f"Rollout time per step of {run} (no capture of the baseline {baseline})"
    else:
        title = f"Rollout time per step of {run} against {baseline}"
    caption = f"Rollout seconds per step with the pause time taken out, {_seed_text(run_doc)}: {run}"
    over, batch = run_doc.get("over_sampling_batch_size"), run_doc.get("rollout_batch_size")
    if groups and over and batch:
        caption += (
            f", marked by the batches of {over} prompts each step needed (a step that dropped more than "
            f"{over - batch} groups needed a second batch)"
        )
    base_median = comparison.get("baseline_rollout_time_adjusted_median_s")
    if base_doc is not None:
        median = f", median {base_median:.1f} s" if base_median is not None else ""
        caption += f"; against {baseline} ({_seed_text(base_doc)}{median})."
    else:
        caption += "."
    return title, caption


def reward_text(document: Mapping[str, Any], comparison: Mapping[str, Any]) -> tuple[str, str]:
    """(title, caption) of the reward figure."""
    run = comparison["run"]
    run_doc = document["runs"][run]
    reward = comparison["reward"]
    mean, low, high = reward["run_mean"], reward["spread_min"], reward["spread_max"]
    subject = "The mean reward before the filter" if run_doc["filter"] else f"The mean reward of {run}"
    if mean is None:
        title = f"No comparable reward: {run} did not log the reward before the filter"
    elif low is None:
        title = f"{subject}: no baseline run to compare with"
    elif mean > high:
        title = f"{subject} read higher than every baseline run"
    elif mean < low:
        title = f"{subject} read lower than every baseline run"
    else:
        title = f"{subject} read within the spread of the baseline runs"
    what = "over every finished answer" if run_doc["filter"] else "over the answers used for training"
    caption = f"Mean reward per step {what}, {_seed_text(run_doc)}: {run} against {comparison['baseline']}"
    found = [name for name, value in reward["baselines"].items() if value is not None]
    if len(found) >= 2:
        caption += f"; band: lowest to highest of {len(found)} baseline runs at each step ({', '.join(found)})"
    if reward["steps_compared"]:
        caption += f"; higher in {reward['steps_higher']} of {reward['steps_compared']} steps"
    return title, caption + "."


def _series(run_doc: Optional[Mapping[str, Any]], key: str, *, complete: bool = True) -> tuple[list, list]:
    if run_doc is None:
        return [], []
    rows = [r for r in run_doc["steps"] if r["complete"] == complete and r[key] is not None]
    return [r["step"] for r in rows], [r[key] for r in rows]


def _new_figure(title: str, caption: str):  # noqa: ANN202
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9.0, 5.6))
    figure.subplots_adjust(left=0.09, right=0.98, top=0.88, bottom=0.2)
    axes = figure.add_subplot()
    figure.suptitle(title, fontsize=11.5, wrap=True, gid="title")
    figure.text(0.01, 0.015, caption, fontsize=8.5, wrap=True, va="bottom", gid="caption")
    axes.grid(True, alpha=0.3)
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    return figure, axes


def draw_rollout_time(document: Mapping[str, Any], comparison: Mapping[str, Any]):  # noqa: ANN201
    """The rollout-time figure (a matplotlib Figure) of one comparison."""
    run, baseline = comparison["run"], comparison["baseline"]
    run_doc = document["runs"][run]
    base_doc = document["runs"].get(baseline)
    title, caption = rollout_time_text(document, comparison)
    figure, axes = _new_figure(title, caption)

    xs, ys = _series(base_doc, "rollout_time_adjusted_s")
    if xs:
        axes.plot(xs, ys, "-", color="0.45", marker=".", label=f"{baseline}", gid="rollout-baseline")
    base_median = comparison.get("baseline_rollout_time_adjusted_median_s")
    if base_median is not None:
        axes.axhline(base_median, color="0.45", ls="--", lw=1,
                     label=f"{baseline} median {base_median:.1f} s", gid="rollout-baseline-median")

    rows = [r for r in run_doc["steps"] if r["complete"] and r["rollout_time_adjusted_s"] is not None]
    groups = sorted({r["batches"] for r in rows if r["batches"] is not None})
    for i, k in enumerate(groups):
        chosen = [r for r in rows if r["batches"] == k]
        stats = comparison["by_batches"].get(str(k), {})
        ratio = f", {stats['ratio']:.1f}x" if stats.get("ratio") is not None else ""
        axes.plot([r["step"] for r in chosen], [r["rollout_time_adjusted_s"] for r in chosen], ls="none",
                  marker=_MARKERS[i % len(_MARKERS)], ms=8, color=f"C{i}",
                  label=f"{run}: {_batches(k)} ({len(chosen)} steps{ratio})", gid=f"rollout-batches-{k}")
    rest = [r for r in rows if r["batches"] is None]
    if rest:
        axes.plot([r["step"] for r in rest], [r["rollout_time_adjusted_s"] for r in rest], ls="none", marker="o",
                  ms=7, color="C3", label=f"{run}", gid="rollout-run")
    xs, ys = _series(run_doc, "rollout_time_adjusted_s", complete=False)
    if xs:
        axes.plot(xs, ys, ls="none", marker="o", ms=8, mfc="none", color="C7",
                  label="incomplete step (not in medians)", gid="rollout-incomplete")
    axes.set_xlabel(STEP_LABEL)
    axes.set_ylabel(ROLLOUT_LABEL)
    axes.set_ylim(bottom=0)
    axes.legend(loc="best", fontsize=8.5)
    return figure


def draw_reward(document: Mapping[str, Any], comparison: Mapping[str, Any]):  # noqa: ANN201
    """The reward figure (a matplotlib Figure) of one comparison."""
    run, baseline = comparison["run"], comparison["baseline"]
    run_doc = document["runs"][run]
    base_doc = document["runs"].get(baseline)
    title, caption = reward_text(document, comparison)
    figure, axes = _new_figure(title, caption)

    per_step: dict[int, list[float]] = {}
    found = [name for name, value in comparison["reward"]["baselines"].items() if value is not None]
    for name in found:
        xs, ys = _series(document["runs"].get(name), "reward")
        for x, y in zip(xs, ys):
            per_step.setdefault(x, []).append(y)
    if len(found) >= 2 and per_step:
        steps = sorted(per_step)
        axes.fill_between(steps, [min(per_step[s]) for s in steps], [max(per_step[s]) for s in steps],
                          color="0.8", alpha=0.7, lw=0, label=f"baselines ({len(found)} runs): lowest to highest",
                          gid="reward-band")
    xs, ys = _series(base_doc, "reward")
    if xs:
        axes.plot(xs, ys, "-", color="0.35", marker=".", label=f"{baseline}", gid="reward-baseline")
    label = f"{run}: reward before the filter" if run_doc["filter"] else run
    xs, ys = _series(run_doc, "reward")
    if xs:
        axes.plot(xs, ys, "-", color="C0", marker="o", label=label, gid="reward-run")
    xs, ys = _series(run_doc, "reward", complete=False)
    if xs:
        axes.plot(xs, ys, ls="none", marker="o", mfc="none", color="C7",
                  label="incomplete step (not in means)", gid="reward-run-incomplete")
    axes.set_xlabel(STEP_LABEL)
    axes.set_ylabel(REWARD_LABEL)
    axes.legend(loc="best", fontsize=8.5)
    return figure


def _save(figure, path: Path, title: str, caption: str) -> Path:  # noqa: ANN001
    import matplotlib

    import io

    from harness.capture import write_text_atomic

    svg = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "miles-gb10-lab"}):
        figure.savefig(svg, format="svg", metadata={"Title": title, "Description": caption, "Date": None})
    write_text_atomic(path, svg.getvalue().decode("utf-8"))  # whole or not at all, and the umask's mode
    return path


def render_figures(document: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """Write both figures for every comparison into `out_dir`; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for comparison in document["comparisons"]:
        if comparison["run"] not in document["runs"]:
            continue
        paths = figure_paths(out_dir, comparison["run"])
        figure = draw_rollout_time(document, comparison)
        written.append(_save(figure, paths["rollout_time"], *rollout_time_text(document, comparison)))
        figure = draw_reward(document, comparison)
        written.append(_save(figure, paths["reward"], *reward_text(document, comparison)))
    return written
