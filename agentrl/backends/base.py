"""The generation-backend interface every backend implements.

A backend samples one reply per prompt, never emits a banned id (SAPO's value tokens), stops at
the end-of-turn token, and returns the log-prob of every sampled token under the distribution it
really sampled from (temperature, top-p, bans and, with constrained decoding, the allowed set all
applied). After each optimizer step the trainer calls :meth:`GenerationBackend.sync_weights` so
that the next rollout samples from the updated policy, and at the start of each iteration
:meth:`GenerationBackend.reseed` so that sampling is a function of (run seed, iteration).
Whoever made a backend calls :meth:`GenerationBackend.close` when done with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agentrl.models.allowed import AllowedTokens, TrieCursor


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    max_new_tokens: int = 64


@dataclass
class Generation:
    token_ids: list[int]  # the end-of-turn token included when the reply finished
    logprobs: list[float]
    finished: bool  # ended with an end-of-turn token (else cut at max_new_tokens)
    allowed: list[AllowedTokens] | None = None  # per token, when decoding was constrained


class GenerationBackend(Protocol):
    name: str

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams,
                 cursors: Sequence[TrieCursor | None] | None = None) -> list[Generation]:
        """One reply per prompt; ``cursors[i]`` constrains reply i when given."""
        ...

    def sync_weights(self) -> None:
        """Make the next generate() use the policy's current weights."""
        ...

    def reseed(self, seed: int) -> None:
        """Restart the sampler's random stream from ``seed``.

        The trainer calls it at the start of every iteration (and before each evaluation) with a
        seed derived from (run seed, iteration), so a resumed run samples exactly what the
        uninterrupted run sampled: the stream never depends on how many draws came before.
        """
        ...

    def close(self) -> None:
        """Give back what generation holds (a vLLM engine's weights and KV cache, a bf16 copy of
        the model) so that a process that trains again does not carry it; the backend is unusable
        afterwards. Calling it twice is harmless."""
        ...
