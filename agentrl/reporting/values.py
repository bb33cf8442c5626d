"""The report's value sections: GRPO's group collapse, explained variance and value traces."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl.reporting import figures
from agentrl.reporting.aggregate import (
    over_seeds,
    run_mean,
)
from agentrl.reporting.blocks import (
    Image,
    Note,
    Paragraph,
    Section,
    Subsection,
    Table,
    fmt,
    slug,
)
from agentrl.reporting.runs import Run, RunGroup


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
