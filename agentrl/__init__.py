"""agentrl: Gymnasium-native reinforcement learning for multi-turn LLM agents.

The public API::

    import agentrl
    cfg = agentrl.build_config(algo="sapo", env="keydoor", model="embedded",
                               overrides=["train.iterations=5"])
    result = agentrl.train(cfg)

Custom envs follow the contract in :mod:`agentrl.envs.contract`; custom algorithms subclass
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
    "EnvConfig": "agentrl.training.config", "ModelConfig": "agentrl.training.config", "RunConfig": "agentrl.training.config",
    "TrainConfig": "agentrl.training.config", "build_config": "agentrl.training.config",
    "RolloutConfig": "agentrl.rollout.engine", "check_text_env": "agentrl.envs.contract", "make_env": "agentrl.envs.contract",
    "text_space": "agentrl.envs.contract", "UserError": "agentrl.errors", "RunResult": "agentrl.training.trainer",
    "Trainer": "agentrl.training.trainer", "train": "agentrl.training.trainer",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'agentrl' has no attribute {name!r}")
