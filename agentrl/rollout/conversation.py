"""The episode as one growing chat (``rollout.history: conversation``).

In the default window mode (:mod:`agentrl.rollout.prompting`) every turn is a fresh two-message prompt,
so the shared text of an episode (system prompt, task, recent history) is encoded again at every
turn, and again in every training pass. In conversation mode the episode is one chat: turn t's
prompt is *exactly* turn t-1's prompt, then the reply ids as the model wrote them (end-of-turn
token included), then the tokens of the next observation message and the generation prompt. It
is an extension at the token level, never re-tokenised, so

* the final sequence of an episode holds every turn's prompt and reply as prefixes, and one
  forward pass over it scores every turn (:mod:`agentrl.algorithms.scoring`);
* a backend with a prefix cache (vLLM) re-uses the previous turn's KV instead of prefilling it.

The chat template's between-turns text is found once, by rendering a conversation with a
placeholder user message after an assistant reply and slicing around the placeholder; the two
pieces (before and after the observation text) are tokenised once and re-used at every turn.

A reply cut at ``max_new_tokens`` has no end-of-turn token; the builder writes one after it (a
prompt token of the next turn, never scored as an action) so the chat stays well formed.

Context limit: when the next prompt would be longer than ``max_prompt_tokens`` the episode ends
there as *truncated*, like a ``max_turns`` truncation: the over-long prompt is kept only as the
bootstrap prompt from which V(s_T) is read, and nothing is generated from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from transformers import PreTrainedTokenizerBase

from agentrl.envs.contract import PLACEHOLDER
from agentrl.rollout.action_format import ActionFormat
from agentrl.rollout.prompting import DEFAULT_SYSTEM_PROMPT, Prompt, end_of_turn_id

#: Which observation messages list the admissible actions: every one, only the first, or none.
#: With constrained decoding the model cannot write an inadmissible action anyway, so repeating the
#: list every turn mostly costs tokens; in free mode the list is the model's only guide.
AdmissibleListing = Literal["every", "first", "never"]

_MARK = "agentrl-reply-marker"
_SLOT = "agentrl-observation-slot"


@dataclass(frozen=True)
class TurnDelta:
    """The template text between an assistant reply's end-of-turn token and the next reply:
    ``before`` + observation message content + ``after`` (``after`` ends with the generation
    prompt). Both as text and as token ids, tokenised once."""

    before_text: str
    after_text: str
    before_ids: tuple[int, ...]
    after_ids: tuple[int, ...]
    end_of_turn: int
    end_of_turn_text: str


def turn_delta(tokenizer: PreTrainedTokenizerBase, system_prompt: str = "s") -> TurnDelta:
    """Slice the chat template's between-turns text out of a rendered placeholder conversation.

    Raises ``ValueError`` when the template does not write the end-of-turn token right after the
    reply, or renders a later user message in a way that depends on the earlier ones (then the
    growing prompt could not be a token-level extension).
    """
    eot = end_of_turn_id(tokenizer)
    eot_text = tokenizer.convert_ids_to_tokens(eot)
    messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": _MARK}, {"role": "user", "content": _SLOT}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    head = tokenizer.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    if not rendered.startswith(head):
        raise ValueError("the chat template renders earlier turns differently once a reply follows; "
                         "rollout.history=conversation needs a template that only appends")
    after_reply = rendered.split(_MARK, 1)[1]
    if not after_reply.startswith(eot_text):
        raise ValueError(f"the chat template does not end a reply with its end-of-turn token {eot_text!r}")
    between = after_reply[len(eot_text):]
    before, after = between.split(_SLOT, 1)

    def encode(text: str) -> tuple[int, ...]:
        return tuple(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else ()

    return TurnDelta(before, after, encode(before), encode(after), eot, eot_text)


class ConversationBuilder:
    """Builds the growing prompt of conversation mode: the first turn's prompt, then each next one
    as an extension of the last (see the module docstring)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, action_format: ActionFormat,
                 system_prompt: str | None = None, max_prompt_tokens: int = 2048,
                 list_admissible: AdmissibleListing = "every"):
        self.tokenizer = tokenizer
        self.action_format = action_format
        self.system_prompt = system_prompt or DEFAULT_SYSTEM_PROMPT
        self.max_prompt_tokens = max_prompt_tokens
        self.list_admissible = list_admissible
        self.delta = turn_delta(tokenizer, self.system_prompt)

    # --- message contents --------------------------------------------------------------------
    @staticmethod
    def _admissible_lines(admissible: Sequence[str] | None) -> list[str]:
        if not admissible:
            return []
        lines = ["Admissible actions:", *admissible]
        if any(a.endswith(PLACEHOLDER) for a in admissible):
            lines.append("(an action ending in [...] takes your own words in place of the dots)")
        return lines

    def first_message(self, task: str, observation: str, admissible: Sequence[str] | None) -> str:
        lines = [f"Your task: {task}", f"[step 1] observation: {observation}"]
        if self.list_admissible != "never":
            lines += self._admissible_lines(admissible)
        lines.append(self.action_format.instruction())
        return "\n".join(lines)

    def observation_message(self, observation: str, admissible: Sequence[str] | None, step: int,
                            last_valid: bool = True) -> str:
        """The user message answering a reply: the env's observation (and, with ``every``, the
        admissible actions). The answer format was given once, in the first message."""
        lines = [] if last_valid else ["(your last action was not a valid admissible action)"]
        lines.append(f"[step {step}] observation: {observation}")
        if self.list_admissible == "every":
            lines += self._admissible_lines(admissible)
        return "\n".join(lines)

    # --- prompts ---------------------------------------------------------------------------------
    def first(self, task: str, observation: str, admissible: Sequence[str] | None) -> Prompt:
        """Turn 1's prompt, rendered by the chat template and tokenised as a whole; a too-long
        first observation loses its middle (as in window mode)."""
        while True:
            messages = [{"role": "system", "content": self.system_prompt},
                        {"role": "user", "content": self.first_message(task, observation, admissible)}]
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            excess_chars = 4 * (len(ids) - self.max_prompt_tokens) + 32
            if len(ids) <= self.max_prompt_tokens or len(observation) <= excess_chars + 64:
                return Prompt(text, ids, messages)
            keep = (len(observation) - excess_chars) // 2
            observation = observation[:keep] + " ... " + observation[-keep:]

    def extend(self, previous: Prompt, reply_ids: Sequence[int], reply_text: str, observation: str,
               admissible: Sequence[str] | None, step: int, last_valid: bool = True) -> Prompt:
        """Turn ``step``'s prompt: ``previous`` + the reply ids as written (+ an end-of-turn token
        if the reply was cut) + the next observation message + the generation prompt."""
        delta = self.delta
        reply_ids = list(reply_ids)
        closed = bool(reply_ids) and reply_ids[-1] == delta.end_of_turn
        content = self.observation_message(observation, admissible, step, last_valid)
        content_ids = self.tokenizer(content, add_special_tokens=False)["input_ids"]
        ids = (list(previous.ids) + reply_ids + ([] if closed else [delta.end_of_turn])
               + list(delta.before_ids) + content_ids + list(delta.after_ids))
        text = previous.text + reply_text + delta.end_of_turn_text + delta.before_text + content + delta.after_text
        messages = [*previous.messages, {"role": "assistant", "content": reply_text},
                    {"role": "user", "content": content}]
        return Prompt(text, ids, messages)

    def fits(self, prompt: Prompt) -> bool:
        return len(prompt.ids) <= self.max_prompt_tokens
