"""Data flows one way: the reporting package reads run directories and never reaches back into
the trainer, the comparison runner or the command line."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import agentrl.reporting

FORBIDDEN = ("agentrl.training", "agentrl.cli", "agentrl.bench", "agentrl.algorithms", "agentrl.rollout")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_reporting_modules_import_nothing_from_the_trainer_or_the_cli():
    folder = Path(agentrl.reporting.__file__).parent
    found = {}
    for path in sorted(folder.glob("*.py")):
        bad = sorted(n for n in _imports(path) if n.startswith(FORBIDDEN))
        if bad:
            found[path.name] = bad
    assert found == {}


def test_building_a_report_loads_no_trainer_module():
    """Transitively too: importing the report builder pulls in none of them."""
    code = ("import sys, agentrl.reporting.report; "
            f"print([m for m in sys.modules if m.startswith({FORBIDDEN!r})])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_only_the_cli_knows_the_cli():
    root = Path(agentrl.reporting.__file__).parent.parent
    users = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if p.relative_to(root).parts[0] != "cli" and p.name != "__main__.py"
                   and any(n.startswith("agentrl.cli") for n in _imports(p)))
    assert users == []
