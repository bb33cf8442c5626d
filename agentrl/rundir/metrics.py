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

from agentrl.errors import UserError
from agentrl.rundir.durable import append_line, atomic_write_text
from agentrl.rundir.layout import PHASES


def _status_kb(field: str) -> int | None:
    """A kB field of ``/proc/self/status`` (``VmHWM``: the RSS high-water mark, ``VmRSS``: the
    resident set now); None off Linux."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def resident_gb() -> float | None:
    """This process's resident set now, in GiB (3 decimals); None off Linux."""
    kb = _status_kb("VmRSS")
    return None if kb is None else round(kb / 2**20, 3)


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
    kb = _status_kb("VmHWM")
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
    """One JSON object per line: ``{"iteration": i, "env_steps": n, "wall_time": s, ...}``.

    Written so that a kill at any moment loses at most the record being written: each record is
    appended whole and fsynced (:func:`agentrl.rundir.durable.append_line`), a cut-off last line is
    skipped when reading, and :meth:`truncate_after` replaces the file atomically.
    """

    def __init__(self, path: Path):
        self.path = path
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any]) -> None:
        append_line(self.path, json.dumps({k: _clean(v) for k, v in record.items()}))

    def read(self) -> list[dict[str, Any]]:
        return read_records(self.path)

    def truncate_after(self, iteration: int) -> None:
        """Drop records past ``iteration`` (a resumed run redoes them) and a cut-off last line.

        The kept records go to a temporary file that replaces the log in one rename: a kill
        during the rewrite leaves the old log, never a shortened one.
        """
        kept = [r for r in self.read() if r.get("iteration", 0) <= iteration]
        if not kept and not self.path.exists():
            return
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept),
                          crash_name="truncate", iteration=iteration)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The JSON records of a JSONL file; a cut-off last line (a process killed while appending
    it) is skipped. A bad line anywhere else is damage, not a kill: one sentence, no traceback."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records = []
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number == last:
                break
            raise UserError(f"'{path}' line {number + 1} is not JSON ({exc.msg}); "
                            "only a cut-off last line is expected after a kill.") from exc
    return records
