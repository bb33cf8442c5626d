"""The few collective operations the algorithms need, as no-ops in a single process.

Training under ``torchrun`` splits the trajectories of an iteration across ranks. Anything that
is a *batch statistic* must then be computed over the global batch, or results would depend on
the number of processes: advantage mean/std, and the token/turn counts that loss averages divide
by. Gradients are averaged across ranks after each backward pass.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def is_main() -> bool:
    return rank() == 0


def all_reduce_sum(values: list[float]) -> list[float]:
    """Sum a few floats over all ranks (float64 on the CPU: exact enough for counts and sums)."""
    if not is_distributed():
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def global_mean_std(x: torch.Tensor) -> tuple[float, float]:
    """Mean and population std of ``x`` gathered over every rank."""
    total, total_sq, count = all_reduce_sum([float(x.double().sum()), float((x.double() ** 2).sum()), float(x.numel())])
    if count == 0:
        return 0.0, 0.0
    mean = total / count
    var = max(total_sq / count - mean * mean, 0.0)
    return mean, var ** 0.5


def reduce_gradients(parameters) -> None:
    """Sum ``.grad`` over ranks (each rank's loss is already divided by global counts,
    so the sum is the global loss's gradient; dividing by nothing else keeps it exact)."""
    if not is_distributed():
        return
    for p in parameters:
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
