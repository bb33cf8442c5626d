"""PPO with a separate critic: the classic actor-critic baseline the SAPO paper compares against.

The critic is a second copy of the policy's transformer body (initialised from the same
weights) with a scalar value head. It has its own optimizer, its own forward pass for value
inference and its own update, which is exactly the cost SAPO removes. Advantages are computed
as in SAPO (turn-level GAE, batch normalisation), so the only difference is where V comes from;
``gae_level: token`` gives the token-level GAE of RLHF-style PPO instead.

Values are in units of R_max, like SAPO's; the head starts at zero so V = 0 at first, as SAPO's
zeroed value rows do (ours, for a like-for-like start).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from agentrl.algorithms.advantages import gae, token_level_gae
from agentrl.algorithms.base import (
    AlgoConfig,
    ClippedPolicyGradient,
    TurnBatch,
    logprob_gap,
    micro_batches,
    turn_advantages_to_tokens,
)
from agentrl.algorithms.lockstep import equal_micro_batches, equal_steps
from agentrl.algorithms.losses import clipped_value_loss, explained_variance
from agentrl.algorithms.ridge_readout import ReadoutWindow, fit_ridge_readout
from agentrl.algorithms.scoring import minibatch_plan
from agentrl.algorithms.value_rows import fit_readout
from agentrl.errors import UserError
from agentrl.models.policy import (
    Policy,
    ScoreItem,
    SequenceItem,
    Span,
    decoder_of,
    run_body,
    spans_of,
)
from agentrl.parallel.distributed import all_reduce_sum, reduce_gradients
from agentrl.parallel.fsdp import clip_gradients, is_sharded
from agentrl.rollout.trajectory import Trajectory
from agentrl.rundir.metrics import PhaseTimer

CRITIC_FILE = "critic.pt"


@dataclass
class PPOConfig(AlgoConfig):
    critic_lr: float = 1e-5  # the critic's body
    #: The critic's value head (a linear layer from zero). None: ``critic_lr``.
    critic_head_lr: float | None = None
    critic_epochs: int = 1
    value_clip: float | None = 0.2  # in units of R_max
    gae_level: str = "turn"  # "turn" (as SAPO) or "token"
    #: Head-only value steps (SAPO's ``value_head_steps`` for PPO's critic): this many full-batch
    #: Adam steps on the value head alone, at ``critic_head_lr``, on the body features the value
    #: pass already computed, before the critic epochs. No extra forward. 0: off. Turn level only.
    critic_head_steps: int = 0
    #: ``adam`` (``critic_head_steps`` Adam steps) or ``ridge`` (ours, 2026-12-07): the head
    #: solved in closed form by whitened ridge regression, with an intercept, on the body features
    #: of the last ``critic_head_window`` batches (:mod:`agentrl.algorithms.ridge_readout`; on
    #: whenever chosen, ``critic_head_steps`` unused). SAPO's ``value_head_fit`` for PPO's critic.
    critic_head_fit: str = "adam"
    #: Batches the ``ridge`` fit keeps and fits together (1: this batch alone).
    critic_head_window: int = 4

    def head_fit_on(self) -> bool:
        """Whether a head-only fit precedes the critic epochs (``critic_head_steps`` or ``ridge``)."""
        return self.critic_head_steps > 0 or self.critic_head_fit == "ridge"


class Critic(nn.Module):
    """A transformer body plus a linear value head, read at chosen positions."""

    def __init__(self, policy_model: nn.Module):
        super().__init__()
        self.body = copy.deepcopy(decoder_of(policy_model))
        self.body.requires_grad_(True)
        hidden = policy_model.config.hidden_size
        dtype = next(self.body.parameters()).dtype
        self.head = nn.Linear(hidden, 1, dtype=dtype)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, items: Sequence[ScoreItem | SequenceItem], token_level: bool,
                features: list[torch.Tensor] | None = None) -> torch.Tensor:
        """Values at the pre-action boundary of each item (``[N]``), or with ``token_level`` at
        the position before every action token (``[T]``, item order). A :class:`SequenceItem`
        gives the values of each of its spans in order (a bootstrap span: one value)."""
        device = self.head.weight.device
        rows_in = [item if isinstance(item, SequenceItem) else SequenceItem.of(item) for item in items]
        hidden = run_body(self.body, rows_in, device)
        rows, positions = [], []
        for row, span in spans_of(rows_in):
            p = span.prompt_length
            count = value_count(span, token_level)
            rows.extend([row] * count)
            positions.extend(range(p - 1, p - 1 + count))
        picked = hidden[torch.tensor(rows, device=device), torch.tensor(positions, device=device)]
        if features is not None:  # the head's inputs, kept for the head-only steps
            features.append(picked.detach().float().cpu())
        return self.head(picked).squeeze(-1).float()


def value_count(span: Span, token_level: bool) -> int:
    """Values the critic reads for a span: one per action token at token level, else one (and
    always one for a bootstrap span, which has no action)."""
    return len(span.action_ids) if token_level and span.action_ids else 1


class PPO(ClippedPolicyGradient):
    name = "ppo"
    config_class = PPOConfig
    needs_critic = True

    def __init__(self, config: PPOConfig, policy: Policy, r_max: float, seed: int = 0):
        super().__init__(config, policy, r_max, seed)
        self.critic = Critic(policy.model).to(policy.device)
        if getattr(policy.model, "is_gradient_checkpointing", False):
            self.critic.body.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        head_lr = config.critic_head_lr if config.critic_head_lr is not None else config.critic_lr
        if config.head_fit_on() and config.gae_level != "turn":
            raise UserError("algorithm.critic_head_steps and critic_head_fit=ridge work with algorithm.gae_level=turn only.")
        self.critic_optimizer = torch.optim.AdamW(
            [{"params": list(self.critic.body.parameters())},
             {"params": list(self.critic.head.parameters()), "lr": head_lr}],
            lr=config.critic_lr, weight_decay=config.weight_decay)
        #: the ``ridge`` head fit's recent batches (body features and targets)
        self.head_window = ReadoutWindow(config.critic_head_window) if config.critic_head_fit == "ridge" else None

    def value_lr_metrics(self) -> dict[str, float]:
        body, head = self.critic_optimizer.param_groups
        return {"optim/critic_lr": body["lr"], "optim/critic_head_lr": head["lr"]}

    def modules(self) -> list[nn.Module]:
        return super().modules() + [self.critic]

    def state_dict(self) -> dict[str, Any]:
        state = {**super().state_dict(), "critic_optimizer": self.critic_optimizer.state_dict()}
        if self.head_window is not None:
            state["head_window"] = self.head_window.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if "critic_optimizer" in state:
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        if self.head_window is not None and state.get("head_window") is not None:
            self.head_window.load_state_dict(state["head_window"])

    def save_extra(self, folder: Path) -> None:
        torch.save(self.critic.state_dict(), folder / CRITIC_FILE)

    def load_extra(self, folder: Path) -> None:
        path = folder / CRITIC_FILE
        if path.exists():
            # weights_only: a run folder's files are data, never code (agentrl.rundir.checkpoints.read_state)
            self.critic.load_state_dict(torch.load(path, map_location=self.policy.device, weights_only=True))

    @torch.no_grad()
    def critic_values(self, items: Sequence[ScoreItem], token_level: bool) -> list[torch.Tensor]:
        """Per item: a 1-element tensor (turn level) or one value per action token."""
        out: list[torch.Tensor | None] = [None] * len(items)
        self.critic.eval()
        for group in micro_batches([it.length for it in items], self.config.micro_batch_tokens):
            chunk = [items[i] for i in group]
            values = self.critic(chunk, token_level).cpu()
            counts = [len(c.action_ids) if token_level else 1 for c in chunk]
            for j, part in enumerate(torch.split(values, counts)):
                out[group[j]] = part
        self.critic.train()
        return out  # type: ignore[return-value]

    @torch.no_grad()
    def batch_values(self, batch: TurnBatch, token_level: bool, pass_name: str = "value_inference",
                     features: list[torch.Tensor | None] | None = None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The critic's values of every turn and every bootstrap prompt, each unit (a turn, or a
        conversation-mode episode) run once; with ``features`` (one entry per slot, turn level),
        the head's input of each slot too."""
        n = len(batch.items)
        out: list[torch.Tensor] = [torch.zeros(0)] * (n + len(batch.bootstrap_items))
        rows = [(unit.sequence, unit.slots) for unit in batch.units]
        self.critic.eval()
        groups = micro_batches([seq.length for seq, _ in rows], self.config.micro_batch_tokens)
        for group in equal_micro_batches(groups, is_sharded(self.critic)):
            if not group:  # FSDP: this rank is done; run the other ranks' collectives
                self.critic([SequenceItem.of(ScoreItem([0], [0]))], token_level)
                continue
            chunk = [rows[i][0] for i in group]
            slots = [slot for i in group for slot in rows[i][1]]
            self.count_tokens(pass_name, chunk)
            picked: list[torch.Tensor] | None = [] if features is not None else None
            values = self.critic(chunk, token_level, picked).cpu()
            counts = [value_count(span, token_level) for seq in chunk for span in seq.spans]
            for j, (slot, part) in enumerate(zip(slots, torch.split(values, counts), strict=True)):
                out[slot] = part
                if features is not None and picked:
                    features[slot] = picked[0][j]
        self.critic.train()
        return out[:n], out[n:]

    def value_trace(self, trajectories) -> None:
        batch = TurnBatch.from_trajectories(trajectories)
        values, _ = self.batch_values(batch, token_level=False, pass_name="value_trace")
        for turn, value in zip(batch.turns, values, strict=True):
            turn.stats["V"] = float(value[0]) * self.r_max

    def update(self, trajectories: list[Trajectory], timer: PhaseTimer) -> dict[str, float]:
        cfg: PPOConfig = self.config  # type: ignore[assignment]
        token_level = cfg.gae_level == "token"
        batch = self.new_batch(trajectories)
        n = len(batch.items)
        with timer.phase("old_logprob"):
            old_logprobs = self.old_logprobs(batch)  # None: exactly on-policy, read in the update
        features: list[torch.Tensor | None] | None = [None] * (n + len(batch.bootstrap_items)) \
            if self.head_window is None and cfg.critic_head_steps > 0 else None
        with timer.phase("value_inference"):
            values, boot_values = self.batch_values(batch, token_level, features=features)
        with timer.phase("ref_logprob"):
            ref_logprobs = self.reference_logprobs(batch)

        counts = batch.token_counts()
        if token_level:
            token_adv, token_ret = self._token_level(batch, values, boot_values)
            flat_adv = torch.cat(token_adv) if token_adv else torch.zeros(0)
            flat_adv = self.normalize(flat_adv)
            token_adv = list(torch.split(flat_adv, counts))
            old_v, targets = values, token_ret
            raw_adv = flat_adv
        else:
            v_old = torch.cat(values) if values else torch.zeros(0)
            advantages, returns = torch.zeros(n), torch.zeros(n)
            for k, (start, stop) in enumerate(batch.spans):
                turns = batch.turns[start:stop]
                boot = float(boot_values[batch.bootstrap_of[k]]) if k in batch.bootstrap_of else 0.0
                adv, ret = gae([t.reward / self.r_max for t in turns], v_old[start:stop].tolist(),
                               [t.terminated for t in turns], boot, cfg.gamma, cfg.lam)
                advantages[start:stop], returns[start:stop] = adv, ret
                for i, turn in enumerate(turns):
                    turn.stats.update(V=float(v_old[start + i]) * self.r_max, advantage=float(adv[i]))
            raw_adv = advantages.clone()
            token_adv = turn_advantages_to_tokens(self.normalize(advantages, batch.valid_mask()), counts)
            old_v = [v_old[i:i + 1] for i in range(n)]
            targets = [returns[i:i + 1] for i in range(n)]

        with timer.phase("actor_update"):  # the same phases every iteration, warm-up or not
            if self.value_warmup_active():  # the critic alone learns; the policy waits
                metrics = {"optim/steps": 0.0}
                if old_logprobs is not None:
                    metrics["rollout/logprob_gap"] = logprob_gap(batch, old_logprobs)
            else:
                metrics = self.optimize(batch, old_logprobs, ref_logprobs, token_adv)
        with timer.phase("critic_update"):
            if self.head_window is None and features is not None and n:
                metrics.update(self._fit_head(torch.stack(features[:n]), torch.cat(old_v), torch.cat(targets)))  # type: ignore[arg-type]
            metrics.update(self._critic_update(batch, old_v, targets, token_level))
            if self.head_window is not None and n:
                metrics.update(self._ridge_head(batch, torch.cat(targets)))
        flat_old = torch.cat(old_v) if old_v else torch.zeros(0)
        flat_target = torch.cat(targets) if targets else torch.zeros(0)
        metrics.update({
            "value/explained_variance_v": explained_variance(flat_old, flat_target),
            "value/v_mean": float(flat_old.mean()) * self.r_max if len(flat_old) else 0.0,
            "adv/mean": float(raw_adv.mean()) if len(raw_adv) else 0.0,
            "adv/std": float(raw_adv.std(unbiased=False)) if len(raw_adv) else 0.0,
        })
        metrics.update(self.token_metrics(batch))
        metrics.update(self.value_lr_metrics())
        return self.finish_update(metrics, metrics["value/explained_variance_v"])

    def _token_level(self, batch: TurnBatch, values: list[torch.Tensor], boot_values: list[torch.Tensor]):
        cfg: PPOConfig = self.config  # type: ignore[assignment]
        token_adv: list[torch.Tensor] = []
        token_ret: list[torch.Tensor] = []
        for k, (start, stop) in enumerate(batch.spans):
            turns = batch.turns[start:stop]
            rewards, vals, dones, ends = [], [], [], []
            for i, turn in enumerate(turns):
                count = len(turn.action_ids)
                rewards += [0.0] * (count - 1) + [turn.reward / self.r_max]
                vals += values[start + i].tolist()
                dones += [False] * (count - 1) + [turn.terminated]
                ends += [False] * (count - 1) + [True]
            boot = float(boot_values[batch.bootstrap_of[k]]) if k in batch.bootstrap_of else 0.0
            adv, ret = token_level_gae(rewards, vals, dones, ends, boot, cfg.gamma, cfg.lam)
            offset = 0
            for turn in turns:
                count = len(turn.action_ids)
                token_adv.append(adv[offset:offset + count])
                token_ret.append(ret[offset:offset + count])
                offset += count
        return token_adv, token_ret

    def _fit_head(self, features: torch.Tensor, old: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
        """``critic_head_steps`` full-batch Adam steps on the value head alone (a fresh Adam at
        ``critic_head_lr``), on the features the value pass computed; the head is written back."""
        cfg: PPOConfig = self.config  # type: ignore[assignment]
        head = self.critic.head

        def loss_and_values(weight: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            pred = (features @ weight.T).squeeze(-1) + bias
            return clipped_value_loss(pred, old, target, cfg.value_clip).mean(), pred

        start = [head.weight.detach().cpu(), head.bias.detach().cpu()]
        fitted = fit_readout(start, lambda w, b: loss_and_values(w, b)[0], cfg.critic_head_steps,
                             cfg.critic_head_lr if cfg.critic_head_lr is not None else cfg.critic_lr)
        with torch.no_grad():
            loss_before, pred_before = loss_and_values(*(t.float() for t in start))
            loss_after, pred_after = loss_and_values(*fitted)
            head.weight.copy_(fitted[0].to(head.weight.device, head.weight.dtype))
            head.bias.copy_(fitted[1].to(head.bias.device, head.bias.dtype))
        return {"value/head_loss_before": float(loss_before), "value/head_loss_after": float(loss_after),
                "value/head_ev_before": explained_variance(pred_before, target),
                "value/head_ev_after": explained_variance(pred_after, target)}

    @torch.no_grad()
    def _ridge_head(self, batch: TurnBatch, target: torch.Tensor) -> dict[str, float]:
        """The ``ridge`` head fit, after the critic epochs: ``batch`` joins the window, every batch
        of it is re-read by the updated body, and the head becomes the whitened ridge fit (with an
        intercept) of their features to their targets (SAPO's ``refit_rows``)."""
        assert self.head_window is not None
        self.head_window.add(batch, y=target)
        stacked = []
        for entry in self.head_window.entries:
            n = len(entry.batch.items)
            features: list[torch.Tensor | None] = [None] * (n + len(entry.batch.bootstrap_items))
            self.batch_values(entry.batch, False, pass_name="value_head", features=features)
            stacked.append(torch.stack(features[:n]).float().cpu())  # type: ignore[arg-type]
        x = torch.cat(stacked)
        y = self.head_window.stacked("y")
        fit = fit_ridge_readout(x, y, self.head_window.episode_ids(), squash="linear")
        head = self.critic.head
        head.weight.copy_(fit.weight.reshape(1, -1).to(head.weight.device, head.weight.dtype))
        head.bias.fill_(fit.bias)
        pred = x.double() @ fit.weight + fit.bias
        this = slice(len(y) - len(batch.items), len(y))
        return {"value/head_ev_after": explained_variance(pred[this].float(), target),
                "value/head_ev_window": explained_variance(pred.float(), y),
                **fit.metrics(len(y))}

    def _critic_update(self, batch: TurnBatch, old_values: list[torch.Tensor],
                       targets: list[torch.Tensor], token_level: bool) -> dict[str, float]:
        cfg: PPOConfig = self.config  # type: ignore[assignment]
        params = list(self.critic.parameters())
        units = batch.units
        total_loss, seen, norms = 0.0, 0.0, []
        for _ in range(cfg.critic_epochs):
            # every rank takes the same number of steps (agentrl.algorithms.lockstep)
            for minibatch in equal_steps(minibatch_plan(units, batch.by_episode, cfg.minibatch_turns,
                                                        self.generator)):
                local = sum(len(old_values[i]) for u in minibatch for i in units[u].turn_slots)
                (global_count,) = all_reduce_sum([float(local)])
                self.critic_optimizer.zero_grad(set_to_none=True)
                if global_count == 0:
                    continue
                minibatch_loss = 0.0
                groups = micro_batches([units[u].training.length for u in minibatch], cfg.micro_batch_tokens)
                for micro in equal_micro_batches(groups, is_sharded(self.critic)):
                    if not micro:  # FSDP: this rank is done; run the other ranks' collectives
                        (self.critic([SequenceItem.of(ScoreItem([0], [0]))], token_level).sum() * 0.0).backward()
                        continue
                    rows = [units[minibatch[j]].training for j in micro]
                    idx = [i for j in micro for i in units[minibatch[j]].turn_slots]
                    self.count_tokens("critic_update", rows)
                    pred = self.critic(rows, token_level)
                    old = torch.cat([old_values[i] for i in idx]).to(pred.device)
                    target = torch.cat([targets[i] for i in idx]).to(pred.device)
                    loss = clipped_value_loss(pred, old, target, cfg.value_clip)
                    (loss.sum() / global_count).backward()
                    minibatch_loss += float(loss.detach().sum())
                reduce_gradients(params)
                norm = clip_gradients(params, cfg.max_grad_norm)
                if not self.step_is_finite(minibatch_loss, norm, "critic "):
                    continue  # skip (algorithm.nonfinite): this minibatch's step is dropped
                self.critic_optimizer.step()
                self.check_weights(params, "critic ")
                norms.append(norm)
                total_loss += minibatch_loss
                seen += local
        return {"loss/value_v": total_loss / max(1.0, seen),
                "optim/critic_grad_norm": sum(norms) / max(1, len(norms))}
