"""The transformers backend: batched sampling with a KV cache, in agentrl's own small loop.

Why not ``model.generate``: we need the exact order "bans, constraint, temperature, top-p" so
that the recorded log-prob is that of the distribution really sampled from, a per-row trie
constraint that must act *before* top-p (else top-p can remove every allowed token), and rows
that leave the batch as soon as they finish (their KV cache is dropped, no padding work).

Prompts are left-padded for the prefill; position ids follow the attention mask, so a padded
row computes exactly what it would alone (up to float rounding).

With ``reuse_prefixes`` (conversation mode) and per-prompt episode keys, each row is prefilled
alone from its episode's stored KV (only the tokens new since the last turn), the rows are then
joined into one left-padded cache for batched decoding, and every row's KV is stored again when it
finishes (:mod:`agentrl.backends.prefix_store`). ``prefilled_tokens`` counts the tokens prefilled.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Sequence

import torch
from transformers import PreTrainedModel

from agentrl.backends.base import Generation, SamplingParams
from agentrl.backends.prefix_store import (
    PrefixStore,
    batch_left_padded,
    plain_layers,
    row_prefix,
    single_row_cache,
)
from agentrl.models.allowed import AllowedTokens, TrieCursor, apply_allowed, token_budget


class HFBackend:
    name = "hf"

    def __init__(self, model: PreTrainedModel, stop_ids: Sequence[int], pad_id: int,
                 banned_ids: Sequence[int] = (), max_batch_rows: int = 64,
                 dtype: torch.dtype | None = None, seed: int = 0, reuse_prefixes: bool = False,
                 separate: bool = False):
        """``dtype`` different from the model's keeps a separate copy for generation (e.g. bf16
        on CPU, ~2x faster than fp32); :meth:`sync_weights` refreshes it after each update.
        ``separate`` keeps such a copy whatever the dtype: asynchronous rollouts generate with it
        while the trainer changes the policy's own weights."""
        self.policy_model = model
        self.own_copy = separate or (dtype is not None and dtype != next(model.parameters()).dtype)
        self.model = self._make_copy(dtype) if self.own_copy else model
        self.stop_ids = set(int(i) for i in stop_ids)
        self.pad_id = int(pad_id)
        self.banned_ids = torch.tensor(sorted(set(banned_ids)), dtype=torch.long)
        self.max_batch_rows = max_batch_rows
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.prefix_store: PrefixStore | None = PrefixStore() if reuse_prefixes else None
        self.prefilled_tokens = 0  # prompt tokens run through the model in prefills, ever

    @property
    def reuses_prefixes(self) -> bool:
        return self.prefix_store is not None

    def drop_prefixes(self) -> None:
        """Forget every stored episode KV (the rollout engine calls it at the start and end of a
        rollout: the weights change between rollouts)."""
        if self.prefix_store is not None:
            self.prefix_store.clear()

    @property
    def device(self) -> torch.device:
        return next(self.policy_model.parameters()).device

    def _make_copy(self, dtype: torch.dtype | None) -> PreTrainedModel:
        """The generation copy keeps the policy's ``requires_grad`` flags on purpose: generation
        runs under ``no_grad`` either way, but torch's matmul decides whether to fold a
        non-contiguous 3-D input into one 2-D product by whether the weight requires grad, even
        under ``no_grad``, and the two paths differ in the last bits. A frozen copy therefore
        sampled with log-probs ~1e-8 away from the policy's own (CI caught it as the asynchronous
        worker at lag 0 drifting from the synchronous loop in ``rollout/logprob_gap``)."""
        clone = copy.deepcopy(self.policy_model)
        if dtype is not None:
            clone = clone.to(dtype)
        clone.eval()
        return clone

    def close(self) -> None:
        """Drop stored episode KV and the generation copy (the policy's own model stays)."""
        self.drop_prefixes()
        if self.own_copy:
            self.model = None  # type: ignore[assignment]

    def reseed(self, seed: int) -> None:
        """Restart the sampling generator (the trainer derives ``seed`` from seed and iteration)."""
        self.generator.manual_seed(seed)

    @torch.no_grad()
    def sync_weights(self) -> None:
        if not self.own_copy:
            return
        source = dict(self.policy_model.named_parameters())
        source.update(dict(self.policy_model.named_buffers()))
        for name, tensor in list(self.model.named_parameters()) + list(self.model.named_buffers()):
            tensor.copy_(source[name])

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 cursors: Sequence[TrieCursor | None] | None = None,
                 keys: Sequence[Hashable] | None = None) -> list[Generation]:
        """``keys``: one episode key per prompt, to reuse and store KV across turns (only with
        ``reuse_prefixes``; ignored otherwise)."""
        budget = token_budget(params.max_new_tokens, cursors)
        if budget != params.max_new_tokens:
            params = SamplingParams(params.temperature, params.top_p, budget)
        if self.prefix_store is None:
            keys = None
        out: list[Generation] = []
        for start in range(0, len(prompts), self.max_batch_rows):
            end = start + self.max_batch_rows
            out.extend(self._generate_chunk(prompts[start:end], params,
                                            None if cursors is None else cursors[start:end],
                                            None if keys is None else keys[start:end]))
        return out

    def _prefill_rows(self, prompts: Sequence[Sequence[int]], keys: Sequence[Hashable]):
        """Each row alone from its stored prefix (if any), then one left-padded batched cache.
        Returns (cache, attention mask, last logits, last positions) like the batched prefill."""
        device = self.device
        caches, logits = [], []
        for prompt, key in zip(prompts, keys, strict=True):
            entry = self.prefix_store.usable(key, prompt)
            start = len(entry.ids) if entry is not None else 0
            cache = single_row_cache(entry) if entry is not None else None
            result = self.model(input_ids=torch.tensor([list(prompt[start:])], device=device),
                                attention_mask=torch.ones((1, len(prompt)), dtype=torch.long, device=device),
                                position_ids=torch.arange(start, len(prompt), device=device)[None],
                                past_key_values=cache, use_cache=True, logits_to_keep=1)
            self.prefilled_tokens += len(prompt) - start
            caches.append(result.past_key_values)
            logits.append(result.logits[0, -1].float())
        cache, attention = batch_left_padded(caches)
        last_pos = torch.tensor([[len(p) - 1] for p in prompts], dtype=torch.long, device=device)
        return cache, attention, torch.stack(logits), last_pos

    @torch.no_grad()
    def _generate_chunk(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                        cursors: Sequence[TrieCursor | None] | None,
                        keys: Sequence[Hashable] | None = None) -> list[Generation]:
        was_training = self.model.training
        self.model.eval()
        device = self.device
        rows = len(prompts)
        if keys is not None:
            cache, attention, logits, last_pos = self._prefill_rows(prompts, keys)
            if not plain_layers(cache):  # a cache type we do not copy rows of: store nothing
                keys = None
        else:
            width = max(len(p) for p in prompts)
            input_ids = torch.full((rows, width), self.pad_id, dtype=torch.long)
            attention = torch.zeros((rows, width), dtype=torch.long)
            for i, p in enumerate(prompts):
                input_ids[i, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
                attention[i, width - len(p):] = 1
            input_ids, attention = input_ids.to(device), attention.to(device)
            positions = (attention.cumsum(-1) - 1).clamp(min=0)
            result = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                                use_cache=True, logits_to_keep=1)
            self.prefilled_tokens += sum(len(p) for p in prompts)
            cache = result.past_key_values
            logits = result.logits[:, -1].float()
            last_pos = positions[:, -1:]

        def store(b: int, row: int) -> None:
            """Keep row ``row``'s KV (batch row ``b``): the prompt and every token fed so far."""
            if keys is not None:
                fed = list(prompts[row]) + tokens[row][:-1]
                self.prefix_store.put(keys[row], row_prefix(cache, b, int(attention[b].sum()), fed))

        tokens: list[list[int]] = [[] for _ in range(rows)]
        logps: list[list[float]] = [[] for _ in range(rows)]
        allowed: list[list[AllowedTokens] | None] = [
            [] if cursors is not None and cursors[i] is not None else None for i in range(rows)]
        finished = [False] * rows
        alive = list(range(rows))  # original row index of each batch row
        banned = self.banned_ids.to(device)

        for step in range(params.max_new_tokens):
            scores = logits
            if len(banned):
                scores[:, banned] = float("-inf")
            if cursors is not None:
                remaining = params.max_new_tokens - step
                for b, row in enumerate(alive):
                    cursor = cursors[row]
                    if cursor is None:
                        continue
                    entry = cursor.allowed(remaining)
                    allowed[row].append(entry)
                    apply_allowed(scores[b], entry)
            chosen, chosen_logp = _sample(scores, params, self.generator)
            keep = []
            for b, row in enumerate(alive):
                tok = int(chosen[b])
                tokens[row].append(tok)
                logps[row].append(float(chosen_logp[b]))
                cursor = cursors[row] if cursors is not None else None
                if cursor is not None:
                    cursor.advance(tok)
                if tok in self.stop_ids or (cursor is not None and cursor.finished):
                    finished[row] = True
                else:
                    keep.append(b)
            if not keep or step == params.max_new_tokens - 1:
                for b, row in enumerate(alive):
                    store(b, row)
                break
            if len(keep) < len(alive):
                kept = set(keep)
                for b, row in enumerate(alive):
                    if b not in kept:
                        store(b, row)
                index = torch.tensor(keep, device=device)
                cache.batch_select_indices(index)
                attention, last_pos, chosen = attention[index], last_pos[index], chosen[index]
                alive = [alive[b] for b in keep]
            attention = torch.cat([attention, attention.new_ones((len(alive), 1))], dim=1)
            last_pos = last_pos + 1
            result = self.model(input_ids=chosen.view(-1, 1), attention_mask=attention,
                                position_ids=last_pos, past_key_values=cache, use_cache=True)
            cache = result.past_key_values
            logits = result.logits[:, -1].float()
        if was_training:
            self.model.train()
        return [Generation(tokens[i], logps[i], finished[i], allowed[i]) for i in range(rows)]



def _sample(scores: torch.Tensor, params: SamplingParams,
            generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one token per row; return it and its log-prob under the distribution used."""
    if params.temperature <= 0:
        logp = torch.log_softmax(scores, dim=-1)
        chosen = scores.argmax(dim=-1)
        return chosen, logp.gather(-1, chosen[:, None]).squeeze(-1)
    scores = scores / params.temperature
    if params.top_p < 1.0:
        scores = top_p_filter(scores, params.top_p)
    logp = torch.log_softmax(scores, dim=-1)
    chosen = sample_categorical(logp.exp(), generator)
    return chosen, logp.gather(-1, chosen[:, None]).squeeze(-1)


def sample_categorical(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row by inverting the cumulative distribution.

    ~10x faster than ``torch.multinomial`` over a 49k vocabulary on CPU. ``right=True`` returns
    the first index whose cumulative mass exceeds the uniform draw, so a zero-probability token
    (whose cumulative mass equals its predecessor's) can never be chosen.
    """
    cdf = probs.cumsum(dim=-1)
    u = torch.rand((probs.shape[0], 1), generator=generator, device=probs.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).clamp(max=probs.shape[-1] - 1).squeeze(-1)


def top_p_filter(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of tokens whose probability reaches ``top_p`` (at least one)."""
    sorted_scores, order = scores.sort(dim=-1, descending=True)
    probs = sorted_scores.softmax(dim=-1)
    cumulative = probs.cumsum(dim=-1)
    drop_sorted = (cumulative - probs) >= top_p  # mass before this token already reaches top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return scores.masked_fill(drop, float("-inf"))
