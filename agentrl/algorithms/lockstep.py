"""The same number of collectives on every rank, whatever each rank's share of the batch.

Under torchrun each rank plans its minibatches and micro-batches from its *own* turns. An
optimizer step is a collective (gradient all-reduce, the global token count), so a rank with 7
turns and ``minibatch_turns: 4`` (2 steps) next to a rank with 3 turns (1 step) would wait forever
for the other's second all-reduce. Under FSDP (:mod:`agentrl.parallel.fsdp`) every forward all-gathers
parameters and every backward reduce-scatters gradients, so the number of *micro-batches* of
every pass must agree too.

The fix is the same everywhere: agree on the largest count with one all-reduce(max) and let the
short ranks run empty steps. An empty minibatch contributes zero tokens to the global counts (the
loss normalisation stays global: each rank still divides by the global token count) and zero
gradients; under FSDP an empty micro-batch runs a one-token forward (and, when training, a
backward of a zero loss), which issues exactly the collectives a real micro-batch does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from agentrl.models.policy import Scores, SequenceItem, Span
from agentrl.parallel.distributed import all_reduce_max, is_distributed

T = TypeVar("T")


def equal_steps(plan: Sequence[list[T]]) -> list[list[T]]:
    """``plan`` (one list per optimizer step) padded with empty steps to the longest plan of any
    rank. One all-reduce under torchrun; unchanged in one process."""
    plan = list(plan)
    if not is_distributed():
        return plan
    (count,) = all_reduce_max([len(plan)])
    return plan + [[] for _ in range(count - len(plan))]


def equal_micro_batches(groups: Sequence[list[T]], sharded: bool) -> list[list[T]]:
    """Micro-batch groups padded to the longest list of any rank when ``sharded`` (FSDP: each
    forward and backward is a collective). Without FSDP micro-batches are local (gradients are
    reduced once per step), so they are returned as they are, at no communication cost."""
    groups = list(groups)
    if not sharded:
        return groups
    return equal_steps(groups)


def idle_row() -> SequenceItem:
    """A two-token row with one action token: what a rank without work runs through the model so
    that its FSDP collectives match the other ranks'. Its outputs are multiplied by zero."""
    return SequenceItem([0, 0], [Span(1, (0,))])


def idle_pass(score: Callable[[list[SequenceItem]], Scores], backward: bool) -> None:
    """Run :func:`idle_row` through ``score`` (the same scoring call real micro-batches make, so
    the same parameters take part) and, when ``backward``, back-propagate zero from every output:
    every parameter a real micro-batch touches gets a zero gradient, and FSDP's reduce-scatters
    match the other ranks'."""
    scores = score([idle_row()])
    if not backward:
        return
    outputs = [t for t in (scores.logprobs, scores.entropy, scores.pre, scores.post)
               if t is not None and t.requires_grad]
    if outputs:
        (sum(t.sum() for t in outputs) * 0.0).backward()
