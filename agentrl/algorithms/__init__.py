"""The algorithm registry.

``agentrl run NAME`` looks NAME up here. Built-ins are registered below; an outside package
registers its own with :func:`register_algorithm` (in code) or through the ``agentrl.algorithms``
entry-point group (``name = "package.module:Class"``), which is read on the first unknown name.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from agentrl.algorithms.base import AlgoConfig, Algorithm, ClippedPolicyGradient, TurnBatch
from agentrl.algorithms.grpo import GRPO, GRPOConfig
from agentrl.algorithms.ppo import PPO, PPOConfig
from agentrl.algorithms.sapo import SAPO, SAPOConfig
from agentrl.errors import UserError

_REGISTRY: dict[str, type[Algorithm]] = {}
_ENTRY_POINTS_LOADED = False


def register_algorithm(cls: type[Algorithm], name: str | None = None) -> type[Algorithm]:
    """Make ``cls`` available as ``agentrl run <name>`` (usable as a class decorator)."""
    key = (name or cls.name).lower()
    if not key:
        raise ValueError("an algorithm needs a name")
    _REGISTRY[key] = cls
    return cls


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    for ep in entry_points(group="agentrl.algorithms"):
        if ep.name.lower() not in _REGISTRY:
            register_algorithm(ep.load(), ep.name)


def get_algorithm(name: str) -> type[Algorithm]:
    key = name.lower()
    if key not in _REGISTRY:
        _load_entry_points()
    if key not in _REGISTRY:
        raise UserError(f"Unknown algorithm '{name}'; available: {', '.join(algorithm_names())}.")
    return _REGISTRY[key]


def algorithm_name(name: str) -> str:
    """The registry's name for ``name`` (names are case-insensitive: ``SAPO`` is ``sapo``): what a
    config and ``config.yaml`` hold and what resume compares, so one run has one name."""
    get_algorithm(name)  # unknown: one sentence listing the known ones
    return name.lower()


def algorithm_names() -> list[str]:
    _load_entry_points()
    return sorted(_REGISTRY)


for _cls in (SAPO, PPO, GRPO):
    register_algorithm(_cls)

__all__ = [
    "AlgoConfig", "Algorithm", "ClippedPolicyGradient", "TurnBatch", "SAPO", "SAPOConfig", "PPO",
    "PPOConfig", "GRPO", "GRPOConfig", "register_algorithm", "get_algorithm", "algorithm_name", "algorithm_names",
]
