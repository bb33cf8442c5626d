"""What machine a benchmark ran on, in words a reader can check.

A timing or memory number means nothing without the machine, so ``bench`` records this next to
its runs (``OUT/bench.json``) and ``report`` prints it. Only facts read from the system are
recorded; anything that cannot be read is left out rather than guessed.
"""

from __future__ import annotations

import os
import platform


def _cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    try:
        with open(cpuinfo) as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


#: the instruction-set features that choose a CPU's numeric path: bf16 native or emulated, and
#: which kernels vLLM's CPU build packs weights for (oneDNN on AVX-512, AMX tiles where present).
#: Two machines with one model name can differ here (an Intel Xeon with and without AMX), and a
#: greedy evaluation can then break a near-tie differently on the same weights.
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def cpu_isa(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The :data:`ISA_FLAGS` this CPU has, space-separated (``none of them`` if it has none;
    None where ``cpuinfo`` cannot be read)."""
    try:
        with open(cpuinfo) as fh:
            flags = next(line for line in fh if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return None
    return " ".join(f for f in ISA_FLAGS if f in flags) or "none of them"


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        return None
    return None


def describe_machine(include_accelerators: bool = True) -> dict[str, str]:
    """A flat ``{field: text}`` description of this machine.

    ``include_accelerators`` imports torch to name the GPUs; ``report`` passes False because it
    describes the machine that built the report, not the one that ran the runs.
    """
    out: dict[str, str] = {"os": platform.platform(), "python": platform.python_version(), **_cpu_fields()}
    memory = _memory_gib()
    if memory is not None:
        out["memory_gib"] = f"{memory:.1f}"
    try:
        from agentrl import __version__

        out["agentrl"] = __version__
    except ImportError:  # pragma: no cover - the package is always importable here
        pass
    if include_accelerators:
        try:
            import torch

            out["torch"] = torch.__version__
            if torch.cuda.is_available():
                names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
                out["gpus"] = ", ".join(names)
            else:
                out["gpus"] = "none"
        except ImportError:
            pass
    return out


def machine_line(machine: dict[str, str]) -> str:
    """One readable line, e.g. ``Intel Xeon ..., 2 logical cores, 23.4 GiB RAM, GPUs: none``."""
    parts = []
    if "cpu" in machine:
        parts.append(machine["cpu"])
    if "cpu_isa" in machine:
        parts.append(f"CPU features: {machine['cpu_isa']}")
    if "logical_cores" in machine:
        parts.append(f"{machine['logical_cores']} logical cores")
    if "memory_gib" in machine:
        parts.append(f"{machine['memory_gib']} GiB RAM")
    if "gpus" in machine:
        parts.append(f"GPUs: {machine['gpus']}")
    if "os" in machine:
        parts.append(machine["os"])
    extras = [f"{k} {machine[k]}" for k in ("python", "torch", "agentrl") if k in machine]
    if extras:
        parts.append(", ".join(extras))
    return "; ".join(parts) if parts else "not recorded"


def _cpu_fields(cpuinfo: str = "/proc/cpuinfo") -> dict[str, str]:
    """``cpu``, ``cpu_isa`` and ``logical_cores``, each where it can be read."""
    out: dict[str, str] = {}
    cpu = _cpu_model(cpuinfo)
    if cpu:
        out["cpu"] = cpu
    isa = cpu_isa(cpuinfo)
    if isa:
        out["cpu_isa"] = isa
    if os.cpu_count():
        out["logical_cores"] = str(os.cpu_count())
    return out


def suite_machine(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU a suite session ran on, in one short line: its model, the :data:`ISA_FLAGS` it has
    and its cores (``platform.machine()`` where none can be read). The embedded suite's policies
    part ways between CPU kinds on one seed (bf16 native or emulated), so each session says which
    kind trained its runs."""
    fields = _cpu_fields(cpuinfo)
    return machine_line(fields) if fields else platform.machine()
