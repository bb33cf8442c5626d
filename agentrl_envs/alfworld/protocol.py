"""ALFWorld's evaluation protocols: what ``protocol="paper"`` fixes, and why.

The default protocol is this project's historical one (generated games allowed, ``help`` listed,
admissibility checked on the exact string, every inadmissible action penalised). ``paper``
reproduces the setup of the published LLM-agent RL results on ALFWorld (GiGPO / verl-agent and
the papers that report against it), choice by choice:

=====================  ==========================================  ============================
choice                 paper                                       source
=====================  ==========================================  ============================
games                  official files only (error without them)    alfworld ``AlfredTWEnv``
eval split             valid_unseen, every game once (134)         ALFWorld's "unseen" column
steps per episode      50                                          verl-agent ``max_steps: 50``
``help`` command       not listed                                  verl-agent ``env_manager.py``
admissibility          after lower-casing and collapsing spaces    the env matches commands so
invalid action         only a malformed reply                      verl-agent ``projection.py``
=====================  ==========================================  ============================

The rule for invalid actions follows verl-agent's ``alfworld_projection``
(``agent_system/environments/env_package/alfworld/projection.py``): a reply is valid when it
holds an ``<action>...</action>`` block, when the ``<think>`` and ``</think>`` tags are both
present (verl-agent's prompt always asks for them; here only when ``rollout.think`` is on), and
when it contains no CJK ideograph (U+4E00-U+9FFF). Whether the action is admissible does not
matter there: an inadmissible command is sent to the game, which answers "Nothing happens.".
"""

from __future__ import annotations

import re

PROTOCOLS = ("default", "paper")
#: The verbs the paper protocol leaves out of the admissible list (verl-agent drops ``help``
#: from the list it shows the model).
PAPER_HIDDEN = ("help",)
PAPER_MAX_STEPS = 50
#: What each protocol says an invalid action is (read by :mod:`agentrl.rollout.engine` from the env's
#: ``metadata["invalid_action_rule"]``).
INVALID_RULE = {"default": "inadmissible", "paper": "malformed"}
_SPACES = re.compile(r"\s+")


def normalize_command(action: str) -> str:
    """A command as the game matches it: lower case, runs of white space as one space.

    Module-level (not a method) so that it pickles by reference into env worker processes,
    where the rollout engine reads it from the env's metadata.
    """
    return _SPACES.sub(" ", action).strip().lower()
