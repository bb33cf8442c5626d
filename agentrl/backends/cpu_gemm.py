"""vLLM on a CPU: the OpenMP threads its engine binds by default, and the GEMM kernels its linear
layers dispatch to, described and refreshed after a weight sync (:mod:`agentrl.backends.vllm`)."""

from __future__ import annotations

import os

import torch
from torch import nn


def _cpu_cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def default_cpu_threads() -> str:
    """Every core of this process, or this rank's share under torchrun (``LOCAL_RANK``).

    vLLM's own default binds one thread per NUMA node's first core: ~117 new tokens/s at batch
    16 against ~203 with both cores of a 2-core machine (docs/scale.md).
    """
    cores = _cpu_cores()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if local_world > 1 and len(cores) >= local_world:
        cores = cores[local_rank::local_world]
    return ",".join(str(c) for c in cores)


def describe_gemm(fn) -> str:
    """Which kernel a vLLM CPU layer's ``cpu_linear`` runs: ``onednn`` (weights prepacked by
    oneDNN), ``sgl`` (AMX-packed small weights), ``zentorch``, or ``torch`` (plain linear on the
    live weight). Read from the names the dispatch closure calls."""
    code = getattr(fn, "__code__", None)
    names = set(code.co_names) if code is not None else set()
    for kernel, marker in (("onednn", "onednn_mm"), ("sgl", "weight_packed_linear_cpu"),
                           ("zentorch", "zentorch_linear_unary")):
        if marker in names:
            return kernel
    return "torch"


def refresh_cpu_gemm(model: nn.Module) -> dict[str, str]:
    """Rebuild the CPU GEMM handlers of layers that keep their weight tensor; returns the kernel of
    every layer that has one, by module name.

    Why: on CPU, vLLM replaces each linear layer's matmul by a handler built from the weight at
    load time (prepacked for oneDNN, or AMX-packed). An in-place ``reload_weights`` reprocesses the
    layers whose weights it loads, but a tied LM head loads nothing (its weight *is* the input
    embedding's), so its handler keeps the weights of the engine's start: the engine then samples
    from a stale head. Layers that still hold a non-empty 2-D weight (embedding, tied head, any
    layer left on the plain path) are cheap to redispatch from the current tensor. Layers whose
    weight was moved into a packed handler hold an empty tensor; the reload rebuilt those.
    """
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    kernels = {}
    for name, module in model.named_modules():
        if not hasattr(module, "cpu_linear"):
            continue
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.Tensor) and weight.ndim == 2 and weight.numel() > 0:
            dispatch_cpu_unquantized_gemm(module, remove_weight=False)
        kernels[name] = describe_gemm(module.cpu_linear)
    return kernels


def cpu_gemm_kernels(model: nn.Module) -> dict[str, str]:
    """The CPU GEMM kernel of every vLLM layer that has one, by module name (nothing changed)."""
    return {name: describe_gemm(module.cpu_linear) for name, module in model.named_modules()
            if hasattr(module, "cpu_linear")}
