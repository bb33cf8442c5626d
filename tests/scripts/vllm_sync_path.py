"""Weight sync on one of vLLM's CPU GEMM paths, in its own process (its own engine).

Usage: python tests/scripts/vllm_sync_path.py {native,plain} DTYPE

``native`` leaves vLLM's dispatch as this CPU makes it (oneDNN-prepacked or AMX-packed weights on
AVX-512 CPUs, plain torch linear elsewhere); ``plain`` forces the plain torch linear on every
layer. The script perturbs the LM head and every MLP weight, syncs, and checks greedy replies and
probe log-probs against the trainer; it prints one JSON line with what ran and what it measured.
"""

from __future__ import annotations

import collections
import json
import sys

import torch


def force_plain_path() -> None:
    """Make vLLM's CPU dispatch pick ``torch.nn.functional.linear`` for every layer."""
    import vllm._custom_ops as ops
    from vllm.model_executor.layers import utils
    from vllm.platforms import current_platform

    ops._supports_onednn = False
    utils.check_cpu_sgl_kernel = lambda *args, **kwargs: False
    type(current_platform).is_zen_cpu = lambda self: False


def main() -> None:
    path, dtype_name = sys.argv[1], sys.argv[2]
    from agentrl.backends.sync_check import trainer_logprobs
    from agentrl.backends.vllm import VLLMBackend, VLLMOptions
    from agentrl.training.compose import load_for_training, stop_ids
    from agentrl.training.config import ModelConfig

    if path == "plain":
        force_plain_path()
    loaded = load_for_training(ModelConfig(name="embedded"), reserve_values=True)
    model = loaded.model
    backend = VLLMBackend(model, stop_ids(loaded.tokenizer, model), loaded.value_tokens.ids,
                          VLLMOptions(dtype=getattr(torch, dtype_name), max_model_len=512,
                                      cpu_kv_cache_gib=1), seed=0)
    kernels = collections.Counter(backend.gemm_kernels.values())
    start_gap = backend.last_sync.relative_gap
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(1.5)  # the tied head (and embedding)
        for name, param in model.named_parameters():
            if "mlp" in name:
                param.add_(torch.randn(param.shape, generator=generator) * param.std() * 0.5)
    stale = backend.probe_logprobs(backend.probe)
    trainer = trainer_logprobs(model, backend.probe)
    stale_gap = float((stale - trainer).abs().mean() / trainer.abs().mean())
    backend.sync_weights()  # raises WeightSyncError if the engine did not take the weights
    print(json.dumps({
        "path": path, "dtype": dtype_name, "kernels": dict(kernels),
        "lm_head": backend.gemm_kernels.get("lm_head"),
        "start_relative_gap": start_gap, "stale_relative_gap": stale_gap,
        "synced_relative_gap": backend.last_sync.relative_gap,
        "tolerance": backend.last_sync.tolerance,
    }))


if __name__ == "__main__":
    main()
