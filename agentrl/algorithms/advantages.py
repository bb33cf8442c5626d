"""Advantages and value targets, at the turn level (SAPO.md), plus GRPO's group statistics.

All functions take plain per-trajectory sequences and return tensors, so each is checked by
hand in the tests. Conventions: ``done[t]`` is True only when the episode *terminated* at turn
t; a truncated episode instead bootstraps from ``bootstrap_value`` (V of the state after the
last turn).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def gae(rewards: Sequence[float], values: Sequence[float], dones: Sequence[bool],
        bootstrap_value: float, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the turns of one trajectory.

    ``delta_t = r_t + gamma * (1 - done_t) * V(s_{t+1}) - V(s_t)`` with ``V(s_T) = bootstrap_value``
    after the last turn; ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}``.
    Returns ``(advantages, lambda_returns)`` where ``G_t = A_t + V(s_t)`` is V's target.
    """
    n = len(rewards)
    adv = torch.zeros(n, dtype=torch.float64)
    next_value, next_adv = float(bootstrap_value), 0.0
    for t in reversed(range(n)):
        not_done = 0.0 if dones[t] else 1.0
        delta = rewards[t] + gamma * not_done * next_value - values[t]
        next_adv = delta + gamma * lam * not_done * next_adv
        adv[t] = next_adv
        next_value = values[t]
    returns = adv + torch.tensor(values, dtype=torch.float64)
    return adv.float(), returns.float()


def sarsa_targets(rewards: Sequence[float], q_values: Sequence[float], dones: Sequence[bool],
                  bootstrap_value: float, gamma: float) -> torch.Tensor:
    """On-policy SARSA targets ``y_t = r_t + gamma * (1 - done_t) * Q(s_{t+1}, a_{t+1})``.

    After the last turn of a truncated episode there is no next action: ``V(s_T)`` stands in
    (``bootstrap_value``, ours). After a terminated turn the target is the reward alone.
    """
    n = len(rewards)
    out = torch.zeros(n, dtype=torch.float32)
    for t in range(n):
        following = q_values[t + 1] if t + 1 < n else bootstrap_value
        out[t] = rewards[t] + (0.0 if dones[t] else gamma * following)
    return out


def normalize(values: torch.Tensor, eps: float = 1e-8, mean: float | None = None,
              std: float | None = None) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` over the whole batch (population std).

    ``mean``/``std`` may be given when they were computed elsewhere (all-reduced across ranks).
    """
    m = values.mean() if mean is None else torch.tensor(mean)
    s = values.std(unbiased=False) if std is None else torch.tensor(std)
    return (values - m) / (s + eps)


def group_advantages(returns: torch.Tensor, groups: Sequence[int], use_std: bool = True,
                     eps: float = 1e-6) -> tuple[torch.Tensor, float]:
    """GRPO: each return minus its group's mean, divided by the group's std when ``use_std``.

    Returns the advantages and the share of groups whose returns are all equal ("advantage
    collapse": every advantage of such a group is 0, so it gives no gradient).
    """
    group_t = torch.tensor(list(groups))
    adv = torch.zeros_like(returns)
    collapsed = 0
    unique = group_t.unique()
    for g in unique:
        idx = (group_t == g).nonzero().squeeze(-1)
        r = returns[idx]
        centred = r - r.mean()
        spread = r.std(unbiased=False) if len(r) > 1 else torch.tensor(0.0)
        if float(r.max() - r.min()) == 0.0:
            collapsed += 1
        adv[idx] = centred / (spread + eps) if use_std else centred
    return adv, collapsed / max(1, len(unique))


def token_level_gae(token_rewards: Sequence[float], token_values: Sequence[float],
                    token_dones: Sequence[bool], turn_ends: Sequence[bool], bootstrap_value: float,
                    gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over the action tokens of a whole trajectory (PPO's token-level option).

    Every action token is a step; its reward is the turn's reward on the turn's last token and 0
    elsewhere. Discounting by ``gamma`` applies only across turn boundaries (a reply is one
    decision), lambda applies at every token.
    """
    n = len(token_rewards)
    adv = torch.zeros(n, dtype=torch.float64)
    next_value, next_adv = float(bootstrap_value), 0.0
    for t in reversed(range(n)):
        not_done = 0.0 if token_dones[t] else 1.0
        discount = gamma if turn_ends[t] else 1.0
        delta = token_rewards[t] + discount * not_done * next_value - token_values[t]
        next_adv = delta + discount * lam * not_done * next_adv
        adv[t] = next_adv
        next_value = token_values[t]
    returns = adv + torch.tensor(token_values, dtype=torch.float64)
    return adv.float(), returns.float()
