"""Paired differences in held-out success: two groups that played the same evaluation games.

A bench evaluates every algorithm on the same games (the same eval split and task seeds), so
a difference in success can be read game by game instead of as two independent means: for
each game, each group's win rate over its seeds, then the mean over games of the difference.
Its uncertainty comes from two sources, both resampled by a bootstrap: which seeds were run
(seeds of each group drawn with replacement, independently) and which games were drawn (the
same resampled games for both groups, which keeps the pairing). With one seed in a group the
first source cannot be seen, and the interval says only how much the games alone move it.

Everything is read from each run's latest ``eval/iter_N.jsonl`` (its final evaluation once
finished): ``task_seed`` names the game, ``won`` its outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agentrl.reporting.runs import Run, RunGroup

BOOTSTRAP_SAMPLES = 4000
BOOTSTRAP_SEED = 0  # a report is rebuilt to the same numbers


@dataclass
class PairedDifference:
    first: str
    second: str
    difference: float  # mean over shared games of (first's win rate - second's)
    low: float  # 2.5th and 97.5th percentiles of the bootstrap
    high: float
    games: int
    seeds: tuple[int, int]
    better: int  # games where first's win rate is higher
    worse: int
    iterations: tuple[list[int], list[int]]  # the evaluations used, per group


def final_wins(run: Run) -> tuple[int, dict[int, bool]] | None:
    """``(iteration, {task_seed: won})`` of the run's latest evaluation episodes."""
    found = run.eval_episodes()
    if found is None:
        return None
    iteration, episodes = found
    wins = {
        int(episode["task_seed"]): bool(episode.get("won"))
        for episode in episodes
        if isinstance(episode.get("task_seed"), int)
    }
    return (iteration, wins) if wins else None


def win_matrix(
    evaluated: Sequence[tuple[int, dict[int, bool]]], games: Sequence[int]
) -> tuple[np.ndarray, list[int]]:
    """Seeds x games, 1.0 where that seed won that game; and the iterations evaluated
    (``evaluated``: :func:`final_wins` of each evaluated run of a group)."""
    rows = [[1.0 if wins.get(game) else 0.0 for game in games] for _, wins in evaluated]
    return np.array(rows, dtype=float), [iteration for iteration, _ in evaluated]


def bootstrap_interval(
    a: np.ndarray, b: np.ndarray, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """95% percentile interval of mean_g(mean_s a - mean_s b) with seeds resampled per group
    and games resampled jointly (``a`` and ``b`` are seeds x games over the same games)."""
    rng = np.random.default_rng(seed)
    games = a.shape[1]
    pick_a = rng.integers(0, a.shape[0], size=(samples, a.shape[0]))
    pick_b = rng.integers(0, b.shape[0], size=(samples, b.shape[0]))
    pick_games = rng.integers(0, games, size=(samples, games))
    per_game = a[pick_a].mean(axis=1) - b[pick_b].mean(axis=1)  # samples x games
    draws = np.take_along_axis(per_game, pick_games, axis=1).mean(axis=1)
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)


def paired_differences(groups: Sequence[RunGroup]) -> list[PairedDifference]:
    """Every pair of groups, in report order (first minus second), over the games all played.

    A group with no evaluation episodes is in no pair."""
    evaluated = {
        g.label: [found for run in g.runs if (found := final_wins(run)) is not None]
        for g in groups
    }
    played = [set(wins) for runs in evaluated.values() for _, wins in runs]
    games = sorted(set.intersection(*played)) if played else []
    if not games:
        return []
    matrices = {label: win_matrix(runs, games) for label, runs in evaluated.items()}
    out = []
    for i, first in enumerate(groups):
        for second in groups[i + 1 :]:
            (a, its_a), (b, its_b) = matrices[first.label], matrices[second.label]
            if not len(a) or not len(b):
                continue
            per_game = a.mean(axis=0) - b.mean(axis=0)
            low, high = bootstrap_interval(a, b)
            out.append(
                PairedDifference(
                    first.label,
                    second.label,
                    float(per_game.mean()),
                    low,
                    high,
                    len(games),
                    (len(a), len(b)),
                    int((per_game > 0).sum()),
                    int((per_game < 0).sum()),
                    (its_a, its_b),
                )
            )
    return out
