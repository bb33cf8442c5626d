"""A generation backend that answers with recorded replies: an episode played again through the
engine (env, prompt builder, conversation mode, time limits), so that every prompt is rebuilt
exactly as a run built it. The value-fit benchmark replays recorded episodes with it
(agentrl/bench/value_data.py), the counterfactual credit judge chosen presses
(agentrl/bench/counterfactual.py)."""

from __future__ import annotations

from collections.abc import Sequence

from agentrl.backends.base import Generation, SamplingParams
from agentrl.rollout.prompting import end_of_turn_id


class ReplayBackend:
    """A generation backend that answers with recorded replies, one episode at a time.

    The engine builds every prompt itself (env, prompt builder, conversation mode, time limits),
    so a replayed turn has the prompt ids the run had; the reply is the recorded text
    re-tokenized, with the end-of-turn token unless it filled ``max_new_tokens``.
    """

    name = "replay"

    def __init__(self, tokenizer, max_new_tokens: int):
        self.tokenizer = tokenizer
        self.eot = end_of_turn_id(tokenizer)
        self.max_new_tokens = max_new_tokens
        self.replies: list[str] = []

    def load(self, replies: Sequence[str]) -> None:
        self.replies = list(replies)

    def generate(self, prompts, params: SamplingParams, cursors=None, keys=None) -> list[Generation]:
        if len(prompts) != 1:
            raise RuntimeError("the replay backend plays one episode at a time")
        if not self.replies:
            raise ReplayMismatch("the env went on after the recorded episode ended")
        ids = self.tokenizer.encode(self.replies.pop(0), add_special_tokens=False)
        finished = len(ids) < self.max_new_tokens
        ids = ids + [self.eot] if finished else ids[: self.max_new_tokens]
        return [Generation(ids, [0.0] * len(ids), finished)]

    def sync_weights(self) -> None:
        pass

    def reseed(self, seed: int) -> None:
        pass

    def close(self) -> None:
        pass


class ReplayMismatch(RuntimeError):
    """A recorded episode the env does not reproduce (another env version, data or setting)."""
