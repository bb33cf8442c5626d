"""Render a :class:`~agentrl.reporting.blocks.Document` as Markdown for READMEs and PRs.

The twin of :mod:`.html`: the same sections, tables and numbers, with figures referenced as
``figures/<name>.png`` next to the file instead of embedded. GitHub renders neither <details>
collapsing inside tables nor long cells well, so long text cells (observations) are shortened
to :data:`LONG_CELL` characters; the HTML page has them whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrl.reporting.blocks import (
    Code,
    Document,
    Image,
    Note,
    Paragraph,
    Subsection,
    Table,
)

LONG_CELL = 160


def _cell(text: str, long: bool) -> str:
    text = " ".join(text.split())
    if long and len(text) > LONG_CELL:
        text = text[: LONG_CELL - 1].rstrip() + "…"
    return text.replace("|", "\\|")


def _table(block: Table) -> str:
    lines = [
        "| " + " | ".join(_cell(h, False) for h in block.header) + " |",
        "|" + "|".join("---" for _ in block.header) + "|",
    ]
    for row in block.rows:
        lines.append(
            "| " + " | ".join(_cell(c, i in block.long_columns) for i, c in enumerate(row)) + " |"
        )
    if block.caption:
        lines.append("")
        lines.append(f"*{block.caption}*")
    return "\n".join(lines)


def _blocks(blocks: Sequence[Any], level: int) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Paragraph):
            out.append(block.text)
        elif isinstance(block, Note):
            out.append(f"> **Note:** {block.text}")
        elif isinstance(block, Table):
            out.append(_table(block))
        elif isinstance(block, Image):
            text = f"![{block.alt}]({block.relative})"
            if block.caption:
                text += f"\n\n*{block.caption}*"
            out.append(text)
        elif isinstance(block, Code):
            out.append(f"```\n{block.text}\n```")
        elif isinstance(block, Subsection):
            out.append(f"{'#' * level} {block.title}")
            out.extend(_blocks(block.blocks, level + 1))
        else:  # pragma: no cover - a new block type must be added here
            raise TypeError(f"cannot render {type(block).__name__}")
    return out


def render_markdown(document: Document) -> str:
    parts = [f"# {document.title}", f"*{document.subtitle}*", "## Contents"]
    parts.append(
        "\n".join(f"{i}. [{s.title}](#{s.id})" for i, s in enumerate(document.sections, 1))
    )
    for section in document.sections:
        parts.append(f'<a id="{section.id}"></a>\n\n## {section.title}')
        parts.extend(_blocks(section.blocks, 3))
    return "\n\n".join(parts) + "\n"
