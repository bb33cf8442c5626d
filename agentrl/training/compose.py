"""Builds what a run needs from its config: the model and tokenizer (with SAPO's value tokens
and LoRA where asked), the policy, the generation backend, env pools and the rollout engine.

The trainer, ``agentrl eval``, demonstrations and SFT all build through here, so they see the
same prompts, action format and constraints.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from agentrl.backends.base import GenerationBackend
from agentrl.backends.hf import HFBackend
from agentrl.envs.contract import make_env, resolve_env_id
from agentrl.errors import UserError
from agentrl.models.loading import load_model, load_tokenizer, resolve_dtype, resolve_model
from agentrl.models.policy import Policy
from agentrl.models.value_tokens import ValueTokens, check_value_tokens, reserve_value_tokens
from agentrl.rollout.action_format import ActionFormat
from agentrl.rollout.constrained import ConstraintBuilder
from agentrl.rollout.conversation import ConversationBuilder
from agentrl.rollout.engine import EnvPool, RolloutConfig, RolloutEngine
from agentrl.rollout.prompting import PromptBuilder, end_of_turn_id
from agentrl.training.config import DEFAULT_SPLITS, EnvConfig, ModelConfig

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    value_tokens: ValueTokens | None
    device: torch.device


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise UserError(f"Unknown device '{name}'.") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"Device '{name}' was asked for but no CUDA GPU is available.")
    return device


def load_for_training(cfg: ModelConfig, reserve_values: bool, seed: int = 0) -> LoadedModel:
    """Load the model and tokenizer; reserve SAPO's value tokens; apply LoRA; move to device.

    Value tokens recorded in a checkpoint folder (``agentrl_value_tokens.json``) are reused as
    they are; otherwise they are reserved when ``reserve_values`` (SAPO) asks for them.
    """
    device = resolve_device(cfg.device)
    source = resolve_model(cfg.name)
    dtype = resolve_dtype(cfg.dtype, device)
    tokenizer = load_tokenizer(source)
    model = load_model(source, dtype, tokenizer, seed=seed)
    value_tokens = ValueTokens.load(source.location) if source.kind == "dir" else None
    if value_tokens is not None:
        check_value_tokens(model, value_tokens)
    elif reserve_values:
        value_tokens = reserve_value_tokens(model, tokenizer)
    if cfg.lora_rank > 0:
        model = apply_lora(model, cfg, value_tokens)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    model.to(device)
    return LoadedModel(model, tokenizer, value_tokens, device)


def apply_lora(model: PreTrainedModel, cfg: ModelConfig, value_tokens: ValueTokens | None):
    """LoRA adapters on every linear layer; SAPO's two value rows stay trainable."""
    from peft import LoraConfig, get_peft_model

    extra = {}
    if value_tokens is not None:
        extra["trainable_token_indices"] = {"embed_tokens": value_tokens.ids}
    lora = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules="all-linear", task_type="CAUSAL_LM", **extra)
    return get_peft_model(model, lora)


def split_kwargs(env_cfg: EnvConfig, which: str) -> dict:
    env_id = resolve_env_id(env_cfg.id)
    split = env_cfg.train_split if which == "train" else env_cfg.eval_split
    if split == "auto":
        pair = DEFAULT_SPLITS.get(env_id)
        split = None if pair is None else (pair[0] if which == "train" else pair[1])
    kwargs = dict(env_cfg.kwargs)
    if split is not None:
        kwargs["split"] = split
    return kwargs


@dataclass(frozen=True)
class EnvMaker:
    """A picklable env factory: env workers (``rollout.env_workers``) rebuild envs from it in
    their own processes.

    ``modules``: the user's env modules this env needs (``env.imports``, and the module that
    registered the id through ``--import`` or ``module:EnvId``). A spawned worker starts with none
    of them, so it imports them again before looking the id up.
    """

    env_id: str
    kwargs: dict
    modules: tuple[str, ...] = ()

    def __call__(self) -> gym.Env:
        if self.modules:
            from agentrl.envs.modules import import_all

            import_all(self.modules)
        return make_env(self.env_id, **self.kwargs)


def env_factory(env_cfg: EnvConfig, which: str) -> Callable[[], gym.Env]:
    """The env factory of a config. Its ``modules`` are the ones this env needs in a fresh
    process: ``env.imports`` and the module that registered the id, not every module this
    process has imported (another run's module may not be importable where the workers start)."""
    from agentrl.envs.modules import ids_registered_by_imports, import_all

    import_all(env_cfg.imports)
    env_id = resolve_env_id(env_cfg.id)
    registering = ids_registered_by_imports().get(env_id)
    modules = tuple(dict.fromkeys([*env_cfg.imports, *([registering] if registering else [])]))
    return EnvMaker(env_id, split_kwargs(env_cfg, which), modules)


def action_format(cfg: RolloutConfig) -> ActionFormat:
    if cfg.action_mode == "constrained" and cfg.think:
        raise UserError("rollout.think cannot be combined with rollout.action_mode=constrained (the reply is the action alone).")
    return ActionFormat(tag=cfg.action_tag, think=cfg.think)


def prompt_builder(tokenizer: PreTrainedTokenizerBase, cfg: RolloutConfig, env: gym.Env | dict) -> PromptBuilder:
    """``env``: an env, or its ``metadata`` (an env living in a worker process)."""
    metadata = env if isinstance(env, dict) else env.unwrapped.metadata
    system = cfg.system_prompt or metadata.get("system_prompt")
    return PromptBuilder(tokenizer, action_format(cfg), system, cfg.history_window, cfg.max_prompt_tokens)


def stop_ids(tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel) -> list[int]:
    ids = {end_of_turn_id(tokenizer)}
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(gen_eos, int):
        ids.add(gen_eos)
    elif isinstance(gen_eos, list):
        ids.update(gen_eos)
    return sorted(ids)


def choose_backend(name: str, model_name: str | None = None, unfit: str | None = None) -> str:
    """``auto`` is vLLM where it is installed (8-27x the new tokens/s of transformers at batch 16
    on CPU, docs/scale.md), else hf; always hf for the tiny random test models, whose runs vLLM's
    start (~17 s) would dominate. ``AGENTRL_AUTO_BACKEND=hf|vllm`` overrides what ``auto`` picks
    (the test suite pins hf so that its transformers-exact expectations hold).

    ``unfit``: why vLLM cannot run this model here (:func:`agentrl.backends.fit.vllm_unfit_reason`),
    or None. ``auto`` then never picks vLLM (not even when pinned), and an explicit ``vllm`` is a
    one-sentence error instead of the engine's long traceback at start."""
    if name == "auto":
        from agentrl.backends.vllm import vllm_available
        from agentrl.models.loading import TINY_NAMES

        pinned = os.environ.get("AGENTRL_AUTO_BACKEND")
        if pinned in ("hf", "vllm"):
            return pinned if pinned == "hf" or unfit is None else "hf"
        return "vllm" if vllm_available() and model_name not in TINY_NAMES and unfit is None else "hf"
    if name not in ("hf", "vllm"):
        raise UserError(f"Unknown rollout backend '{name}'; use auto, hf or vllm.")
    if name == "vllm" and unfit is not None:
        raise UserError(f"rollout.backend=vllm cannot run model '{model_name}': {unfit}; "
                        f"use --backend hf (or auto).")
    return name


def cpu_has_native_bf16() -> bool:
    """True when this CPU computes bf16 matmuls natively (AVX-512 BF16 or AMX). Without them
    (e.g. AVX2-only EPYCs) bf16 is emulated: measured 3-5x *slower* than fp32 for generation
    (docs/benchmarks.md), so the ``auto`` generation dtype only picks bf16 where it pays."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def generation_dtype(name: str, model_dtype: torch.dtype, device: torch.device) -> torch.dtype:
    """``auto``: a bfloat16 copy for generation when an fp32 model trains on a CPU with native
    bf16 (MEASURED.md: 2-2.5x faster sampling there; the trainer recomputes old log-probs in its
    own precision, so ratios stay exact and the difference shows as ``rollout/logprob_gap``);
    otherwise the model's dtype. ``same``: always the model's dtype (no copy)."""
    if name == "same":
        return model_dtype
    if name == "auto":
        if device.type == "cpu" and model_dtype == torch.float32 and cpu_has_native_bf16():
            return torch.bfloat16
        return model_dtype
    return resolve_dtype(name, device)


def make_backend(policy: Policy, cfg: RolloutConfig, seed: int,
                 model_cfg: ModelConfig | None = None, separate: bool = False) -> GenerationBackend:
    """The generation backend. ``separate`` (asynchronous rollouts): the hf backend generates
    from a copy of its own, refreshed by ``sync_weights``, never from the weights being trained."""
    banned = policy.value_tokens.ids if policy.value_tokens is not None else []
    stops = stop_ids(policy.tokenizer, policy.model)
    model_dtype = next(policy.model.parameters()).dtype
    # without a model config, a model built from a config alone (no name_or_path) is a test model
    model_name = model_cfg.name if model_cfg is not None else (
        getattr(policy.model, "name_or_path", "") or "tiny")
    dtype = generation_dtype(cfg.generation_dtype, model_dtype, policy.device)
    from agentrl.backends.fit import vllm_unfit_reason

    if choose_backend(cfg.backend, model_name, vllm_unfit_reason(policy.model.config, policy.device)) == "hf":
        return HFBackend(policy.model, stops, policy.tokenizer.pad_token_id, banned,
                         max_batch_rows=cfg.generation_batch_size, dtype=dtype, seed=seed,
                         reuse_prefixes=cfg.history == "conversation" and cfg.kv_reuse, separate=separate)
    from agentrl.backends.vllm import VLLMBackend, VLLMOptions

    model_cfg = model_cfg or ModelConfig()
    longest = getattr(policy.model.config, "max_position_embeddings", None) or 1 << 20
    options = VLLMOptions(dtype=dtype, max_model_len=min(longest, cfg.max_prompt_tokens + cfg.max_new_tokens + 256),
                          gpu_memory_utilization=model_cfg.vllm_gpu_memory_utilization,
                          cpu_kv_cache_gib=model_cfg.vllm_kv_cache_gib,
                          sync_check=model_cfg.vllm_sync_check,
                          sync_tolerance=model_cfg.vllm_sync_tolerance, sleep=model_cfg.vllm_sleep)
    return VLLMBackend(policy.model, stops, banned, options, seed=seed)


def make_engine(policy: Policy, backend: GenerationBackend, cfg: RolloutConfig,
                factory: Callable[[], gym.Env]) -> RolloutEngine:
    if cfg.env_workers > 0:
        from agentrl.envs.workers import EnvWorkerPool

        pool = EnvWorkerPool(factory, cfg.env_workers, step_timeout_s=cfg.env_step_timeout_s,
                             env_errors=cfg.env_errors)
        builder = prompt_builder(policy.tokenizer, cfg, pool.metadata())
    else:
        pool = EnvPool(factory, step_timeout_s=cfg.env_step_timeout_s, env_errors=cfg.env_errors)
        pool.ensure(1)
        builder = prompt_builder(policy.tokenizer, cfg, pool.envs[0])
    fmt = builder.action_format
    constraints = None
    if cfg.action_mode == "constrained":
        constraints = ConstraintBuilder(policy.tokenizer, fmt.render, end_of_turn_id(policy.tokenizer))
    return RolloutEngine(pool, backend, builder, fmt, cfg, constraints, conversation_builder(builder, cfg))


def conversation_builder(builder: PromptBuilder, cfg: RolloutConfig) -> ConversationBuilder | None:
    """The growing-chat builder of ``rollout.history: conversation`` (same tokenizer, system
    prompt and action format as ``builder``), or None in window mode."""
    if cfg.history != "conversation":
        return None
    return ConversationBuilder(builder.tokenizer, builder.action_format, builder.system_prompt,
                               cfg.max_prompt_tokens, cfg.list_admissible)
