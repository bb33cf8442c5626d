"""Memory levers applied around an algorithm: CPU offload of the frozen reference, bf16 autocast.

* ``model.reference_offload``: the KL reference (a full copy of the policy when training every
  weight) is needed once per iteration, for the reference log-prob pass. On a GPU it can wait in
  host memory and visit the device only for that pass: one model's worth of GPU memory saved for
  two host<->device copies per iteration (~1-2 s for 7B in bf16 over PCIe). With LoRA there is
  no copy to offload (the reference is the base with adapters disabled). On CPU it does nothing.
* ``model.autocast: bf16``: weights and optimizer state stay fp32 ("where it matters": Adam's
  moments and the small updates they make), matmuls and the activations they save run in bf16.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def on_device(module: nn.Module, device: torch.device) -> Iterator[nn.Module]:
    """Move ``module`` to ``device`` for the block, and back where it was afterwards."""
    home = next(module.parameters()).device
    if home == device:
        yield module
        return
    module.to(device)
    try:
        yield module
    finally:
        module.to(home)
        if device.type == "cuda":
            torch.cuda.empty_cache()


def offload_reference(algorithm, device: torch.device) -> bool:
    """Keep ``algorithm.reference`` on the CPU except during its log-prob pass; True if done.

    Wraps the instance's ``reference_logprobs`` (the only place the reference is used).
    """
    reference = getattr(algorithm, "reference", None)
    if reference is None or device.type == "cpu":
        return False
    reference.to("cpu")
    original = algorithm.reference_logprobs

    def reference_logprobs(batch):
        with on_device(reference, device):
            return original(batch)

    algorithm.reference_logprobs = reference_logprobs
    return True


def autocast(mode: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The context the algorithm's update runs in: bf16 autocast, or nothing."""
    if mode == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
