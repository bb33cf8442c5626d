"""GRPO: group-relative policy optimisation, critic-free.

Each task is played ``group_size`` times from the same reset seed. A trajectory's advantage is
its episode return minus the group's mean (divided by the group's std when ``use_std``), given
to every action token of every turn. When all rollouts of a group earn the same return, every
advantage of the group is 0 ("advantage collapse"): the share of such groups is logged as
``grpo/collapse_share``, the failure SAPO's single-rollout value estimate avoids.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentrl.algorithms.advantages import group_advantages
from agentrl.algorithms.base import (
    AlgoConfig,
    ClippedPolicyGradient,
    logprob_gap,
    turn_advantages_to_tokens,
)
from agentrl.rollout.trajectory import Trajectory
from agentrl.rundir.metrics import PhaseTimer


@dataclass
class GRPOConfig(AlgoConfig):
    group_size: int = 8
    use_std: bool = True


class GRPO(ClippedPolicyGradient):
    name = "grpo"
    config_class = GRPOConfig

    def rollouts_per_task(self) -> int:
        return self.config.group_size  # type: ignore[attr-defined]

    def update(self, trajectories: list[Trajectory], timer: PhaseTimer) -> dict[str, float]:
        cfg: GRPOConfig = self.config  # type: ignore[assignment]
        batch = self.new_batch(trajectories)
        with timer.phase("old_logprob"):
            old_logprobs = self.old_logprobs(batch)  # None: exactly on-policy, read in the update
        with timer.phase("ref_logprob"):
            ref_logprobs = self.reference_logprobs(batch)

        returns = torch.tensor([t.episode_return for t in trajectories], dtype=torch.float32)
        traj_adv, collapse = group_advantages(returns, [t.group for t in trajectories], cfg.use_std)
        per_turn = torch.zeros(len(batch.items))
        for k, (start, stop) in enumerate(batch.spans):
            per_turn[start:stop] = traj_adv[k]
            for turn in batch.turns[start:stop]:
                turn.stats["advantage"] = float(traj_adv[k])
        token_adv = turn_advantages_to_tokens(per_turn, batch.token_counts())

        with timer.phase("actor_update"):  # the same phases every iteration, warm-up or not
            if self.value_warmup_active():  # no values to warm up: the policy waits with the others
                metrics = {"optim/steps": 0.0}
                if old_logprobs is not None:
                    metrics["rollout/logprob_gap"] = logprob_gap(batch, old_logprobs)
            else:
                metrics = self.optimize(batch, old_logprobs, ref_logprobs, token_adv)
        metrics.update({
            "grpo/collapse_share": collapse,
            "adv/mean": float(traj_adv.mean()) if len(traj_adv) else 0.0,
            "adv/std": float(traj_adv.std(unbiased=False)) if len(traj_adv) else 0.0,
        })
        metrics.update(self.token_metrics(batch))
        return self.finish_update(metrics)
