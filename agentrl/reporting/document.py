"""The report assembled: the runs grouped and every section built in page order (the content
model is :mod:`agentrl.reporting.blocks`; each section lives in :mod:`.results`, :mod:`.setup`,
:mod:`.costs` or :mod:`.values`), rendered twice by :mod:`.html` and :mod:`.markdown`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from agentrl.reporting.blocks import (
    FIGURE_DIR,
    Document,
)
from agentrl.reporting.costs import _efficiency
from agentrl.reporting.results import _final_eval, _headline, _learning_curves, _paired, _task_types
from agentrl.reporting.runs import Run, group_runs
from agentrl.reporting.setup import _setup
from agentrl.reporting.values import _collapse, _explained_variance, _value_traces

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
