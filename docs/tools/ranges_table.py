"""Render the table of numeric config ranges (agentrl.training.config.RANGES and OPTION_RANGES) that
docs/cli.md holds between its ``<!-- ranges -->`` markers; tests/test_input_checks.py checks
that the page is up to date.

    .venv/bin/python docs/tools/ranges_table.py     # rewrites the table in docs/cli.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agentrl.training.config import OPTION_RANGES, RANGES  # noqa: E402

BEGIN, END = "<!-- ranges -->", "<!-- /ranges -->"


def render() -> str:
    """One row per setting: the key and the rule its values must follow."""
    rows = ["| setting | allowed |", "|---|---|"]
    rows += [f"| `{key}` | {rule.describe()} |" for key, rule in RANGES.items()]
    rows += [f"| `{option}` (command line) | {rule.describe()} |" for option, rule in OPTION_RANGES.items()]
    return "\n".join(rows)


def rewrite(page: str) -> str:
    """``page`` with the text between the markers replaced by :func:`render`."""
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), flags=re.DOTALL)
    return pattern.sub(lambda _: f"{BEGIN}\n{render()}\n{END}", page)


if __name__ == "__main__":
    path = ROOT / "docs" / "cli.md"
    path.write_text(rewrite(path.read_text()))
    print(f"wrote the ranges table in {path}")
