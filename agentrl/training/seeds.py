"""The run's random streams: every seed an iteration draws from is a pure function of (run seed,
iteration, stream), so a resumed process draws what an uninterrupted one would
(docs/architecture.md, "Resume is exact")."""

from __future__ import annotations

import hashlib
import random
from typing import Any

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def stream_seed(run_seed: int, iteration: int, stream: str, rank_: int = 0) -> int:
    """A 63-bit seed for one random stream of one iteration: a pure function of its arguments,
    so an iteration draws the same numbers in a resumed process as in an uninterrupted one."""
    key = f"agentrl-{stream}-{run_seed}-{iteration}-{rank_}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


def task_seeds(run_seed: int, iteration: int, count: int) -> list[int]:
    rng = random.Random(f"agentrl-tasks-{run_seed}-{iteration}")
    return [rng.randrange(2**31) for _ in range(count)]


def _python_rng_state(saved: Any) -> tuple:
    """``random.setstate``'s tuple from what a checkpoint holds (a list, since it went through a
    weights-only load; older checkpoints hold the tuple itself)."""
    version, internal, gauss = saved
    return (int(version), tuple(int(x) for x in internal), gauss)
