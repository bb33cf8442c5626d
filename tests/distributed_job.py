"""A short SAPO run on the tiny model, used by tests/test_distributed.py: started once in one
process and once under ``torchrun --nproc_per_node 2`` with the same global batch.

Rollouts are greedy and constrained, so every task plays the same trajectory whichever rank
plays it and whatever else is in its batch: the two runs see the same global batch. The env's
rewards depend on the task seed, so the two ranks' halves of the batch have different advantage
statistics: a per-rank normalisation would give a different update than the global one.
"""

from __future__ import annotations

import sys

import gymnasium as gym

from agentrl.envs import text_space


class CoinEnv(gym.Env):
    """Two turns; choosing "heads" pays ``1 + seed % 4`` at the end, "tails" pays ``seed % 3``."""

    metadata = {"r_max": 4.0}

    def __init__(self):
        self.observation_space = text_space()
        self.action_space = text_space()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed_value, self.t = int(seed or 0), 0
        return "A coin lies on the table.", self._info()

    def step(self, action):
        self.t += 1
        done = self.t >= 2
        pay = (1 + self.seed_value % 4) if action == "heads" else self.seed_value % 3
        return f"You chose {action}.", float(pay) if done else 0.0, done, False, self._info()

    def _info(self):
        return {"task": "call the coin", "admissible_actions": ["heads", "tails"], "won": False}


def main() -> None:
    from agentrl.training.config import build_config
    from agentrl.training.trainer import train

    gym.register("agentrl-test/Coin-v0", entry_point=CoinEnv)
    run_dir = sys.argv[1]
    overrides = [
        f"train.run_dir={run_dir}", "train.iterations=2", "train.save_every=1",
        "train.eval_episodes=0", "train.samples_per_iteration=0", "train.seed=3",
        "rollout.tasks_per_iteration=6", "rollout.action_mode=constrained", "rollout.temperature=0",
        "rollout.history_window=1", "rollout.max_prompt_tokens=256", "rollout.backend=hf",
        "algorithm.lr=1e-3", "algorithm.minibatch_turns=256", "algorithm.epochs=1",
        "algorithm.micro_batch_tokens=1024", "algorithm.kl_coef=0.01",
    ] + sys.argv[2:]
    config = build_config(algo="sapo", env="agentrl-test/Coin-v0", model="tiny", overrides=overrides)
    train(config)


if __name__ == "__main__":
    main()
