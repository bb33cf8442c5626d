"""agentrl's environments, registered with gymnasium under ``agentrl/...`` ids.

Importing this package registers the ids; the env modules themselves (and their heavy
dependencies such as TextWorld or selenium) load only when an env is made.
"""

from __future__ import annotations

import gymnasium as gym


def _register(env_id: str, entry_point: str) -> None:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point)


_register("agentrl/KeyDoor-v0", "agentrl_envs.keydoor:KeyDoorEnv")
_register("agentrl/ALFWorld-v0", "agentrl_envs.alfworld.env:ALFWorldEnv")
_register("agentrl/WebShop-v0", "agentrl_envs.webshop.env:WebShopEnv")
# the behaviour suite's probes (agentrl_envs/probes)
_register("agentrl/Chain-v0", "agentrl_envs.probes.chain:ChainEnv")
_register("agentrl/Locks-v0", "agentrl_envs.probes.locks:LocksEnv")
_register("agentrl/Memory-v0", "agentrl_envs.probes.memory:MemoryEnv")
_register("agentrl/Corridor-v0", "agentrl_envs.probes.corridor:CorridorEnv")
