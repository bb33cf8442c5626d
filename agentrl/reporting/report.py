"""``agentrl report``: run directories in, ``report.html`` + ``report.md`` + ``figures/`` out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentrl.reporting.document import build_document
from agentrl.reporting.html import render_html
from agentrl.reporting.markdown import render_markdown
from agentrl.reporting.runs import discover_runs


@dataclass
class ReportFiles:
    html: Path
    markdown: Path
    figures: list[Path]
    runs: int
    groups: list[str]


def build_report(
    paths: Sequence[Path], out_dir: Path, traces_per_group: int = 2, title: str | None = None
) -> ReportFiles:
    """Read every run under ``paths`` and write the report into ``out_dir``.

    Raises :class:`~agentrl.errors.UserError` when a path is missing or holds no run.
    """
    runs, notes = discover_runs(list(paths))
    out_dir.mkdir(parents=True, exist_ok=True)
    document = build_document(runs, out_dir, notes, traces_per_group, title)
    html_path = out_dir / "report.html"
    md_path = out_dir / "report.md"
    html_path.write_text(render_html(document), encoding="utf-8")
    md_path.write_text(render_markdown(document), encoding="utf-8")
    return ReportFiles(
        html_path, md_path, [image.path for image in document.images()], len(runs), document.groups
    )
