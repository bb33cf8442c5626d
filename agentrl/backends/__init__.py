"""Generation backends: turn a batch of prompt token ids into sampled replies with log-probs."""

from agentrl.backends.base import Generation, GenerationBackend, SamplingParams

__all__ = ["Generation", "GenerationBackend", "SamplingParams"]
