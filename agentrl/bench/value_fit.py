"""Fit value functions offline on recorded episodes: how much of the return can V learn here?

A training run mixes three questions: is the state value predictable from what the model reads,
can a readout get there at the rates the run uses, and does the policy keep the data still long
enough. This module answers the first two on fixed data, in minutes on a CPU:

* **Episodes**, exact to the token: replayed from any run's eval or sample JSONL through the
  run's own env and prompt builder (:class:`ReplayBackend` hands the engine the recorded replies,
  re-tokenized), or freshly played with a policy.
* **Reference points**: a ridge probe on the frozen final-layer features at each turn's
  pre-action boundary (the best any linear readout of those features can do: the ceiling of
  SAPO's head-only readout and of PPO's frozen-body head) and a baseline from the turn index and
  task type alone (what V can get without reading the state).
* **Trained readouts**, each trained only on the value objective for K optimizer steps:
  SAPO's two value rows on cached features (``sapo-head``: milliseconds a step), SAPO with the
  backbone (``sapo-full``, the algorithm's own optimizers: ``lr`` for the body, ``value_lr`` for
  the rows), PPO's head on cached features (``ppo-head``) and PPO's critic with its body
  (``ppo-full``). Targets are the ones the algorithms train on: lambda-returns (and SARSA targets
  for SAPO's Q) recomputed from the readout's own values every ``refresh`` steps, as an iteration
  of training recomputes them from its old pass, with the same value clipping.

Every score is an explained variance on held-out episodes (split by task, so one task's
episodes never sit on both sides) against the Monte-Carlo return (what V should predict) and
against the lambda-return of the readout's own values (what a training log reports as
``value/explained_variance_v``). Values and returns are in units of R_max.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from agentrl.algorithms.base import micro_batches
from agentrl.algorithms.losses import clipped_value_loss
from agentrl.algorithms.ppo import PPO, PPOConfig
from agentrl.algorithms.sapo import SAPO, SAPOConfig, readout
from agentrl.bench.value_data import (  # also value_fit's names, as before
    RIDGE_ALPHAS,
    TOKEN_BUDGET,
    FitData,
    FitPoint,
    FitResult,
    ReplayBackend,
    ReplayMismatch,
    baseline_features,
    boundary_features,
    load_policy,
    play,
    probe_config,
    probe_episodes,
    read_records,
    references,
    replay,
    ridge_predict,
    score,
)
from agentrl.errors import UserError
from agentrl.models.policy import (
    Policy,
    SequenceItem,
)
from agentrl.parallel.fsdp import clip_gradients

__all__ = ["FitData", "FitPoint", "FitResult", "PpoFull", "PpoHead", "RIDGE_ALPHAS", "Readout", "ReplayBackend", "ReplayMismatch", "SapoFull", "SapoHead", "TOKEN_BUDGET", "TrainSettings", "baseline_features", "boundary_features", "fresh_copy", "load_policy", "markdown_table", "play", "probe_config", "probe_episodes", "read_records", "references", "replay", "ridge_predict", "score", "train_readout"]


@dataclass
class TrainSettings:
    """How a readout is trained: ``steps`` full-batch optimizer steps on the training episodes,
    targets recomputed from the readout's own values every ``refresh`` steps (one iteration of
    training), scored at ``checkpoints``."""

    steps: int = 256
    refresh: int = 2
    checkpoints: tuple[int, ...] = (2, 8, 32, 128, 256)
    target: str = "lambda"  # "lambda" (what the algorithms train on) or "mc"


class Readout:
    """One trainable value readout: per-slot values (and Q for SAPO) and a training step."""

    name = "readout"
    has_q = False

    def values(self, test: bool | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(V per slot, Q per turn slot or None)``; ``test`` None: every slot (no gradient),
        else the training slots with gradient (``False``)."""
        raise NotImplementedError

    def step(self, loss_of: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]) -> None:
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        return {}


class SapoHead(Readout):
    """SAPO's two value rows on cached final-layer features: ``d = h . (w+ - w-)``, read out as
    ``R_max * squash(d / tau_v)``; Adam at ``value_lr`` (as :class:`agentrl.algorithms.value_rows.RowAdam`)."""

    name = "sapo-head"
    has_q = True

    def __init__(self, pre: torch.Tensor, post: torch.Tensor, rows: torch.Tensor, cfg: SAPOConfig, lr: float):
        self.pre, self.post, self.cfg, self.lr = pre, post, cfg, lr
        self.w = nn.Parameter(rows.detach().float().clone())  # [2, H]: w+, w-
        self.optimizer = torch.optim.Adam([self.w], lr=lr)

    def values(self, test):
        direction = self.w[0] - self.w[1]
        with torch.set_grad_enabled(test is False):
            return readout(self.pre @ direction, self.cfg), readout(self.post @ direction, self.cfg)

    def step(self, loss_of):
        self.optimizer.zero_grad()
        loss_of(*self.values(False)).backward()
        self.optimizer.step()

    def settings(self):
        return {"value_lr": self.lr, "value_temperature": self.cfg.value_temperature, "value_squash": self.cfg.value_squash}


class PpoHead(Readout):
    """PPO's linear value head from zero on cached features (the critic's body frozen)."""

    name = "ppo-head"

    def __init__(self, pre: torch.Tensor, lr: float, weight_decay: float):
        self.pre, self.lr = pre, lr
        self.head = nn.Linear(pre.shape[1], 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.optimizer = torch.optim.AdamW(self.head.parameters(), lr=lr, weight_decay=weight_decay)

    def values(self, test):
        with torch.set_grad_enabled(test is False):
            return self.head(self.pre).squeeze(-1), None

    def step(self, loss_of):
        self.optimizer.zero_grad()
        loss_of(*self.values(False)).backward()
        self.optimizer.step()

    def settings(self):
        return {"critic_head_lr": self.lr}


class _FullModel(Readout):
    """Shared by the readouts that run the transformer every step: forward over units."""

    def __init__(self, data: FitData):
        self.data = data
        test_turn = torch.zeros(data.n_turns, dtype=torch.bool)
        test_turn[data.turn_slots(True)] = True
        self.train_units = [u for u in data.batch.units
                            if u.training is not None and not any(bool(test_turn[s]) for s in u.turn_slots)]

    def _rows(self, test):
        if test is None:
            units = self.data.batch.units
            return [(u.sequence, u.slots) for u in units]
        return [(u.training, u.turn_slots) for u in self.train_units]

    def forward(self, rows: Sequence[SequenceItem]) -> tuple[torch.Tensor, torch.Tensor | None]:
        raise NotImplementedError

    def values(self, test):
        data = self.data
        v = torch.zeros(data.n_slots)
        q = torch.zeros(data.n_turns) if self.has_q else None
        rows = self._rows(test)
        with torch.set_grad_enabled(test is False):
            vs, qs = [], []
            slot_list: list[int] = []
            for group in micro_batches([r.length for r, _ in rows], TOKEN_BUDGET):
                chunk = [rows[i][0] for i in group]
                pv, pq = self.forward(chunk)
                vs.append(pv.cpu())
                if pq is not None:
                    qs.append(pq.cpu())
                slot_list.extend(s for i in group for s in rows[i][1])
            index = torch.tensor(slot_list, dtype=torch.long)
            v = v.index_put((index,), torch.cat(vs))
            if q is not None:
                turn = index < data.n_turns
                q = q.index_put((index[turn],), torch.cat(qs)[turn])
        return v, q


class SapoFull(_FullModel):
    """SAPO trained end to end on the value objective: the algorithm's own optimizers (AdamW at
    ``lr`` for the model, :class:`~agentrl.algorithms.value_rows.RowAdam` at ``value_lr`` for the rows)."""

    name = "sapo-full"
    has_q = True

    def __init__(self, data: FitData, policy: Policy, cfg: SAPOConfig):
        super().__init__(data)
        self.policy, self.cfg = policy, cfg
        self.algo = SAPO(cfg, policy, data.r_max)
        policy.model.train()

    def forward(self, rows):
        scores = self.policy.score_sequences(rows, values=True)
        return readout(scores.pre, self.cfg), readout(scores.post, self.cfg)

    def step(self, loss_of):
        self.algo.optimizer.zero_grad(set_to_none=True)
        loss_of(*self.values(False)).backward()
        clip_gradients([p for p in self.policy.model.parameters() if p.requires_grad], self.cfg.max_grad_norm)
        self.algo.optimizer_step()

    def settings(self):
        return {"lr": self.cfg.lr, "value_lr": self.cfg.value_lr if self.cfg.value_lr is not None else self.cfg.lr,
                "value_temperature": self.cfg.value_temperature, "value_squash": self.cfg.value_squash}


class PpoFull(_FullModel):
    """PPO's critic (a copy of the body plus a zero head) trained with its own optimizer."""

    name = "ppo-full"

    def __init__(self, data: FitData, policy: Policy, cfg: PPOConfig):
        super().__init__(data)
        self.cfg = cfg
        self.algo = PPO(cfg, policy, data.r_max)
        self.algo.critic.train()

    def forward(self, rows):
        return self.algo.critic(rows, token_level=False), None

    def step(self, loss_of):
        self.algo.critic_optimizer.zero_grad(set_to_none=True)
        loss_of(*self.values(False)).backward()
        clip_gradients(list(self.algo.critic.parameters()), self.cfg.max_grad_norm)
        self.algo.critic_optimizer.step()

    def settings(self):
        body, head = self.algo.critic_optimizer.param_groups
        return {"critic_lr": body["lr"], "critic_head_lr": head["lr"]}


def train_readout(data: FitData, model: Readout, settings: TrainSettings, value_clip: float | None,
                  value_coef: float = 1.0, q_coef: float = 0.0) -> list[FitPoint]:
    """Train ``model`` on the value objective alone; its scores at each checkpoint (and step 0).

    Every ``refresh`` steps the targets are recomputed from the readout's current values over
    the training episodes (lambda-returns for V, SARSA targets for Q; with ``target='mc'`` the
    Monte-Carlo return for both) and the clipping anchors reset, as an iteration's old pass does.
    The loss is ``(c_V sum L_V + c_Q sum L_Q) / turns``, the algorithms' per-turn average.
    """
    if settings.target not in ("lambda", "mc"):
        raise UserError(f"The value-fit target must be 'lambda' or 'mc', not {settings.target!r}.")
    train = data.turn_slots(False)
    points = []
    v_all, q_all = model.values(None)
    points.append(score(data, v_all, 0, q_all))
    anchors: tuple[torch.Tensor, ...] = ()
    for step in range(1, settings.steps + 1):
        if (step - 1) % settings.refresh == 0:
            v_all, q_all = model.values(None)
            v_all = v_all.detach()
            if settings.target == "mc":
                v_target, q_target = data.mc, data.mc
            else:
                v_target = data.lambda_returns(v_all)
                q_target = data.sarsa_targets(q_all.detach(), v_all) if q_all is not None else None
            anchors = (v_all[train], v_target[train],
                       None if q_all is None else q_all.detach()[train],
                       None if q_target is None else q_target[train])

        def loss_of(v: torch.Tensor, q: torch.Tensor | None, anchors=anchors) -> torch.Tensor:
            v_old, v_tgt, q_old, q_tgt = anchors
            loss = value_coef * clipped_value_loss(v[train], v_old, v_tgt, value_clip).sum()
            if q is not None and q_coef and q_old is not None:
                loss = loss + q_coef * clipped_value_loss(q[train], q_old, q_tgt, value_clip).sum()
            return loss / len(train)

        model.step(loss_of)
        if step in settings.checkpoints or step == settings.steps:
            v_all, q_all = model.values(None)
            points.append(score(data, v_all.detach(), step, q_all))
    return points


def fresh_copy(policy: Policy) -> Policy:
    """A policy over a deep copy of the model, so that one trained readout never starts from
    another's weights."""
    return Policy(copy.deepcopy(policy.model), policy.tokenizer, policy.value_tokens, policy.temperature)


def markdown_table(results: Sequence[FitResult], checkpoints: Sequence[int]) -> str:
    """One row per readout: held-out EV vs Monte-Carlo at each checkpoint (the closed-form
    references have only a final value), then at the end EV vs the lambda-return of its own
    values, training EV, V's spread on the held-out turns and Q's held-out EV (SAPO's readouts)."""
    head = ["readout", "settings", *[f"K={k}" for k in checkpoints], "final", "EV vs λ-return",
            "train EV", "V std", "Q EV", "s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        by_step = {p.steps: p for p in r.points} if len(r.points) > 1 else {}
        cells = [_ev(by_step[k].test_ev_mc) if k in by_step else "" for k in checkpoints]
        f = r.final
        text = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in r.settings.items())
        lines.append("| " + " | ".join([r.name, text, *cells, f"**{_ev(f.test_ev_mc)}**", _ev(f.test_ev_lambda),
                                        _ev(f.train_ev_mc), f"{f.v_std:.3f}", _ev(f.test_ev_q),
                                        f"{r.seconds:.1f}"]) + " |")
    return "\n".join(lines)


def _ev(x: float) -> str:
    return "n/a" if x != x else f"{x:.3f}"
