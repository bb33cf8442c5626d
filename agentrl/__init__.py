"""agentrl: Gymnasium-native reinforcement learning for multi-turn LLM agents.

The public API::

    import agentrl
    cfg = agentrl.build_config(algo="sapo", env="keydoor", model="embedded",
                               overrides=["train.iterations=5"])
    result = agentrl.train(cfg)

Custom envs follow the contract in :mod:`agentrl.envs`; custom algorithms subclass
:class:`agentrl.algorithms.Algorithm` and call :func:`register_algorithm`.
Names are imported lazily so that ``agentrl --help`` does not pay for torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "AlgoConfig": "agentrl.algorithms", "Algorithm": "agentrl.algorithms",
    "ClippedPolicyGradient": "agentrl.algorithms", "register_algorithm": "agentrl.algorithms",
    "EnvConfig": "agentrl.config", "ModelConfig": "agentrl.config", "RunConfig": "agentrl.config",
    "TrainConfig": "agentrl.config", "build_config": "agentrl.config",
    "RolloutConfig": "agentrl.rollout", "check_text_env": "agentrl.envs", "make_env": "agentrl.envs",
    "text_space": "agentrl.envs", "UserError": "agentrl.errors", "RunResult": "agentrl.trainer",
    "Trainer": "agentrl.trainer", "train": "agentrl.trainer",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'agentrl' has no attribute {name!r}")
