"""Sparse success: a row of locks, one wrong lever ends the episode.

Each of ``n_locks`` locks shows a sun or a moon; a sun opens with "pull up", a moon with
"pull down" (one rule for every task). A wrong lever jams the row (the episode ends, reward 0);
opening the last lock pays 1. A uniform-random policy succeeds with probability 2^-n_locks
(1/16 with 4 locks), so most groups of rollouts of one task all fail and a group-relative
advantage is zero for the whole group (advantage collapse), while a value function sees every
opened lock as progress (the observation says how many are open).
"""

from __future__ import annotations

from typing import Any

from .base import ProbeEnv

RULE = {"sun": "pull up", "moon": "pull down"}


class LocksEnv(ProbeEnv):
    measures = "sparse success: one wrong move of n ends the episode (advantage collapse)"

    def __init__(self, n_locks: int = 4, split: str = "train", render_mode: str | None = None):
        if not 1 <= n_locks <= 12:
            raise ValueError("n_locks must be between 1 and 12")
        super().__init__(split, render_mode)
        self.n_locks = n_locks
        self.max_steps = n_locks
        self.symbols: list[str] = []
        self.opened = 0

    @property
    def task(self) -> str:
        return "Open every lock. Sun: pull up. Moon: pull down."

    def options(self) -> dict[str, Any]:
        return {"n_locks": self.n_locks}

    def _new_task(self) -> None:
        self.symbols = [self.rng.choice(sorted(RULE)) for _ in range(self.n_locks)]
        self.opened = 0

    def admissible(self) -> list[str]:
        return ["pull up", "pull down"]

    def _observe(self, feedback: str) -> str:
        state = f"{self.opened} of {self.n_locks} locks open."
        if self.done:
            return f"{feedback} {state}".strip()
        return f"{feedback} {state} The next lock shows a {self.symbols[self.opened]}.".strip()

    def _act(self, command: str) -> tuple[float, bool, str]:
        if command != RULE[self.symbols[self.opened]]:
            return 0.0, True, "The row jams."
        self.opened += 1
        if self.opened == self.n_locks:
            self.won = True
            return 1.0, True, "The last lock opens."
        return 0.0, False, "Click."

    def expert_action(self) -> str:
        return RULE[self.symbols[self.opened]]

    def optimal_return(self) -> float:
        return 1.0

    def random_return(self) -> float:
        return 0.5 ** self.n_locks
