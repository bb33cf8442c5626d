"""The report's setup section: groups, seeds, settings, the machine and the data each run played."""

from __future__ import annotations

import time
from collections.abc import Sequence

from agentrl.reporting import starting_model
from agentrl.reporting.blocks import (
    Code,
    Note,
    Paragraph,
    Section,
    Subsection,
    Table,
)
from agentrl.reporting.data import data_rows, data_warnings
from agentrl.reporting.runs import Run, RunGroup, settings_table
from agentrl.rundir.layout import METRICS_FILE
from agentrl.rundir.machine import describe_machine, machine_line


def _seeds_text(group: RunGroup) -> str:
    seeds = ", ".join("?" if s is None else str(s) for s in group.seeds)
    return f"{len(group.runs)} (seed {seeds})"


def _run_dates(run: Run) -> str:
    """When a run trained: its first training session's start to the time it finished.

    A comparison is run in pieces and its sessions are stopped rather than finished, so a
    session's end is not the run's: the run's own times are used where bench recorded them,
    and a finished run whose end was not recorded says so instead of reading "unfinished"."""
    sessions = [s for s in run.sessions if s.started]
    if sessions:
        first, last = sessions[0], sessions[-1]
        start = first.run_started or first.started
        if last.run_finished and last.run_state == "done":
            end = last.run_finished
        elif run.finished:
            end = f"by {last.finished}" if last.finished else "finished, end time not recorded"
        else:
            end = "unfinished"
        pieces = f" (in {len(sessions)} bench sessions)" if len(sessions) > 1 else ""
        return f"{start} to {end}{pieces}"
    stamp = time.strftime(
        "%Y-%m-%d %H:%M", time.localtime((run.path / METRICS_FILE).stat().st_mtime)
    )
    return f"last record written {stamp}"


def _setup(groups: Sequence[RunGroup], notes: Sequence[str]) -> Section:
    section = Section("setup", "Setup: machine, dates, commands, seeds")
    runs = [run for group in groups for run in group.runs]
    section.blocks.append(
        Paragraph(
            "Runs: " + "; ".join(f"{g.label}: {_seeds_text(g)}" for g in groups) + ". "
            "Every ± from here on is the sample standard deviation over seeds (ddof=1; the headline "
            "table above gives the standard error of the mean instead); with one seed no spread "
            "is shown. n is the number of seeds a number is averaged over."
        )
    )

    machines: dict[str, list[str]] = {}
    unrecorded = []
    mixed = []
    for run in runs:
        lines = list(
            dict.fromkeys(machine_line(s.machine) for s in run.sessions if s.machine)
        )
        for line in lines:
            machines.setdefault(line, []).append(_run_name(run))
        if len(lines) > 1:
            mixed.append(_run_name(run))
        if not lines:
            unrecorded.append(_run_name(run))
    for line, names in machines.items():
        section.blocks.append(Paragraph(f"Machine ({', '.join(names)}): {line}."))
    if mixed:
        section.blocks.append(
            Note(
                f"{', '.join(mixed)} trained on more than one machine (resumed in another "
                "session): its time and memory mix those machines."
            )
        )
    if unrecorded:
        section.blocks.append(
            Note(
                f"The machine is not recorded for {', '.join(unrecorded)} (made outside "
                "`agentrl bench`). This report was built on: "
                f"{machine_line(describe_machine(include_accelerators=False))}."
            )
        )

    rows = []
    for group in groups:
        for run in group.runs:
            last = run.records[-1]
            planned = run.planned_iterations
            rows.append(
                [
                    group.label,
                    "?" if run.seed is None else str(run.seed),
                    f"{run.done_iterations} / {planned if planned is not None else '?'}",
                    "yes" if run.finished else "no",
                    str(last.get("env_steps", "missing")),
                    f"{float(last['wall_time']):.1f}"
                    if isinstance(last.get("wall_time"), (int, float))
                    else "missing",
                    _trajectories_per_iteration(run),
                    run.bench.action if run.bench is not None else "-",
                    _run_dates(run),
                    str(run.path),
                ]
            )
    section.blocks.append(
        Table(
            [
                "group",
                "seed",
                "iterations done / planned",
                "finished",
                "env steps",
                "training wall-clock (s)",
                "trajectories / iteration",
                "bench action",
                "dates",
                "run directory",
            ],
            rows,
            "Wall-clock counts training iterations only (evaluation time is excluded).",
        )
    )

    for model in sorted({str((r.config.get("model") or {}).get("name", "")) for r in runs}):
        described = starting_model.describe(model) if model else None
        if described is not None:
            text, found = described
            section.blocks.append(Paragraph(text) if found else Note(text))

    per_group = {g.label: {_trajectories_per_iteration(r) for r in g.runs} for g in groups}
    counts = set().union(*per_group.values())
    if len(counts) > 1:
        section.blocks.append(
            Note(
                "Not like-for-like: trajectories per iteration differ ("
                + "; ".join(f"{k}: {', '.join(sorted(v))}" for k, v in per_group.items())
                + ")."
            )
        )
    section.blocks.append(
        Table(["run", "training data", "evaluation data"], data_rows(runs, _run_label),
              "What each run played (fingerprint.json): source, split, size and a digest of "
              "the ordered task list and options.", frozenset({1, 2}))
    )
    for warning in data_warnings(runs, _run_label):
        section.blocks.append(Note(warning))
    for key, what in (("env", "envs"), ("model", "models")):
        values = {str(r.config.get(key)) for r in runs}
        if len(values) > 1:
            section.blocks.append(Note(f"Not like-for-like: the runs use different {what}."))

    shared, differing = settings_table(groups)
    if differing:
        section.blocks.append(
            Table(
                ["setting", *[g.label for g in groups]],
                [[k, *v] for k, v in differing.items()],
                "Settings that differ between groups (seeds and bookkeeping left out).",
            )
        )
    section.blocks.append(
        Subsection(
            "Settings shared by every group",
            [Table(["setting", "value"], [[k, v] for k, v in shared.items()])],
            collapsed=True,
        )
    )

    commands = sorted({r.bench.command for r in runs if r.bench is not None and r.bench.command})
    if commands:
        section.blocks.append(Paragraph("Made with:"))
        section.blocks.append(Code("\n".join(commands)))
    section.blocks.append(
        Subsection(
            "Each run's own command (from its config.yaml)",
            [Code("\n".join(run.command() for run in runs))],
            collapsed=True,
        )
    )
    for note in notes:
        section.blocks.append(Note(note))
    for group in groups:
        seeds = [r.seed for r in group.runs]
        repeated = sorted({s for s in seeds if seeds.count(s) > 1}, key=str)
        if repeated:
            section.blocks.append(
                Note(
                    f"{group.label} has several runs with seed {', '.join(map(str, repeated))}: "
                    "they are counted as separate samples, though they played the same tasks."
                )
            )
    for run in runs:
        if run.skipped_lines:
            section.blocks.append(
                Note(f"{run.path}: its last metrics line was cut short and is ignored.")
            )
        if not run.finished:
            section.blocks.append(
                Note(
                    f"{_run_name(run)} is unfinished ({run.done_iterations} of "
                    f"{run.planned_iterations} iterations); its numbers are those recorded so far."
                )
            )
    return section


def _run_name(run: Run) -> str:
    return f"{run.algo} seed {run.seed}"


def _run_label(run: Run) -> str:
    """The run's name with its folder, for lists where two runs may share algorithm and seed."""
    return f"{_run_name(run)} ({run.path.name})"


def _trajectories_per_iteration(run: Run) -> str:
    last = run.records[-1]
    trajectories, iteration = last.get("trajectories"), last.get("iteration")
    if isinstance(trajectories, (int, float)) and isinstance(iteration, int) and iteration > 0:
        value = trajectories / iteration
        return f"{value:g}"
    return "missing"
