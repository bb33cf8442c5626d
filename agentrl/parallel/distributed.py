"""torch.distributed for multi-process training under ``torchrun``, as no-ops in one process.

``torchrun --nproc_per_node N -m agentrl.cli run ...`` starts N copies of the same run. Each
joins the process group (:func:`init_from_env`: gloo on CPU, NCCL on GPUs), plays a share of the
iteration's tasks (:func:`split_groups`: whole groups, so GRPO's group statistics see every
rollout of a group) and computes gradients on its own trajectories.

Anything that is a *batch statistic* must then be computed over the global batch, or results
would depend on the number of processes: advantage mean/std (:func:`global_mean_std`), and the
token/turn counts that loss averages divide by (:func:`all_reduce_sum`). Each rank's loss is its
own tokens' share of the global mean, so the global gradient is the *sum* of the ranks'
gradients (:func:`reduce_gradients`), and every rank then takes the same optimizer step.

Why not ``DistributedDataParallel``: the lean forward (:mod:`agentrl.models.policy`) calls the decoder
and slices the output embedding itself instead of calling the wrapped model's ``forward``, so
DDP's reducer would never be armed. Summing the gradients once per optimizer step after all
micro-batches is what DDP does under ``no_sync()`` plus one final synchronisation; we do it with
one all-reduce per flat bucket (see docs/scale.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")

#: Elements per all-reduce bucket (25M floats = 100 MB in fp32, DDP's default bucket size).
BUCKET_ELEMENTS = 25 * 2**20


def is_distributed() -> bool:
    """More than one process trains. (A colocated vLLM engine initialises a process group of
    its own with one member: that is not distributed training.)"""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def is_main() -> bool:
    return rank() == 0


def init_from_env(device: str = "auto") -> bool:
    """Join torchrun's process group when ``WORLD_SIZE`` > 1; True if this call created it.

    NCCL when the run trains on CUDA (each rank on ``cuda:LOCAL_RANK``), gloo otherwise.
    """
    if dist.is_initialized() or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    on_cuda = torch.cuda.is_available() and device != "cpu" and not device.startswith("cpu")
    if on_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if on_cuda else "gloo")
    return True


def shutdown() -> None:
    if is_distributed():
        dist.barrier()
        dist.destroy_process_group()


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def _collective_device() -> torch.device:
    """NCCL reduces only CUDA tensors; gloo takes CPU tensors."""
    if is_distributed() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def split_groups(tasks: Sequence[T], rank_: int, world: int) -> list[T]:
    """This rank's share: every task whose ``group`` is ``rank_`` modulo ``world``.

    With one rollout per task this is ``tasks[rank::world]``; with k rollouts per task (GRPO)
    the k rollouts of a group stay on one rank, where the group's mean and std are computed.
    """
    if world <= 1:
        return list(tasks)
    return [t for t in tasks if t.group % world == rank_]  # type: ignore[attr-defined]


def all_reduce_sum(values: list[float]) -> list[float]:
    """Sum a few floats over all ranks (float64: exact enough for counts and sums)."""
    if not is_distributed():
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=_collective_device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.cpu().tolist()


def all_reduce_max(values: list[int]) -> list[int]:
    """The maximum of a few integers over all ranks: how many optimizer steps or micro-batches
    every rank must run so that each issues the same collectives (:mod:`agentrl.algorithms.lockstep`)."""
    if not is_distributed():
        return list(values)
    t = torch.tensor(values, dtype=torch.int64, device=_collective_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [int(v) for v in t.cpu().tolist()]


def global_mean_std(x: torch.Tensor) -> tuple[float, float]:
    """Mean and population std of ``x`` gathered over every rank."""
    total, total_sq, count = all_reduce_sum([float(x.double().sum()), float((x.double() ** 2).sum()), float(x.numel())])
    if count == 0:
        return 0.0, 0.0
    mean = total / count
    var = max(total_sq / count - mean * mean, 0.0)
    return mean, var ** 0.5


def reduce_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Sum ``.grad`` over ranks (each rank's loss is already divided by global counts, so the sum
    is the global loss's gradient; dividing by nothing else keeps it exact).

    A parameter without a gradient on this rank (no tokens here this minibatch) takes part with
    zeros, so every rank issues the same collectives. Gradients travel in flat buckets of one
    dtype and device: one all-reduce per bucket instead of one per tensor.
    """
    if not is_distributed():
        return
    # FSDP-managed parameters are DTensors whose gradients FSDP has already reduce-scattered
    # (summed, agentrl.parallel.fsdp sets the divide factor to 1): reducing them again would double them.
    params = [p for p in parameters if p.requires_grad and not _is_dtensor(p)]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    buckets: dict[tuple[torch.dtype, torch.device], list[list[torch.Tensor]]] = {}
    for p in params:
        key = (p.grad.dtype, p.grad.device)
        lists = buckets.setdefault(key, [[]])
        if lists[-1] and sum(g.numel() for g in lists[-1]) + p.grad.numel() > BUCKET_ELEMENTS:
            lists.append([])
        lists[-1].append(p.grad)
    for lists in buckets.values():
        for grads in lists:
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            offset = 0
            for g in grads:
                g.copy_(flat[offset: offset + g.numel()].view_as(g))
                offset += g.numel()


def _is_dtensor(tensor: torch.Tensor) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (picklable), in rank order; ``[obj]`` in one process."""
    if not is_distributed():
        return [obj]
    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


#: Metric keys that add up over ranks (counts), and prefixes whose global value is the maximum
#: over ranks (wall time, memory: the slowest / largest rank).
SUM_KEYS = ("env_steps", "trajectories", "perf/generated_tokens", "perf/tokens_per_s",
            "perf/env_steps_per_s")
MAX_PREFIXES = ("time/", "memory/", "wall_time", "sync/")  # sync: the worst rank's engine
SUM_PREFIXES = ("tokens/",)  # tokens scored, prefilled, unique: counts over the global batch


def merge_records(records: Sequence[dict[str, Any]], episodes: Sequence[float],
                  turns: Sequence[float]) -> dict[str, Any]:
    """One metrics record for the global batch from every rank's record.

    Episode metrics (``rollout/*`` means over episodes) are exact: weighted by each rank's
    episode count, the invalid-action rate by its turn count, per-task-type success by that
    type's episode count. Counts and throughputs are summed; times and memory take the maximum.
    Algorithm metrics (token or turn means of losses, KL, the log-prob gap) are weighted by
    turns, which is exact for turn means and close for token means.
    """
    if len(records) == 1:
        return dict(records[0])
    keys = list(dict.fromkeys(k for r in records for k in r))
    out: dict[str, Any] = {}
    for key in keys:
        values = [(r.get(key), i) for i, r in enumerate(records) if key in r]
        numeric = [(v, i) for v, i in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numeric) != len(values):
            out[key] = values[0][0]
            continue
        if key in SUM_KEYS or key.startswith(SUM_PREFIXES) or key.endswith("/episodes") or "/episodes/" in key:
            out[key] = sum(v for v, _ in numeric)
        elif all(v == numeric[0][0] for v, _ in numeric):
            out[key] = numeric[0][0]  # the same on every rank (iteration, lr, parameter counts)
        elif key.startswith(MAX_PREFIXES):
            out[key] = max(v for v, _ in numeric)
        else:
            if "/success/" in key:
                prefix, task_type = key.split("/success/", 1)
                weights = [records[i].get(f"{prefix}/episodes/{task_type}", 0.0) for _, i in numeric]
            elif key.endswith("/invalid_action_rate"):
                weights = [turns[i] for _, i in numeric]
            elif key.startswith(("rollout/", "eval/")) and key != "rollout/logprob_gap":
                weights = [episodes[i] for _, i in numeric]
            else:
                weights = [turns[i] for _, i in numeric]
            total = sum(weights)
            if total > 0:
                out[key] = sum(v * w for (v, _), w in zip(numeric, weights, strict=True)) / total
            else:
                out[key] = sum(v for v, _ in numeric) / len(numeric)
    return out


def global_record(record: dict[str, Any], episodes: int, turns: int) -> dict[str, Any]:
    """:func:`merge_records` over all ranks; every rank gets the same record."""
    if not is_distributed():
        return record
    gathered = gather_objects((record, float(episodes), float(turns)))
    return merge_records([g[0] for g in gathered], [g[1] for g in gathered], [g[2] for g in gathered])
