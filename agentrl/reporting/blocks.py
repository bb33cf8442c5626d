"""The report's content model: blocks built once from the runs and rendered twice (HTML and Markdown).

Keeping the content in one neutral model (sections of paragraphs, notes, tables, images) is
what makes the Markdown file a true twin of the HTML page: both renderers walk the same blocks,
so a number cannot appear in one and differ in the other. Every number comes from the runs'
files; where a metric is absent the section says so in a :class:`Note` instead of drawing an
empty chart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.reporting.aggregate import (
    MeanStd,
)

#: The folder beside the report that holds its figures.
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
