"""Output paths checked before any work starts.

``agentrl eval -o FILE`` used to play every episode and only then find that FILE is a folder,
or that its parent is a file or read-only; a run learned that its run directory was a file
after loading the model. These checks look at the file system only (nothing is created), so
a command calls them first and a failed command leaves nothing behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from agentrl.errors import UserError


def _first_existing_ancestor(path: Path) -> Path:
    current = path.absolute().parent
    while not current.exists():
        current = current.parent
    return current


def _check_parent(path: Path, what: str) -> None:
    ancestor = _first_existing_ancestor(path)
    if not ancestor.is_dir():
        raise UserError(f"Cannot write {what} '{path}': '{ancestor}' is a file, not a folder.")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UserError(f"Cannot write {what} '{path}': folder '{ancestor}' is not writable.")


def check_output_file(path: Path, what: str = "output file") -> None:
    """``path`` can be created or overwritten as a file."""
    if path.is_dir():
        raise UserError(f"Cannot write {what} '{path}': it is a folder; name a file.")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UserError(f"Cannot write {what} '{path}': the file is not writable.")
        return
    _check_parent(path, what)


def check_output_dir(path: Path, what: str = "output folder", must_be_empty: bool = False) -> None:
    """``path`` is a folder that exists and is writable, or can be created."""
    if path.exists():
        if not path.is_dir():
            raise UserError(f"Cannot use {what} '{path}': it is a file, not a folder.")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UserError(f"Cannot write {what} '{path}': the folder is not writable.")
        if must_be_empty and any(path.iterdir()):
            raise UserError(f"{what.capitalize()} '{path}' is not empty; choose a new one.")
        return
    _check_parent(path, what)


def given_path(text: str | None, option: str, kind: str = "folder") -> Path | None:
    """The path a command-line option names, refusing an empty one.

    ``--run-dir "$DIR"`` with ``DIR`` unset arrives as an empty string, which ``Path`` reads as
    the current folder: a run (or a bench, a report) would then write into wherever the user
    stands. So an empty or blank value is a mistake, said before any work.
    """
    if text is None:
        return None
    if not text.strip():
        raise UserError(f"{option} is empty (an unset shell variable?); name a {kind}.")
    return Path(text)


def check_owned_dir(path: Path, what: str, kind: str, owns: Callable[[Path], bool]) -> None:
    """``path`` is new, empty, or a folder this command wrote before (``owns`` says so).

    A command that writes a folder of its own (a run, a bench, a report) would otherwise
    overwrite same-named files in any folder it is pointed at, e.g. a project's own
    ``config.yaml``; such a folder is refused and left untouched.
    """
    check_output_dir(path, what)
    if not path.is_dir():
        return
    entries = sorted(p.name for p in path.iterdir())
    if not entries or owns(path):
        return
    shown = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
    raise UserError(f"Cannot use {what} '{path}': it holds files that are not {kind} ({shown}); "
                    "choose a new or empty folder.")
