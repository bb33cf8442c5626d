"""A value readout solved in closed form: whitened ridge regression over a window of recent batches.

The alternative to the head-only Adam steps (SAPO's ``value_head_fit`` / PPO's
``critic_head_fit`` set to ``ridge``). Why: on the embedded model the final-layer features carry
which button was pressed, but in directions far smaller than the ones that carry the lamp
(``benchmarks/chain_button_ridge.py``). A few hundred Adam steps from zero fit the large directions
and never reach the small ones: the value follows the lamp. Ridge on *standardised* features
weighs every direction by how well it predicts, not by how large it is, and reads the button
(docs/suite.md). Two more things make it work on an RL batch:

- **A window of batches.** A batch of 16 episodes from a near-decided policy holds one or two
  presses of the wrong button, too few to fit; the last ``window`` batches are kept
  (:class:`ReadoutWindow`) and fitted together, their targets as their own update computed them.
- **Features read after the update.** The fit runs at the end of an update, on hidden states
  re-read under the updated weights (one forward pass over each batch of the window, no
  backward), because that is what the next iteration's old pass will read it from. Fitted before
  the update, it does not survive it: one policy update at lr 1e-5 shifts SmolLM2-135M's final
  features by 0.3 of their spread over a batch at the median dimension and up to 12 in the
  narrowest, which is where the button is read; a readout fitted on 16 episodes then fell from
  EV 0.74 to -0.72 on the same states (docs/suite.md).
- **Its penalty chosen per fit** by grouped k-fold cross-validation over episodes, from
  :data:`ALPHAS`: what suits 32 states does not suit 256.

The value is then ``squash(x . w + b)``: ``clip`` and ``clip_st`` are linear inside the range, so
the least-squares solution is the fit; for ``tanh`` a few damped Gauss-Newton steps refine it on
the squashed objective (starting from the linear solution, each step accepted only if it lowers
the penalised loss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from agentrl.algorithms.batch import TurnBatch
from agentrl.rollout.trajectory import Trajectory, Turn

#: Ridge penalties tried by cross-validation, on standardised features (one unit of penalty per
#: unit-variance feature).
ALPHAS: tuple[float, ...] = (1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3, 1e4)


@dataclass
class RidgeReadout:
    """``squash(x @ weight + bias)`` in the raw feature space; ``alpha`` the penalty chosen."""

    weight: torch.Tensor  # [H], float64
    bias: float
    alpha: float
    #: the chosen penalty's cross-validated fit on held-out episodes, as explained variance against
    #: a constant (each fold's training mean) scored on the same folds: at or below 0 the features
    #: held nothing about the targets that carried over to episodes the fit had not seen, so the
    #: readout is a constant whatever ``alpha`` was picked (NaN without two episodes to split)
    held_out_ev: float = math.nan

    def metrics(self, window_turns: int) -> dict[str, float]:
        """What both critics log of a fit (SAPO's ``refit_rows``, PPO's ``_ridge_head``)."""
        return {"value/head_alpha": self.alpha, "value/head_window_turns": float(window_turns),
                "value/head_cv_ev": self.held_out_ev}


def _solve(z: torch.Tensor, y: torch.Tensor, sw: torch.Tensor, alpha: float, intercept: bool) -> tuple[torch.Tensor, float]:
    """Weighted ridge on standardised ``z``: min sum sw (z w + b - y)^2 + alpha |w|^2 (b free)."""
    if intercept:
        total = float(sw.sum())
        z_mean = (sw[:, None] * z).sum(0) / total
        y_mean = float((sw * y).sum()) / total
        zc, yc = z - z_mean, y - y_mean
    else:
        zc, yc = z, y
    gram = zc.T @ (sw[:, None] * zc)
    w = torch.linalg.solve(gram + alpha * torch.eye(z.shape[1], dtype=z.dtype), zc.T @ (sw * yc))
    b = y_mean - float(z_mean @ w) if intercept else 0.0
    return w, b


def _refine_tanh(z: torch.Tensor, y: torch.Tensor, sw: torch.Tensor, alpha: float, intercept: bool,
                 w: torch.Tensor, b: float, iterations: int) -> tuple[torch.Tensor, float]:
    """Damped Gauss-Newton on sum sw (tanh(z w + b) - y)^2 + alpha |w|^2 from (w, b)."""
    ones = torch.ones(len(z), 1, dtype=z.dtype)
    design = torch.cat([z, ones], 1) if intercept else z
    theta = torch.cat([w, torch.tensor([b], dtype=z.dtype)]) if intercept else w.clone()
    penalty = torch.full((design.shape[1],), alpha, dtype=z.dtype)
    if intercept:
        penalty[-1] = 0.0

    def loss(t: torch.Tensor) -> float:
        return float((sw * (torch.tanh(design @ t) - y) ** 2).sum() + (penalty * t * t).sum())

    current = loss(theta)
    for _ in range(iterations):
        pred = torch.tanh(design @ theta)
        jac = (1 - pred ** 2)[:, None] * design
        lhs = jac.T @ (sw[:, None] * jac) + torch.diag(penalty)
        step = torch.linalg.solve(lhs + 1e-9 * torch.eye(len(theta), dtype=z.dtype),
                                  jac.T @ (sw * (y - pred)) - penalty * theta)
        size = 1.0
        while size > 1e-3:
            trial = theta + size * step
            value = loss(trial)
            if value < current:
                theta, current = trial, value
                break
            size /= 2
        else:
            break
    return (theta[:-1], float(theta[-1])) if intercept else (theta, 0.0)


def fit_ridge_readout(x: torch.Tensor, y: torch.Tensor, groups: torch.Tensor, *, squash: str = "clip",
                      intercept: bool = True, sample_weight: torch.Tensor | None = None,
                      alphas: tuple[float, ...] = ALPHAS, folds: int = 4, tanh_iterations: int = 10) -> RidgeReadout:
    """Fit ``squash(x @ w + b)`` to ``y`` by whitened ridge; ``alpha`` by grouped k-fold CV.

    ``x``: [N, H] features; ``y``: [N] targets in the squash's range; ``groups``: [N] integer
    episode ids (a fold holds whole episodes, so that CV asks the question the next batch will:
    an episode never seen); ``sample_weight``: [N] (SAPO weighs its V and Q rows by ``value_coef``
    and ``q_coef``), rescaled to mean 1. Features are scaled by their standard deviation over ``x`` (clamped at 1e-6 of
    the largest), so the penalty weighs every direction alike. ``intercept=False`` (SAPO's value
    rows have no bias): features are scaled but not centred, so a constant is read through a
    direction on which every feature vector agrees; language models' final hidden states have such
    directions (massive activations), and ``head_ev_after`` in the metrics shows it if one lacks them.
    The CV scores the linear fit; for ``tanh`` the chosen alpha's solution is then refined.
    """
    x64, y64 = x.double(), y.double()
    sw = torch.ones(len(y64), dtype=torch.float64) if sample_weight is None else sample_weight.double()
    if float(sw.sum()) > 0:
        sw = sw * (len(sw) / float(sw.sum()))  # mean 1: the penalty's scale does not depend on the weights'
    scale = x64.std(0, unbiased=False)
    scale = scale.clamp(min=max(float(scale.max()), 1e-12) * 1e-6)
    z = x64 / scale
    linear_y = y64.clamp(-1.0, 1.0) if squash in ("clip", "clip_st", "tanh") else y64
    unique = torch.unique(groups)
    fold_of = torch.zeros(len(groups), dtype=torch.long)
    for k, g in enumerate(unique.tolist()):
        fold_of[groups == g] = k % folds
    best_alpha, best_err, held_out_ev = alphas[0], float("inf"), math.nan
    if len(unique) >= 2:
        held_out = [fold_of == f for f in range(min(folds, len(unique)))]
        for alpha in alphas:
            err = 0.0
            for held in held_out:
                w, b = _solve(z[~held], linear_y[~held], sw[~held], alpha, intercept)
                err += float((sw[held] * (z[held] @ w + b - linear_y[held]) ** 2).sum())
            if err < best_err:
                best_alpha, best_err = alpha, err
        constant = 0.0
        for held in held_out:
            mean = float((sw[~held] * linear_y[~held]).sum() / sw[~held].sum())
            constant += float((sw[held] * (linear_y[held] - mean) ** 2).sum())
        if constant > 0:
            held_out_ev = 1.0 - best_err / constant
    w, b = _solve(z, linear_y, sw, best_alpha, intercept)
    if squash == "tanh":
        w, b = _refine_tanh(z, y64, sw, best_alpha, intercept, w, b, tanh_iterations)
    return RidgeReadout(weight=w / scale, bias=b, alpha=best_alpha, held_out_ev=held_out_ev)


def batch_state(batch: TurnBatch) -> list[dict[str, Any]]:
    """What re-scoring ``batch`` needs, as tensors and plain values (a checkpoint's trainer state
    is loaded with ``weights_only=True``): token ids, rewards and ends of every turn, and the
    bootstrap prompts. No text, log-probs or constraints: a refit reads hidden states only."""
    return [{"task_seed": t.task_seed, "conversation": t.conversation,
             "bootstrap": None if t.bootstrap_prompt_ids is None else torch.tensor(t.bootstrap_prompt_ids),
             "turns": [{"prompt": torch.tensor(u.prompt_ids), "action": torch.tensor(u.action_ids),
                        "reward": u.reward, "terminated": u.terminated, "truncated": u.truncated, "valid": u.valid}
                       for u in t.turns]}
            for t in batch.trajectories]


def batch_from_state(state: list[dict[str, Any]]) -> TurnBatch:
    """The :class:`TurnBatch` that :func:`batch_state` recorded (turns without text)."""
    trajectories = []
    for record in state:
        turns = [Turn(prompt_ids=t["prompt"].tolist(), action_ids=t["action"].tolist(), rollout_logprobs=[],
                      prompt_text="", reply_text="", action="", observation="", reward=float(t["reward"]),
                      env_reward=float(t["reward"]), terminated=bool(t["terminated"]), truncated=bool(t["truncated"]),
                      valid=bool(t["valid"]))
                 for t in record["turns"]]
        bootstrap = record["bootstrap"]
        trajectories.append(Trajectory(task_seed=int(record["task_seed"]), group=0, task="", turns=turns,
                                       bootstrap_prompt_ids=None if bootstrap is None else bootstrap.tolist(),
                                       conversation=bool(record["conversation"])))
    return TurnBatch.from_trajectories(trajectories)


@dataclass
class WindowEntry:
    """One batch of the window: its turns (to re-score under the current weights) and the value
    targets its own update computed (lambda-returns, SARSA targets)."""

    batch: TurnBatch
    targets: dict[str, torch.Tensor]


@dataclass
class ReadoutWindow:
    """The last ``size`` batches, whose hidden states the ridge readout is fitted on, re-read under
    the weights the fit will be read with. Kept in the algorithm's checkpoint state (token ids and
    targets), so that a resumed run fits as an unbroken one would."""

    size: int
    entries: list[WindowEntry] = field(default_factory=list)

    def add(self, batch: TurnBatch, **targets: torch.Tensor) -> None:
        """Keep one batch and its targets (detached, float32, CPU); drop the oldest past ``size``."""
        self.entries.append(WindowEntry(batch, {k: v.detach().float().cpu() for k, v in targets.items()}))
        del self.entries[:-self.size]

    def stacked(self, key: str) -> torch.Tensor:
        return torch.cat([e.targets[key] for e in self.entries])

    def episode_ids(self) -> torch.Tensor:
        """Each turn's episode, numbered apart across the window's batches."""
        out, offset = [], 0
        for entry in self.entries:
            out.append(entry.batch.episode_of_turns() + offset)
            offset += len(entry.batch.spans)
        return torch.cat(out)

    def state_dict(self) -> dict[str, Any]:
        return {"size": self.size, "entries": [{"batch": batch_state(e.batch), "targets": e.targets}
                                               for e in self.entries]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.entries = [WindowEntry(batch_from_state(e["batch"]), dict(e["targets"]))
                        for e in state["entries"]][-self.size:]
