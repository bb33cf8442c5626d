"""ALFWorld's official game files: find them, index them, and write games in their layout.

The official games come from ``alfworld-download`` into ``$ALFWORLD_DATA/json_2.1.1/`` with one
folder per split (``train``, ``valid_seen``, ``valid_unseen``), one folder per task
(``pick_and_place_simple-Tomato-None-Microwave-12``) and one per trial, which holds
``game.tw-pddl`` (the game) and ``traj_data.json`` (ALFRED's annotations). Like ALFWorld's own
loader we skip the movable-receptacle and sliced-object tasks, which are not among the six task
types, and games marked unsolvable (checked when a game is loaded, so indexing stays fast).

:func:`write_game` stores a generated game in the same layout, so a fixed set of generated games
can be shared as files and read back through the same path as the official ones.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalog import GOAL_LIBRARY_KEY, OFFICIAL_TASK_TYPES

#: Our split names -> ALFWorld's folder names.
SPLIT_DIRS: dict[str, str] = {
    "train": "train",
    "eval_seen": "valid_seen",
    "eval_unseen": "valid_unseen",
}
GAME_FILE = "game.tw-pddl"
_TASK_SENTENCE = re.compile(r"Your task is to: (.*)")


@dataclass(frozen=True)
class OfficialGame:
    """One game file and its task type (ours)."""

    path: Path
    task_type: str


def find_root(data_path: str | os.PathLike[str] | None = None) -> Path | None:
    """The folder holding the split folders, from ``data_path`` or else ``$ALFWORLD_DATA``.

    Accepts the data folder itself (with ``json_2.1.1`` inside) or the ``json_2.1.1`` folder.
    Returns None when neither holds a split folder.
    """
    base = data_path if data_path is not None else os.environ.get("ALFWORLD_DATA")
    if not base:
        return None
    path = Path(base).expanduser()
    for root in (path / "json_2.1.1", path):
        if any((root / d).is_dir() for d in SPLIT_DIRS.values()):
            return root
    return None


def _task_type_of(task_folder: Path) -> str | None:
    official = task_folder.name.split("-", 1)[0]
    if official in OFFICIAL_TASK_TYPES:
        return OFFICIAL_TASK_TYPES[official]
    for traj in sorted(task_folder.rglob("traj_data.json"))[:1]:
        with open(traj) as handle:
            return OFFICIAL_TASK_TYPES.get(json.load(handle).get("task_type", ""))
    return None


@functools.lru_cache(maxsize=16)
def list_games(root: Path, split: str) -> tuple[OfficialGame, ...]:
    """The split's usable game files, in a fixed (sorted) order; seed ``s`` plays entry ``s``."""
    base = root / SPLIT_DIRS[split]
    games = []
    types: dict[Path, str | None] = {}
    for path in sorted(base.rglob(GAME_FILE)):
        relative = path.relative_to(base)
        if "movable" in str(relative) or "Sliced" in str(relative):
            continue
        task_folder = base / relative.parts[0]
        if task_folder not in types:
            types[task_folder] = _task_type_of(task_folder)
        task_type = types[task_folder]
        if task_type is not None:
            games.append(OfficialGame(path, task_type))
    return tuple(games)


def read_game(path: Path) -> dict[str, Any]:
    with open(path) as handle:
        return json.load(handle)


def task_sentence(observation: str) -> str:
    """The goal sentence of an introduction ("put a tomato in microwave.")."""
    match = _TASK_SENTENCE.search(observation)
    return match.group(1).strip() if match else ""


def write_game(
    root: Path, split: str, index: int, task_type: str, object_type: str, target_type: str,
    game: dict[str, Any],
) -> Path:
    """Store one game as ``<root>/json_2.1.1/<split folder>/<task>/trial_<index>/game.tw-pddl``.

    The task folder follows ALFWorld's naming (task type, object, "None", receptacle, a
    number); ``traj_data.json`` carries the fields ALFWorld's tools read (the task type and the
    goal's object and receptacle).
    """
    official_type = GOAL_LIBRARY_KEY[task_type]
    is_look = task_type == "look_at_obj_in_light"
    receptacle = "" if is_look else target_type
    folder_name = f"{official_type}-{object_type}-None-{target_type}-{index}"
    trial = root / "json_2.1.1" / SPLIT_DIRS[split] / folder_name / f"trial_agentrl_{index:06d}"
    trial.mkdir(parents=True, exist_ok=True)
    (trial / GAME_FILE).write_text(json.dumps(game))
    traj = {
        "task_type": official_type,
        "pddl_params": {
            "object_target": object_type,
            "parent_target": receptacle,
            "toggle_target": target_type if is_look else "",
            "mrecep_target": "",
            "object_sliced": False,
        },
    }
    (trial / "traj_data.json").write_text(json.dumps(traj))
    return trial / GAME_FILE
