"""Checks a command runs on its config before it loads anything heavy.

Each is cheap (a registry lookup, a folder listing, one small JSON file, at most one short hub
request) and each failure is a :class:`~agentrl.errors.UserError`, so a mistake in the model,
env or backend settings is one sentence before a model loads, an env starts or a run directory
is made.
"""

from __future__ import annotations

from typing import Any

from agentrl.errors import UserError
from agentrl.training.config import RunConfig


def _model_config(name: str) -> Any | None:
    """The transformers config of the model ``name`` names, when it is at hand without loading."""
    from agentrl.models.loading import TINY_NAMES, ModelSource, resolve_model

    source: ModelSource = resolve_model(name)
    if source.kind == "tiny" or name in TINY_NAMES:
        from types import SimpleNamespace

        return SimpleNamespace(hidden_size=64, num_attention_heads=4)  # build_tiny_model's shape
    if source.kind == "hub":
        from agentrl.models.hub import check_hub_model

        check_hub_model(source.location)
    if source.kind == "gguf":
        from pathlib import Path

        from agentrl.models.files import check_gguf

        check_gguf(Path(source.location) / str(source.gguf_file))
    if source.kind in ("dir", "hub"):
        from transformers import AutoConfig

        try:
            config = AutoConfig.from_pretrained(source.location)
        except (OSError, ValueError) as exc:
            raise UserError(f"Cannot read the model config of '{name}': {str(exc).splitlines()[0]}") from exc
        if source.kind == "dir":  # weights and tokenizer whole, before anything loads them
            from agentrl.models.files import check_model_folder

            check_model_folder(source.location)
        return config
    return None  # embedded / GGUF: read when the model loads


def check_model_and_backend(cfg: RunConfig) -> None:
    """The model exists (folder, file, cache or hub) and the chosen backend can run it."""
    from agentrl.backends.fit import vllm_unfit_reason
    from agentrl.training.compose import choose_backend, resolve_device

    model_config = _model_config(cfg.model.name)
    device = resolve_device(cfg.model.device)
    unfit = vllm_unfit_reason(model_config, device) if model_config is not None else None
    if cfg.rollout.backend == "vllm":
        choose_backend("vllm", cfg.model.name, unfit)


def check_env(cfg: RunConfig) -> str:
    """The env id resolves (importing the user's module for ``module:EnvId``); returns the id.

    agentrl's own envs are also made once for each split (cheap: their heavy parts load on the
    first reset), so that missing data (ALFWorld's games, a split folder, a data_path) is one
    sentence before a model is looked up or loaded. A user's env is made once (train split) and
    checked against the text-env contract (:func:`agentrl.envs.contract.check_text_env`): a wrong space,
    an old 4-tuple step or a reset that returns the observation alone is one sentence naming the
    env, the method and the rule, not a traceback in the middle of the first rollout.
    """
    from agentrl.envs.contract import resolve_env_id
    from agentrl.training.compose import env_factory

    env_id = resolve_env_id(cfg.env.id)
    if env_id.startswith("agentrl/"):
        for which in ("train", "eval"):
            env_factory(cfg.env, which)().close()
    else:
        check_user_env(env_factory(cfg.env, "train"), env_id)
    return env_id


def check_user_env(make: Any, env_id: str) -> None:
    """Make one of the user's envs and check it; an exception in its constructor is one sentence."""
    from agentrl.envs.contract import check_text_env

    try:
        env = make()
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 (the user's constructor: any exception is reported)
        from agentrl.errors import cut

        raise UserError(f"Env '{env_id}' raised {type(exc).__name__} while being made: {cut(str(exc))}.") from exc
    try:
        check_text_env(env, seeds=(0,), max_steps=2)
    finally:
        try:
            env.close()
        except Exception:  # noqa: BLE001 (closing a half-checked env must not hide the sentence)
            pass


def check_inputs(cfg: RunConfig, backend: bool = True) -> None:
    """Everything above, in the order a user fixes them: env, then model and backend."""
    check_env(cfg)
    if backend:
        check_model_and_backend(cfg)
    else:
        _model_config(cfg.model.name)
