"""The memory-lean forward pass over turns, and the policy that owns it.

A turn is scored by running the transformer body once over ``prompt + action`` and applying the
LM head only to the hidden states that matter: the positions that predict action tokens (for
log-probs, entropy, KL) and, for SAPO, the two value boundaries. The naive alternative, full
vocabulary logits at every prompt position, costs ~0.8 GB per copy at 8 x 512 tokens for a 49k
vocabulary and dominates the step's memory.

Positions for a turn with prompt length P and action length A:

* action token j (0-based) is predicted by the logits at position ``P - 1 + j``;
* the pre-action boundary (SAPO's V) is position ``P - 1``, the last prompt token;
* the post-action boundary (SAPO's Q) is position ``P + A - 1``, the last action token (the
  end-of-turn token when the reply finished). A bootstrap item (A = 0) has only the pre boundary.

The same rules hold for a :class:`SequenceItem`: one token sequence holding several turns as
prefixes (a conversation-mode episode, :mod:`agentrl.rollout.conversation`), each a :class:`Span` with its
own P and A. A causal model's hidden state at a position depends only on the tokens before it, so
the outputs of a span are those of the turn scored alone: one forward serves every turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from agentrl.models.allowed import AllowedTokens, allowed_mask
from agentrl.models.value_tokens import ValueTokens


@dataclass
class ScoreItem:
    prompt_ids: Sequence[int]
    action_ids: Sequence[int]
    allowed: Sequence[AllowedTokens] | None = None

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.action_ids)

    @property
    def ids(self) -> list[int]:
        return list(self.prompt_ids) + list(self.action_ids)


@dataclass(frozen=True)
class Span:
    """One turn inside a sequence: its prompt is the first ``prompt_length`` ids, its action the
    next ``len(action_ids)`` (A = 0: a bootstrap state, only V is read)."""

    prompt_length: int
    action_ids: Sequence[int]
    allowed: Sequence[AllowedTokens] | None = None

    @property
    def end(self) -> int:
        return self.prompt_length + len(self.action_ids)


@dataclass
class SequenceItem:
    """One row of a forward pass and the turns (spans) read from it, in output order."""

    ids: Sequence[int]
    spans: Sequence[Span]

    @property
    def length(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, item: ScoreItem) -> SequenceItem:
        return cls(item.ids, [Span(len(item.prompt_ids), item.action_ids, item.allowed)])


@dataclass
class Scores:
    logprobs: torch.Tensor  # [T] every action token of every item, in item order
    entropy: torch.Tensor | None  # [T]
    pre: torch.Tensor | None  # [N] value readout d = logit(w+) - logit(w-) at the pre-action boundary
    post: torch.Tensor | None  # [N] the same at the post-action boundary (= pre when A = 0)
    token_item: torch.Tensor  # [T] index of the item each token belongs to
    #: [2N, H] the final hidden states the readouts were read from (pre boundaries, then post),
    #: detached: what SAPO's head-only value steps refit the value rows on (no second forward)
    boundary_hidden: torch.Tensor | None = None


def decoder_of(model: nn.Module) -> nn.Module:
    """The transformer body (embeddings, layers, final norm) without the LM head."""
    get_base = getattr(model, "get_base_model", None)  # peft
    base = get_base() if get_base is not None else model
    return base.get_decoder()


def run_body(body: nn.Module, items: Sequence[ScoreItem | SequenceItem], device: torch.device) -> torch.Tensor:
    """Right-padded batch through the body; returns the last hidden states ``[B, L, H]``."""
    width = max(item.length for item in items)
    ids = torch.zeros((len(items), width), dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    for row, item in enumerate(items):
        seq = list(item.ids)
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    out = body(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
    return out.last_hidden_state


def spans_of(items: Sequence[SequenceItem]) -> list[tuple[int, Span]]:
    """(row, span) of every span of a micro-batch, in output order."""
    return [(row, span) for row, item in enumerate(items) for span in item.spans]


def _allowed_entries(items: Sequence[ScoreItem | Span]) -> list[AllowedTokens] | None:
    """One allowed set per action token of the micro-batch, or None if nothing is constrained.
    Unconstrained turns mixed in get "everything allowed" (an empty exclude set)."""
    if all(item.allowed is None for item in items):
        return None
    entries: list[AllowedTokens] = []
    for item in items:
        if item.allowed is None:
            entries.extend(AllowedTokens((), exclude=True) for _ in item.action_ids)
        else:
            if len(item.allowed) != len(item.action_ids):
                raise ValueError("constrained turn without one allowed set per action token")
            entries.extend(item.allowed)
    return entries


def action_positions(spans: Sequence[tuple[int, Span]]) -> tuple[list[int], list[int], list[int], list[int]]:
    """(row, position, target token, span index) of every action token, in span order."""
    rows, positions, targets, owners = [], [], [], []
    for k, (row, span) in enumerate(spans):
        p = span.prompt_length
        for j, tok in enumerate(span.action_ids):
            rows.append(row)
            positions.append(p - 1 + j)
            targets.append(int(tok))
            owners.append(k)
    return rows, positions, targets, owners


def boundary_positions(spans: Sequence[tuple[int, Span]]) -> tuple[list[int], list[int]]:
    pre = [span.prompt_length - 1 for _, span in spans]
    post = [span.end - 1 for _, span in spans]
    return pre, post


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None,
                   want_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of ``targets`` (and entropies) of the softmax of ``logits`` restricted to ``mask``.

    Entropy is computed as ``logsumexp(z) - sum(p * z)`` with masked logits replaced by 0 in the
    product: ``p * log p`` would give 0 * -inf = NaN on masked tokens.
    """
    z = logits if mask is None else logits.masked_fill(~mask, float("-inf"))
    log_norm = torch.logsumexp(z, dim=-1)
    logp = z.gather(-1, targets[:, None]).squeeze(-1) - log_norm
    entropy = None
    if want_entropy:
        probs = torch.exp(z - log_norm[:, None])
        finite = logits if mask is None else logits.masked_fill(~mask, 0.0)
        entropy = log_norm - (probs * finite).sum(-1)
    return logp, entropy


class Policy:
    """The trained causal LM, seen as an action policy (and, for SAPO, a value function)."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                 value_tokens: ValueTokens | None = None, temperature: float = 1.0):
        self.model = model
        self.tokenizer = tokenizer
        self.value_tokens = value_tokens
        self.temperature = temperature if temperature > 0 else 1.0
        #: id(module) -> a runner that scores inside that module's FSDP root forward, its
        #: parameters gathered (agentrl.parallel.fsdp.GatheredForward); empty without train.parallel=fsdp
        self.runners: dict[int, Any] = {}

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def policy_vocab(self) -> int:
        rows = self.model.get_output_embeddings().weight.shape[0]
        return self.value_tokens.policy_vocab if self.value_tokens is not None else rows

    def _sparse_logprobs(self, source: nn.Module, hidden: torch.Tensor, entries: list[AllowedTokens],
                         targets: list[int], want_entropy: bool):
        """Constrained positions whose allowed sets are small lists: score only those tokens.

        Logits of the allowed ids are ``h . W[id]``; the renormalised softmax over them is the
        constrained policy, so nothing of the rest of the vocabulary is ever computed. Positions
        are padded to the largest set of the micro-batch (padding masked out).
        """
        device = hidden.device
        width = max(len(e.ids) for e in entries) if entries else 1
        index = torch.zeros((len(entries), width), dtype=torch.long)
        valid = torch.zeros((len(entries), width), dtype=torch.bool)
        where = torch.zeros(len(entries), dtype=torch.long)
        for row, (entry, target) in enumerate(zip(entries, targets, strict=True)):
            index[row, : len(entry.ids)] = torch.tensor(entry.ids, dtype=torch.long)
            valid[row, : len(entry.ids)] = True
            try:
                where[row] = entry.ids.index(target)
            except ValueError:
                raise ValueError(f"token {target} was recorded outside its allowed set") from None
        index, valid, where = index.to(device), valid.to(device), where.to(device)
        weight = source.get_output_embeddings().weight
        logits = torch.einsum("nkh,nh->nk", weight[index], hidden).float()
        cap = getattr(source.config, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return token_logprobs(logits / self.temperature, where, valid, want_entropy)

    @staticmethod
    def _head(source: nn.Module, hidden: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        weight = source.get_output_embeddings().weight[start:stop]
        logits = (hidden @ weight.T).float()
        cap = getattr(source.config, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def score(self, items: Sequence[ScoreItem], *, entropy: bool = False,
              values: bool = False, model: nn.Module | None = None) -> Scores:
        """Action log-probs (and entropy, and SAPO value readouts) for a micro-batch of turns.

        ``model`` scores with another module of the same architecture (the frozen reference).
        Gradients flow when called outside ``torch.no_grad``.
        """
        return self.score_sequences([SequenceItem.of(item) for item in items], entropy=entropy,
                                    values=values, model=model)

    def score_sequences(self, items: Sequence[SequenceItem], *, entropy: bool = False,
                        values: bool = False, model: nn.Module | None = None,
                        values_detached: bool = False) -> Scores:
        """:meth:`score` for rows holding one or more turns each (spans); outputs in span order,
        ``token_item`` indexing spans. One body pass per row whatever its number of turns.

        ``values_detached``: V and Q are read from the boundary hidden states cut from the graph,
        so a loss on them trains the two value rows only, never the body (SAPO's
        ``value_backbone_grad: false``)."""
        source = self.model if model is None else model
        runner = self.runners.get(id(source))
        if runner is not None and not runner.active:  # FSDP: run where the head's weight is whole
            return runner(lambda: self.score_sequences(items, entropy=entropy, values=values, model=model,
                                                       values_detached=values_detached))
        device = self.device
        hidden = run_body(decoder_of(source), items, device)
        spans = spans_of(items)
        rows, positions, targets, owners = action_positions(spans)
        row_t = torch.tensor(rows, dtype=torch.long, device=device)
        pos_t = torch.tensor(positions, dtype=torch.long, device=device)
        picked = hidden[row_t, pos_t]
        target_t = torch.tensor(targets, dtype=torch.long, device=device)
        entries = _allowed_entries([span for _, span in spans])
        if entries is not None and not any(e.exclude for e in entries):
            logp, ent = self._sparse_logprobs(source, picked, entries, targets, entropy)
        else:
            logits = self._head(source, picked, 0, self.policy_vocab) / self.temperature
            mask = None if entries is None else allowed_mask(entries, self.policy_vocab, device)
            logp, ent = token_logprobs(logits, target_t, mask, entropy)
        pre = post = None
        if values:
            if self.value_tokens is None:
                raise RuntimeError("value readout needs reserved value tokens")
            pre_pos, post_pos = boundary_positions(spans)
            n = len(spans)
            span_rows = torch.tensor([row for row, _ in spans], dtype=torch.long, device=device)
            idx_rows = span_rows.repeat(2)
            idx_pos = torch.tensor(pre_pos + post_pos, dtype=torch.long, device=device)
            vt = self.value_tokens
            boundary = hidden[idx_rows, idx_pos]
            read = boundary.detach() if values_detached else boundary
            pair = self._head(source, read, vt.policy_vocab, vt.policy_vocab + 2)
            plus_col = vt.plus - vt.policy_vocab
            d = pair[:, plus_col] - pair[:, 1 - plus_col]
            pre, post = d[:n], d[n:]
            return Scores(logp, ent, pre, post, torch.tensor(owners, dtype=torch.long, device=device),
                          boundary.detach())
        return Scores(logp, ent, pre, post, torch.tensor(owners, dtype=torch.long, device=device))
