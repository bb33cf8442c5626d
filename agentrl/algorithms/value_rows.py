"""A separate learning rate for SAPO's two value rows: Adam over chosen rows of one matrix.

SAPO's value readout is two rows (``w+``, ``w-``) of the output embedding, a matrix that also
holds every vocabulary row (and, with tied embeddings, the input embeddings): the rows cannot be
a parameter group of their own. :class:`RowAdam` keeps Adam moments for those rows alone (two
rows, not a second matrix-sized state) and steps them at ``value_lr``; the main optimizer is
kept off them (their gradient is zeroed before its step, their values restored after it, so
neither its moments nor its weight decay touch them). Why a rate of its own: under Adam every
weight moves about ``lr`` per step, and RL's policy rate (1e-6 in the paper) moves the readout
by a few thousandths of R_max per step, too slow for a value to form in a few dozen updates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn


class RowAdam:
    """AdamW (no weight decay) over ``rows`` of each parameter; ``rows`` None: the whole tensor.

    The update is Adam's, bias-corrected, computed in float32 whatever the parameter's dtype.
    """

    def __init__(self, targets: Sequence[tuple[nn.Parameter, torch.Tensor | None]], lr: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.targets = list(targets)
        self.lr = lr
        self.betas = betas
        self.eps = eps
        self.step_count = 0
        self.exp_avg: list[torch.Tensor | None] = [None] * len(self.targets)
        self.exp_avg_sq: list[torch.Tensor | None] = [None] * len(self.targets)
        #: rows that a fit of their own sets (SAPO's ``value_head_fit=ridge``): :meth:`step` leaves
        #: them as they are, and the main optimizer is kept off them as always
        self.frozen = False

    def _view(self, param: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
        return param if rows is None else param[rows.to(param.device)]

    def take_gradients(self) -> list[torch.Tensor | None]:
        """The rows' gradients (float32 copies), zeroed in place in ``.grad`` so that another
        optimizer stepping the same parameter sees none there."""
        out: list[torch.Tensor | None] = []
        for param, rows in self.targets:
            if param.grad is None:
                out.append(None)
                continue
            out.append(self._view(param.grad, rows).detach().float().clone())
            if rows is None:
                param.grad.zero_()
            else:
                param.grad[rows.to(param.device)] = 0
        return out

    def values(self) -> list[torch.Tensor]:
        """Copies of the rows as they are now (to restore after another optimizer's step)."""
        return [self._view(param.detach(), rows).clone() for param, rows in self.targets]

    @torch.no_grad()
    def restore(self, saved: Sequence[torch.Tensor]) -> None:
        for (param, rows), value in zip(self.targets, saved, strict=True):
            if rows is None:
                param.copy_(value)
            else:
                param[rows.to(param.device)] = value

    @torch.no_grad()
    def step(self, grads: Sequence[torch.Tensor | None]) -> None:
        """One Adam step on the rows with ``grads`` (from :meth:`take_gradients`); none when frozen."""
        if self.frozen or all(g is None for g in grads):
            return
        self.step_count += 1
        beta1, beta2 = self.betas
        correction1 = 1 - beta1 ** self.step_count
        correction2 = 1 - beta2 ** self.step_count
        for k, ((param, rows), grad) in enumerate(zip(self.targets, grads, strict=True)):
            if grad is None:
                continue
            if self.exp_avg[k] is None:
                self.exp_avg[k] = torch.zeros_like(grad)
                self.exp_avg_sq[k] = torch.zeros_like(grad)
            m, v = self.exp_avg[k], self.exp_avg_sq[k]
            m.mul_(beta1).add_(grad, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            update = (m / correction1) / ((v / correction2).sqrt() + self.eps)
            current = self._view(param.detach(), rows).float()
            new = (current - self.lr * update).to(param.dtype)
            if rows is None:
                param.copy_(new)
            else:
                param[rows.to(param.device)] = new

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "step": self.step_count,
                "exp_avg": [None if t is None else t.cpu() for t in self.exp_avg],
                "exp_avg_sq": [None if t is None else t.cpu() for t in self.exp_avg_sq]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step_count = int(state["step"])
        device = [p.device for p, _ in self.targets]
        self.exp_avg = [None if t is None else t.to(d) for t, d in zip(state["exp_avg"], device, strict=True)]
        self.exp_avg_sq = [None if t is None else t.to(d) for t, d in zip(state["exp_avg_sq"], device, strict=True)]



def fit_readout(tensors: Sequence[torch.Tensor], loss_of: Any, steps: int, lr: float) -> list[torch.Tensor]:
    """``steps`` full-batch Adam steps on float32 copies of ``tensors`` (a readout: SAPO's value
    rows, PPO's value head), minimising ``loss_of(*copies)``; returns the copies, detached. A
    fresh Adam each call, so the steps need no state of their own in checkpoints."""
    fitted = [t.detach().float().clone().requires_grad_(True) for t in tensors]
    optimizer = torch.optim.Adam(fitted, lr=lr)
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss_of(*fitted).backward()
        optimizer.step()
    return [t.detach() for t in fitted]


def value_difference(rows: torch.Tensor, hidden: torch.Tensor, plus: int,
                     softcap: float | None = None) -> torch.Tensor:
    """d = logit(w+) - logit(w-) read from final hidden states ``hidden`` [N, H] with the value
    rows ``rows`` [2, H] (``plus`` indexes w+), the model's logit soft-cap applied as the policy's
    head does."""
    logits = hidden.float() @ rows.float().T
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    return logits[:, plus] - logits[:, 1 - plus]


def fit_value_rows(rows: torch.Tensor, plus: int, hidden_pre: torch.Tensor, hidden_post: torch.Tensor,
                   loss_of: Any, steps: int, lr: float,
                   softcap: float | None = None) -> torch.Tensor:
    """SAPO's head-only value steps: ``steps`` full-batch Adam steps on the two value rows alone,
    on hidden states the old pass already computed (no forward through the model).

    ``rows``: [2, H], the value rows (``plus`` indexes w+); ``hidden_pre`` / ``hidden_post``:
    [N, H], each turn's final hidden state at its pre- and post-action boundary; ``loss_of(d_pre,
    d_post)``: the value loss of the logit differences d = logit(w+) - logit(w-). Returns the new
    rows (float32, detached). Why: the value rows are a linear readout of features the pass has
    already paid for, so refitting them costs milliseconds, while the joint epochs move them
    only as often as the policy steps (the value-fit benchmark's ``sapo-head``, done online).
    """
    pre, post = hidden_pre.float(), hidden_post.float()
    (fitted,) = fit_readout([rows], lambda r: loss_of(value_difference(r, pre, plus, softcap),
                                                      value_difference(r, post, plus, softcap)), steps, lr)
    return fitted
