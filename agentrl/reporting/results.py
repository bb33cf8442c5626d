"""The report's results sections: the headline table, learning curves, final evaluation, paired
differences and per-task-type success."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentrl.reporting import figures
from agentrl.reporting.aggregate import (
    MeanStd,
    eval_at,
    evals_by_iteration,
    final_eval_value,
    last_value,
    over_seeds,
    own_peak_rss,
    run_max,
    run_median,
)
from agentrl.reporting.blocks import (
    Image,
    Note,
    Paragraph,
    Section,
    Table,
    fmt,
)
from agentrl.reporting.costs import inherited_memory_note
from agentrl.reporting.data import comparability
from agentrl.reporting.paired import BOOTSTRAP_SAMPLES, paired_differences
from agentrl.reporting.runs import RunGroup


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

    inherited = inherited_memory_note(groups)
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
