"""Constrained action decoding: the model may only write an admissible action.

Every admissible action ``a`` is rendered in the output format (``<action>a</action>``),
tokenised, followed by the end-of-turn token, and inserted in a token trie. At each step of
generation only the children of the current trie node are allowed, so the reply is always one
complete admissible action and the turn can end only after one.

The policy is then the distribution renormalised over the allowed tokens. To keep importance
ratios exact, the rollout records the allowed set of every action position (:class:`AllowedTokens`)
and the trainer recomputes log-probs, KL and entropy under the same sets.

Placeholder actions (``search[...]``, see :mod:`agentrl.envs.contract`) become a trie path for the prefix
(``<action>search[``), then free text of at least one token that contains no ``]``, no ``<`` and no
special token, then the forced suffix ``]</action>`` + end-of-turn. The suffix may start only once
the free text holds a non-blank character: the rollout normalises whitespace and judges
``search[ ]`` inadmissible, so a constrained reply must never be able to write it. ``<`` is banned
because free text such as ``</action>`` would end the tagged action early when it is parsed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AllowedTokens:
    """Token ids allowed at one position: exactly ``ids``, or (``exclude``) every id but ``ids``."""

    ids: tuple[int, ...]
    exclude: bool = False

    def contains(self, token: int) -> bool:
        return (token in self.ids) != self.exclude


class _Node:
    __slots__ = ("children", "free")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.free: _FreeText | None = None


@dataclass
class _FreeText:
    suffix: list[int]  # forced after the free text: tokens of "]</action>" then end-of-turn


class ActionTrie:
    """A token trie over the rendered admissible actions of one turn."""

    def __init__(self, sequences: Sequence[Sequence[int]], free_entries: Sequence[tuple[Sequence[int], Sequence[int]]] = ()):
        self.root = _Node()
        self.max_length = 0
        for seq in sequences:
            node = self.root
            for tok in seq:
                node = node.children.setdefault(tok, _Node())
            self.max_length = max(self.max_length, len(seq))
        for prefix, suffix in free_entries:
            node = self.root
            for tok in prefix:
                node = node.children.setdefault(tok, _Node())
            node.free = _FreeText(list(suffix))
            self.max_length = max(self.max_length, len(prefix) + 1 + len(suffix))


class TrieCursor:
    """Where one reply is in its trie; gives the allowed set and advances token by token."""

    def __init__(self, trie: ActionTrie, free_banned: frozenset[int], free_blank: frozenset[int] = frozenset()):
        self._node: _Node | None = trie.root
        self._free: _FreeText | None = None
        self._free_has_text = False  # a non-blank token was written inside the placeholder
        self._suffix: list[int] = []
        self._free_banned = free_banned
        self._free_blank = free_blank
        self.max_length = trie.max_length
        self.finished = False

    def allowed(self, remaining: int) -> AllowedTokens:
        """The allowed next tokens; ``remaining`` is how many tokens the reply may still add."""
        if self._suffix:
            return AllowedTokens((self._suffix[0],))
        if self._free is not None:
            suffix_start = self._free.suffix[0]
            if self._free_has_text and remaining <= len(self._free.suffix):
                return AllowedTokens((suffix_start,))  # out of budget: close the placeholder
            banned = set(self._free_banned)
            if self._free_has_text:
                banned.discard(suffix_start)
            else:
                banned.add(suffix_start)
                if remaining <= len(self._free.suffix) + 1:
                    banned.update(self._free_blank)  # the last free slot: it must hold text
            return AllowedTokens(tuple(sorted(banned)), exclude=True)
        assert self._node is not None
        return AllowedTokens(tuple(sorted(self._node.children)))

    def advance(self, token: int) -> None:
        if self._suffix:
            if token != self._suffix[0]:
                raise ValueError("token outside the forced suffix")
            self._suffix.pop(0)
            self.finished = not self._suffix
            return
        if self._free is not None:
            if token == self._free.suffix[0] and self._free_has_text:
                self._suffix = self._free.suffix[1:]
                self.finished = not self._suffix
            elif token not in self._free_blank:
                self._free_has_text = True
            return
        assert self._node is not None
        child = self._node.children.get(token)
        if child is None:
            raise ValueError(f"token {token} is not allowed here")
        self._node = child
        if child.free is not None:
            self._free = child.free  # a placeholder's prefix is complete: free text follows
        elif not child.children:
            self.finished = True


def token_budget(max_new_tokens: int, cursors: Sequence[TrieCursor | None] | None) -> int:
    """A constrained reply must be able to finish: the budget grows to the longest allowed one."""
    longest = max((c.max_length for c in cursors or () if c is not None), default=0)
    return max(max_new_tokens, longest)


def free_text_tokens(tokenizer) -> tuple[frozenset[int], frozenset[int]]:
    """Inside a placeholder's free text: the banned ids (text containing ``]`` or ``<``, and every
    special token) and the blank ids (text that is only whitespace, or empty)."""
    banned = set(tokenizer.all_special_ids)
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    banned.update(int(i) for i in added)
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    banned.update(i for i, text in enumerate(texts) if "]" in text or "<" in text)
    blank = frozenset(i for i, text in enumerate(texts) if not text.strip())
    return frozenset(banned), blank


def bracket_tokens(tokenizer) -> frozenset[int]:
    """The ids banned inside free text (see :func:`free_text_tokens`)."""
    return free_text_tokens(tokenizer)[0]




def allowed_mask(allowed: Sequence[AllowedTokens], vocab: int, device: torch.device) -> torch.Tensor:
    """A boolean ``[len(allowed), vocab]`` mask, True where a token is allowed."""
    mask = torch.zeros(len(allowed), vocab, dtype=torch.bool, device=device)
    for row, entry in enumerate(allowed):
        # ids past the action vocabulary (SAPO's value tokens, banned anyway) have no column
        ids = torch.tensor([i for i in entry.ids if i < vocab], dtype=torch.long, device=device)
        if entry.exclude:
            mask[row] = True
            if len(ids):
                mask[row, ids] = False
        elif len(ids):
            mask[row, ids] = True
    return mask


def apply_allowed(row_scores: torch.Tensor, entry: AllowedTokens) -> None:
    """Set one row of next-token scores to -inf outside ``entry``'s allowed set (in place)."""
    ids = torch.tensor(entry.ids, dtype=torch.long, device=row_scores.device)
    if entry.exclude:
        if len(ids):
            row_scores[ids] = float("-inf")
    else:
        kept = row_scores[ids].clone()
        row_scores.fill_(float("-inf"))
        row_scores[ids] = kept
