"""The behaviour suite's probes: tiny text envs that each isolate one property of multi-turn RL.

============  =====================================================  ==========================
env id        what it measures                                        options
============  =====================================================  ==========================
Chain-v0      credit assignment: reward ``delay`` turns after the     ``delay``, ``reward_noise``
              one decisive action (noisy reward with reward_noise)
Locks-v0      sparse success, advantage collapse: one wrong lever     ``n_locks``
              of n ends the episode
Memory-v0     memory: the code is shown only in the first turn        ``n_codes``, ``gap``
Corridor-v0   exploration under a visible time limit                  ``length``, ``max_steps``
============  =====================================================  ==========================

Each knows its optimal and uniform-random expected returns exactly (``optimal_return()``,
``random_return()``), and shows its progress in the observation, so the state value is
learnable by construction. ``agentrl suite`` (agentrl/bench/suite.py) runs them for several algorithms
and seeds; docs/suite.md describes them.
"""

from agentrl_envs.probes.base import ProbeEnv
from agentrl_envs.probes.chain import ChainEnv
from agentrl_envs.probes.corridor import CorridorEnv
from agentrl_envs.probes.locks import LocksEnv
from agentrl_envs.probes.memory import MemoryEnv

__all__ = ["ProbeEnv", "ChainEnv", "LocksEnv", "MemoryEnv", "CorridorEnv"]
