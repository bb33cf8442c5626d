"""What every behaviour-suite probe shares: the text-env contract, tasks drawn from the seed.

A probe is a tiny text env that isolates one property of multi-turn RL (credit assignment over a
delay, advantage collapse, memory, exploration, reward noise). Each one:

* draws its task from the reset seed (the ``eval`` split from a disjoint range), so GRPO's k
  rollouts of a task replay it exactly and evaluation never plays a training task;
* shows progress in the observation ("3 turns to go", "lock 2 of 4 open", "position 4 of 6"),
  so the state value is a function of what the model reads: a critic that fails here fails for
  want of learning, not of information;
* knows its optimal expected return (``optimal_return``) and a uniform-random policy's
  (``random_return``), exactly, so a score can be normalised to 0 (random) .. 1 (optimal);
* offers ``expert_action`` (an optimal move) for tests and demonstrations.

Observations are short on purpose: the suite runs hundreds of short trainings on two CPU cores.
"""

from __future__ import annotations

import hashlib
import inspect
import random
from typing import Any

import gymnasium as gym

from agentrl.envs import text_space
from agentrl_envs.action_check import action_problem

SPLIT_OFFSETS = {"train": 0, "eval": 1_000_000_007}


class ProbeEnv(gym.Env):
    """Base class: subclasses implement ``_new_task``, ``_observe``, ``_act`` and ``admissible``."""

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "r_max": 1.0,
                                "system_prompt": "Pick one of the listed actions each turn."}
    #: one line for docs and reports: what the probe measures
    measures = ""

    def __init__(self, split: str = "train", render_mode: str | None = None):
        if split not in SPLIT_OFFSETS:
            raise ValueError(f"split must be one of {sorted(SPLIT_OFFSETS)}")
        self.split = split
        self.render_mode = render_mode
        self.observation_space = text_space(1024)
        self.action_space = text_space(64)
        self.rng = random.Random(0)
        self.steps = 0
        self.done = False
        self.won = False
        self._last_obs = ""

    # --- contract ---------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        self.rng = random.Random(task_seed + SPLIT_OFFSETS[self.split])
        self.steps = 0
        self.done = False
        self.won = False
        self._new_task()
        self._last_obs = self._observe("")
        return self._last_obs, self._info()

    def step(self, action: str):
        if self.done:
            raise RuntimeError("the episode is over; call reset()")
        self.steps += 1
        problem = action_problem(action, self.action_space.max_length)
        command = "" if problem is not None else action.strip().lower()
        if command in self.admissible():
            reward, terminated, feedback = self._act(command)
        else:
            reward, terminated, feedback = 0.0, False, "Nothing happens."
        truncated = not terminated and self.steps >= self.max_steps
        self.done = terminated or truncated
        self._last_obs = self._observe(feedback)
        return self._last_obs, float(reward), terminated, truncated, self._info()

    def render(self) -> str | None:
        return self._last_obs if self.render_mode == "ansi" else None

    # --- to implement -------------------------------------------------------------------------
    max_steps: int = 1

    @property
    def task(self) -> str:
        raise NotImplementedError

    def _new_task(self) -> None:
        raise NotImplementedError

    def _observe(self, feedback: str) -> str:
        raise NotImplementedError

    def _act(self, command: str) -> tuple[float, bool, str]:
        """(reward, terminated, feedback) for an admissible ``command``."""
        raise NotImplementedError

    def admissible(self) -> list[str]:
        raise NotImplementedError

    def expert_action(self) -> str:
        raise NotImplementedError

    def optimal_return(self) -> float:
        raise NotImplementedError

    def random_return(self) -> float:
        raise NotImplementedError

    def options(self) -> dict[str, Any]:
        return {}

    # --- shared -----------------------------------------------------------------------------------
    def _info(self) -> dict[str, Any]:
        return {"task": self.task, "admissible_actions": None if self.done else self.admissible(),
                "won": self.won, "score": 1.0 if self.won else 0.0, "task_type": type(self).__name__}

    def data_fingerprint(self) -> dict[str, Any]:
        """What decides the tasks: the seed plus the split's offset, the options and the code."""
        code = inspect.getsource(type(self)).encode()
        key = f"{type(self).__name__}|{self.split}|{SPLIT_OFFSETS[self.split]}|{sorted(self.options().items())}|"
        return {"source": "generated", "split": self.split, "split_size": None,
                "games_sha256": hashlib.sha256(key.encode() + code).hexdigest(),
                "reward": self.measures, "options": self.options()}
