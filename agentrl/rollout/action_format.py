"""How the agent writes its action, and how the engine reads it back.

The default format is the field's usual one: the action inside ``<action>...</action>`` tags,
optionally preceded by reasoning inside ``<think>...</think>`` (``think=True``). The same object
renders an action (for demonstrations and constrained decoding) and parses a reply (rollouts),
so the two can never drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class ActionFormat:
    tag: str = "action"
    think: bool = False

    @property
    def open(self) -> str:
        return f"<{self.tag}>"

    @property
    def close(self) -> str:
        return f"</{self.tag}>"

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        return re.compile(re.escape(self.open) + r"(.*?)" + re.escape(self.close), re.DOTALL)

    def render(self, action: str) -> str:
        """The reply that states ``action`` (without reasoning)."""
        return f"{self.open}{action}{self.close}"

    def parse(self, reply: str) -> str | None:
        """The action in ``reply`` (the last tagged one), or None if there is none or it is empty."""
        found = self._pattern.findall(reply)
        if not found:
            return None
        action = " ".join(found[-1].split())
        return action or None

    def instruction(self) -> str:
        """What the prompt asks for. No example action: an example biases small models towards it."""
        if self.think:
            return (f"First think step by step about the situation inside <think> </think> tags. "
                    f"Then write exactly one admissible action, copied as listed, inside "
                    f"{self.open} {self.close} tags.")
        return (f"Write exactly one admissible action, copied as listed, inside {self.open} "
                f"{self.close} tags, and nothing else.")
