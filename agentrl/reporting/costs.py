"""The report's efficiency section: time per phase, memory, tokens, against PPO where present."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentrl.reporting import figures
from agentrl.reporting.aggregate import (
    OTHER_PHASE,
    PHASES,
    MeanStd,
    PhaseCost,
    over_seeds,
    own_peak_rss,
    phase_cost,
    run_max,
)
from agentrl.reporting.blocks import (
    Image,
    Note,
    Paragraph,
    Section,
    Table,
    fmt,
)
from agentrl.reporting.runs import RunGroup
from agentrl.reporting.setup import _run_name


def _ppo_index(groups: Sequence[RunGroup]) -> int | None:
    for i, group in enumerate(groups):
        if group.algo == "ppo":
            return i
    return None


def _ratio(value: MeanStd | None, base: MeanStd | None) -> str:
    if value is None or base is None or not base.mean:
        return "-"
    return f"{value.mean / base.mean:.2f}x"


def _efficiency(groups: Sequence[RunGroup], figure_dir: Path) -> Section:
    section = Section("efficiency", "Cost per iteration: time by phase and peak memory")
    ppo = _ppo_index(groups)
    costs: list[PhaseCost] = [phase_cost(g) for g in groups]
    names = [name for _, name in PHASES] + [OTHER_PHASE]
    rows = []
    for group, cost in zip(groups, costs, strict=True):
        cells = [
            fmt(
                cost.phases.get(n) if n != OTHER_PHASE else cost.other, digits=2, of=len(group.runs)
            )
            for n in names
        ]
        ratio = _ratio(cost.total, costs[ppo].total) if ppo is not None else "-"
        rows.append([group.label, *cells, fmt(cost.total, digits=2, of=len(group.runs)), ratio])
    section.blocks.append(
        Table(
            ["group", *[f"{n} (s)" for n in names], "total (s)", "total / PPO"],
            rows,
            "Seconds per training iteration: each seed's median over its iterations "
            "(robust to iterations slowed by other work on the machine), then mean ± std over "
            "seeds. 'other' is time/iteration minus the timed phases (weight sync, "
            "advantages, bookkeeping), per iteration, then its median; the medians of the "
            "parts need not add up to the median total exactly.",
        )
    )
    if ppo is None:
        section.blocks.append(Note("No PPO run among these runs, so no ratio to PPO is shown."))
    else:
        ratio_rows = []
        for group, cost in zip(groups, costs, strict=True):
            base = costs[ppo]
            ratio_rows.append(
                [
                    group.label,
                    *[
                        _ratio(
                            cost.phases.get(n) if n != OTHER_PHASE else cost.other,
                            base.phases.get(n) if n != OTHER_PHASE else base.other,
                        )
                        for n in names
                    ],
                    _ratio(cost.total, base.total),
                ]
            )
        section.blocks.append(
            Table(
                ["group", *names, "total"],
                ratio_rows,
                f"Each phase as a ratio to {groups[ppo].label}'s ('-' where PPO spends "
                "no time in it).",
            )
        )
    path = figures.phase_bars(groups, costs, ppo, figure_dir / "time_per_iteration.png")
    if path is None:
        section.blocks.append(Note("missing: no run recorded time/iteration."))
    else:
        section.blocks.append(
            Image(path, "time per iteration by phase", "Error bar: std over seeds of the total.")
        )

    memory: dict[str, list[MeanStd | None]] = {}
    for name, per_run in (
        ("peak RSS", own_peak_rss),
        ("peak CUDA memory", lambda r: run_max(r, "memory/peak_cuda_gb")),
    ):
        values = [over_seeds(g, per_run) for g in groups]
        if any(values):
            memory[name] = values
    if memory:
        header = ["group"]
        for name in memory:
            header += [f"{name} (GiB)"] + ([f"{name} / PPO"] if ppo is not None else [])
        mem_rows = []
        for g, group in enumerate(groups):
            row = [group.label]
            for values in memory.values():
                row.append(fmt(values[g], digits=2, of=len(group.runs)))
                if ppo is not None:
                    row.append(_ratio(values[g], values[ppo]))
            mem_rows.append(row)
        section.blocks.append(
            Table(
                header,
                mem_rows,
                "Each seed's highest per-iteration peak, mean ± std over seeds. Peak RSS "
                "is the process's resident-set high-water mark, reset every iteration: "
                "it includes whatever the process already held.",
            )
        )
        inherited = inherited_memory_note(groups)
        if inherited is not None:
            section.blocks.append(inherited)
        path = figures.memory_bars(groups, memory, ppo, figure_dir / "peak_memory.png")
        if path is not None:
            section.blocks.append(Image(path, "peak memory", "Error bars: std over seeds."))
        if "peak CUDA memory" not in memory:
            section.blocks.append(Paragraph("No CUDA memory was recorded: these runs ran on CPU."))
    else:
        section.blocks.append(
            Note("missing: no run recorded memory/peak_rss_gb or memory/peak_cuda_gb.")
        )
    return section


def inherited_memory_note(groups: Sequence[RunGroup]) -> Note | None:
    """Which runs' peak RSS is left out of the memory numbers, and why: placed under every table
    that shows peak RSS (the headline and the memory table), so each can be read alone."""
    names = [_run_name(r) for g in groups for r in g.runs if r.memory_inherited]
    if not names:
        return None
    return Note(
        f"Peak RSS left out for {', '.join(names)}: each ran (at least in part) in a bench "
        "process after another run, before agentrl gave each run a process of its own, so its "
        "peak may include the earlier run's memory (n counts the seeds left)."
    )
