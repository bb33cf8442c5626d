"""SAPO: Single-rollout Autoregressive Policy Optimization (Liang, Feng, An, Liu, 2026).

One LLM is the policy, the state-value and the action-value function. V(s_t) and Q(s_t, a_t)
are read from two reserved vocabulary ids ``w+``/``w-`` (see :mod:`agentrl.models.value_tokens`):
``d = logit[w+] - logit[w-]`` at the last prompt position gives V, at the last action position
gives Q, both as ``R_max * squash(d / tau_v)`` with ``tau_v`` the value temperature
(``value_temperature``; the paper's detailed write-up: ``p(c) = clip(d(c) / tau_v, -1, 1)``). One rollout per task; turn-level GAE on V; a
lambda-return target for V and an on-policy SARSA target for Q; turn advantages normalised over
the batch's valid turns (``advantage_turns``); one backward pass for
``L_pi + c_V L_V + c_Q L_Q + beta KL - c_H H``. ../shared/SAPO.md is the specification.

Two settings decide how fast the readout can learn (under Adam every weight moves about its
learning rate per step, whatever the gradient's size): ``value_temperature`` divides ``d``, so
a smaller tau_v makes every step of the two rows (and the backbone's share of the value
gradient) move V further; ``value_lr`` gives the two value rows a learning rate of their own
(:mod:`agentrl.algorithms.value_rows`) while the backbone keeps ``lr``. Both are recorded with the value
ids in every checkpoint (``agentrl_value_tokens.json``).

Not to be confused with "Soft Adaptive Policy Optimization", also called SAPO (verl, SkyRL,
ms-swift): a different, clipping-free policy loss.

Values are regressed in units of R_max (rewards divided by R_max), so the value clip range and
the loss scale do not depend on the env's reward scale (ours).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from agentrl.algorithms.advantages import gae, sarsa_targets
from agentrl.algorithms.base import (
    AlgoConfig,
    ClippedPolicyGradient,
    TurnBatch,
    turn_advantages_to_tokens,
)
from agentrl.algorithms.losses import clipped_value_loss, explained_variance, squash, squash_reading
from agentrl.algorithms.readout import VALUE_ROWS_GROUP
from agentrl.algorithms.ridge_readout import ReadoutWindow, fit_ridge_readout
from agentrl.algorithms.value_rows import RowAdam, fit_value_rows, value_difference
from agentrl.models.policy import Scores
from agentrl.rollout.trajectory import Trajectory
from agentrl.rundir.metrics import PhaseTimer


@dataclass
class SAPOConfig(AlgoConfig):
    value_coef: float = 0.5  # c_V
    q_coef: float = 0.5  # c_Q
    value_clip: float | None = 0.2  # in units of R_max; None disables value clipping
    #: "clip" (the paper), "clip_st" (the paper's values, a straight-through gradient: ours) or
    #: "tanh" (ours); the two of ours never leave a saturated readout without a gradient.
    value_squash: str = "clip"
    #: tau_v: V = R_max * squash(d / tau_v). The paper's write-up names it without a value.
    value_temperature: float = 1.0
    #: Learning rate of the two value rows w+/w- (their own Adam; the backbone keeps ``lr``).
    #: None: ``lr`` for everything, in the one optimizer.
    value_lr: float | None = None
    #: Value-only epochs (ours, not the paper's): after the ``epochs`` joint passes, this many
    #: more passes over the batch minimise ``c_V L_V + c_Q L_Q`` alone, through every trainable
    #: weight (the backbone at ``lr``, the value rows at ``value_lr``). SAPO's counterpart of
    #: PPO's ``critic_epochs``: a value shares the policy's steps otherwise, and on the behaviour
    #: suite's budget that was too few for it to learn (docs/suite.md). 0: off (the paper).
    value_epochs: int = 0
    #: The backbone's rate in the value-only epochs (None: ``lr``); the value rows keep
    #: ``value_lr``. Lets V's share of the backbone learn at a rate that suits a value (the
    #: value-fit benchmark: 1e-3 on the tiny model, where 1e-2 collapses) beside a faster policy.
    value_epoch_lr: float | None = None
    #: Which Adam the value-only epochs step: ``shared`` (the default, and what runs made before
    #: this setting did), the main optimizer at ``value_epoch_lr``; ``own``, a second AdamW over
    #: the same weights whose moments only ever see the value gradient. Shared moments hand the
    #: value steps the policy's history: Adam's second moment, filled by policy gradients often
    #: larger than the value's, shrinks every value step, and its first moment keeps pushing in
    #: the policy's direction. ``own`` costs a second set of Adam moments (8 bytes per trainable
    #: weight, allocated at the first value epoch): still less than PPO's critic, which has
    #: weights and moments of its own.
    value_epoch_optimizer: str = "shared"
    #: Head-only value steps (ours; the issue's "cheap readout steps"): after the old pass, this
    #: many full-batch Adam steps on the two value rows alone, on the boundary hidden states that
    #: pass already computed (:func:`agentrl.algorithms.value_rows.fit_value_rows`): no extra
    #: forward, milliseconds. They refit the linear readout to this batch's targets before the
    #: joint epochs; the advantages still use the old pass's V. 0: off. Full fine-tuning only.
    value_head_steps: int = 0
    #: Their rate (None: ``value_lr``, else ``lr``).
    value_head_lr: float | None = None
    #: How the head-only fit is made: ``adam`` (``value_head_steps`` Adam steps after the old
    #: pass; off at 0 steps) or ``ridge`` (ours, 2026-12-07): at the end of each update the two
    #: rows are solved in closed form by whitened ridge regression on the hidden states of the last
    #: ``value_head_window`` batches, re-read under the updated weights
    #: (:mod:`agentrl.algorithms.ridge_readout`; ``value_head_steps`` unused). Why: Adam from small
    #: rows fits the features' large directions (on the chain probes: the lamp) and misses small
    #: ones that carry the value (the button pressed); docs/suite.md.
    value_head_fit: str = "adam"
    #: Batches the ``ridge`` fit keeps and fits together (1: this batch alone); each is re-read
    #: by one forward pass per update.
    value_head_window: int = 4
    #: Whether the value terms' gradient reaches the body (the paper: one model learns to act and
    #: to value). ``false`` (ours): V and Q are read from the boundary hidden states cut from the
    #: graph, so the body learns from the policy's terms alone and the value rows from the value
    #: terms (or their ``ridge`` fit). Why: measured on the embedded model (chain-d1, after one
    #: ridge fit, rows of norm 46 against a token row's 3.2), the value terms' gradient on the
    #: body is ~2,400x the policy terms' (1405 against 0.59, L2), so global clipping and Adam
    #: step the body along the value loss and the policy barely moves (docs/suite.md). With the
    #: cut, SAPO's per-update KL there met PPO's at the same ``lr`` (docs/suite.md, sixth result).
    value_backbone_grad: bool = True


def readout(d: torch.Tensor, cfg: SAPOConfig) -> torch.Tensor:
    """V or Q in units of R_max from the logit difference ``d``: ``squash(d / tau_v)``."""
    return squash(d / cfg.value_temperature, cfg.value_squash)


class SAPO(ClippedPolicyGradient):
    name = "sapo"
    config_class = SAPOConfig
    reads_values = True

    def __init__(self, config: SAPOConfig, policy, r_max: float, seed: int = 0):
        super().__init__(config, policy, r_max, seed)
        if config.value_lr is not None:
            readout_params = self.value_readout()
            if all(rows is None for _, rows in readout_params):
                # LoRA: peft holds the value rows in parameters of their own: a param group
                held = {id(p) for p, _ in readout_params}
                rest = [p for p in policy.model.parameters() if p.requires_grad and id(p) not in held]
                self.optimizer = torch.optim.AdamW(
                    [{"params": rest}, {"params": [p for p, _ in readout_params], "lr": config.value_lr,
                                        "weight_decay": 0.0, VALUE_ROWS_GROUP: True}],
                    lr=config.lr, weight_decay=config.weight_decay)
            else:
                self.value_rows = RowAdam(readout_params, lr=config.value_lr)
        #: the value-only epochs' own AdamW (``value_epoch_optimizer: own``): the main one's
        #: parameter groups, the backbone's at ``value_epoch_lr``
        self.value_optimizer: torch.optim.Optimizer | None = None
        if config.value_epochs > 0 and config.value_epoch_optimizer == "own":
            groups = [{"params": list(g["params"]), "lr": g["lr"], "weight_decay": g["weight_decay"]}
                      for g in self.optimizer.param_groups]
            if config.value_epoch_lr is not None:
                groups[0]["lr"] = config.value_epoch_lr
            self.value_optimizer = torch.optim.AdamW(groups, lr=config.lr, weight_decay=config.weight_decay)
        #: the ``ridge`` head fit's recent batches (hidden states and targets)
        self.head_window = ReadoutWindow(config.value_head_window) if config.value_head_fit == "ridge" else None
        if self.head_window is not None:
            # the fit sets the rows; the joint and value-only steps leave them where it put them
            # (Adam would move every coordinate by about its rate a step, whatever the gradient)
            if self.value_rows is None:
                self.value_rows = RowAdam(self.value_readout(), lr=config.lr)
            self.value_rows.frozen = True

    @property
    def values_detached(self) -> bool:
        return not self.config.value_backbone_grad  # type: ignore[attr-defined]

    def value_pass_step(self, lr: float | None) -> None:
        if self.value_optimizer is None:
            super().value_pass_step(lr)
        else:
            self.optimizer_step(self.value_optimizer)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.value_optimizer is not None:
            state["value_optimizer"] = self.value_optimizer.state_dict()
        if self.head_window is not None:
            state["head_window"] = self.head_window.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        lora_rows = [g.get(VALUE_ROWS_GROUP, False) for g in self.optimizer.param_groups]
        super().load_state_dict(state)
        # a checkpoint written before the mark existed brings its groups without it
        for group, mark in zip(self.optimizer.param_groups, lora_rows, strict=True):
            if mark:
                group[VALUE_ROWS_GROUP] = True
        if self.value_optimizer is not None and state.get("value_optimizer") is not None:
            self.value_optimizer.load_state_dict(state["value_optimizer"])
        if self.head_window is not None and state.get("head_window") is not None:
            self.head_window.load_state_dict(state["head_window"])

    def readout_settings(self) -> dict[str, Any]:
        cfg: SAPOConfig = self.config  # type: ignore[assignment]
        return {"value_temperature": cfg.value_temperature, "value_squash": cfg.value_squash}

    def value_lr_metrics(self) -> dict[str, float]:
        cfg: SAPOConfig = self.config  # type: ignore[assignment]
        return {"optim/value_lr": cfg.value_lr if cfg.value_lr is not None else cfg.lr,
                "optim/value_temperature": cfg.value_temperature}

    def value_trace(self, trajectories) -> None:
        batch = TurnBatch.from_trajectories(trajectories)
        cfg: SAPOConfig = self.config  # type: ignore[assignment]
        scores = self.score_batch(batch, values=True, pass_name="value_trace")
        for turn, d_pre, d_post in zip(batch.turns, scores.pre, scores.post, strict=True):
            turn.stats.update(V=float(readout(d_pre, cfg)) * self.r_max,
                              Q=float(readout(d_post, cfg)) * self.r_max)

    def update(self, trajectories: list[Trajectory], timer: PhaseTimer) -> dict[str, float]:
        cfg: SAPOConfig = self.config  # type: ignore[assignment]
        batch = self.new_batch(trajectories)
        n = len(batch.items)

        # One pass over prompt + action per turn (or per conversation-mode episode) gives old
        # log-probs, V and Q; the bootstrap prompts of truncated episodes ride along for V(s_T).
        # It is never skipped: even exactly on-policy, GAE needs every V before the first backward.
        with timer.phase("old_logprob"):
            old = self.score_batch(batch, values=True, bootstrap=True, keep_hidden=self.head_window is None and cfg.value_head_steps > 0)
        v_old = readout(old.pre, cfg)
        q_old = readout(old.post, cfg)
        old_logprobs = old.logprobs[:n]
        with timer.phase("ref_logprob"):
            ref_logprobs = self.reference_logprobs(batch)

        advantages = torch.zeros(n)
        v_target = torch.zeros(n)
        q_target = torch.zeros(n)
        for k, (start, stop) in enumerate(batch.spans):
            turns = batch.turns[start:stop]
            rewards = [t.reward / self.r_max for t in turns]
            dones = [t.terminated for t in turns]
            boot = float(v_old[n + batch.bootstrap_of[k]]) if k in batch.bootstrap_of else 0.0
            values = v_old[start:stop].tolist()
            adv, ret = gae(rewards, values, dones, boot, cfg.gamma, cfg.lam)
            advantages[start:stop] = adv
            v_target[start:stop] = ret
            q_target[start:stop] = sarsa_targets(rewards, q_old[start:stop].tolist(), dones, boot, cfg.gamma)
            for i, turn in enumerate(turns):
                turn.stats.update(V=float(v_old[start + i]) * self.r_max,
                                  Q=float(q_old[start + i]) * self.r_max,
                                  advantage=float(adv[i]))
        raw_adv = advantages.clone()
        advantages = self.normalize(advantages, batch.valid_mask())
        token_adv = turn_advantages_to_tokens(advantages, batch.token_counts())
        v_old_turns, q_old_turns = v_old[:n], q_old[:n]
        head_metrics: dict[str, float] = {}
        if self.head_window is None and cfg.value_head_steps > 0 and n and old.hidden_pre is not None:
            with timer.phase("value_head"):
                head_metrics = self.fit_head(old.hidden_pre[:n], old.hidden_post[:n], v_old_turns, q_old_turns,
                                             v_target, q_target)

        def value_losses(scores: Scores, idx: list[int], turns_total: float):
            return sapo_value_loss(scores.pre, scores.post, v_old_turns[idx], q_old_turns[idx],
                                   v_target[idx], q_target[idx], turns_total, cfg)

        with timer.phase("actor_update"):  # in a value warm-up, the value rows alone
            metrics = self.optimize(batch, old_logprobs, ref_logprobs, token_adv, value_losses,
                                    value_only=self.value_warmup_active(),
                                    value_epochs=0 if self.value_warmup_active() else cfg.value_epochs,
                                    value_epoch_lr=cfg.value_epoch_lr)
        if self.head_window is not None and n:
            with timer.phase("value_head"):
                head_metrics = self.refit_rows(batch, v_target, q_target)
        metrics.update({
            "value/explained_variance_v": explained_variance(v_old_turns, v_target),
            "value/explained_variance_q": explained_variance(q_old_turns, q_target),
            "value/v_mean": float(v_old_turns.mean()) * self.r_max if n else 0.0,
            "value/q_mean": float(q_old_turns.mean()) * self.r_max if n else 0.0,
            "adv/mean": float(raw_adv.mean()) if n else 0.0,
            "adv/std": float(raw_adv.std(unbiased=False)) if n else 0.0,
        })
        metrics.update(self.token_metrics(batch))
        metrics.update(head_metrics)
        return self.finish_update(metrics, metrics["value/explained_variance_v"])

    @torch.no_grad()
    def fit_head(self, hidden_pre: torch.Tensor, hidden_post: torch.Tensor, v_old: torch.Tensor,
                 q_old: torch.Tensor, v_target: torch.Tensor, q_target: torch.Tensor) -> dict[str, float]:
        """``value_head_steps`` on the value rows (:func:`fit_value_rows`), written back into the
        output embedding; logs the batch's value loss and V explained variance before and after."""
        cfg: SAPOConfig = self.config  # type: ignore[assignment]
        vt = self.policy.value_tokens
        weight = self.policy.model.get_output_embeddings().weight
        ids = torch.tensor(vt.ids, dtype=torch.long, device=weight.device)
        softcap = getattr(self.policy.model.config, "final_logit_softcapping", None)
        rate = cfg.value_head_lr if cfg.value_head_lr is not None else (cfg.value_lr or cfg.lr)
        n = len(v_old)

        def loss_of(d_pre: torch.Tensor, d_post: torch.Tensor) -> torch.Tensor:
            return sapo_value_loss(d_pre, d_post, v_old, q_old, v_target, q_target, n, cfg)[0]

        def scores(rows: torch.Tensor) -> tuple[float, float]:  # rows in vt.ids order: w+ first
            d_pre = value_difference(rows, hidden_pre, 0, softcap)
            d_post = value_difference(rows, hidden_post, 0, softcap)
            return float(loss_of(d_pre, d_post)), explained_variance(readout(d_pre, cfg), v_target)

        before = weight[ids].detach().float().cpu()
        with torch.enable_grad():
            fitted = fit_value_rows(before, 0, hidden_pre, hidden_post, loss_of, cfg.value_head_steps, rate, softcap)
        weight[ids] = fitted.to(weight.device, weight.dtype)
        (loss_before, ev_before), (loss_after, ev_after) = scores(before), scores(fitted)
        return {"value/head_loss_before": loss_before, "value/head_loss_after": loss_after,
                "value/head_ev_before": ev_before, "value/head_ev_after": ev_after}

    @torch.no_grad()
    def refit_rows(self, batch: TurnBatch, v_target: torch.Tensor, q_target: torch.Tensor) -> dict[str, float]:
        """The ``ridge`` head fit, at the end of an update: ``batch`` joins the window, every batch
        of it is re-read under the updated weights (hidden states only), and the rows are set to
        the fit. One readout ``u`` serves V (pre-action states, target the lambda-return, weight
        ``value_coef``) and Q (post-action states, the SARSA target, ``q_coef``), as the rows do:
        ``squash(h . u) ~ target``. Since ``d / tau_v = h . (w+ - w-) / tau_v``, the rows become
        ``m +- tau_v u / 2`` around their current mean ``m``: the difference is what V and Q read,
        and the mean (which no readout sees) is kept."""
        cfg: SAPOConfig = self.config  # type: ignore[assignment]
        assert self.head_window is not None
        softcap = getattr(self.policy.model.config, "final_logit_softcapping", None)
        if softcap:
            raise ValueError("value_head_fit=ridge needs a model without a final logit soft-cap "
                             "(the logit difference must be linear in the rows)")
        self.head_window.add(batch, v=v_target, q=q_target)
        pre, post = [], []
        for entry in self.head_window.entries:
            n = len(entry.batch.items)
            scores = self.score_batch(entry.batch, values=True, pass_name="value_head", keep_hidden=True)
            assert scores.hidden_pre is not None and scores.hidden_post is not None
            pre.append(scores.hidden_pre[:n])
            post.append(scores.hidden_post[:n])
        episodes = self.head_window.episode_ids()
        states = len(episodes)
        x = torch.cat(pre + post)
        y = torch.cat([self.head_window.stacked("v"), self.head_window.stacked("q")])
        weight = torch.cat([torch.full((states,), cfg.value_coef), torch.full((states,), cfg.q_coef)])
        fit = fit_ridge_readout(x, y, torch.cat([episodes, episodes]), squash=squash_reading(cfg.value_squash),
                                intercept=False, sample_weight=weight)
        matrix = self.policy.model.get_output_embeddings().weight
        ids = torch.tensor(self.policy.value_tokens.ids, dtype=torch.long, device=matrix.device)
        mean = matrix[ids].detach().float().cpu().mean(0)
        u = fit.weight.float() * cfg.value_temperature
        matrix[ids] = torch.stack([mean + u / 2, mean - u / 2]).to(matrix.device, matrix.dtype)
        this = slice(states - len(batch.items), states)  # the batch just played: the window's last
        d = torch.cat(pre) @ u
        return {"value/head_ev_after": explained_variance(readout(d[this], cfg), v_target),
                "value/head_ev_window": explained_variance(readout(d, cfg), self.head_window.stacked("v")),
                **fit.metrics(states)}


def sapo_value_loss(d_pre: torch.Tensor, d_post: torch.Tensor, v_old: torch.Tensor,
                    q_old: torch.Tensor, v_target: torch.Tensor, q_target: torch.Tensor,
                    turns_total: float, cfg: SAPOConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """``(c_V * sum L_V + c_Q * sum L_Q) / turns_total`` for one micro-batch of turns.

    Each turn contributes one V term and one Q term whatever its number of action tokens:
    the value losses are averaged over turns, not tokens (SAPO.md). Inputs in units of R_max.
    """
    device = d_pre.device
    v_new = readout(d_pre, cfg)
    q_new = readout(d_post, cfg)
    lv = clipped_value_loss(v_new, v_old.to(device), v_target.to(device), cfg.value_clip)
    lq = clipped_value_loss(q_new, q_old.to(device), q_target.to(device), cfg.value_clip)
    loss = (cfg.value_coef * lv.sum() + cfg.q_coef * lq.sum()) / turns_total
    return loss, {"loss/value_v": float(lv.detach().sum()), "loss/value_q": float(lq.detach().sum())}
