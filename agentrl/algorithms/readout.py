"""The value readout of :class:`~agentrl.algorithms.base.ClippedPolicyGradient`: which parameters
read values out, their optimizer, the warm-up that trains them alone, the value-only steps. A part
of that class, kept in a file of its own."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

#: Key of the parameter group that holds SAPO's value rows under LoRA (peft keeps them in parameters
#: of their own): such a group trains at ``value_lr`` whatever rate the backbone is stepped at.
VALUE_ROWS_GROUP = "value_rows"


@contextmanager
def optimizer_lr(optimizer: torch.optim.Optimizer, lr: float | None) -> Iterator[None]:
    """Every parameter group of ``optimizer`` at ``lr`` for the steps inside (None: as it is),
    except a group marked ``VALUE_ROWS_GROUP`` (SAPO's value rows under LoRA), which keeps its
    ``value_lr``. SAPO's value-only epochs step the shared backbone at a rate of their own this way."""
    if lr is None:
        yield
        return
    saved = [group["lr"] for group in optimizer.param_groups]
    for group in optimizer.param_groups:
        if not group.get(VALUE_ROWS_GROUP, False):
            group["lr"] = lr
    try:
        yield
    finally:
        for group, rate in zip(optimizer.param_groups, saved, strict=True):
            group["lr"] = rate


class ValueReadout:
    """The value readout of :class:`~agentrl.algorithms.base.ClippedPolicyGradient` (its state lives there)."""

    def value_warmup_active(self) -> bool:
        """Whether this update is a value warm-up update (``value_warmup_iterations``)."""
        return self.updates_done < self.config.value_warmup_iterations and not self.warmup_ended

    def finish_update(self, metrics: dict[str, float], explained_variance_v: float | None = None) -> dict[str, float]:
        """Count the update, end the warm-up early if V explains enough, log ``optim/value_warmup``."""
        warm = self.value_warmup_active()
        metrics["optim/value_warmup"] = float(warm)
        metrics["optim/nonfinite_skipped"] = float(self.nonfinite_skipped)  # counted since new_batch
        threshold = self.config.value_warmup_ev
        if warm and threshold is not None and explained_variance_v is not None and explained_variance_v >= threshold:
            self.warmup_ended = True
        self.updates_done += 1
        return metrics

    def value_readout(self) -> list[tuple[nn.Parameter, torch.Tensor | None]]:
        """What a SAPO warm-up update trains: (parameter, rows) pairs, rows None for all of it.

        The value rows of the output embedding (full fine-tuning), or peft's trainable-token
        parameters that hold them (LoRA). Why rows: with tied embeddings the value rows share one
        matrix with every vocabulary row; the other rows' gradients are zeroed, and since Adam's
        moments for them start at zero and stay there, they do not move.
        """
        model = self.policy.model
        held = [p for n, p in model.named_parameters() if "trainable_tokens" in n and p.requires_grad]
        if held:
            return [(p, None) for p in held]
        assert self.policy.value_tokens is not None, "only algorithms that read values warm them up"
        weight = model.get_output_embeddings().weight
        return [(weight, torch.tensor(self.policy.value_tokens.ids, dtype=torch.long))]

    def value_readout_optimizer(self) -> torch.optim.Optimizer:
        """AdamW over the value readout alone, without weight decay (it would shrink every row)."""
        if self.warmup_optimizer is None:
            lr = self.config.value_warmup_lr
            if lr is None:
                lr = getattr(self.config, "value_lr", None) or self.config.lr
            self.warmup_optimizer = torch.optim.AdamW([p for p, _ in self.value_readout()], lr=lr,
                                                      weight_decay=0.0)
        return self.warmup_optimizer

    def keep_only_value_readout_gradients(self, params: Sequence[nn.Parameter]) -> list[nn.Parameter]:
        """Drop every gradient but the value readout's (rows outside it zeroed); returns the
        readout's parameters, the only ones the warm-up step touches."""
        readout = self.value_readout()
        kept = {id(p) for p, _ in readout}
        for p in params:
            if id(p) not in kept:
                p.grad = None
        for p, rows in readout:
            if rows is not None and p.grad is not None:
                mask = torch.zeros(p.shape[0], 1, dtype=p.grad.dtype, device=p.grad.device)
                mask[rows.to(p.grad.device)] = 1
                p.grad.mul_(mask)
        return [p for p, _ in readout]

    # --- bookkeeping -----------------------------------------------------------------------------

    def value_pass_step(self, lr: float | None) -> None:
        """A value-only epoch's step (``optimize(value_epochs=...)``): the main optimizer at
        ``lr`` (None: its own rate). SAPO overrides it to step an optimizer of its own."""
        with optimizer_lr(self.optimizer, lr):
            self.optimizer_step()

    def value_lr_metrics(self) -> dict[str, float]:
        """``optim/value_lr``: the rate the value readout trains at (algorithms that have one)."""
        return {}
