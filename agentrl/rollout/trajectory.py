"""What the rollout engine records and every algorithm reads.

A :class:`Turn` is one agent decision: the exact token ids the model saw and wrote, the log-probs
of the written tokens under the sampling distribution actually used, the env's answer, and (with
constrained decoding) what is needed to rebuild the allowed token set at each action position.
A :class:`Trajectory` is one episode of one task. Algorithms add their per-turn numbers (V, Q,
advantages...) to ``Turn.stats`` only for logging and reports; what they train on lives in their
own tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrl.models.allowed import AllowedTokens


@dataclass
class Turn:
    prompt_ids: list[int]
    action_ids: list[int]
    rollout_logprobs: list[float]
    prompt_text: str
    reply_text: str  # the decoded reply, end-of-turn token excluded
    action: str  # what the env received
    observation: str  # the observation this turn answered
    reward: float  # env reward plus any invalid-action penalty
    env_reward: float
    terminated: bool
    truncated: bool
    valid: bool  # not penalised: well-formed and admissible (or only well-formed, per the env's invalid_action_rule)
    info: dict[str, Any] = field(default_factory=dict)
    allowed: list[AllowedTokens] | None = None  # one per action token when decoding was constrained
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.action_ids)


@dataclass
class Trajectory:
    task_seed: int
    group: int  # index of the task within its iteration; GRPO's k rollouts share it
    task: str
    turns: list[Turn] = field(default_factory=list)
    task_type: str | None = None
    won: bool = False
    score: float = 0.0
    #: Prompt for the observation after the last turn, kept when the episode was truncated so
    #: that V(s_T) can be read for bootstrapping (SAPO.md).
    bootstrap_prompt_ids: list[int] | None = None
    #: Played in conversation mode (agentrl.rollout.conversation): every turn's prompt + reply is a prefix
    #: of the next prompt (and of the bootstrap prompt), so the episode is scored as one sequence.
    conversation: bool = False
    #: How many updates the weights that played this episode had made (the trainer's version
    #: when it was played); with asynchronous rollouts the update's version minus this is its
    #: staleness (agentrl.training.producer).
    policy_version: int = 0

    @property
    def final_ids(self) -> list[int]:
        """The episode's longest sequence: the bootstrap prompt if kept, else the last turn's
        prompt + reply. In conversation mode it holds every turn as a prefix."""
        if self.bootstrap_prompt_ids is not None:
            return list(self.bootstrap_prompt_ids)
        last = self.turns[-1]
        return list(last.prompt_ids) + list(last.action_ids)

    @property
    def episode_return(self) -> float:
        return sum(t.reward for t in self.turns)

    @property
    def terminated(self) -> bool:
        return bool(self.turns) and self.turns[-1].terminated

    @property
    def truncated(self) -> bool:
        return bool(self.turns) and self.turns[-1].truncated and not self.turns[-1].terminated

    def to_json(self) -> dict[str, Any]:
        """A readable record for sample files and value-trace reports (no token ids)."""
        return {
            "task_seed": self.task_seed,
            "task": self.task,
            "task_type": self.task_type,
            "won": self.won,
            "score": self.score,
            "return": self.episode_return,
            "policy_version": self.policy_version,
            "turns": [
                {
                    "observation": t.observation,
                    "reply": t.reply_text,
                    "action": t.action,
                    "valid": t.valid,
                    "reward": t.reward,
                    "terminated": t.terminated,
                    "truncated": t.truncated,
                    **{k: v for k, v in t.stats.items()},
                }
                for t in self.turns
            ],
        }
