"""The report's content, built once from the runs and rendered twice (HTML and Markdown).

Keeping the content in one neutral model (sections of paragraphs, notes, tables, images) is
what makes the Markdown file a true twin of the HTML page: both renderers walk the same blocks,
so a number cannot appear in one and differ in the other. Every number comes from the runs'
files; where a metric is absent the section says so in a :class:`Note` instead of drawing an
empty chart.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.reporting import figures, starting_model
from agentrl.reporting.aggregate import (
    OTHER_PHASE,
    PHASES,
    MeanStd,
    PhaseCost,
    eval_at,
    evals_by_iteration,
    final_eval_value,
    last_value,
    over_seeds,
    own_peak_rss,
    phase_cost,
    run_max,
    run_mean,
    run_median,
)
from agentrl.reporting.data import comparability, data_rows, data_warnings
from agentrl.reporting.paired import BOOTSTRAP_SAMPLES, paired_differences
from agentrl.reporting.runs import Run, RunGroup, group_runs, settings_table
from agentrl.rundir.layout import METRICS_FILE
from agentrl.rundir.machine import describe_machine, machine_line

#: Section ids, in page order; every report has all of them (tests and readers rely on it).
SECTION_IDS = (
    "headline",
    "setup",
    "learning-curves",
    "final-eval",
    "paired",
    "task-types",
    "efficiency",
    "grpo-collapse",
    "explained-variance",
    "value-traces",
)
FIGURE_DIR = "figures"


@dataclass
class Paragraph:
    text: str  # plain text; `backticks` mark code


@dataclass
class Note:
    """A caveat or a missing metric: rendered so that a reader cannot miss it."""

    text: str


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    caption: str = ""
    long_columns: frozenset[int] = frozenset()  # shortened in Markdown, whole in HTML


@dataclass
class Image:
    path: Path  # the PNG on disk
    alt: str
    caption: str = ""

    @property
    def relative(self) -> str:
        return f"{FIGURE_DIR}/{self.path.name}"


@dataclass
class Code:
    text: str


@dataclass
class Subsection:
    title: str
    blocks: list[Any] = field(default_factory=list)
    collapsed: bool = False  # HTML: a <details> element


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Any] = field(default_factory=list)


@dataclass
class Document:
    title: str
    subtitle: str
    sections: list[Section]
    groups: list[str] = field(default_factory=list)  # group labels, in page order

    def images(self) -> list[Image]:
        found: list[Image] = []

        def walk(blocks: Sequence[Any]) -> None:
            for block in blocks:
                if isinstance(block, Image):
                    found.append(block)
                elif isinstance(block, Subsection):
                    walk(block.blocks)

        for section in self.sections:
            walk(section.blocks)
        return found


def fmt(
    value: MeanStd | None,
    scale: float = 1.0,
    digits: int = 3,
    unit: str = "",
    of: int | None = None,
    spread: str = "std",
) -> str:
    """A mean ± std cell (± standard error with ``spread="sem"``); ``(n=k)`` is added when only
    k of the group's ``of`` seeds have it."""
    if value is None:
        return "missing"
    text = value.format(scale, digits, unit, spread)
    return text + (f" (n={value.n})" if of is not None and value.n != of else "")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "group"


# --- building ------------------------------------------------------------------------------------


def build_document(
    runs: Sequence[Run],
    out_dir: Path,
    notes: Sequence[str] = (),
    traces_per_group: int = 2,
    title: str | None = None,
) -> Document:
    """Group the runs, draw the figures into ``out_dir/figures`` and assemble the sections."""
    groups = group_runs(runs)
    figure_dir = out_dir / FIGURE_DIR
    figure_dir.mkdir(parents=True, exist_ok=True)
    env_ids = sorted({str((r.config.get("env") or {}).get("id", "?")) for r in runs})
    models = sorted({str((r.config.get("model") or {}).get("name", "?")) for r in runs})
    title = title or f"{', '.join(g.label for g in groups)} on {', '.join(env_ids)}"
    subtitle = (
        f"model {', '.join(models)}; {len(runs)} runs; report built "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}"
    )
    sections = [
        _headline(groups, figure_dir),
        _setup(groups, notes),
        _learning_curves(groups, figure_dir),
        _final_eval(groups),
        _paired(groups),
        _task_types(groups, figure_dir),
        _efficiency(groups, figure_dir),
        _collapse(groups, figure_dir),
        _explained_variance(groups, figure_dir),
        _value_traces(groups, figure_dir, traces_per_group),
    ]
    return Document(title, subtitle, sections, [g.label for g in groups])


def _headline(groups: Sequence[RunGroup], figure_dir: Path) -> Section:
    """The table a comparison is read by: held-out success before, at the end and at its best,
    what it cost per iteration, and the budget it used; ± is the standard error over seeds."""
    section = Section("headline", "Headline: success, cost and budget (mean ± standard error)")

    def cell(group: RunGroup, per_run, scale: float = 1.0, digits: int = 3) -> str:
        return fmt(over_seeds(group, per_run), scale, digits, of=len(group.runs), spread="sem")

    def percent(group: RunGroup, per_run) -> str:
        return cell(group, per_run, 100.0, 1)

    cuda = any(r.has("memory/peak_cuda_gb") for g in groups for r in g.runs)
    rows = []
    for group in groups:
        n = len(group.runs)
        rows.append(
            [
                group.label,
                str(n),
                f"{sum(r.finished for r in group.runs)} / {n}",
                percent(group, lambda r: eval_at(r, "eval/success_rate", 0)),
                percent(group, lambda r: final_eval_value(r, "eval/success_rate")),
                percent(group, lambda r: run_max(r, "eval/success_rate")),
                cell(group, lambda r: run_median(r, "time/iteration"), digits=1),
                cell(group, own_peak_rss, digits=2),
                *(
                    [cell(group, lambda r: run_max(r, "memory/peak_cuda_gb"), digits=2)]
                    if cuda
                    else []
                ),
                _budget(group, "iteration"),
                _budget(group, "trajectories"),
                cell(group, lambda r: last_value(r, "env_steps"), digits=0),
            ]
        )
    section.blocks.append(
        Table(
            [
                "group",
                "seeds (n)",
                "finished",
                "success at start (%)",
                "final success (%)",
                "best success (%)",
                "time / iteration (s)",
                "peak RSS (GiB)",
                *(["peak CUDA (GiB)"] if cuda else []),
                "iterations",
                "trajectories",
                "env steps",
            ],
            rows,
            "Held-out evaluation success: at start is the evaluation before the first update "
            "(iteration 0, train.eval_at_start), final is each seed's last evaluation (its "
            "latest so far while a run is unfinished: see the finished column), best is "
            "each seed's highest evaluation (an optimistic number: the best of several noisy "
            "evaluations on the same episodes). Then the mean over seeds ± its standard error "
            "(sample std / sqrt n). Time per iteration is each seed's median over its "
            "iterations; peak RSS each seed's highest. Iterations and trajectories are per "
            "seed (one value when every seed used the same); env steps per seed, mean ± "
            "standard error.",
        )
    )

    inherited = _inherited_memory_note(groups)
    if inherited is not None:
        section.blocks.append(inherited)

    types = _eval_task_types(groups)
    if types:
        type_rows = []
        for task_type in types:
            row = [task_type.replace("_", " ")]
            key = f"eval/success/{task_type}"
            for group in groups:
                row.append(percent(group, lambda r, k=key: final_eval_value(r, k)))
            type_rows.append(row)
        section.blocks.append(
            Table(
                ["task type", *[f"{g.label} final success (%)" for g in groups]],
                type_rows,
                "Each seed's last evaluation per task type, mean over seeds ± standard error.",
            )
        )
    multi_eval = any(len(evals_by_iteration(run)) > 1 for g in groups for run in g.runs)
    path = figures.held_out_success(groups, figure_dir / "held_out_success.png") if multi_eval else None
    if path is not None:
        section.blocks.append(
            Image(
                path,
                "held-out success by training iteration",
                "Held-out success at each evaluation (the same episodes every time): each seed "
                "as a thin line, the mean over seeds with ± standard-error bars at the "
                "iterations every seed of the group reached.",
            )
        )
    return section


def _budget(group: RunGroup, key: str) -> str:
    """A per-seed count (iterations, trajectories) at the run's end: one value when all agree."""
    counts = sorted({f"{v:g}" for v in (last_value(r, key) for r in group.runs) if v is not None})
    return ", ".join(counts) if counts else "missing"


def _eval_task_types(groups: Sequence[RunGroup]) -> list[str]:
    return sorted(
        {
            key.split("/", 2)[2]
            for g in groups
            for r in g.runs
            for key in (r.last_eval() or {})
            if key.startswith("eval/success/")
        }
    )


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


def _learning_curves(groups: Sequence[RunGroup], figure_dir: Path) -> Section:
    section = Section("learning-curves", "Success and score vs env steps and wall-clock")
    path = figures.learning_curves(groups, figure_dir / "learning_curves.png", "rollout")
    if path is None:
        section.blocks.append(
            Note("missing: no run recorded rollout/success_rate or rollout/score.")
        )
    else:
        section.blocks.append(
            Image(
                path,
                "training success and score vs env steps and wall-clock",
                "Training rollouts (sampled actions, the iteration's tasks): mean "
                "line, ± std band over seeds. Seeds are interpolated onto a common "
                "x grid within the range every seed reached.",
            )
        )
    multi_eval = any(len(run.values("eval/success_rate")) > 1 for g in groups for run in g.runs)
    if multi_eval:
        path = figures.learning_curves(groups, figure_dir / "eval_curves.png", "eval")
        if path is not None:
            section.blocks.append(
                Image(
                    path,
                    "eval success and score vs env steps and wall-clock",
                    "Evaluation episodes (fixed eval tasks, greedy unless "
                    "train.eval_greedy is false) at each eval iteration.",
                )
            )
    else:
        section.blocks.append(
            Paragraph(
                "Evaluation ran at most once per run, so there is no eval curve; see the final "
                "evaluation table. Set `train.eval_every` for eval curves."
            )
        )
    return section


EVAL_COLUMNS = (
    ("eval/success_rate", "success (%)", 100.0, 1),
    ("eval/score", "score", 1.0, 3),
    ("eval/return", "return", 1.0, 3),
    ("eval/episode_length", "episode length", 1.0, 2),
    ("eval/invalid_action_rate", "invalid actions (%)", 100.0, 1),
)


def _final_eval(groups: Sequence[RunGroup]) -> Section:
    section = Section("final-eval", "Final evaluation")
    rows = []
    missing = []
    for group in groups:
        evaluated = [r for r in group.runs if r.last_eval() is not None]
        if not evaluated:
            missing.append(group.label)
            rows.append([group.label, "0", *["missing"] * len(EVAL_COLUMNS), "-", "-"])
            continue
        cells = [
            fmt(
                over_seeds(group, lambda r, k=key: final_eval_value(r, k)),
                scale,
                digits,
                of=len(evaluated),
            )
            for key, _, scale, digits in EVAL_COLUMNS
        ]
        episodes = sorted({f"{r.last_eval().get('eval/episodes', 0):g}" for r in evaluated})
        iterations = sorted({str(r.last_eval()["iteration"]) for r in evaluated}, key=int)
        rows.append(
            [group.label, str(len(evaluated)), *cells, ", ".join(episodes), ", ".join(iterations)]
        )
    section.blocks.append(
        Table(
            [
                "group",
                "seeds (n)",
                *[name for _, name, _, _ in EVAL_COLUMNS],
                "episodes per seed",
                "at iteration",
            ],
            rows,
            "Each seed's latest evaluation (the final one for a finished run); "
            "mean ± std over seeds.",
        )
    )
    if missing:
        section.blocks.append(
            Note(
                f"missing: {', '.join(missing)} recorded no evaluation (train.eval_episodes was 0)."
            )
        )
    for note in comparability([r for g in groups for r in g.runs]):
        section.blocks.append(Note(f"Data: {note}."))
    return section


def _paired(groups: Sequence[RunGroup]) -> Section:
    section = Section("paired", "Paired differences on the same held-out games")
    if len(groups) < 2:
        section.blocks.append(Paragraph("One group only: nothing to compare it with."))
        return section
    pairs = paired_differences(groups)
    if not pairs:
        section.blocks.append(
            Note(
                "missing: no held-out game was played by every evaluated run (no eval/ "
                "episodes, or evaluations on different games), so no paired difference."
            )
        )
        return section
    rows = []
    for pair in pairs:
        tie = pair.games - pair.better - pair.worse
        rows.append(
            [
                f"{pair.first} - {pair.second}",
                f"{pair.seeds[0]}, {pair.seeds[1]}",
                str(pair.games),
                f"{100 * pair.difference:+.1f}",
                f"[{100 * pair.low:+.1f}, {100 * pair.high:+.1f}]",
                f"{pair.better} / {pair.worse} / {tie}",
                f"{', '.join(map(str, sorted(set(pair.iterations[0]))))}; "
                f"{', '.join(map(str, sorted(set(pair.iterations[1]))))}",
            ]
        )
    section.blocks.append(
        Table(
            [
                "pair",
                "seeds (n)",
                "games",
                "difference in success (points)",
                "95% bootstrap interval",
                "games better / worse / same",
                "evaluated at iteration",
            ],
            rows,
            "Each seed's latest evaluation. Per game, each group's win rate over its seeds; "
            "the difference is the mean over the games every run played. The interval "
            f"resamples each group's seeds and the games (the same games for both), "
            f"{BOOTSTRAP_SAMPLES} draws: an interval that contains 0 does not show a "
            "difference. With one seed in a group it shows only the games' share of the "
            "uncertainty, not the seeds'.",
        )
    )
    paired = {label for pair in pairs for label in (pair.first, pair.second)}
    unplayed = [g.label for g in groups if g.label not in paired]
    if unplayed:
        section.blocks.append(
            Note(f"missing: {', '.join(unplayed)} has no eval/ episodes to pair.")
        )
    return section


def _task_types(groups: Sequence[RunGroup], figure_dir: Path) -> Section:
    section = Section("task-types", "Success per task type")
    types = _eval_task_types(groups)
    if not types:
        section.blocks.append(
            Paragraph(
                "The env reports no task types for these runs (no `eval/success/<type>` numbers), "
                "so there is no per-type breakdown. ALFWorld reports its six types here."
            )
        )
        return section
    values: dict[tuple[int, str], MeanStd | None] = {}
    rows = []
    for task_type in types:
        row = [task_type.replace("_", " ")]
        for g, group in enumerate(groups):
            value = over_seeds(
                group, lambda r, k=f"eval/success/{task_type}": final_eval_value(r, k)
            )
            values[(g, task_type)] = value
            episodes = {
                f"{final_eval_value(r, f'eval/episodes/{task_type}') or 0:g}"
                for r in group.runs
                if r.last_eval() is not None
            }
            cell = fmt(value, 100.0, 1)
            if value is not None:
                word = "episode" if episodes == {"1"} else "episodes"
                cell += f" (n={value.n}, {'/'.join(sorted(episodes))} {word})"
            row.append(cell)
        rows.append(row)
    section.blocks.append(
        Table(
            ["task type", *[f"{g.label} success (%)" for g in groups]],
            rows,
            "Final evaluation; n seeds, eval episodes of that type per seed.",
        )
    )
    path = figures.task_type_bars(groups, types, values, figure_dir / "task_types.png")
    if path is not None:
        section.blocks.append(Image(path, "success per task type", "Error bars: std over seeds."))
    return section


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
        inherited = _inherited_memory_note(groups)
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


def _inherited_memory_note(groups: Sequence[RunGroup]) -> Note | None:
    """Which runs' peak RSS is left out of the memory numbers, and why."""
    names = [_run_name(r) for g in groups for r in g.runs if r.memory_inherited]
    if not names:
        return None
    return Note(
        f"Peak RSS left out for {', '.join(names)}: each ran (at least in part) in a bench "
        "process after another run, before agentrl gave each run a process of its own, so its "
        "peak may include the earlier run's memory (n counts the seeds left)."
    )


def _collapse(groups: Sequence[RunGroup], figure_dir: Path) -> Section:
    section = Section("grpo-collapse", "GRPO advantage collapse")
    section.blocks.append(
        Paragraph(
            "The share of GRPO's task groups whose k rollouts all earned the same return: their "
            "advantages are all 0, so those tasks give no policy gradient. SAPO and PPO have one "
            "rollout per task and a value baseline, so the notion does not apply to them."
        )
    )
    grpo = [g for g in groups if any(r.has("grpo/collapse_share") for r in g.runs)]
    if not grpo:
        section.blocks.append(
            Note("No GRPO run among these runs (no grpo/collapse_share recorded).")
        )
        return section
    rows = []
    for group in grpo:
        over_training = over_seeds(group, lambda r: run_mean(r, "grpo/collapse_share"))
        last = over_seeds(group, lambda r: _last_of(r, "grpo/collapse_share"))
        rows.append(
            [
                group.label,
                str(len(group.with_key("grpo/collapse_share"))),
                fmt(over_training, 100.0, 1, of=len(group.runs)),
                fmt(last, 100.0, 1, of=len(group.runs)),
            ]
        )
    section.blocks.append(
        Table(["group", "seeds (n)", "mean over training (%)", "last iteration (%)"], rows)
    )
    path = figures.iteration_curves(
        grpo,
        [("grpo/collapse_share", "", "-")],
        figure_dir / "grpo_collapse.png",
        "collapsed share of groups",
        "GRPO advantage collapse (mean ± std over seeds)",
        (-0.05, 1.05),
    )
    if path is not None:
        section.blocks.append(Image(path, "GRPO collapse share over training"))
    return section


def _last_of(run: Run, key: str) -> float | None:
    """``key`` in the run's last record only (None there means missing, not an older value)."""
    value = run.records[-1].get(key) if run.records else None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _explained_variance(groups: Sequence[RunGroup], figure_dir: Path) -> Section:
    section = Section("explained-variance", "Explained variance of V and Q")
    section.blocks.append(
        Paragraph(
            "1 - Var(target - prediction) / Var(target) over each iteration's turns, before the "
            "update: V against its lambda-return target (SAPO's value tokens, PPO's critic), Q "
            "against its SARSA target (SAPO only). 1 is a perfect fit; 0 is no better than the "
            "mean; below 0 is worse. It is undefined (recorded as null, left out here) in an "
            "iteration whose targets do not vary, e.g. when every episode earned the same return; "
            "(n=k) then says how many seeds a number has."
        )
    )
    keys = (("value/explained_variance_v", "V"), ("value/explained_variance_q", "Q"))
    rows = []
    for group in groups:
        cells = [
            fmt(over_seeds(group, lambda r, k=key: _last_of(r, k)), of=len(group.runs))
            for key, _ in keys
        ]
        if all(c == "missing" for c in cells):
            continue
        rows.append([group.label, *cells])
    without = [g.label for g in groups if not any(r.has(k) for r in g.runs for k, _ in keys)]
    if not rows:
        section.blocks.append(
            Note(
                "missing: no run recorded value/explained_variance_v or _q "
                "(only SAPO and PPO learn values)."
            )
        )
        return section
    section.blocks.append(
        Table(
            ["group", "V at last iteration", "Q at last iteration"],
            rows,
            "Mean ± std over seeds; 'missing' where the algorithm has no such value.",
        )
    )
    if without:
        section.blocks.append(
            Paragraph(f"No value function, nothing to show: {', '.join(without)}.")
        )
    path = figures.iteration_curves(
        [g for g in groups if g.label not in without],
        [("value/explained_variance_v", " V", "-"), ("value/explained_variance_q", " Q", "--")],
        figure_dir / "explained_variance.png",
        "explained variance",
        "explained variance over training (solid V, dashed Q)",
    )
    if path is not None:
        section.blocks.append(Image(path, "explained variance of V and Q over training"))
    return section


def _pick_episodes(episodes: Sequence[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """A won and a lost episode first when both exist (the contrast shows credit assignment)."""
    chosen: list[dict[str, Any]] = []
    for want in (True, False):
        for episode in episodes:
            if bool(episode.get("won")) == want and episode.get("turns"):
                chosen.append(episode)
                break
    for episode in episodes:
        if episode not in chosen and episode.get("turns"):
            chosen.append(episode)
    return chosen[:count]


def _number(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def _value_traces(groups: Sequence[RunGroup], figure_dir: Path, per_group: int) -> Section:
    section = Section("value-traces", "Value traces of evaluation episodes")
    section.blocks.append(
        Paragraph(
            "Each turn of an evaluation episode: what the agent saw, what it did, the reward, and "
            "the values the trained model read at that moment: V(s_t) before acting and, for SAPO, "
            "Q(s_t, a_t) after writing the action (both in reward units). A useful value rises "
            "as the agent nears success and stays low on a failing path; credit assignment is the "
            "gap between them."
        )
    )
    traced = False
    no_values = []
    for group in groups:
        source = next((r for r in group.runs if r.eval_files()), None)
        if source is None:
            section.blocks.append(
                Note(f"missing: {group.label} has no eval/ episodes (train.eval_episodes was 0).")
            )
            continue
        iteration, episodes = source.eval_episodes()  # type: ignore[misc]
        if not any("V" in t for e in episodes for t in e.get("turns", [])):
            no_values.append(group.label)
            continue
        for n, episode in enumerate(_pick_episodes(episodes, per_group)):
            outcome = "won" if episode.get("won") else "lost"
            title = (
                f"{group.label}, seed {source.seed}, eval at iteration {iteration}, task seed "
                f"{episode.get('task_seed')}: {outcome}, return {_number(episode.get('return'), 2)}"
            )
            path = figures.value_trace(
                episode, title, figure_dir / f"trace_{slug(group.label)}_{n + 1}.png"
            )
            has_q = any("Q" in t for t in episode["turns"])
            header = ["turn", "observation", "action", "reward", "V"] + (["Q"] if has_q else [])
            rows = []
            for t, turn in enumerate(episode["turns"], 1):
                action = str(turn.get("action", ""))
                if turn.get("valid") is False:
                    action += " (invalid)"
                row = [
                    str(t),
                    str(turn.get("observation", "")),
                    action,
                    _number(turn.get("reward")),
                    _number(turn.get("V")),
                ]
                if has_q:
                    row.append(_number(turn.get("Q")))
                rows.append(row)
            blocks: list[Any] = [Paragraph(f"Task: {episode.get('task', '')}")]
            if path is not None:
                blocks.append(Image(path, f"value trace: {title}"))
            blocks.append(Table(header, rows, long_columns=frozenset({1})))
            section.blocks.append(Subsection(title, blocks))
            traced = True
    if no_values:
        section.blocks.append(
            Paragraph(f"No value function, nothing to trace: {', '.join(no_values)}.")
        )
    if not traced and not no_values:
        section.blocks.append(Note("missing: no run has evaluation episodes with values."))
    return section
