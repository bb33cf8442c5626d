"""What one forward pass covers: the scoring units of an iteration's batch.

Every training pass (old log-probs, V and Q, reference, critic values, actor and critic updates)
runs the model over *units*, and reads each turn from the unit that holds it:

* window mode: one unit per turn (its prompt + reply) and one per bootstrap prompt, as before;
* conversation mode (:mod:`agentrl.rollout.conversation`): one unit per episode, the episode's final
  sequence, whose prefixes are every turn's prompt + reply (and the bootstrap prompt of a
  truncated episode). Each token of the episode goes through the model once per pass instead of
  once per turn that repeats it.

A turn read from its episode's sequence gets the same outputs as the turn scored alone (causal
attention; the lean forward of :mod:`agentrl.models.policy` picks positions ``P - 1 + j``, ``P - 1`` and
``P + A - 1``), so losses, their normalisation and the gradient are unchanged; only the number of
tokens run through the model changes. An episode whose turns are not prefixes of its final
sequence (a hand-made trajectory) falls back to one unit per turn.

Slots: turn ``i`` of the batch is slot ``i``; bootstrap prompt ``b`` is slot ``n + b``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from agentrl.models.policy import SequenceItem, Span
from agentrl.rollout.trajectory import Trajectory


@dataclass
class ScoringUnit:
    """One row of a forward pass: the full sequence with all its spans (turns, then the bootstrap
    if any) and the slot of each span; ``training`` is the same row cut after the last reply, with
    turn spans only (what the update passes need)."""

    sequence: SequenceItem
    slots: list[int]
    training: SequenceItem | None  # None: a bootstrap-only unit (window mode)
    turn_slots: list[int]


def _turn_span(turn) -> Span:
    return Span(len(turn.prompt_ids), turn.action_ids, turn.allowed)


def _is_prefix_of_final(traj: Trajectory) -> bool:
    final = traj.final_ids
    return all(final[:t.num_tokens] == list(t.prompt_ids) + list(t.action_ids) for t in traj.turns)


def build_units(trajectories: Sequence[Trajectory], spans: Sequence[tuple[int, int]],
                bootstrap_of: dict[int, int], total_turns: int) -> tuple[list[ScoringUnit], bool]:
    """The units of a batch, and whether they are whole episodes (every trajectory was played in
    conversation mode and passes the prefix check)."""
    by_episode = bool(trajectories) and all(t.conversation and t.turns and _is_prefix_of_final(t)
                                            for t in trajectories)
    units: list[ScoringUnit] = []
    if by_episode:
        for k, traj in enumerate(trajectories):
            start, stop = spans[k]
            turn_spans = [_turn_span(t) for t in traj.turns]
            turn_slots = list(range(start, stop))
            all_spans, slots = list(turn_spans), list(turn_slots)
            if k in bootstrap_of:
                all_spans.append(Span(len(traj.bootstrap_prompt_ids), ()))
                slots.append(total_turns + bootstrap_of[k])
            final = traj.final_ids
            training = SequenceItem(final[:turn_spans[-1].end], turn_spans)
            units.append(ScoringUnit(SequenceItem(final, all_spans), slots, training, turn_slots))
        return units, True
    for k, traj in enumerate(trajectories):
        start, _ = spans[k]
        for i, turn in enumerate(traj.turns):
            seq = SequenceItem(list(turn.prompt_ids) + list(turn.action_ids), [_turn_span(turn)])
            units.append(ScoringUnit(seq, [start + i], seq, [start + i]))
    for k, b in sorted(bootstrap_of.items(), key=lambda kv: kv[1]):
        ids = list(trajectories[k].bootstrap_prompt_ids)
        units.append(ScoringUnit(SequenceItem(ids, [Span(len(ids), ())]), [total_turns + b], None, []))
    return units, False


def minibatch_plan(units: Sequence[ScoringUnit], by_episode: bool, minibatch_turns: int,
                   generator: torch.Generator) -> list[list[int]]:
    """Training units (indices into ``units``) per optimizer step for one epoch.

    Window mode: the turns shuffled and cut every ``minibatch_turns`` (the draw is the same as
    before units existed). Conversation mode: whole episodes shuffled and gathered until a
    minibatch holds at least ``minibatch_turns`` turns, so no episode is split across steps.
    """
    trainable = [u for u, unit in enumerate(units) if unit.training is not None]
    order = torch.randperm(len(trainable), generator=generator).tolist()
    if not by_episode:
        return [[trainable[i] for i in order[s:s + minibatch_turns]] for s in range(0, len(order), minibatch_turns)]
    chosen = [trainable[i] for i in order]
    return gather_until(chosen, [len(units[u].turn_slots) for u in chosen], minibatch_turns)


def gather_until(order: Sequence[int], sizes: Sequence[int], at_least: int) -> list[list[int]]:
    """``order`` cut into consecutive groups, each closed as soon as its ``sizes`` (one per item
    of ``order``) add up to ``at_least``; the last group may hold less. Whole episodes per
    optimizer step, in RL (:func:`minibatch_plan`) and in SFT (:func:`agentrl.training.sft.batch_plan`)."""
    plan: list[list[int]] = []
    current: list[int] = []
    total = 0
    for item, size in zip(order, sizes, strict=True):
        current.append(item)
        total += size
        if total >= at_least:
            plan.append(current)
            current, total = [], 0
    if current:
        plan.append(current)
    return plan
