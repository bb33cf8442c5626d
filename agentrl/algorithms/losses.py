"""The loss library every algorithm shares, element-wise so callers choose how to average.

Averaging is the caller's business on purpose: the policy loss is averaged over action tokens,
SAPO's value losses over turns (every decision weighs the same, whatever its length), and with
micro-batches both are divided by the minibatch totals, not the micro-batch ones.
"""

from __future__ import annotations

import torch


def clipped_surrogate(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                      clip_eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's per-token loss ``-min(r A, clip(r, 1-eps, 1+eps) A)`` with ``r = exp(logp - old)``.

    Returns the loss and a 0/1 tensor telling where the clipped term was the one used.
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    loss = -torch.minimum(unclipped, clipped)
    was_clipped = (clipped < unclipped).float()
    return loss, was_clipped


def clipped_value_loss(pred: torch.Tensor, old: torch.Tensor, target: torch.Tensor,
                       clip: float | None) -> torch.Tensor:
    """PPO-style value loss ``0.5 * max((v - y)^2, (v_old + clip(v - v_old, -c, c) - y)^2)``.

    ``clip=None`` gives the plain ``0.5 * (v - y)^2``.
    """
    plain = (pred - target) ** 2
    if clip is None:
        return 0.5 * plain
    clipped_pred = old + torch.clamp(pred - old, -clip, clip)
    return 0.5 * torch.maximum(plain, (clipped_pred - target) ** 2)


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || pi_ref) per sampled token: ``e^x - x - 1``,
    ``x = ref_logp - logp``. Non-negative and unbiased for tokens sampled from pi."""
    x = ref_logp - logp
    return torch.exp(x) - x - 1.0


def squash(d: torch.Tensor, kind: str) -> torch.Tensor:
    """SAPO's map from the logit difference to a value in [-1, 1] (in units of R_max).

    ``clip`` is the paper's; past +-1 it passes no gradient, so a readout driven there stays
    there for good (``tanh`` nearly so: slope < 1e-3 past 4.1; docs/suite.md). ``clip_st`` has the
    same values but lets the gradient through as if unclipped (straight-through): a saturated
    readout whose target lies inside the range is pulled back, and one whose target is the bound
    itself gets no push further out. ``tanh`` is smooth everywhere.
    """
    if kind == "clip":
        return torch.clamp(d, -1.0, 1.0)
    if kind == "clip_st":
        return d + (torch.clamp(d, -1.0, 1.0) - d).detach()
    if kind == "tanh":
        return torch.tanh(d)
    raise ValueError(f"value_squash must be 'clip', 'clip_st' or 'tanh', not {kind!r}")


def squash_reading(kind: str) -> str:
    """The squash whose values ``kind`` gives: ``clip_st`` reads as ``clip`` (only its gradient
    differs), so a readout recorded under one means the same under the other."""
    return "clip" if kind == "clip_st" else kind


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """``1 - Var(y - v) / Var(y)``: 1 is perfect, 0 no better than a constant; nan if Var(y) = 0."""
    var_y = target.var(unbiased=False)
    if float(var_y) == 0.0:
        return float("nan")
    return float(1.0 - (target - pred).var(unbiased=False) / var_y)
