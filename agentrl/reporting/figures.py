"""The report's figures, drawn with matplotlib's Agg backend into PNG files.

Figures are built on :class:`matplotlib.figure.Figure` with an Agg canvas, never through pyplot,
so no global figure state or GUI backend is involved and a report can be built inside any
process (a trainer, a notebook, a test). Every function returns the path it wrote, or None when
the runs lack the data (the document then says so in words).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from agentrl.reporting.aggregate import (
    OTHER_PHASE,
    PHASES,
    Band,
    MeanStd,
    PhaseCost,
    eval_curve,
    evals_by_iteration,
    group_band,
)
from agentrl.reporting.runs import RunGroup

ALGO_COLORS = {"sapo": "#1f77b4", "ppo": "#ff7f0e", "grpo": "#2ca02c"}
EXTRA_COLORS = ("#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
PHASE_COLORS = ("#4c72b0", "#8172b3", "#c44e52", "#937860", "#55a868", "#dd8452", "#bbbbbb")
DPI = 100


def group_colors(groups: Sequence[RunGroup]) -> list[str]:
    """One colour per group: the algorithm's own for its first group, then a spare one."""
    used: set[str] = set()
    colors = []
    spare = iter(EXTRA_COLORS * 4)
    for group in groups:
        color = ALGO_COLORS.get(group.algo)
        if color is None or color in used:
            color = next(spare)
        used.add(color)
        colors.append(color)
    return colors


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, format="png", metadata={"Software": None})
    return path


def _draw_band(ax: Any, data: Band, color: str, label: str, linestyle: str = "-") -> None:
    marker = "o" if data.measured and len(data.x) <= 30 else None
    ax.plot(
        data.x,
        data.mean,
        color=color,
        label=f"{label} (n={data.seeds})",
        linestyle=linestyle,
        marker=marker,
        markersize=3,
    )
    if data.std is not None:
        ax.fill_between(
            data.x, data.mean - data.std, data.mean + data.std, color=color, alpha=0.18, linewidth=0
        )


def learning_curves(groups: Sequence[RunGroup], path: Path, prefix: str = "rollout") -> Path | None:
    """Success rate and score against env steps and wall-clock: a 2 x 2 grid."""
    metrics = ((f"{prefix}/success_rate", "success rate"), (f"{prefix}/score", "score"))
    axes_x = (("env_steps", "env steps"), ("wall_time", "wall-clock (s, training only)"))
    if not any(run.has(key) for group in groups for run in group.runs for key, _ in metrics):
        return None
    fig = Figure(figsize=(11, 7))
    grid = fig.subplots(2, 2)
    colors = group_colors(groups)
    for row, (key, name) in enumerate(metrics):
        for col, (x_key, x_name) in enumerate(axes_x):
            ax = grid[row][col]
            drawn = False
            for group, color in zip(groups, colors, strict=True):
                data = group_band(group, key, x_key)
                if data is not None:
                    _draw_band(ax, data, color, group.label)
                    drawn = True
            if not drawn:
                ax.text(
                    0.5,
                    0.5,
                    f"no {key} recorded",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                    color="#666666",
                )
            ax.set_xlabel(x_name)
            ax.set_ylabel(f"{prefix} {name}")
            ax.grid(alpha=0.3)
            if drawn and row == 0 and col == 0:
                ax.legend(fontsize=8)
    what = "training rollouts" if prefix == "rollout" else "evaluation"
    fig.suptitle(f"{what}: mean ± std over seeds")
    fig.tight_layout()
    return _save(fig, path)


def task_type_bars(
    groups: Sequence[RunGroup],
    types: Sequence[str],
    values: dict[tuple[int, str], MeanStd | None],
    path: Path,
) -> Path | None:
    """Grouped bars: success per task type for each group, error bars = std over seeds."""
    if not types:
        return None
    fig = Figure(figsize=(max(7.0, 0.8 * len(types) * max(1, len(groups)) + 3), 4.5))
    ax = fig.subplots()
    width = 0.8 / max(1, len(groups))
    positions = np.arange(len(types))
    for g, (group, color) in enumerate(zip(groups, group_colors(groups), strict=True)):
        means, errors = [], []
        for task_type in types:
            value = values.get((g, task_type))
            means.append(value.mean * 100 if value else np.nan)
            errors.append(value.std * 100 if value and value.std is not None else np.nan)
        x = positions + (g - (len(groups) - 1) / 2) * width
        ax.bar(x, means, width, yerr=errors, color=color, label=group.label, capsize=3)
        for xi, mean in zip(x, means, strict=True):  # the number, so a 0 % bar is not invisible
            if np.isfinite(mean):
                ax.text(
                    xi,
                    1.5,
                    f"{mean:.0f}",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.85},
                )
    ax.set_xticks(
        positions, [t.replace("_", " ") for t in types], rotation=20, ha="right", fontsize=8
    )
    ax.set_ylabel("eval success (%)")
    ax.set_ylim(0, 105)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("success per task type at the final eval (mean ± std over seeds)")
    fig.tight_layout()
    return _save(fig, path)


def phase_bars(
    groups: Sequence[RunGroup], costs: Sequence[PhaseCost], ppo: int | None, path: Path
) -> Path | None:
    """Stacked seconds per iteration by phase; beside it each group's total as a ratio to PPO."""
    if not any(c.total for c in costs):
        return None
    fig = Figure(figsize=(11 if ppo is not None else 7, 5.2))
    axes = fig.subplots(1, 2 if ppo is not None else 1, squeeze=False)[0]
    ax = axes[0]
    labels = [g.label for g in groups]
    x = np.arange(len(groups))
    bottom = np.zeros(len(groups))
    names = [name for _, name in PHASES] + [OTHER_PHASE]
    for name, color in zip(names, PHASE_COLORS, strict=True):
        heights = []
        for cost in costs:
            value = cost.other if name == OTHER_PHASE else cost.phases.get(name)
            heights.append(value.mean if value else 0.0)
        heights_arr = np.array(heights)
        if heights_arr.any():
            ax.bar(x, heights_arr, 0.6, bottom=bottom, color=color, label=name)
            bottom += heights_arr
    errors = [c.total.std if c.total and c.total.std is not None else np.nan for c in costs]
    ax.errorbar(x, bottom, yerr=errors, fmt="none", ecolor="black", capsize=4)
    ax.set_xticks(x, labels, fontsize=9)
    ax.set_ylabel("seconds per iteration")
    ax.set_title("time per iteration by phase (mean over seeds)")
    ax.grid(axis="y", alpha=0.3)
    if ppo is not None:
        _ratio_axis(axes[1], groups, [c.total for c in costs], ppo, "time per iteration")
    handles, names_shown = ax.get_legend_handles_labels()
    fig.legend(
        handles,
        names_shown,
        loc="lower center",
        ncol=4 if ppo is not None else 3,
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0.12 if ppo is not None else 0.16, 1, 1))
    return _save(fig, path)


def memory_bars(
    groups: Sequence[RunGroup], memory: dict[str, list[MeanStd | None]], ppo: int | None, path: Path
) -> Path | None:
    """Peak memory bars per group (one panel per kind: RSS, CUDA), plus ratios to PPO."""
    kinds = [k for k, values in memory.items() if any(values)]
    if not kinds:
        return None
    cols = 2 if ppo is not None else 1
    fig = Figure(figsize=(5.5 * cols, 3.8 * len(kinds)))
    axes = fig.subplots(len(kinds), cols, squeeze=False)
    colors = group_colors(groups)
    x = np.arange(len(groups))
    for row, kind in enumerate(kinds):
        values = memory[kind]
        ax = axes[row][0]
        ax.bar(
            x,
            [v.mean if v else np.nan for v in values],
            0.6,
            color=colors,
            yerr=[v.std if v and v.std is not None else np.nan for v in values],
            capsize=4,
        )
        ax.set_xticks(x, [g.label for g in groups], fontsize=9)
        ax.set_ylabel(f"{kind} (GiB)")
        ax.set_title(f"{kind}: max over iterations, mean over seeds", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        if ppo is not None:
            _ratio_axis(axes[row][1], groups, values, ppo, kind)
    fig.tight_layout()
    return _save(fig, path)


def _ratio_axis(
    ax: Any, groups: Sequence[RunGroup], values: Sequence[MeanStd | None], ppo: int, what: str
) -> None:
    base = values[ppo]
    ratios = [v.mean / base.mean if v and base and base.mean else np.nan for v in values]
    x = np.arange(len(groups))
    ax.bar(x, ratios, 0.6, color=group_colors(groups))
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    for xi, r in zip(x, ratios, strict=True):
        if np.isfinite(r):
            ax.text(xi, r, f"{r:.2f}x", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [g.label for g in groups], fontsize=9)
    ax.set_ylabel(f"{what} / PPO's")
    ax.set_title(f"{what} as a ratio to {groups[ppo].label}", fontsize=10)
    ax.grid(axis="y", alpha=0.3)


def held_out_success(groups: Sequence[RunGroup], path: Path) -> Path | None:
    """Held-out success by training iteration: each seed thin, the mean over seeds bold with
    ± standard-error bars (the same trajectories per iteration for every group in a bench, so
    the x axis is also the trajectory budget)."""
    fig = Figure(figsize=(8, 4.4))
    ax = fig.subplots()
    drawn = False
    for group, color in zip(groups, group_colors(groups), strict=True):
        for run in group.runs:
            evals = evals_by_iteration(run)
            if evals:
                xs = sorted(evals)
                ax.plot(xs, [100 * evals[x] for x in xs], color=color, alpha=0.3, linewidth=1)
        curve = eval_curve(group)
        if not curve:
            continue
        xs = sorted(curve)
        errors = [100 * (curve[x].sem or 0.0) for x in xs]
        ax.errorbar(
            xs,
            [100 * curve[x].mean for x in xs],
            yerr=errors,
            color=color,
            linewidth=2,
            marker="o",
            capsize=3,
            label=f"{group.label} (n={len(group.runs)})",
        )
        drawn = True
    if not drawn:
        return None
    ax.set_xlabel("training iteration")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
    ax.set_ylabel("held-out success (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("held-out success: mean ± standard error over seeds (thin: each seed)")
    fig.tight_layout()
    return _save(fig, path)


def iteration_curves(
    groups: Sequence[RunGroup],
    keys: Sequence[tuple[str, str, str]],
    path: Path,
    ylabel: str,
    title: str,
    ylim: tuple[float, float] | None = None,
) -> Path | None:
    """Per-iteration metrics with bands; ``keys`` are ``(metric, legend suffix, line style)``."""
    fig = Figure(figsize=(8, 4.2))
    ax = fig.subplots()
    drawn = False
    for group, color in zip(groups, group_colors(groups), strict=True):
        for key, suffix, style in keys:
            data = group_band(group, key, "iteration")
            if data is not None:
                _draw_band(ax, data, color, f"{group.label}{suffix}", style)
                drawn = True
    if not drawn:
        return None
    ax.set_xlabel("iteration")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    return _save(fig, path)


def value_trace(episode: dict[str, Any], title: str, path: Path) -> Path | None:
    """One eval episode: V (and Q) at each turn over the rewards the turns earned."""
    turns = episode.get("turns") or []
    if not turns or not any("V" in t for t in turns):
        return None
    fig = Figure(figsize=(7.5, 2.8))
    ax = fig.subplots()
    x = np.arange(1, len(turns) + 1)
    rewards = [float(t.get("reward", 0.0)) for t in turns]
    ax.bar(x, rewards, 0.5, color="#bbbbbb", label="reward")
    for key, color, marker in (("V", "#1f77b4", "o"), ("Q", "#d62728", "s")):
        if any(key in t for t in turns):
            ys = [float(t[key]) if isinstance(t.get(key), (int, float)) else np.nan for t in turns]
            ax.plot(x, ys, color=color, marker=marker, markersize=4, label=key)
    invalid = [i + 1 for i, t in enumerate(turns) if t.get("valid") is False]
    if invalid:
        ax.scatter(
            invalid,
            [0.0] * len(invalid),
            marker="x",
            color="black",
            label="invalid action",
            zorder=3,
        )
    ax.axhline(0.0, color="black", linewidth=0.6)
    ax.set_xlabel("turn")
    ax.set_ylabel("reward units")
    ax.set_xticks(x if len(x) <= 25 else x[:: max(1, len(x) // 12)])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return _save(fig, path)
