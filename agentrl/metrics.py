"""Per-phase timers, peak memory, and the JSONL metrics log.

Every algorithm reports the same phase keys so comparisons line up: ``time/rollout``,
``time/old_logprob``, ``time/value_inference`` (PPO's critic pass; 0 for SAPO and GRPO),
``time/ref_logprob``, ``time/actor_update``, ``time/critic_update`` and ``time/iteration``.

Peak memory: on Linux the resident-set high-water mark (VmHWM) can be reset by writing 5 to
``/proc/self/clear_refs``, so each iteration's peak is its own, not the process's lifetime peak.
On GPUs, ``torch.cuda.max_memory_allocated`` is reset the same way.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

PHASES = ("rollout", "old_logprob", "value_inference", "ref_logprob", "actor_update", "critic_update")


def _read_hwm_kb() -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_memory() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def peak_memory() -> dict[str, float]:
    out: dict[str, float] = {}
    kb = _read_hwm_kb()
    if kb is not None:
        out["memory/peak_rss_gb"] = kb / 2**20
    if torch.cuda.is_available():
        out["memory/peak_cuda_gb"] = torch.cuda.max_memory_allocated() / 2**30
    return out


class PhaseTimer:
    """Accumulates wall-clock seconds and peak memory per phase within one iteration."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.peaks: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        try:
            yield
        finally:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            self.seconds[name] += time.perf_counter() - start
            for key, value in peak_memory().items():
                self.peaks[f"{key}/{name}"] = max(self.peaks.get(f"{key}/{name}", 0.0), value)

    def metrics(self) -> dict[str, float]:
        out = {f"time/{p}": self.seconds.get(p, 0.0) for p in PHASES}
        out.update({f"time/{p}": s for p, s in self.seconds.items() if p not in PHASES})
        return out


def count_parameters(*modules: torch.nn.Module) -> dict[str, float]:
    seen: set[int] = set()
    total = trainable = 0
    for module in modules:
        for p in module.parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            total += p.numel()
            if p.requires_grad:
                trainable += p.numel()
    return {"params/total": float(total), "params/trainable": float(trainable)}


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, torch.Tensor):
        return _clean(value.item())
    return value


class MetricsLog:
    """One JSON object per line: ``{"iteration": i, "env_steps": n, "wall_time": s, ...}``."""

    def __init__(self, path: Path):
        self.path = path
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as fh:
            fh.write(json.dumps({k: _clean(v) for k, v in record.items()}) + "\n")

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def truncate_after(self, iteration: int) -> None:
        """Drop records past ``iteration`` (a resumed run redoes them)."""
        kept = [r for r in self.read() if r.get("iteration", 0) <= iteration]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
