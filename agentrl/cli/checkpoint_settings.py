"""The settings a checkpoint was trained with, for ``agentrl eval --model RUN/checkpoints/iter_N``.

A checkpoint is only meaningful with the prompts and action format it was trained on: a model
trained with ``rollout.action_mode: constrained`` and a one-turn history, evaluated with the
defaults (free-form, two turns), is measured on a task it never saw. When the model folder
sits in a run directory (``RUN/checkpoints/iter_N`` beside ``RUN/config.yaml``), eval starts
from that run's ``env`` and ``rollout`` sections; ``--config``, ``--env`` and ``--set`` still
override them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentrl.rundir.layout import CHECKPOINTS_DIR, CONFIG_FILE
from agentrl.training.config import load_yaml

#: Sections of the run's config that eval inherits (training-only sections are not relevant).
INHERITED_SECTIONS = ("env", "rollout")


def run_dir_of_checkpoint(model_name: str | None) -> Path | None:
    """``RUN`` when ``model_name`` is a folder ``RUN/checkpoints/<name>`` with ``RUN/config.yaml``."""
    if not model_name:
        return None
    folder = Path(os.path.expanduser(model_name))
    if not folder.is_dir() or folder.parent.name != CHECKPOINTS_DIR:
        return None
    run_dir = folder.parent.parent
    return run_dir if (run_dir / CONFIG_FILE).is_file() else None


def run_checkpoint(model_name: str | None) -> tuple[str | None, str]:
    """``--model RUN`` (a run directory rather than one of its checkpoints) as its newest
    readable checkpoint, and a line saying which; any other name unchanged, with no line.

    A run directory is not a model folder (its weights are in ``checkpoints/iter_N``), so the
    name a user most likely means is the run's newest checkpoint, said so they know which.
    """
    from agentrl.errors import UserError
    from agentrl.rundir.checkpoints import is_run_dir, latest_checkpoint

    if not model_name:
        return model_name, ""
    folder = Path(os.path.expanduser(model_name))
    if not is_run_dir(folder) or (folder / "config.json").is_file():
        return model_name, ""
    checkpoint = latest_checkpoint(folder)
    if checkpoint is None:
        raise UserError(f"Model '{model_name}' is a run directory without a complete checkpoint; "
                        f"pass one of its checkpoints, RUN/checkpoints/iter_N, once it has one.")
    return str(checkpoint), f"model {model_name} is a run: using its newest checkpoint, {checkpoint}"


def inherited_settings(model_name: str | None) -> tuple[dict[str, Any], Path | None]:
    """The run's ``env`` and ``rollout`` sections as a config tree, and the run dir (or ``({}, None)``)."""
    run_dir = run_dir_of_checkpoint(model_name)
    if run_dir is None:
        return {}, None
    tree = load_yaml(run_dir / CONFIG_FILE)
    base = {name: tree[name] for name in INHERITED_SECTIONS if isinstance(tree.get(name), dict)}
    return base, run_dir
