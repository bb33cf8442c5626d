"""The value-fit benchmark's data and reference points (:mod:`agentrl.bench.value_fit` trains the
readouts): episodes replayed exactly from a run's JSONL or freshly played, the boundary features
cached once, the ridge ceiling and the turn-index + task-type baseline, and the explained-variance
score every readout gets."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from agentrl.algorithms.base import TurnBatch, micro_batches
from agentrl.algorithms.losses import explained_variance
from agentrl.algorithms.ridge_readout import ALPHAS
from agentrl.backends.base import SamplingParams
from agentrl.bench.replay import ReplayBackend, ReplayMismatch
from agentrl.errors import UserError
from agentrl.models.policy import (
    Policy,
    boundary_positions,
    decoder_of,
    run_body,
    spans_of,
)
from agentrl.rollout.engine import RolloutEngine, Task
from agentrl.rollout.trajectory import Trajectory

TOKEN_BUDGET = 16384  # tokens per forward micro-batch when caching features


# --- episodes ------------------------------------------------------------------------------------
def read_records(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Episode records (one JSON object per line) from eval or sample JSONL files."""
    out = []
    for path in paths:
        for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}:{n} is not a JSON episode record ({exc.msg}).") from exc
            if not isinstance(record, dict) or not isinstance(record.get("turns"), list) or "task_seed" not in record:
                raise UserError(f"{path}:{n} is not an episode record (it needs task_seed and turns).")
            out.append(record)
    return out


def replay(engine: RolloutEngine, backend: ReplayBackend,
           records: Sequence[dict[str, Any]]) -> tuple[list[Trajectory], list[str]]:
    """Replay ``records`` through ``engine`` (whose backend is ``backend``); returns the exact
    trajectories and one reason per record that the env did not reproduce (left out)."""
    trajectories, skipped = [], []
    for record in records:
        backend.load([turn["reply"] for turn in record["turns"]])
        try:
            (traj,) = engine.run([Task(seed=int(record["task_seed"]), group=0)]).trajectories
        except ReplayMismatch as exc:
            skipped.append(f"task_seed {record['task_seed']}: {exc}")
            continue
        recorded = [(t["observation"], t["action"]) for t in record["turns"]]
        played = [(t.observation, t.action) for t in traj.turns]
        if played != recorded:
            # the first turn that differs, or the end of the shorter when one is a prefix of the other
            first = next((i for i, (a, b) in enumerate(zip(played, recorded, strict=False)) if a != b),
                         min(len(played), len(recorded)))
            skipped.append(f"task_seed {record['task_seed']}: turn {first + 1} differs from the record")
            continue
        trajectories.append(traj)
    return trajectories, skipped


def play(engine: RolloutEngine, count: int, seed: int, params: SamplingParams | None = None,
         batch: int = 32) -> list[Trajectory]:
    """``count`` fresh episodes on distinct random task seeds (batches of ``batch``)."""
    rng = random.Random(f"value-fit-{seed}")
    seeds = rng.sample(range(2**31), count)
    out: list[Trajectory] = []
    for start in range(0, count, batch):
        tasks = [Task(seed=s, group=i) for i, s in enumerate(seeds[start:start + batch])]
        out.extend(engine.run(tasks, params).trajectories)
    return out


def probe_config(name: str, model: str = "tiny") -> Any:
    """The run config a suite run of probe ``name`` trains with (its SAPO run's, seed 0): the same
    env, prompts and decoding the suite uses, so fitted values mean what they mean there."""
    import tempfile

    from agentrl.bench.suite import plan_suite, probe_by_name

    (probe,) = probe_by_name(name)
    with tempfile.TemporaryDirectory() as tmp:
        plans = plan_suite(["sapo"], Path(tmp), [probe], model=model, seeds=1)
    return plans[probe.name].runs[0].config


def load_policy(model: str, seed: int) -> Policy:
    """A fresh policy with its value rows reserved, on the CPU (what a run would start from)."""
    from agentrl.training.compose import load_for_training
    from agentrl.training.config import ModelConfig

    loaded = load_for_training(replace(ModelConfig(), name=model, device="cpu"), reserve_values=True, seed=seed)
    return Policy(loaded.model, loaded.tokenizer, loaded.value_tokens, 1.0)


def probe_episodes(name: str, model: str = "tiny", count: int = 128,
                   seed: int = 0) -> tuple[Any, Policy, list[Trajectory]]:
    """``count`` fresh episodes of suite probe ``name`` played by a fresh ``model`` through the
    suite's config: (that config, the policy, the trajectories). The value-fit benchmark's probe
    source and the value-learning test's data."""
    from agentrl.training.compose import env_factory, make_backend, make_engine

    config = probe_config(name, model)
    policy = load_policy(model, seed)
    rollout = replace(config.rollout, env_workers=0)
    engine = make_engine(policy, make_backend(policy, rollout, seed=seed), rollout,
                         env_factory(config.env, "train"))
    try:
        return config, policy, play(engine, count, seed)
    finally:
        engine.pool.close()


# --- the data: turns, episodes, splits, returns ----------------------------------------------------
@dataclass
class FitData:
    """The episodes as one scoring batch plus padded per-episode tensors ``[E, T]``.

    Slots follow :mod:`agentrl.algorithms.scoring`: turn ``i`` is slot ``i``, the bootstrap prompt of
    truncated episode ``b`` is slot ``n + b``.
    """

    batch: TurnBatch
    r_max: float
    gamma: float
    lam: float
    rewards: torch.Tensor  # [E, T] in units of R_max
    done: torch.Tensor  # [E, T] terminated
    mask: torch.Tensor  # [E, T] a turn is there
    slot: torch.Tensor  # [E, T] slot of each turn (0 where no turn)
    boot_slot: torch.Tensor  # [E] bootstrap slot or -1
    test_episode: torch.Tensor  # [E] bool
    test_fraction: float = 0.3
    split_seed: int = 0
    mc: torch.Tensor = field(init=False)  # [n] discounted Monte-Carlo return of each turn

    def __post_init__(self) -> None:
        zeros = torch.zeros(self.n_slots)
        self.mc = self.lambda_returns(zeros, lam=1.0, bootstrap=False)

    @classmethod
    def build(cls, trajectories: Sequence[Trajectory], r_max: float, gamma: float, lam: float,
              test_fraction: float = 0.3, split_seed: int = 0) -> FitData:
        if len(trajectories) < 4:
            raise UserError(f"The value fit needs at least 4 episodes, not {len(trajectories)}.")
        batch = TurnBatch.from_trajectories(trajectories)
        e, t = len(trajectories), max(len(tr.turns) for tr in trajectories)
        rewards, done = torch.zeros(e, t), torch.zeros(e, t, dtype=torch.bool)
        mask, slot = torch.zeros(e, t, dtype=torch.bool), torch.zeros(e, t, dtype=torch.long)
        boot = torch.full((e,), -1, dtype=torch.long)
        n = len(batch.turns)
        for k, (start, stop) in enumerate(batch.spans):
            for i, turn in enumerate(batch.turns[start:stop]):
                rewards[k, i] = turn.reward / r_max
                done[k, i] = turn.terminated
                mask[k, i] = True
                slot[k, i] = start + i
            if k in batch.bootstrap_of:
                boot[k] = n + batch.bootstrap_of[k]
        # Held out by task: every episode of one (task, seed) on the same side. The split is
        # stratified on whether a task ever paid a reward, so a sparse probe where one task in
        # eight is won still holds won episodes out (else every held-out return is 0 and the
        # explained variance is undefined).
        paid = {(tr.task, tr.task_seed) for tr in trajectories if any(t.reward != 0 for t in tr.turns)}
        keys = sorted({(tr.task, tr.task_seed) for tr in trajectories})
        rng = random.Random(f"value-fit-split-{split_seed}")
        held: set[tuple[str, int]] = set()
        for stratum in ([k for k in keys if k in paid], [k for k in keys if k not in paid]):
            rng.shuffle(stratum)
            held.update(stratum[: round(test_fraction * len(stratum))])
        if not held:
            held.add(rng.choice(keys))
        test = torch.tensor([(tr.task, tr.task_seed) in held for tr in trajectories])
        if bool(test.all()) or not bool(test.any()):
            raise UserError("The episodes hold too few distinct tasks to hold some out.")
        return cls(batch, r_max, gamma, lam, rewards, done, mask, slot, boot, test, test_fraction, split_seed)

    @property
    def n_turns(self) -> int:
        return len(self.batch.turns)

    @property
    def n_slots(self) -> int:
        return self.n_turns + len(self.batch.bootstrap_items)

    def turn_slots(self, test: bool) -> torch.Tensor:
        """Slots of the turns of the held-out (``test``) or training episodes, in turn order."""
        keep = self.mask & (self.test_episode[:, None] == test)
        return self.slot[keep]

    def episode_of_slots(self) -> torch.Tensor:
        """Per slot: the index of its episode (a bootstrap prompt's too): the groups of a fit
        that holds whole episodes out."""
        episode = torch.zeros(self.n_slots, dtype=torch.long)
        episode[:self.n_turns] = self.batch.episode_of_turns()
        for k, slot in enumerate(self.boot_slot.tolist()):
            if slot >= 0:
                episode[slot] = k
        return episode

    def episodes(self, test: bool) -> list[int]:
        return [k for k in range(len(self.batch.trajectories)) if bool(self.test_episode[k]) == test]

    def _padded(self, per_slot: torch.Tensor) -> torch.Tensor:
        return torch.where(self.mask, per_slot[self.slot], torch.zeros(()))

    def _boot(self, per_slot: torch.Tensor, bootstrap: bool) -> torch.Tensor:
        if not bootstrap:
            return torch.zeros(self.boot_slot.shape)
        return torch.where(self.boot_slot >= 0, per_slot[self.boot_slot.clamp(min=0)], torch.zeros(()))

    def lambda_returns(self, v: torch.Tensor, lam: float | None = None, bootstrap: bool = True) -> torch.Tensor:
        """Per turn slot: the lambda-return of values ``v`` (per slot, bootstrap slots included),
        as :func:`agentrl.algorithms.advantages.gae` computes it, for every episode at once."""
        lam = self.lam if lam is None else lam
        values = self._padded(v)
        next_v, next_adv = self._boot(v, bootstrap), torch.zeros(values.shape[0])
        ret = torch.zeros_like(values)
        for t in reversed(range(values.shape[1])):
            here, not_done = self.mask[:, t], (~self.done[:, t]).float()
            delta = self.rewards[:, t] + self.gamma * not_done * next_v - values[:, t]
            adv = delta + self.gamma * lam * not_done * next_adv
            ret[:, t] = adv + values[:, t]
            next_v = torch.where(here, values[:, t], next_v)
            next_adv = torch.where(here, adv, next_adv)
        out = torch.zeros(self.n_turns)
        out[self.slot[self.mask]] = ret[self.mask]
        return out

    def sarsa_targets(self, q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Per turn slot: ``r_t + gamma * Q(s_{t+1}, a_{t+1})`` (V(s_T) after a truncated end),
        as :func:`agentrl.algorithms.advantages.sarsa_targets`."""
        qs = self._padded(q)
        following = self._boot(v, True)
        out = torch.zeros_like(qs)
        for t in reversed(range(qs.shape[1])):
            here, not_done = self.mask[:, t], (~self.done[:, t]).float()
            out[:, t] = self.rewards[:, t] + self.gamma * not_done * following
            following = torch.where(here, qs[:, t], following)
        flat = torch.zeros(self.n_turns)
        flat[self.slot[self.mask]] = out[self.mask]
        return flat


# --- features --------------------------------------------------------------------------------------
@torch.no_grad()
def boundary_features(policy: Policy, data: FitData, body: nn.Module | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Final-layer hidden states at every slot's pre-action boundary (V's position) and every
    turn's post-action boundary (Q's): ``([n_slots, H], [n_turns, H])``, float32, one pass per unit."""
    body = decoder_of(policy.model) if body is None else body
    units = data.batch.units
    pre: torch.Tensor | None = None
    post: torch.Tensor | None = None
    was_training = policy.model.training
    policy.model.eval()
    try:
        for group in micro_batches([u.sequence.length for u in units], TOKEN_BUDGET):
            chunk = [units[i].sequence for i in group]
            slots = [s for i in group for s in units[i].slots]
            hidden = run_body(body, chunk, policy.device).float()
            spans = spans_of(chunk)
            pre_pos, post_pos = boundary_positions(spans)
            rows = torch.tensor([row for row, _ in spans])
            h_pre = hidden[rows, torch.tensor(pre_pos)].cpu()
            h_post = hidden[rows, torch.tensor(post_pos)].cpu()
            if pre is None:
                pre = torch.zeros(data.n_slots, hidden.shape[-1])
                post = torch.zeros(data.n_turns, hidden.shape[-1])
            for j, s in enumerate(slots):
                pre[s] = h_pre[j]
                if s < data.n_turns:
                    post[s] = h_post[j]
    finally:
        policy.model.train(was_training)
    assert pre is not None and post is not None
    return pre, post


# --- reference points --------------------------------------------------------------------------------
RIDGE_ALPHAS = ALPHAS  # the same grid as the online ridge head fit (agentrl.algorithms.ridge_readout)


def _ridge_fit(x: torch.Tensor, y: torch.Tensor, alpha: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    mean, std = x.mean(0), x.std(0).clamp(min=1e-6)
    z = (x - mean) / std
    y_mean = float(y.mean())
    w = torch.linalg.solve(z.T @ z + alpha * torch.eye(z.shape[1], dtype=z.dtype), z.T @ (y - y_mean))
    return w, mean, std, y_mean


def ridge_predict(x_train: torch.Tensor, y_train: torch.Tensor, groups: torch.Tensor,
                  x_test: torch.Tensor, folds: int = 5) -> tuple[torch.Tensor, float]:
    """Ridge regression on standardised features, its alpha chosen by grouped k-fold CV on the
    training side only; returns the predictions for ``x_test`` and the alpha chosen."""
    x_train, x_test, y_train = x_train.double(), x_test.double(), y_train.double()
    fold_of = groups % folds
    best, best_alpha = float("inf"), RIDGE_ALPHAS[0]
    for alpha in RIDGE_ALPHAS:
        err = 0.0
        for f in range(folds):
            inner, outer = fold_of != f, fold_of == f
            if not bool(outer.any()) or int(inner.sum()) < 2:
                continue
            w, mean, std, y_mean = _ridge_fit(x_train[inner], y_train[inner], alpha)
            pred = ((x_train[outer] - mean) / std) @ w + y_mean
            err += float(((pred - y_train[outer]) ** 2).sum())
        if err < best:
            best, best_alpha = err, alpha
    w, mean, std, y_mean = _ridge_fit(x_train, y_train, best_alpha)
    return (((x_test - mean) / std) @ w + y_mean).float(), best_alpha


def baseline_features(data: FitData) -> torch.Tensor:
    """Per slot: one-hot turn index (bootstrap prompts: the index after the last turn), one-hot
    task type, and their product: what a value can know without reading the state."""
    trajs = data.batch.trajectories
    types = sorted({tr.task_type or "" for tr in trajs})
    horizon = data.mask.shape[1] + 1
    index = torch.zeros(data.n_slots, dtype=torch.long)
    kind = torch.zeros(data.n_slots, dtype=torch.long)
    for k, tr in enumerate(trajs):
        start, stop = data.batch.spans[k]
        index[start:stop] = torch.arange(stop - start)
        kind[start:stop] = types.index(tr.task_type or "")
        if int(data.boot_slot[k]) >= 0:
            index[data.boot_slot[k]] = stop - start
            kind[data.boot_slot[k]] = types.index(tr.task_type or "")
    turn_hot = nn.functional.one_hot(index, horizon).float()
    type_hot = nn.functional.one_hot(kind, len(types)).float()
    both = (type_hot[:, :, None] * turn_hot[:, None, :]).flatten(1)
    return torch.cat([turn_hot, type_hot, both], dim=1) if len(types) > 1 else turn_hot


# --- results ---------------------------------------------------------------------------------------
@dataclass
class FitPoint:
    """A readout's scores after ``steps`` optimizer steps (0 for the closed-form references)."""

    steps: int
    test_ev_mc: float
    test_ev_lambda: float
    train_ev_mc: float
    v_std: float  # spread of V on the held-out turns (units of R_max)
    #: Q's held-out EV against the Monte-Carlo return (the return after the action taken is
    #: Q's target as much as V's); nan for readouts without a Q
    test_ev_q: float = float("nan")


@dataclass
class FitResult:
    name: str
    settings: dict[str, Any]
    points: list[FitPoint]
    seconds: float = 0.0

    @property
    def final(self) -> FitPoint:
        return self.points[-1]

    def best(self) -> FitPoint:
        scored = [p for p in self.points if p.test_ev_mc == p.test_ev_mc]
        return max(scored, key=lambda p: p.test_ev_mc) if scored else self.points[-1]


def score(data: FitData, v: torch.Tensor, steps: int, q: torch.Tensor | None = None) -> FitPoint:
    """Explained variances of per-slot values ``v`` (and ``q``) on held-out and training turns."""
    test, train = data.turn_slots(True), data.turn_slots(False)
    lam = data.lambda_returns(v.detach())
    return FitPoint(steps, explained_variance(v[test], data.mc[test]),
                    explained_variance(v[test], lam[test]),
                    explained_variance(v[train], data.mc[train]),
                    float(v[test].std(unbiased=False)),
                    float("nan") if q is None else explained_variance(q.detach()[test], data.mc[test]))


def references(data: FitData, pre: torch.Tensor) -> list[FitResult]:
    """The ridge ceiling on frozen features and the turn-index + task-type baseline (V only)."""
    train = data.turn_slots(False)
    episode_of = data.episode_of_slots()
    out = []
    for name, x in (("ridge (frozen features)", pre), ("baseline (turn index + task type)", baseline_features(data))):
        everything = torch.arange(data.n_slots)
        pred, alpha = ridge_predict(x[train], data.mc[train], episode_of[train], x[everything])
        out.append(FitResult(name, {"alpha": alpha, "features": int(x.shape[1])}, [score(data, pred, 0)]))
    return out


# --- trained readouts ------------------------------------------------------------------------------
