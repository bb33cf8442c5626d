"""Exploration: a corridor whose far end a random walk rarely reaches in time.

The agent starts at position 0 of ``length`` and may go left or right (left at 0 bumps into the
wall); reaching the end pays 1. The episode has ``max_steps`` moves and the observation shows
both the position and the moves left, so the time limit is part of the state: the env declares
``time_limit_in_observation`` and the step limit is a terminal state, not a truncation to
bootstrap (``rollout.time_limit: auto``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from .base import ProbeEnv


class CorridorEnv(ProbeEnv):
    measures = "exploration: a random walk rarely reaches the goal before the time runs out"
    metadata = {**ProbeEnv.metadata, "time_limit_in_observation": True}

    def __init__(self, length: int = 6, max_steps: int = 10, split: str = "train",
                 render_mode: str | None = None):
        if not 1 <= length <= 32:
            raise ValueError("length must be between 1 and 32")
        if not length <= max_steps <= 64:
            raise ValueError("max_steps must be between length and 64")
        super().__init__(split, render_mode)
        self.length = length
        self.max_steps = max_steps
        self.position = 0

    @property
    def task(self) -> str:
        return f"Reach the end of the corridor (position {self.length})."

    def options(self) -> dict[str, Any]:
        return {"length": self.length, "max_steps": self.max_steps}

    def _new_task(self) -> None:
        self.position = 0  # one corridor: the seed changes nothing but the split's bookkeeping

    def admissible(self) -> list[str]:
        return ["go left", "go right"]

    def _observe(self, feedback: str) -> str:
        if self.won:
            return "You reach the end."
        return (f"{feedback} You are at {self.position} of {self.length}. "
                f"{self.max_steps - self.steps} moves left.").strip()

    def _act(self, command: str) -> tuple[float, bool, str]:
        if command == "go left":
            if self.position == 0:
                return 0.0, False, "A wall."
            self.position -= 1
            return 0.0, False, ""
        self.position += 1
        if self.position == self.length:
            self.won = True
            return 1.0, True, ""
        return 0.0, False, ""

    def expert_action(self) -> str:
        return "go right"

    def optimal_return(self) -> float:
        return 1.0

    def random_return(self) -> float:
        return reach_probability(self.length, self.max_steps)


@cache
def reach_probability(length: int, moves: int, position: int = 0) -> float:
    """Chance that a uniform random walk from ``position`` (a wall at 0) reaches ``length``
    within ``moves`` moves (exact, by recursion over the moves left)."""
    if position == length:
        return 1.0
    if moves == 0:
        return 0.0
    left = reach_probability(length, moves - 1, max(0, position - 1))
    right = reach_probability(length, moves - 1, position + 1)
    return 0.5 * left + 0.5 * right
