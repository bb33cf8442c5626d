"""Which turns count as invalid (and pay ``rollout.invalid_action_penalty``): the env decides.

Envs disagree on what an invalid action is, and published numbers depend on it, so the rule is
the env's to declare in its ``metadata`` (docs/custom_env.md):

* ``metadata["invalid_action_rule"]``: ``"inadmissible"`` (default) -- a reply without a
  well-formed action, or with an action not in ``info["admissible_actions"]``; ``"malformed"``
  -- only a reply that is not well formed, as verl-agent's ALFWorld projection judges it
  (``agent_system/environments/env_package/alfworld/projection.py``: an action block, the
  think tags when thinking is asked for, no CJK ideograph); an inadmissible command is then
  the game's business ("Nothing happens."), not a penalty.
* ``metadata["normalize_action"]``: a function ``str -> str`` (module-level, so it pickles into
  env workers) that the env applies before matching a command; admissibility is then judged
  on normalised text, so ``Go to  Cabinet 1`` counts as the ``go to cabinet 1`` it plays as.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentrl.envs.contract import is_admissible
from agentrl.rollout.action_format import ActionFormat

RULES = ("inadmissible", "malformed")
#: verl-agent marks a reply holding a CJK ideograph invalid (its projection's range).
_CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class ActionValidity:
    """How one env judges a turn's validity (see the module doc)."""

    rule: str = "inadmissible"
    normalize: Callable[[str], str] | None = None
    think: bool = False  # the action format asks for <think> ... </think>

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any], action_format: ActionFormat) -> ActionValidity:
        rule = metadata.get("invalid_action_rule", "inadmissible")
        if rule not in RULES:
            raise ValueError(f"metadata['invalid_action_rule'] must be one of {RULES}, not {rule!r}")
        normalize = metadata.get("normalize_action")
        if normalize is not None and not callable(normalize):
            raise ValueError("metadata['normalize_action'] must be a function str -> str")
        return cls(rule, normalize, action_format.think)

    def judge(self, reply: str, action: str | None, admissible: Sequence[str] | None) -> bool:
        """Whether the turn that wrote ``reply`` (parsed to ``action``) is valid."""
        if action is None:
            return False
        if self.rule == "malformed":
            if self.think and ("<think>" not in reply or "</think>" not in reply):
                return False
            return _CJK.search(reply) is None
        if self.normalize is not None and admissible is not None:
            return is_admissible(self.normalize(action), [self.normalize(a) for a in admissible])
        return is_admissible(action, admissible)


def pool_metadata(pool: Any) -> dict[str, Any]:
    """The metadata of a pool's envs: a worker pool asks its first worker, an in-process pool
    reads its first env; an empty pool (tests) has none."""
    method = getattr(pool, "metadata", None)
    if callable(method):
        return dict(method())
    envs = getattr(pool, "envs", None)
    return dict(envs[0].unwrapped.metadata) if envs else {}
