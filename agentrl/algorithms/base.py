"""The algorithm interface, and the clipped policy-gradient step SAPO, PPO and GRPO share.

An algorithm receives the trajectories of one iteration and updates the policy. It declares how
many rollouts it wants per task, whether it keeps a critic, and whether it reads SAPO's value
tokens. Everything that is the same for the three (old log-prob pass, reference pass, the clipped
surrogate with KL and entropy, minibatches, micro-batches, gradient clipping) lives here, so a
comparison between them changes only what differs: advantages, targets and value losses.
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from torch import nn

from agentrl.algorithms.batch import (  # also agentrl.algorithms.base's public names, as before
    ItemScores,
    TurnBatch,
    behaviour_logprobs,
    logprob_gap,
    micro_batches,
    split_tokens,
    tis_weights,
    turn_advantages_to_tokens,
)
from agentrl.algorithms.lockstep import equal_micro_batches, equal_steps, idle_pass
from agentrl.algorithms.losses import clipped_surrogate, k3_kl
from agentrl.algorithms.passes import ScoringPasses
from agentrl.algorithms.readout import ValueReadout, optimizer_lr
from agentrl.algorithms.scoring import minibatch_plan
from agentrl.algorithms.value_rows import RowAdam
from agentrl.errors import UserError
from agentrl.models.policy import Policy, Scores
from agentrl.parallel.distributed import (
    all_reduce_max,
    all_reduce_sum,
    global_mean_std,
    reduce_gradients,
)
from agentrl.parallel.fsdp import clip_gradients, is_sharded
from agentrl.rollout.trajectory import Trajectory
from agentrl.rundir.metrics import PhaseTimer

__all__ = ["AlgoConfig", "Algorithm", "ClippedPolicyGradient", "ItemScores", "NonFiniteUpdate", "TurnBatch",
           "clipped_policy_loss", "logprob_gap", "micro_batches", "optimizer_lr", "split_tokens", "tis_weights",
           "turn_advantages_to_tokens"]


@dataclass
class AlgoConfig:
    """Settings shared by the clipped policy-gradient family (defaults: the paper's where it
    gives them, lr 1e-6 and KL 0.01; the rest are common choices, marked in docs)."""

    lr: float = 1e-6
    epochs: int = 1
    minibatch_turns: int = 64  # turns per optimizer step
    micro_batch_tokens: int = 4096  # padded tokens per forward/backward
    clip_eps: float = 0.2
    kl_coef: float = 0.01
    entropy_coef: float = 0.0
    max_grad_norm: float = 1.0
    gamma: float = 0.95
    lam: float = 0.95
    normalize_advantages: bool = True
    #: Which turns carry a policy advantage. ``valid`` (the paper, per its detailed write-up):
    #: turn advantages are multiplied by the valid-action indicator, the batch mean and std are
    #: taken over valid turns only, and only valid turns' tokens get one (an invalid turn's
    #: tokens get 0; its penalty still reaches the earlier turns through GAE). ``all``: every turn
    #: is normalised and pushed alike (what agentrl did before this setting; a malformed reply is
    #: then discouraged directly by its own penalised advantage). Turn-level advantages only (SAPO, PPO).
    advantage_turns: str = "valid"
    weight_decay: float = 0.0
    #: auto: no separate old-log-prob pass when the update is exactly on-policy (one epoch, one
    #: minibatch, no dropout): the first training forward's log-probs, detached, are the old ones.
    #: always: run it anyway. SAPO always runs it: it is also the pass that reads V and Q.
    old_logprob_pass: str = "auto"
    #: > 0: truncated importance sampling, each token's surrogate weighted by
    #: min(exp(old log-prob - rollout log-prob), tis_cap) to correct for a generator that is a
    #: different numerical path (vLLM, a bf16 copy). 0: off.
    tis_cap: float = 0.0
    #: How the update treats episodes played by older weights (``rollout.max_staleness`` > 0).
    #: ``decoupled``: the clipped ratio is taken against the trainer's old pass (the proximal
    #: policy) and each token weighted by min(pi_old / pi_behaviour, ``tis_cap``), the decoupled
    #: PPO objective (Hilton et al. 2022, "Batch size-invariance for policy optimization"; the
    #: objective AReaL trains asynchronously with). ``behaviour``: the ratio is taken against the
    #: log-probs the engine recorded while playing (plain PPO on stale data: its clip bounds the
    #: step from the behaviour policy, not from the current one). Synchronous runs: no effect.
    off_policy: str = "decoupled"
    #: Value warm-up: the first N updates train only the value readout, so that RL from a warm
    #: start (an SFT checkpoint) begins with values that mean something (SAPO's value rows start
    #: at zero: explained variance ~0 for the first iterations). SAPO: only the two value rows
    #: w+/w- of the output embedding train, so the policy's distribution does not move; PPO: only
    #: the critic; GRPO, which has no values, leaves its policy as it is too, so the three make
    #: the same number of policy updates from the same trajectories. 0: off.
    value_warmup_iterations: int = 0
    #: End the warm-up early after an update whose V explained variance (measured before that
    #: update) reached this value. None: always value_warmup_iterations updates.
    value_warmup_ev: float | None = None
    #: Learning rate of the warm-up's value readout (SAPO's value rows). None: SAPO's
    #: ``value_lr`` when set, else ``lr``.
    value_warmup_lr: float | None = None
    #: A minibatch whose loss or gradient norm is not finite (inf, NaN): ``stop`` ends the run
    #: before that step is applied, naming the iteration (the last checkpoint stays ``latest``);
    #: ``skip`` drops that minibatch's step and counts it (``optim/nonfinite_skipped``).
    #: Weights that become non-finite after a step always stop the run: a step cannot be undone.
    nonfinite: Literal["stop", "skip"] = "stop"


class NonFiniteUpdate(UserError):
    """A loss, gradient norm or weight that is not finite, found before it reaches a checkpoint:
    the trainer names the iteration and ends the run (``algorithm.nonfinite``)."""

    def __init__(self, quantity: str, value: float):
        self.quantity = quantity
        self.value = value
        super().__init__(f"the {quantity} is {value}")


class Algorithm(ABC):
    """Base of every algorithm. Subclasses set ``name`` and implement :meth:`update`."""

    name: ClassVar[str] = ""
    config_class: ClassVar[type[AlgoConfig]] = AlgoConfig
    needs_critic: ClassVar[bool] = False
    reads_values: ClassVar[bool] = False  # SAPO: reserve w+/w- and read V, Q

    @property
    def values_detached(self) -> bool:
        """Read V and Q in the update from hidden states cut from the graph (SAPO's
        ``value_backbone_grad: false``): the value terms then train the value rows only."""
        return False

    def __init__(self, config: AlgoConfig, policy: Policy, r_max: float, seed: int = 0):
        self.config = config
        self.policy = policy
        self.r_max = r_max
        self.generator = torch.Generator().manual_seed(seed)

    def rollouts_per_task(self) -> int:
        return 1

    @abstractmethod
    def update(self, trajectories: list[Trajectory], timer: PhaseTimer) -> dict[str, float]:
        """One iteration's optimisation; returns metrics (namespaced keys)."""

    def modules(self) -> list[nn.Module]:
        """Every module held in memory for training (for parameter counts)."""
        return [self.policy.model]

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        del state

    def value_trace(self, trajectories: Sequence[Trajectory]) -> None:
        """Write the algorithm's value estimates into ``turn.stats`` (for eval value traces);
        nothing for critic-free algorithms."""

    def readout_settings(self) -> dict[str, Any] | None:
        """How this algorithm reads V from the value tokens (recorded in checkpoints); None for
        algorithms that do not read them."""
        return None

    def save_extra(self, folder: Path) -> None:
        """Write weights other than the policy's (PPO's critic) into a checkpoint folder."""

    def load_extra(self, folder: Path) -> None:
        """Read what :meth:`save_extra` wrote."""


class ClippedPolicyGradient(ScoringPasses, ValueReadout, Algorithm, ABC):
    """PPO-style clipped surrogate with k3 KL to a frozen reference and an entropy bonus."""

    def __init__(self, config: AlgoConfig, policy: Policy, r_max: float, seed: int = 0):
        super().__init__(config, policy, r_max, seed)
        self.scored_tokens: dict[str, float] = defaultdict(float)  # pass -> tokens run through the model
        params = [p for p in policy.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
        self.updates_done = 0  # updates made so far (resumed from the checkpoint)
        #: set by the trainer when rollouts run ahead of the update (``rollout.max_staleness`` > 0):
        #: ``off_policy`` then decides what the policy ratio is taken against
        self.asynchronous = False
        self.nonfinite_skipped = 0  # this update's minibatch steps dropped (algorithm.nonfinite: skip)
        self.warmup_ended = False  # the value warm-up reached value_warmup_ev early
        self.warmup_optimizer: torch.optim.Optimizer | None = None
        #: SAPO with ``value_lr``: the value rows' own optimizer (:mod:`agentrl.algorithms.value_rows`).
        self.value_rows: RowAdam | None = None
        self.reference: nn.Module | None = None
        self.reference_is_base_without_adapters = hasattr(policy.model, "disable_adapter")
        if config.kl_coef > 0 and not self.reference_is_base_without_adapters:
            self.reference = copy.deepcopy(policy.model).eval().requires_grad_(False)

    def modules(self) -> list[nn.Module]:
        return [self.policy.model] + ([self.reference] if self.reference is not None else [])

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "generator": self.generator.get_state(),
                "updates_done": self.updates_done, "warmup_ended": self.warmup_ended,
                "warmup_optimizer": (self.warmup_optimizer.state_dict()
                                     if self.warmup_optimizer is not None else None),
                "value_rows": self.value_rows.state_dict() if self.value_rows is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "optimizer" in state:
            self.optimizer.load_state_dict(state["optimizer"])
        if "generator" in state:
            self.generator.set_state(state["generator"])
        self.updates_done = int(state.get("updates_done", 0))
        self.warmup_ended = bool(state.get("warmup_ended", False))
        if state.get("warmup_optimizer") is not None:
            self.value_readout_optimizer().load_state_dict(state["warmup_optimizer"])
        if state.get("value_rows") is not None and self.value_rows is not None:
            self.value_rows.load_state_dict(state["value_rows"])

    # --- value warm-up -----------------------------------------------------------------------------
    def normalize(self, advantages: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """Batch normalisation of turn advantages over the global batch (all ranks).

        ``valid`` (a bool per turn) with ``advantage_turns: valid``: the statistics come from
        the valid turns alone and the invalid turns' advantages are 0 (see :class:`AlgoConfig`).
        """
        if valid is None or self.config.advantage_turns != "valid":
            valid = torch.ones_like(advantages, dtype=torch.bool)  # every turn counts
        keep = valid.to(torch.bool)
        zero = torch.zeros_like(advantages)
        advantages = torch.where(keep, advantages, zero)
        if not self.config.normalize_advantages:
            return advantages
        mean, std = global_mean_std(advantages[keep])
        return torch.where(keep, (advantages - mean) / (std + 1e-8), zero)

    # --- non-finite numbers ---------------------------------------------------------------------
    def step_is_finite(self, loss: float, grad_norm: float, what: str = "") -> bool:
        """Whether a minibatch's step may be applied: its loss and gradient norm are finite on
        every rank. One inf or NaN step turns every weight into NaN, and a checkpoint of those
        would replace the last good one; so ``stop`` raises :class:`NonFiniteUpdate` before the
        step, and ``skip`` drops it (counted in :attr:`nonfinite_skipped`)."""
        bad: tuple[str, float] | None = None
        if not math.isfinite(loss):
            bad = (f"{what}loss", loss)
        elif not math.isfinite(grad_norm):
            bad = (f"{what}gradient norm", grad_norm)
        if not all_reduce_max([int(bad is not None)])[0]:  # every rank decides alike
            return True
        if self.config.nonfinite == "skip":
            self.nonfinite_skipped += 1
            return False
        raise NonFiniteUpdate(*(bad or (f"{what}loss or gradient norm of another rank", math.nan)))

    def check_weights(self, params: Sequence[torch.Tensor], what: str = "") -> None:
        """Stop when a step left a weight that is not finite (a finite but huge step can), so
        that it never reaches a checkpoint; it cannot be skipped, since the step is done."""
        if not params:
            return
        local = [p.to_local() if hasattr(p, "to_local") else p for p in params]
        finite = bool(torch.stack([torch.isfinite(p.detach()).all() for p in local]).all())
        if all_reduce_max([int(not finite)])[0]:
            raise NonFiniteUpdate(f"{what}weights", math.inf if finite else _first_nonfinite(local))

    # --- the optimisation step -----------------------------------------------------------------
    def optimizer_step(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """A step of ``optimizer`` (default: the main one); with :attr:`value_rows` (SAPO's
        ``value_lr``), the value rows step on their own at their own rate and ``optimizer``
        leaves them as they are."""
        optimizer = optimizer if optimizer is not None else self.optimizer
        rows = self.value_rows
        if rows is None:
            optimizer.step()
            return
        grads = rows.take_gradients()
        saved = rows.values()
        optimizer.step()
        rows.restore(saved)
        rows.step(grads)

    def optimize(self, batch: TurnBatch, old_logprobs: Sequence[torch.Tensor] | None,
                 ref_logprobs: Sequence[torch.Tensor] | None,
                 token_advantages: Sequence[torch.Tensor],
                 extra_loss: Callable[[Scores, list[int], float], tuple[torch.Tensor, dict[str, float]]] | None = None,
                 value_only: bool = False,
                 value_epochs: int = 0,
                 value_epoch_lr: float | None = None,
                 ) -> dict[str, float]:
        """Epochs x minibatches of the clipped surrogate (+ KL, - entropy, + ``extra_loss``).

        Token terms are summed and divided by the minibatch's action-token count, turn terms
        (``extra_loss``) by its turn count, so micro-batching does not change the gradient.
        Each forward runs over scoring units (a turn, or a whole conversation-mode episode,
        :mod:`agentrl.algorithms.scoring`); a minibatch is made of whole units.

        ``old_logprobs`` None: the update is exactly on-policy (:meth:`exactly_on_policy`); the
        forward's own log-probs, detached, serve as the old ones (ratio 1, same gradient).

        ``value_only``: a value warm-up step (SAPO): only ``extra_loss`` is minimised, and only
        the value readout moves (:meth:`keep_only_value_readout_gradients`).

        ``value_epochs``: after the joint epochs, that many more passes over the batch in which
        only ``extra_loss`` is minimised, through every trainable weight (SAPO's value-only
        epochs, :class:`agentrl.algorithms.sapo.SAPOConfig`). The policy's terms are computed and
        logged but carry no gradient; the steps count under ``optim/value_steps``. Each step is
        :meth:`value_pass_step` at ``value_epoch_lr``; the value rows keep their own rate.
        """
        cfg = self.config
        device = self.policy.device
        params = [p for p in self.policy.model.parameters() if p.requires_grad]
        sums: dict[str, float] = defaultdict(float)
        token_seen = turn_seen = 0.0
        grad_norms: list[float] = []
        units = batch.units
        reused: list[torch.Tensor] = [torch.zeros(0)] * len(batch.items)
        self.policy.model.train()
        sharded = is_sharded(self.policy.model)
        value_norms: list[float] = []  # the value-only epochs' steps
        for epoch in range(cfg.epochs + value_epochs):
            value_pass = epoch >= cfg.epochs  # a value-only epoch: the policy's terms carry no gradient
            # every rank takes the same number of steps, whatever its turn count (agentrl.algorithms.lockstep)
            for minibatch in equal_steps(minibatch_plan(units, batch.by_episode, cfg.minibatch_turns,
                                                        self.generator)):
                turns = [i for u in minibatch for i in units[u].turn_slots]
                tokens_local = sum(len(batch.items[i].action_ids) for i in turns)
                tokens_total, turns_total = all_reduce_sum([float(tokens_local), float(len(turns))])
                if tokens_total == 0:
                    continue
                self.optimizer.zero_grad(set_to_none=True)
                minibatch_loss = 0.0
                minibatch_sums: dict[str, float] = defaultdict(float)
                lengths = [units[u].training.length for u in minibatch]
                for micro in equal_micro_batches(micro_batches(lengths, cfg.micro_batch_tokens), sharded):
                    if not micro:  # FSDP: this rank is done; run the other ranks' collectives
                        idle_pass(lambda r: self.policy.score_sequences(r, entropy=True, values=self.reads_values,
                                                                        values_detached=self.values_detached),
                                  backward=True)
                        continue
                    rows = [units[minibatch[j]].training for j in micro]
                    idx = [i for j in micro for i in units[minibatch[j]].turn_slots]
                    self.count_tokens("actor_update", rows)
                    scores = self.policy.score_sequences(rows, entropy=True, values=self.reads_values,
                                                         values_detached=self.values_detached)
                    if old_logprobs is None:
                        old = scores.logprobs.detach()
                        for i, part in zip(idx, split_tokens(old.cpu(), [len(batch.items[i].action_ids) for i in idx]),
                                           strict=True):
                            reused[i] = part
                    else:
                        old = torch.cat([old_logprobs[i] for i in idx]).to(device)
                    adv = torch.cat([token_advantages[i] for i in idx]).to(device)
                    ref = None if ref_logprobs is None else torch.cat([ref_logprobs[i] for i in idx]).to(device)
                    weights = None
                    if self.asynchronous and cfg.off_policy == "behaviour":
                        # the ratio against the policy that played the episodes (not the old pass)
                        old = behaviour_logprobs([batch.turns[i] for i in idx], old).to(old.dtype)
                    elif cfg.tis_cap > 0:
                        weights = tis_weights([batch.turns[i] for i in idx], old, cfg.tis_cap)
                    loss, terms = clipped_policy_loss(scores.logprobs, old, adv, ref, scores.entropy,
                                                      tokens_total, cfg, weights)
                    if value_only or value_pass:
                        loss = loss * 0.0  # the policy's terms are only logged
                    if extra_loss is not None:
                        extra, extra_sums = extra_loss(scores, idx, turns_total)
                        loss = loss + extra
                        terms = {**terms, **extra_sums}
                    if not value_pass:  # the logged losses are the joint epochs'
                        for key, value in terms.items():
                            minibatch_sums[key] += value
                    loss.backward()
                    minibatch_loss += float(loss.detach())
                reduce_gradients(params)
                stepped = self.keep_only_value_readout_gradients(params) if value_only else params
                norm = clip_gradients(stepped, cfg.max_grad_norm)
                if not self.step_is_finite(minibatch_loss, norm):
                    continue  # skip: this minibatch's step and its logged terms are dropped
                if value_only:
                    self.value_readout_optimizer().step()
                elif value_pass:
                    self.value_pass_step(value_epoch_lr)
                else:
                    self.optimizer_step()
                self.check_weights(stepped)
                if value_pass:
                    value_norms.append(norm)
                    continue
                grad_norms.append(norm)
                for key, value in minibatch_sums.items():
                    sums[key] += value
                token_seen += tokens_local
                turn_seen += len(turns)
        out = {}
        for key, value in sums.items():
            per_turn = key.startswith(("loss/value", "value/"))
            out[key] = value / max(1.0, turn_seen if per_turn else token_seen)
        out["rollout/logprob_gap"] = logprob_gap(batch, reused if old_logprobs is None else old_logprobs)
        out["optim/old_pass_skipped"] = float(old_logprobs is None)
        out["optim/grad_norm"] = sum(grad_norms) / max(1, len(grad_norms))
        out["optim/lr"] = self.optimizer.param_groups[0]["lr"]
        out.update(self.value_lr_metrics())
        out["optim/steps"] = float(len(grad_norms))
        if value_epochs:
            out["optim/value_steps"] = float(len(value_norms))
            out["optim/value_grad_norm"] = sum(value_norms) / max(1, len(value_norms))
        return out


def _first_nonfinite(params: Sequence[torch.Tensor]) -> float:
    """The first inf or NaN among ``params`` (for the message)."""
    for p in params:
        bad = p.detach()[~torch.isfinite(p.detach())]
        if bad.numel():
            return float(bad.flatten()[0])
    return math.nan



def clipped_policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                        ref_logp: torch.Tensor | None, entropy: torch.Tensor | None,
                        tokens_total: float, cfg: AlgoConfig,
                        weights: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The token part of the loss for one micro-batch: ``sum(surrogate + beta * KL - c_H * H)``
    divided by the minibatch's token count ``tokens_total`` (so it is a token mean over the
    minibatch once every micro-batch is added). Also returns the per-token sums for logging.
    ``weights``: per-token truncated importance weights on the surrogate (``tis_cap``)."""
    pg, clipped = clipped_surrogate(logp, old_logp, advantages, cfg.clip_eps)
    if weights is not None:
        pg = pg * weights
    loss = pg.sum() / tokens_total
    log_ratio = (logp - old_logp).detach()
    sums = {
        "loss/policy": float(pg.detach().sum()),
        "policy/clip_fraction": float(clipped.sum()),
        "policy/approx_kl": float((log_ratio.exp() - 1 - log_ratio).sum()),
    }
    if entropy is not None:
        sums["policy/entropy"] = float(entropy.detach().sum())
        if cfg.entropy_coef:
            loss = loss - cfg.entropy_coef * entropy.sum() / tokens_total
    if ref_logp is not None:
        kl = k3_kl(logp, ref_logp)
        sums["policy/kl_ref"] = float(kl.detach().sum())
        loss = loss + cfg.kl_coef * kl.sum() / tokens_total
    return loss, sums
