"""Delayed-reward chain: the decisive action comes first, its reward N turns later.

A lamp shows a colour; red means "press left", blue means "press right" (the same rule in every
task, so it can be learnt). After the press the agent waits N turns ("wait" is the only
action; the observation says what was pressed and how many turns are left) and the reward
arrives at the end: 1 for the right button, 0 for the wrong one. ``reward_noise`` p > 0 makes
the reward a coin: the right button pays 1 with probability 1 - p, the wrong one with p (the
noisy-reward probe). Credit assignment: every turn after the press carries no information the
press did not, and the return must be traced back over N turns.
"""

from __future__ import annotations

from typing import Any

from .base import ProbeEnv

RULE = {"red": "press left", "blue": "press right"}


class ChainEnv(ProbeEnv):
    measures = "credit assignment over a delay: reward N turns after the one decisive action"

    def __init__(self, delay: int = 3, reward_noise: float = 0.0, split: str = "train",
                 render_mode: str | None = None):
        if not 0 <= delay <= 32:
            raise ValueError("delay must be between 0 and 32")
        if not 0.0 <= reward_noise < 0.5:
            raise ValueError("reward_noise must be in [0, 0.5)")
        super().__init__(split, render_mode)
        self.delay = delay
        self.reward_noise = reward_noise
        self.max_steps = delay + 1
        self.colour = "red"
        self.pressed: str | None = None

    @property
    def task(self) -> str:
        return "Red lamp: press left. Blue lamp: press right."

    def options(self) -> dict[str, Any]:
        return {"delay": self.delay, "reward_noise": self.reward_noise}

    def _new_task(self) -> None:
        self.colour = self.rng.choice(sorted(RULE))
        self.pressed = None

    def admissible(self) -> list[str]:
        return ["press left", "press right"] if self.pressed is None else ["wait"]

    def _observe(self, feedback: str) -> str:
        if self.pressed is None:
            return f"{feedback} The lamp is {self.colour}.".strip()
        left = self.max_steps - self.steps
        if self.done:
            return f"The lamp was {self.colour}; you pressed {self.pressed.split()[1]}. " + (
                "Correct." if self.won else "Wrong.")
        return f"The lamp was {self.colour}; you pressed {self.pressed.split()[1]}. {left} turn{'s' if left != 1 else ''} to go."

    def _act(self, command: str) -> tuple[float, bool, str]:
        if self.pressed is None:
            self.pressed = command
        if self.steps < self.max_steps:
            return 0.0, False, ""
        self.won = self.pressed == RULE[self.colour]
        pays = self.rng.random() >= self.reward_noise if self.won else self.rng.random() < self.reward_noise
        return (1.0 if pays else 0.0), True, ""

    def expert_action(self) -> str:
        return RULE[self.colour] if self.pressed is None else "wait"

    def return_after_press(self, right: bool, gamma: float) -> float:
        """The expected discounted return from the state after the press (the first wait), for
        the right or the wrong button, whatever the policy: the reward comes on the last of the
        ``delay`` waits, ``delay - 1`` turns later. The yardstick of the counterfactual credit
        judge (agentrl/bench/counterfactual.py)."""
        if self.delay < 1:
            raise ValueError("with delay 0 the press ends the episode: there is no state after it")
        pays = 1.0 - self.reward_noise if right else self.reward_noise
        return pays * gamma ** (self.delay - 1)

    def optimal_return(self) -> float:
        return 1.0 - self.reward_noise

    def random_return(self) -> float:
        return 0.5
