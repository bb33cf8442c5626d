"""Data flows one way, and the layout shows it: each room of ``agentrl/`` (a subpackage) imports
only the rooms below it, computed from every import statement of every module, at module level
and inside functions alike (docs/architecture.md draws the same table)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import agentrl

ROOT = Path(agentrl.__file__).parent

#: What each room may import from agentrl, besides itself, ``agentrl.errors`` and the package
#: root (``agentrl.__version__``). Everything not listed is forbidden: envs import nothing of
#: training, rollout never imports algorithms, reporting reads run directories only.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "envs": set(),
    "rundir": set(),
    "models": set(),
    "parallel": {"models"},
    "backends": {"models", "parallel"},
    "rollout": {"envs", "models", "backends"},
    "algorithms": {"models", "parallel", "rollout", "rundir"},
    "training": {"envs", "models", "parallel", "backends", "rollout", "algorithms", "rundir"},
    "bench": {"envs", "models", "parallel", "backends", "rollout", "algorithms", "rundir", "training"},
    "reporting": {"rundir"},
    "cli": {"envs", "models", "parallel", "backends", "rollout", "algorithms", "rundir", "training",
            "bench", "reporting"},
    "__main__": {"cli"},
}
#: Modules at the top of agentrl/ besides the rooms.
TOP_LEVEL_MODULES = {"__init__.py", "__main__.py", "errors.py"}
#: Libraries of the command line, which only the cli room imports.
CLI_LIBRARIES = ("typer", "click", "rich")


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module ``path`` imports, anywhere in it (module level, functions, ``if`` blocks):
    ``from package import module`` counts as importing that module."""
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                out.add(full if full in known else module)
    return out


def import_graph() -> dict[str, set[str]]:
    """agentrl module -> the modules it imports (agentrl's and other packages')."""
    modules = _modules()
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import that breaks a room's rules, as ``importer -> imported (rule)``."""
    found = []
    for module, imported in sorted(graph.items()):
        own = room(module)
        for target in sorted(imported):
            top = target.split(".")[0]
            if top in CLI_LIBRARIES and own != "cli":
                found.append(f"{module} -> {target} (only cli imports {top})")
            if top != "agentrl" or target == "agentrl":
                continue
            other = room(target)
            if own == "(root)" or other in (own, "errors"):
                continue
            if other not in ALLOWED.get(own, set()):
                found.append(f"{module} -> {target} ({own} may not import {other})")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles among agentrl's modules (Tarjan's strongly connected components)."""
    inside = {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(inside[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(inside):
        if node not in index:
            visit(node)
    return found


def test_every_room_imports_only_the_rooms_below_it():
    assert violations(import_graph()) == []


def test_there_is_no_import_circle_inside_agentrl():
    assert cycles(import_graph()) == []


def test_the_checks_catch_a_bad_import_and_a_circle():
    """The rules are not vacuous: a deliberate bad import and a circle are both reported."""
    graph = import_graph()
    graph["agentrl.envs.contract"] = graph["agentrl.envs.contract"] | {"agentrl.training.trainer"}
    graph["agentrl.rollout.engine"] = graph["agentrl.rollout.engine"] | {"agentrl.algorithms.base"}
    graph["agentrl.reporting.runs"] = graph["agentrl.reporting.runs"] | {"agentrl.models.loading"}
    graph["agentrl.training.trainer"] = graph["agentrl.training.trainer"] | {"rich.console"}
    assert violations(graph) == [
        "agentrl.envs.contract -> agentrl.training.trainer (envs may not import training)",
        "agentrl.reporting.runs -> agentrl.models.loading (reporting may not import models)",
        "agentrl.rollout.engine -> agentrl.algorithms.base (rollout may not import algorithms)",
        "agentrl.training.trainer -> rich.console (only cli imports rich)",
    ]
    graph = import_graph()
    graph["agentrl.rundir.layout"] = graph["agentrl.rundir.layout"] | {"agentrl.rundir.checkpoints"}
    assert any("agentrl.rundir.layout" in circle for circle in cycles(graph))


def test_the_top_level_holds_rooms_only():
    rooms = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    modules = {p.name for p in ROOT.glob("*.py")}
    assert modules == TOP_LEVEL_MODULES
    assert rooms == set(ALLOWED) - {"errors", "__main__"}


def test_the_envs_import_only_the_env_room_of_agentrl():
    """``agentrl_envs`` sees agentrl through ``agentrl.envs`` (and its errors) alone."""
    folder = ROOT.parent / "agentrl_envs"
    bad = {}
    for path in sorted(folder.rglob("*.py")):
        names = imports_of("agentrl_envs.x", path, set())
        wrong = sorted(n for n in names if n.startswith("agentrl.")
                       and not n.startswith(("agentrl.envs", "agentrl.errors")))
        if wrong:
            bad[str(path.relative_to(folder))] = wrong
    assert bad == {}


def test_building_a_report_loads_no_trainer_module():
    """Transitively too: importing the report builder pulls in nothing of the live stack."""
    live = ("agentrl.training", "agentrl.cli", "agentrl.bench", "agentrl.algorithms", "agentrl.rollout",
            "agentrl.models", "agentrl.backends", "agentrl.envs", "agentrl.parallel")
    code = ("import sys, agentrl.reporting.report, agentrl.reporting.suite; "
            f"print([m for m in sys.modules if m.startswith({live!r})])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


#: About 500 lines: a module past this is two jobs, or one that wants a file per part.
MAX_MODULE_LINES = 530


def test_no_module_is_longer_than_about_500_lines():
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}
