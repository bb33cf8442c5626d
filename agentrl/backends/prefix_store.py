"""KV caches of live episodes kept between turns (the transformers backend, conversation mode).

In conversation mode (:mod:`agentrl.rollout.conversation`) turn t's prompt starts with turn t-1's prompt
+ reply, so the keys and values of that prefix were already computed while generating turn t-1.
vLLM's prefix cache reuses them by itself; the hf backend keeps, per episode, the KV of every
token it fed (the prompt and every generated token but the last, which was sampled and never fed)
and at the next turn prefills only the new tokens. A stored entry is used only when its ids are a
prefix of the new prompt, so a stale or foreign entry can never be read by mistake; the rollout
engine drops every entry at the start and end of each rollout (the weights change in between).

Only plain :class:`~transformers.DynamicCache` layers (full attention, ``keys``/``values``
tensors ``[batch, heads, length, dim]``) are handled; other cache types are not stored.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache


@dataclass
class StoredPrefix:
    ids: list[int]  # the tokens whose keys/values are held, in order
    layers: list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values), [1, heads, len(ids), dim]


def plain_layers(cache) -> bool:
    """True when every layer of ``cache`` is a full-attention layer with ``keys``/``values``."""
    layers = getattr(cache, "layers", None)
    if not layers:
        return False
    return all(hasattr(layer, "keys") and hasattr(layer, "values") and not getattr(layer, "is_sliding", False)
               for layer in layers)


def row_prefix(cache, row: int, valid: int, ids: Sequence[int]) -> StoredPrefix:
    """Row ``row`` of a left-padded batched cache: its last ``valid`` positions (the padding is on
    the left, the decode steps appended on the right), copied out of the batch."""
    layers = [(layer.keys[row:row + 1, :, -valid:].clone(), layer.values[row:row + 1, :, -valid:].clone())
              for layer in cache.layers]
    return StoredPrefix(list(ids), layers)


def single_row_cache(prefix: StoredPrefix) -> DynamicCache:
    cache = DynamicCache()
    for index, (keys, values) in enumerate(prefix.layers):
        cache.update(keys.clone(), values.clone(), index)
    return cache


def batch_left_padded(rows: Sequence[DynamicCache]) -> tuple[DynamicCache, torch.Tensor]:
    """Several one-row caches as one batched cache, each row left-padded with zeros to the
    longest, and the attention mask ``[rows, width]`` (0 on the padding)."""
    lengths = [cache.get_seq_length() for cache in rows]
    width = max(lengths)
    device = rows[0].layers[0].keys.device
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for r, length in enumerate(lengths):
        mask[r, width - length:] = 1
    batched = DynamicCache()
    for index in range(len(rows[0].layers)):
        keys, values = [], []
        for cache, length in zip(rows, lengths, strict=True):
            k, v = cache.layers[index].keys, cache.layers[index].values
            pad = width - length
            if pad:
                k = torch.cat([k.new_zeros(k.shape[0], k.shape[1], pad, k.shape[3]), k], dim=2)
                v = torch.cat([v.new_zeros(v.shape[0], v.shape[1], pad, v.shape[3]), v], dim=2)
            keys.append(k)
            values.append(v)
        batched.update(torch.cat(keys, dim=0), torch.cat(values, dim=0), index)
    return batched, mask


class PrefixStore:
    """Per-episode stored prefixes, looked up by key and checked against the new prompt."""

    def __init__(self) -> None:
        self.entries: dict[Hashable, StoredPrefix] = {}

    def usable(self, key: Hashable | None, prompt: Sequence[int]) -> StoredPrefix | None:
        """The entry of ``key`` if its ids are a proper prefix of ``prompt`` (at least one new
        token must be fed to get the next logits), else None."""
        entry = self.entries.get(key) if key is not None else None
        if entry is None or len(entry.ids) >= len(prompt) or list(prompt[:len(entry.ids)]) != entry.ids:
            return None
        return entry

    def put(self, key: Hashable, prefix: StoredPrefix) -> None:
        self.entries[key] = prefix

    def clear(self) -> None:
        self.entries.clear()
