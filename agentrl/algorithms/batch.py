"""A training batch of turns and what is cut from it: turns flattened from trajectories, micro-batches
by a padded-token budget, per-token advantages, the rollout log-prob gap and truncated importance
weights."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from agentrl.algorithms.scoring import ScoringUnit, build_units
from agentrl.models.policy import ScoreItem
from agentrl.rollout.trajectory import Trajectory, Turn


@dataclass
class TurnBatch:
    """The turns of an iteration flattened, with the bootstrap prompts of truncated episodes."""

    trajectories: list[Trajectory]
    turns: list[Turn]
    items: list[ScoreItem]
    spans: list[tuple[int, int]]  # [start, stop) of each trajectory's turns in ``turns``
    bootstrap_items: list[ScoreItem] = field(default_factory=list)
    bootstrap_of: dict[int, int] = field(default_factory=dict)  # trajectory -> bootstrap item
    #: What each forward pass runs over (agentrl.algorithms.scoring): one unit per turn and per
    #: bootstrap prompt, or one per episode when every trajectory is a conversation-mode chat.
    units: list[ScoringUnit] = field(default_factory=list)
    by_episode: bool = False

    @classmethod
    def from_trajectories(cls, trajectories: Sequence[Trajectory]) -> TurnBatch:
        turns: list[Turn] = []
        spans, boot, boot_of = [], [], {}
        for k, traj in enumerate(trajectories):
            spans.append((len(turns), len(turns) + len(traj.turns)))
            turns.extend(traj.turns)
            if traj.truncated and traj.bootstrap_prompt_ids is not None:
                boot_of[k] = len(boot)
                boot.append(ScoreItem(traj.bootstrap_prompt_ids, []))
        items = [ScoreItem(t.prompt_ids, t.action_ids, t.allowed) for t in turns]
        units, by_episode = build_units(trajectories, spans, boot_of, len(turns))
        return cls(list(trajectories), turns, items, spans, boot, boot_of, units, by_episode)

    def unique_tokens(self) -> int:
        """Distinct token positions of the batch: what one pass over every unit covers."""
        return sum(unit.sequence.length for unit in self.units)

    def token_counts(self) -> list[int]:
        return [len(item.action_ids) for item in self.items]

    def episode_of_turns(self) -> torch.Tensor:
        """Per turn: the index of its trajectory in the batch (the groups of a fit that must hold
        whole episodes out, such as the ridge readout's cross-validation)."""
        episode = torch.zeros(len(self.turns), dtype=torch.long)
        for k, (start, stop) in enumerate(self.spans):
            episode[start:stop] = k
        return episode

    def valid_mask(self) -> torch.Tensor:
        """Per turn: whether its action was valid (not penalised), for :meth:`normalize`."""
        return torch.tensor([turn.valid for turn in self.turns], dtype=torch.bool)


def micro_batches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Split positions ``0..n-1`` into groups whose padded size (rows x longest) fits the budget.

    Sorting by length keeps padding small; a single sequence longer than the budget gets a
    group of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i], reverse=True)
    groups: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        new_longest = max(longest, lengths[i])
        if current and new_longest * (len(current) + 1) > token_budget:
            groups.append(current)
            current, new_longest = [], lengths[i]
        current.append(i)
        longest = new_longest
    if current:
        groups.append(current)
    return groups


@dataclass
class ItemScores:
    logprobs: list[torch.Tensor]  # per item
    pre: torch.Tensor | None
    post: torch.Tensor | None
    #: [size, H] per slot, the final hidden states at the pre / post boundaries (``keep_hidden``)
    hidden_pre: torch.Tensor | None = None
    hidden_post: torch.Tensor | None = None


def split_tokens(flat: torch.Tensor, counts: Sequence[int]) -> list[torch.Tensor]:
    return list(torch.split(flat, list(counts)))


def turn_advantages_to_tokens(advantages: torch.Tensor, counts: Sequence[int]) -> list[torch.Tensor]:
    """Give every action token of turn i the turn's advantage ``advantages[i]``."""
    return [advantages[i].repeat(c) for i, c in enumerate(counts)]


def logprob_gap(batch: TurnBatch, old_logprobs: Sequence[torch.Tensor]) -> float:
    """Mean |log-prob recorded at rollout - log-prob the trainer recomputed| per action token.

    Zero up to float rounding when generation and training use the same weights and dtype;
    larger with a bf16 generation copy or vLLM. Logged as ``rollout/logprob_gap``.
    """
    total, count = 0.0, 0
    for turn, old in zip(batch.turns, old_logprobs, strict=True):
        if len(turn.rollout_logprobs) != len(old):
            continue
        total += float((torch.tensor(turn.rollout_logprobs) - old).abs().sum())
        count += len(old)
    return total / count if count else float("nan")


def behaviour_logprobs(turns: Sequence[Turn], old_logp: torch.Tensor) -> torch.Tensor:
    """The log-probs the engine recorded for ``turns``' action tokens (the behaviour policy), in
    the order of ``old_logp``; a turn recorded without them takes its ``old_logp`` entries."""
    rollout = []
    offset = 0
    for turn in turns:
        count = len(turn.action_ids)
        recorded = turn.rollout_logprobs if len(turn.rollout_logprobs) == count else None
        rollout.append(torch.tensor(recorded, dtype=torch.float32) if recorded is not None
                       else old_logp[offset:offset + count].detach().float().cpu())
        offset += count
    return torch.cat(rollout).to(old_logp.device) if rollout else old_logp.new_zeros(0)


def tis_weights(turns: Sequence[Turn], old_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance weights ``min(exp(old - rollout), cap)`` per action token: the ratio
    of the trainer's old policy to the distribution the tokens were sampled from. Tokens without a
    recorded rollout log-prob get weight 1."""
    return torch.exp(old_logp.detach().float() - behaviour_logprobs(turns, old_logp)).clamp(max=cap)
