"""Render a :class:`~agentrl.reporting.blocks.Document` as one self-contained HTML page.

Self-contained means the file can be mailed, attached to a PR or opened offline and shows the
same thing: the style sheet is inline, every figure is embedded as a ``data:`` URI, and the page
refers to nothing outside itself (no fonts, scripts or images from the network; links are
in-page anchors only). All text from runs (observations, actions, paths) is escaped.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from typing import Any

from agentrl.reporting.blocks import (
    Code,
    Document,
    Image,
    Note,
    Paragraph,
    Section,
    Subsection,
    Table,
)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       color: #1d1d1f; background: #fafafa; line-height: 1.45; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 64px; background: #ffffff; }
h1 { font-size: 1.7em; margin-bottom: 0.1em; }
h2 { border-bottom: 2px solid #e3e3e3; padding-bottom: 4px; margin-top: 2.2em; }
h3 { font-size: 1.05em; margin-top: 1.6em; }
.subtitle { color: #555555; margin-top: 0; }
nav ol { columns: 2; font-size: 0.95em; }
nav a, nav a:visited { color: #1f5fa8; text-decoration: none; }
table { border-collapse: collapse; margin: 10px 0 4px; font-size: 0.88em; }
th, td { border: 1px solid #d5d5d5; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f3; }
td.long { white-space: pre-wrap; max-width: 520px; font-size: 0.95em; }
caption { caption-side: bottom; text-align: left; color: #555555; font-size: 0.92em;
          padding-top: 4px; }
figure { margin: 14px 0; }
figure img { max-width: 100%; border: 1px solid #e3e3e3; }
figcaption { color: #555555; font-size: 0.92em; }
.note { background: #fff6d6; border-left: 4px solid #e0b000; padding: 6px 10px; margin: 10px 0; }
pre { background: #f4f4f6; padding: 8px 10px; white-space: pre-wrap; overflow-wrap: anywhere;
      font-size: 0.85em; }
code { background: #f4f4f6; padding: 0 3px; }
details { margin: 10px 0; }
summary { cursor: pointer; color: #1f5fa8; }
.table-wrap { overflow-x: auto; }
"""


def _inline(text: str) -> str:
    """Escape, then turn `code` spans into <code> elements."""
    escaped = html.escape(text)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _image(block: Image) -> str:
    data = base64.b64encode(block.path.read_bytes()).decode("ascii")
    caption = f"<figcaption>{_inline(block.caption)}</figcaption>" if block.caption else ""
    return (
        f'<figure><img alt="{html.escape(block.alt)}" data-file="{html.escape(block.relative)}" '
        f'src="data:image/png;base64,{data}">{caption}</figure>'
    )


def _table(block: Table) -> str:
    head = "".join(f"<th>{_inline(h)}</th>" for h in block.header)
    body = []
    for row in block.rows:
        cells = []
        for i, cell in enumerate(row):
            css = ' class="long"' if i in block.long_columns else ""
            cells.append(f"<td{css}>{html.escape(cell)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    caption = f"<caption>{_inline(block.caption)}</caption>" if block.caption else ""
    return (
        f'<div class="table-wrap"><table>{caption}<thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _blocks(blocks: Sequence[Any]) -> str:
    out = []
    for block in blocks:
        if isinstance(block, Paragraph):
            out.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Note):
            out.append(f'<div class="note">{_inline(block.text)}</div>')
        elif isinstance(block, Table):
            out.append(_table(block))
        elif isinstance(block, Image):
            out.append(_image(block))
        elif isinstance(block, Code):
            out.append(f"<pre>{html.escape(block.text)}</pre>")
        elif isinstance(block, Subsection):
            inner = _blocks(block.blocks)
            if block.collapsed:
                out.append(f"<details><summary>{_inline(block.title)}</summary>{inner}</details>")
            else:
                out.append(f"<h3>{_inline(block.title)}</h3>{inner}")
        else:  # pragma: no cover - a new block type must be added here
            raise TypeError(f"cannot render {type(block).__name__}")
    return "\n".join(out)


def _section(section: Section) -> str:
    return (
        f'<section id="{section.id}"><h2>{_inline(section.title)}</h2>\n'
        f"{_blocks(section.blocks)}\n</section>"
    )


def render_html(document: Document) -> str:
    toc = "".join(f'<li><a href="#{s.id}">{_inline(s.title)}</a></li>' for s in document.sections)
    body = "\n".join(_section(s) for s in document.sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(document.title)}</title><style>{STYLE}</style></head>\n<body><main>"
        f'<h1>{_inline(document.title)}</h1><p class="subtitle">{_inline(document.subtitle)}</p>'
        f"<nav><ol>{toc}</ol></nav>\n{body}\n</main></body></html>\n"
    )
