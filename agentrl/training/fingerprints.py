"""Data fingerprints of live envs: what a config's env plays, for a run and for an eval.

The plain-data half (digests, reading and writing ``fingerprint.json``, the sentences) is
:mod:`agentrl.rundir.fingerprint`; this half makes envs, so it sits with the composition root.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from agentrl.rundir.fingerprint import check_unchanged, collect, coverage_note
from agentrl.training.compose import env_factory


def for_config(env_cfg: Any, which: str) -> dict[str, Any]:
    """The fingerprint of the env a config builds for ``which`` (``train`` or ``eval``).

    Makes one env in this process (cheap for agentrl's envs: heavy parts load on first reset),
    so data mistakes surface before any model loads.
    """
    maker = env_factory(env_cfg, which)
    env = maker()
    try:
        return collect(env, maker.env_id, maker.kwargs)
    finally:
        env.close()


def for_run(config: Any, train_env: gym.Env, train_maker: Any,
            resumed: Path | None = None) -> dict[str, dict[str, Any]]:
    """A training run's fingerprints: ``train`` from the env already made for it, ``eval`` (when
    the run evaluates) from a fresh env of the eval split, with a ``coverage`` sentence when the
    eval episodes do not play each game of a finite split once.

    ``resumed``: the run directory being resumed; if the data differ from what it recorded
    (another download or release, generated games where it had official ones), resuming would
    mix two datasets in one run, so it is refused. The same data in another folder is fine.
    """
    out = {"train": collect(train_env, train_maker.env_id, train_maker.kwargs)}
    if config.train.eval_episodes:
        out["eval"] = for_eval(config.env, config.train.eval_episodes)
    if resumed is not None:
        check_unchanged(resumed, out)
    return out


def for_eval(env_cfg: Any, episodes: int) -> dict[str, Any]:
    """The eval split's fingerprint with the episode count and, when the episodes do not play
    each game of a finite split once, a ``coverage`` sentence."""
    evaluation = for_config(env_cfg, "eval")
    evaluation["eval_episodes"] = episodes
    note = coverage_note(evaluation, episodes)
    if note is not None:
        evaluation["coverage"] = note
    return evaluation
