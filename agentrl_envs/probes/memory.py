"""Memory: the key fact is shown only in the first observation.

The first observation shows a code (one of ``n_codes`` digits); then the agent waits ``gap``
turns, whose observations do not show it, and must enter the code. Reward 1 for the right
code. Only an agent that sees its own history (``rollout.history: conversation``, or a window
of at least ``gap + 1`` turns) can do better than chance; with it, V at the last turn is a
function of the context.
"""

from __future__ import annotations

from typing import Any

from .base import ProbeEnv


class MemoryEnv(ProbeEnv):
    measures = "memory across turns: the code appears only in the first observation"

    def __init__(self, n_codes: int = 3, gap: int = 2, split: str = "train",
                 render_mode: str | None = None):
        if not 2 <= n_codes <= 9:
            raise ValueError("n_codes must be between 2 and 9")
        if not 0 <= gap <= 16:
            raise ValueError("gap must be between 0 and 16")
        super().__init__(split, render_mode)
        self.n_codes = n_codes
        self.gap = gap
        self.max_steps = gap + 1
        self.code = 1

    @property
    def task(self) -> str:
        return "Remember the code you are shown; enter it when asked."

    def options(self) -> dict[str, Any]:
        return {"n_codes": self.n_codes, "gap": self.gap}

    def _new_task(self) -> None:
        self.code = self.rng.randint(1, self.n_codes)

    def admissible(self) -> list[str]:
        if self.steps < self.gap:
            return ["wait"]
        return [f"enter {k}" for k in range(1, self.n_codes + 1)]

    def _observe(self, feedback: str) -> str:
        if self.done:
            return "The door opens." if self.won else "Wrong code."
        if self.steps == 0 and self.gap > 0:
            return f"The code is {self.code}. Wait."
        if self.steps == 0:
            return f"The code is {self.code}. Enter the code."
        if self.steps < self.gap:
            left = self.gap - self.steps
            return f"{left} turn{'s' if left != 1 else ''} to wait."
        return "Enter the code."

    def _act(self, command: str) -> tuple[float, bool, str]:
        if command == "wait":
            return 0.0, False, ""
        self.won = command == f"enter {self.code}"
        return (1.0 if self.won else 0.0), True, ""

    def expert_action(self) -> str:
        return "wait" if self.steps < self.gap else f"enter {self.code}"

    def optimal_return(self) -> float:
        return 1.0

    def random_return(self) -> float:
        return 1.0 / self.n_codes
