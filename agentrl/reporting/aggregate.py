"""Numbers over seeds: mean ± std (or ± standard error), curves on a common axis, per-phase cost.

Conventions (stated in every report): ``std`` is the sample standard deviation over seeds
(``ddof=1``), undefined for one seed; the standard error of the mean is ``std / sqrt(n)`` (the
headline table's spread, since it answers "how sure is this mean", which is what a comparison
of algorithms asks); a seed's number for a cost is its mean over iterations;
curves of several seeds are interpolated linearly onto the x values any seed recorded, within
the range every seed reached, so a band never extrapolates a seed past its last record.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agentrl.reporting.runs import Run, RunGroup
from agentrl.rundir.layout import PHASE_NAMES

#: The phases of one iteration, in the order they run, with the names readers see.
PHASES: tuple[tuple[str, str], ...] = tuple((f"time/{key}", name) for key, name in PHASE_NAMES.items())
OTHER_PHASE = "other (untimed)"  # weight sync, advantages, bookkeeping


@dataclass(frozen=True)
class MeanStd:
    mean: float
    std: float | None  # None with fewer than two values
    n: int

    @property
    def sem(self) -> float | None:
        """Standard error of the mean, ``std / sqrt(n)``; None with fewer than two values."""
        return None if self.std is None else self.std / math.sqrt(self.n)

    def format(
        self, scale: float = 1.0, digits: int = 3, unit: str = "", spread: str = "std"
    ) -> str:
        """``"62.5 ± 17.7"`` (``unit`` appended); one value prints without a ``±``.

        ``spread`` picks what follows the ``±``: ``"std"`` or ``"sem"`` (standard error).
        """
        if spread not in ("std", "sem"):
            raise ValueError(f"spread must be 'std' or 'sem', not {spread!r}")
        text = f"{self.mean * scale:.{digits}f}"
        width = self.std if spread == "std" else self.sem
        if width is not None:
            text += f" ± {width * scale:.{digits}f}"
        return text + unit


def mean_std(values: Sequence[float]) -> MeanStd | None:
    """Mean and sample std (ddof=1) of finite values; None when there are none."""
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return None
    mean = sum(finite) / len(finite)
    std = None
    if len(finite) > 1:
        std = math.sqrt(sum((v - mean) ** 2 for v in finite) / (len(finite) - 1))
    return MeanStd(mean, std, len(finite))


@dataclass
class Band:
    """A mean curve over seeds with its std (None for one seed)."""

    x: np.ndarray
    mean: np.ndarray
    std: np.ndarray | None
    seeds: int
    measured: bool = True  # False when some points are interpolated (no marker is drawn there)


def band(curves: Sequence[tuple[Sequence[float], Sequence[float]]]) -> Band | None:
    """Mean ± std of several ``(x, y)`` curves on a common x grid.

    The grid is every x any curve recorded, kept within ``[max of first x, min of last x]`` so
    each seed is interpolated, never extrapolated. When the ranges do not overlap (one
    iteration each at different x), the curves are aligned by index instead, at the mean x.
    """
    cleaned = []
    for xs, ys in curves:
        pairs = sorted(
            (float(a), float(b))
            for a, b in zip(xs, ys, strict=True)
            if math.isfinite(a) and math.isfinite(b)
        )
        if pairs:
            cleaned.append((np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])))
    if not cleaned:
        return None
    if len(cleaned) == 1:
        x, y = cleaned[0]
        return Band(x, y, None, 1)
    if all(len(x) == len(cleaned[0][0]) and np.array_equal(x, cleaned[0][0]) for x, _ in cleaned):
        stacked = np.stack(
            [y for _, y in cleaned]
        )  # every seed at the same x: nothing to interpolate
        return Band(cleaned[0][0], stacked.mean(axis=0), stacked.std(axis=0, ddof=1), len(cleaned))
    low = max(x[0] for x, _ in cleaned)
    high = min(x[-1] for x, _ in cleaned)
    grid = np.unique(np.concatenate([x for x, _ in cleaned]))
    grid = grid[(grid >= low) & (grid <= high)]
    if len(grid) == 0:
        length = min(len(x) for x, _ in cleaned)
        grid = np.mean([x[:length] for x, _ in cleaned], axis=0)
        stacked = np.stack([y[:length] for _, y in cleaned])
    else:
        stacked = np.stack([np.interp(grid, x, y) for x, y in cleaned])
    return Band(
        grid, stacked.mean(axis=0), stacked.std(axis=0, ddof=1), len(cleaned), measured=False
    )


def curve(run: Run, key: str, x_key: str) -> tuple[list[float], list[float]]:
    """``(x, y)`` of ``key`` against ``x_key`` (``env_steps``, ``wall_time`` or ``iteration``)."""
    xs, ys = [], []
    for record, value in run.values(key):
        x = record.get(x_key)
        if isinstance(x, (int, float)):
            xs.append(float(x))
            ys.append(value)
    return xs, ys


def group_band(group: RunGroup, key: str, x_key: str) -> Band | None:
    return band([curve(run, key, x_key) for run in group.runs if run.has(key)])


def run_mean(run: Run, key: str) -> float | None:
    values = [v for _, v in run.values(key)]
    return sum(values) / len(values) if values else None


def run_max(run: Run, key: str) -> float | None:
    values = [v for _, v in run.values(key)]
    return max(values) if values else None


def own_peak_rss(run: Run) -> float | None:
    """The run's highest per-iteration peak RSS, or None when part of it ran in a process that
    still held an earlier run's memory (:attr:`Run.memory_inherited`): that number is the
    earlier run's, and a mean over seeds must not take it as this algorithm's."""
    return None if run.memory_inherited else run_max(run, "memory/peak_rss_gb")


def eval_at(run: Run, key: str, iteration: int) -> float | None:
    """``key`` in the run's eval record of ``iteration`` (0: the evaluation before training)."""
    return evals_by_iteration(run, key).get(iteration)


def evals_by_iteration(run: Run, key: str = "eval/success_rate") -> dict[int, float]:
    """``{iteration: key}`` over the run's evaluation records (0: before the first update)."""
    return {
        int(record["iteration"]): value
        for record, value in run.values(key)
        if "eval/success_rate" in record and isinstance(record.get("iteration"), int)
    }


def eval_curve(group: RunGroup, key: str = "eval/success_rate") -> dict[int, MeanStd]:
    """Mean ± std over seeds of ``key`` at each iteration where every seed evaluated.

    Evaluations run at the same iterations in every seed (``train.eval_every``), so this needs
    no interpolation; iterations an unfinished seed has not reached are left out rather than
    averaged over fewer seeds."""
    per_run = [evals_by_iteration(run, key) for run in group.runs]
    per_run = [evals for evals in per_run if evals]
    if not per_run:
        return {}
    common = set.intersection(*(set(evals) for evals in per_run))
    curve = {}
    for it in sorted(common):
        summary = mean_std([evals[it] for evals in per_run])
        if summary is not None:
            curve[it] = summary
    return curve


def last_value(run: Run, key: str) -> float | None:
    """``key`` in the latest record that has it (a cumulative count: env steps, trajectories)."""
    values = run.values(key)
    return values[-1][1] if values else None


def over_seeds(group: RunGroup, per_run) -> MeanStd | None:
    """Mean ± std over the group's seeds of ``per_run(run)`` (runs giving None left out)."""
    return mean_std([v for v in (per_run(run) for run in group.runs) if v is not None])


@dataclass
class PhaseCost:
    """Seconds per iteration by phase for one group (each a mean ± std over seeds)."""

    phases: dict[str, MeanStd | None]  # display name -> cost
    other: MeanStd | None
    total: MeanStd | None


def run_median(run: Run, key: str) -> float | None:
    """The median over the run's iterations: a few iterations slowed by other work on a
    shared machine (or a first one that warms caches) move it much less than a mean."""
    values = [v for _, v in run.values(key)]
    return statistics.median(values) if values else None


def untimed_seconds(run: Run) -> float | None:
    """Median over iterations of time/iteration minus its timed phases (weight sync,
    advantages, bookkeeping): per iteration first, so it is the rest of a real iteration."""
    rest = []
    for record, total in run.values("time/iteration"):
        parts = [record.get(key) for key, _ in PHASES]
        timed = sum(p for p in parts if isinstance(p, (int, float)) and math.isfinite(p))
        rest.append(max(0.0, total - timed))
    return statistics.median(rest) if rest else None


def phase_cost(group: RunGroup) -> PhaseCost:
    """Each phase's seconds per iteration: each seed's median over its iterations, then mean ±
    std over seeds (medians of phases need not add up to the median total exactly)."""
    phases = {name: over_seeds(group, lambda r, k=key: run_median(r, k)) for key, name in PHASES}
    return PhaseCost(
        phases,
        over_seeds(group, untimed_seconds),
        over_seeds(group, lambda r: run_median(r, "time/iteration")),
    )


def final_eval_value(run: Run, key: str) -> float | None:
    record = run.last_eval()
    if record is None:
        return None
    value = record.get(key)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
