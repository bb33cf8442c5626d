"""The prompt the agent sees at each turn.

One chat-templated prompt per turn (the style of verl-agent and the SAPO paper): a system
message, then one user message with the task, a window of the most recent (observation, action)
pairs, the current observation, the admissible actions and the answer format. Keeping the whole
state in one message bounds the prompt length however long the episode runs.

The rollout engine, demonstrations and evaluation all build prompts here, so a demonstration's
prompt is byte-identical to the one the engine would build in the same state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from agentrl.envs.contract import PLACEHOLDER
from agentrl.rollout.action_format import ActionFormat

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent acting in a text environment. Read the task and the observation, "
    "then choose the next action."
)


@dataclass(frozen=True)
class HistoryEntry:
    observation: str
    action: str


@dataclass(frozen=True)
class Prompt:
    text: str
    ids: list[int]
    messages: list[dict[str, str]]


class PromptBuilder:
    """Builds the chat-templated prompt of a turn and its token ids."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, action_format: ActionFormat,
                 system_prompt: str | None = None, history_window: int = 2,
                 max_prompt_tokens: int = 2048):
        self.tokenizer = tokenizer
        self.action_format = action_format
        self.system_prompt = system_prompt or DEFAULT_SYSTEM_PROMPT
        self.history_window = history_window
        self.max_prompt_tokens = max_prompt_tokens

    def user_message(self, task: str, history: Sequence[HistoryEntry], observation: str,
                     admissible: Sequence[str] | None, step: int) -> str:
        lines = [f"Your task: {task}"]
        recent = list(history)[-self.history_window:] if self.history_window > 0 else []
        if recent:
            first = step - len(recent)
            lines.append(f"Your last {len(recent)} step(s) of {step - 1} so far:")
            for offset, entry in enumerate(recent):
                lines.append(f"[step {first + offset}] observation: {entry.observation}")
                lines.append(f"[step {first + offset}] action: {entry.action}")
        lines.append(f"[step {step}] current observation: {observation}")
        if admissible:
            lines.append("Admissible actions:")
            lines.extend(admissible)
            if any(a.endswith(PLACEHOLDER) for a in admissible):
                lines.append("(an action ending in [...] takes your own words in place of the dots)")
        lines.append(self.action_format.instruction())
        return "\n".join(lines)

    def messages(self, task: str, history: Sequence[HistoryEntry], observation: str,
                 admissible: Sequence[str] | None, step: int) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": self.user_message(task, history, observation, admissible, step)},
        ]

    def render_messages(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def build(self, task: str, history: Sequence[HistoryEntry], observation: str,
              admissible: Sequence[str] | None, step: int) -> Prompt:
        """The prompt of turn ``step`` (1-based), shortened to ``max_prompt_tokens`` if needed.

        Too long a prompt first loses its oldest history entries, then the middle of the current
        observation: the start usually says where the agent is, the end what just happened.
        """
        history = list(history)[-self.history_window:] if self.history_window > 0 else []
        while True:
            messages = self.messages(task, history, observation, admissible, step)
            text = self.render_messages(messages)
            ids = self.encode(text)
            if len(ids) <= self.max_prompt_tokens:
                return Prompt(text, ids, messages)
            if history:
                history = history[1:]
                continue
            excess_chars = 4 * (len(ids) - self.max_prompt_tokens) + 32
            if len(observation) <= excess_chars + 64:
                return Prompt(text, ids, messages)  # nothing more to cut: the caller sees the true length
            keep = (len(observation) - excess_chars) // 2
            observation = observation[:keep] + " ... " + observation[-keep:]

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]


def end_of_turn_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """The token the chat template writes right after an assistant reply (``<|im_end|>`` for
    ChatML models). Generation stops there, and constrained actions end with it."""
    marker = "agentrl-reply-marker"
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": marker}], tokenize=False)
    after = rendered.split(marker, 1)[1]
    candidates = [tokenizer.eos_token, *getattr(tokenizer, "all_special_tokens", [])]
    for token in candidates:
        if token and after.startswith(token):
            return tokenizer.convert_tokens_to_ids(token)
    if tokenizer.eos_token_id is None:
        raise ValueError("the tokenizer has no end-of-sequence token and its chat template ends replies with none")
    return tokenizer.eos_token_id
