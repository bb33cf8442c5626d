"""The rollout half of constrained decoding: a trie per turn built from the env's admissible
actions as the prompt renders them (an action ending in the placeholder ``[...]`` becomes a
prefix, free text and a closing ``]``). The tries and cursors themselves are
:mod:`agentrl.models.allowed`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentrl.envs.contract import PLACEHOLDER
from agentrl.models.allowed import ActionTrie, TrieCursor, free_text_tokens


class ConstraintBuilder:
    """Builds a trie per turn from the admissible actions, caching tokenisations."""

    def __init__(self, tokenizer, render: Callable[[str], str], end_of_turn_id: int):
        self.tokenizer = tokenizer
        self.render = render
        self.end_of_turn_id = end_of_turn_id
        self._cache: dict[str, list[int]] = {}
        self._free_sets: tuple[frozenset[int], frozenset[int]] | None = None

    @property
    def free_banned(self) -> frozenset[int]:
        if self._free_sets is None:
            self._free_sets = free_text_tokens(self.tokenizer)
        return self._free_sets[0]

    @property
    def free_blank(self) -> frozenset[int]:
        if self._free_sets is None:
            self._free_sets = free_text_tokens(self.tokenizer)
        return self._free_sets[1]

    def _encode(self, text: str) -> list[int]:
        ids = self._cache.get(text)
        if ids is None:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            self._cache[text] = ids
        return ids

    def trie(self, admissible: Sequence[str]) -> ActionTrie:
        sequences, free = [], []
        for action in dict.fromkeys(admissible):
            if action.endswith(PLACEHOLDER):
                # "<action>search[" + free text + "]</action>" + end of turn
                rendered = self.render(action[: -len(PLACEHOLDER)] + "[\x00]")
                head, tail = rendered.split("\x00")
                free.append((self._encode(head), self._encode(tail) + [self.end_of_turn_id]))
            else:
                sequences.append(self._encode(self.render(action)) + [self.end_of_turn_id])
        return ActionTrie(sequences, free)

    def cursor(self, admissible: Sequence[str]) -> TrieCursor:
        trie = self.trie(admissible)
        needs_free = any(a.endswith(PLACEHOLDER) for a in admissible)
        if not needs_free:
            return TrieCursor(trie, frozenset())
        return TrieCursor(trie, self.free_banned, self.free_blank)
