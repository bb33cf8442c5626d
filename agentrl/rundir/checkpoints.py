"""The run directory on disk: crash-safe checkpoints, the ``latest`` pointer, the run's config.

A run may be killed at any moment; whatever it leaves must be resumable with
``agentrl run ALGO --run-dir DIR --resume`` (docs/architecture.md, "Run directory"):

* a checkpoint is written into ``checkpoints/.tmp-iter_N`` (``trainer_state.pt`` last), fsynced,
  then renamed to ``iter_N`` in one step, so a folder named ``iter_N`` is always complete;
* ``checkpoints/latest`` is replaced atomically; when it is missing, empty or names a folder
  without ``trainer_state.pt``, the newest complete ``iter_*`` is used instead;
* old checkpoints are renamed away before they are deleted, so a kill mid-delete never leaves a
  folder that looks complete but lacks weights;
* ``config.yaml`` is the run's own: ``--resume`` starts from it, and settings given again that
  differ from it are refused (:func:`agentrl.training.resume.check_resume_config`), except the few in
  :data:`agentrl.rundir.settings.NOT_LEARNED` (checked in :mod:`agentrl.training.resume`).
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from agentrl.errors import UserError
from agentrl.rundir.durable import atomic_write_text, disk_full, folder_bytes, fsync_dir, fsync_tree
from agentrl.rundir.layout import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    EVAL_DIR,
    FINGERPRINT_FILE,
    LATEST,
    METRICS_FILE,
    SAMPLES_DIR,
    STATE_FILE,
    SUMMARY_FILE,
)

KEEP_CHECKPOINTS = 2
_ITER_NAME = re.compile(r"^iter_(\d+)$")
_TEMP_NAME = re.compile(r"^\..+\.tmp-\d+$")  # agentrl.rundir.durable.temp_path's names

#: What a run writes at the top of its folder (the trainer, agentrl.training.loggers' tensorboard and wandb).
RUN_ENTRIES = frozenset({CONFIG_FILE, METRICS_FILE, FINGERPRINT_FILE, SUMMARY_FILE, SAMPLES_DIR,
                         "eval", CHECKPOINTS_DIR, "tensorboard", "wandb"})
#: Sections every config.yaml a run writes holds (the resolved config; ``sft`` came later).
_RUN_SECTIONS = frozenset({"algo", "env", "model", "rollout", "train", "algorithm"})


# --- what may be a run directory -----------------------------------------------------------------


def _holds_run_config(folder: Path) -> bool:
    """``config.yaml`` as a run writes it: the resolved config, every section present (a
    hand-written config usually sets a few keys of a few sections)."""
    try:
        tree = yaml.safe_load((folder / CONFIG_FILE).read_text())
    except OSError:
        return False
    except (UnicodeDecodeError, yaml.YAMLError):
        # a run's config a user edited and broke: still a run (its fingerprint says so), so that
        # reading it names the broken byte or line instead of calling the folder foreign
        return (folder / FINGERPRINT_FILE).is_file()
    return isinstance(tree, dict) and _RUN_SECTIONS <= tree.keys()


def foreign_entries(folder: Path) -> list[str]:
    """Names at the top of ``folder`` that no run writes (temporary files a kill left are a run's)."""
    return sorted(p.name for p in folder.iterdir() if p.name not in RUN_ENTRIES and not _TEMP_NAME.match(p.name))


def is_run_dir(folder: Path) -> bool:
    """An agentrl run: its ``config.yaml`` is a run's, and beside it is the ``fingerprint.json``
    a run writes as it starts (or, killed between the two, nothing a run does not write)."""
    if not folder.is_dir() or not _holds_run_config(folder):
        return False
    return (folder / FINGERPRINT_FILE).is_file() or not foreign_entries(folder)


def check_run_dir(run_dir: str | None) -> None:
    """A run directory is a new or empty folder, or an agentrl run (which ``--resume``
    continues, and a new run may reuse only while it holds no records): anything else, such
    as a project folder with a ``config.yaml`` of its own, is refused and left as it is."""
    from agentrl.rundir.output_paths import check_owned_dir

    if run_dir is None:
        return
    if not str(run_dir).strip():
        raise UserError("Config key 'train.run_dir' is empty (an unset shell variable?); name a folder.")
    check_owned_dir(Path(run_dir), "run directory", "an agentrl run", _run_or_its_remains)


def _run_or_its_remains(folder: Path) -> bool:
    """A run, or what is left of one whose config a restart removed (``agentrl bench`` clears a
    run that has records but no checkpoint): only names a run writes, and no ``config.yaml``
    that is not a run's."""
    if is_run_dir(folder):
        return True
    return not (folder / CONFIG_FILE).exists() and not foreign_entries(folder)


# --- checkpoints ---------------------------------------------------------------------------------


def checkpoint_name(iteration: int) -> str:
    return f"iter_{iteration:05d}"


def is_complete(folder: Path) -> bool:
    """A finished checkpoint: an ``iter_N`` folder holding ``trainer_state.pt`` (written last)."""
    return _ITER_NAME.match(folder.name) is not None and (folder / STATE_FILE).is_file()


def complete_checkpoints(run_dir: Path) -> list[Path]:
    """Every complete checkpoint of a run, oldest first."""
    root = run_dir / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and is_complete(p)]
    return sorted(found, key=lambda p: int(_ITER_NAME.match(p.name).group(1)))


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint ``latest`` names when that one is complete, else the newest complete one
    (``latest`` lost, empty, or naming a folder a kill left unfinished)."""
    root = run_dir / CHECKPOINTS_DIR
    try:
        name = (root / LATEST).read_text().strip()
    except OSError:
        name = ""
    if name and _ITER_NAME.match(name) and is_complete(root / name):
        return root / name
    done = complete_checkpoints(run_dir)
    return done[-1] if done else None


def write_checkpoint(run_dir: Path, iteration: int, fill: Callable[[Path], None]) -> Path:
    """Write checkpoint ``iteration`` through ``fill(folder)`` (which must write
    ``trainer_state.pt`` last) into a temporary folder, then rename it into place, point
    ``latest`` at it and delete all but the newest :data:`KEEP_CHECKPOINTS`.

    A full disk while the folder is written (:func:`agentrl.rundir.durable.disk_full`) removes the
    unfinished folder and stops the run in one sentence; ``latest`` still names the previous
    checkpoint, so ``--resume`` continues from there once there is room."""
    root = run_dir / CHECKPOINTS_DIR
    root.mkdir(parents=True, exist_ok=True)
    remove_partial_checkpoints(root)
    final = root / checkpoint_name(iteration)
    tmp = root / f".tmp-{final.name}"
    previous = latest_checkpoint(run_dir)
    tmp.mkdir()
    try:
        fill(tmp)
        fsync_tree(tmp)
    except Exception as exc:
        if not disk_full(exc):
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        raise _checkpoint_disk_full(run_dir, final, previous) from exc
    if final.exists():  # the same iteration written before a resume from an older checkpoint
        _discard(final)
    os.rename(tmp, final)
    fsync_dir(root)
    atomic_write_text(root / LATEST, final.name + "\n", crash_name="latest", iteration=iteration)
    prune_checkpoints(root, KEEP_CHECKPOINTS)
    return final


def _checkpoint_disk_full(run_dir: Path, final: Path, previous: Path | None) -> UserError:
    """The one sentence for a checkpoint the disk had no room for: how much one takes (the
    previous one's size, when there is one) and where ``--resume`` will continue from."""
    needed = f"about {folder_bytes(previous):,} bytes, the size of the previous one" if previous else "its size is not known yet"
    after = f"continues from {previous.name}" if previous else "starts the run over"
    return UserError(f"No space left on the device for checkpoint '{final}' ({needed}); free some space, "
                     f"then `--run-dir {run_dir} --resume` {after}.")


# --- reading a checkpoint's state ---------------------------------------------------------------


class UnreadableState(Exception):
    """A ``trainer_state.pt`` that cannot be read (cut off, emptied, damaged): resume falls back to
    an older checkpoint."""


def read_state(folder: Path) -> dict[str, Any]:
    """A checkpoint's trainer state, loaded with ``weights_only=True``: tensors, numbers,
    strings and containers of them, never code. A run folder may come from anywhere (a
    download, a shared disk), and a pickle can run any code as it loads; a state file that
    holds anything else is refused in one sentence, not loaded the unsafe way."""
    import torch

    path = folder / STATE_FILE
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UserError(f"Cannot resume from '{path}': it holds objects other than tensors and plain numbers "
                        f"({_refusal_reason(exc)}), and agentrl does not run code from a run folder; if an "
                        f"older agentrl wrote it, start a new run from its weights with --model {folder}.") from exc
    except (OSError, RuntimeError, EOFError, KeyError, ValueError) as exc:
        raise UnreadableState(_first_sentence(exc)) from exc
    if not isinstance(state, dict) or "iteration" not in state:
        raise UnreadableState("it is not a trainer state")
    return state


def _first_sentence(exc: BaseException) -> str:
    """What went wrong reading a file, short: the first sentence of the library's message."""
    text = str(exc).strip()
    if not text:
        return "the file is empty or cut off" if isinstance(exc, EOFError) else type(exc).__name__
    return text.splitlines()[0].split(". ")[0].rstrip(".")


class ResumeFallbackWarning(UserWarning):
    """Resume skipped a newer checkpoint it could not read (the CLI prints it as one line)."""


def _refusal_reason(exc: Exception) -> str:
    """The line of torch's weights-only refusal that names what was refused."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    named = [line for line in lines if "GLOBAL" in line or "Unsupported" in line]
    return (named or lines or ["unsupported content"])[0].rstrip(".")


def resume_checkpoint(run_dir: Path) -> tuple[Path, dict[str, Any], list[str]] | None:
    """The checkpoint to resume from, its state, and a warning for each newer one skipped.

    ``latest`` first (or the newest complete one), then older complete ones: a state file cut
    off by a full disk or a copy that stopped half-way costs the iterations since the
    checkpoint before it, not the run. None when the run has no complete checkpoint; an error
    when it has some and none can be read.
    """
    first = latest_checkpoint(run_dir)
    if first is None:
        return None
    others = [p for p in reversed(complete_checkpoints(run_dir)) if p != first]
    skipped: list[str] = []
    for folder in [first, *others]:
        try:
            state = read_state(folder)
        except UnreadableState as exc:
            skipped.append(f"{folder.name} ({exc})")
            continue
        notes = [f"checkpoint {name} cannot be read, so the run resumes from {folder.name}" for name in skipped]
        return folder, state, notes
    raise UserError(f"Cannot resume '{run_dir}': none of its checkpoints can be read ({'; '.join(skipped)}); "
                    f"start a new run in another folder.")


def remove_partial_checkpoints(root: Path) -> None:
    """Delete what a killed checkpoint write or delete left behind: ``.tmp-iter_N`` and
    ``.old-iter_N`` folders, a ``latest`` temporary file. Everything hidden in ``checkpoints/``
    is agentrl's and unfinished."""
    if not root.is_dir():
        return
    for path in root.iterdir():
        if path.name.startswith("."):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def remove_stale_temp_files(run_dir: Path) -> None:
    """Delete temporary files a kill left mid-replacement (``.metrics.jsonl.tmp-PID`` and the
    like, in the run directory, ``samples/`` and ``eval/``) and unfinished checkpoints. Only the
    process that owns the run directory calls it, when it starts."""
    for folder in (run_dir, run_dir / SAMPLES_DIR, run_dir / EVAL_DIR):
        if folder.is_dir():
            for path in folder.iterdir():
                if path.is_file() and _TEMP_NAME.match(path.name):
                    path.unlink(missing_ok=True)
    remove_partial_checkpoints(run_dir / CHECKPOINTS_DIR)


def prune_checkpoints(root: Path, keep: int) -> None:
    """Keep the newest ``keep`` complete checkpoints; drop older ones and unfinished ``iter_*``
    folders (left by versions that wrote checkpoints in place)."""
    folders = [p for p in root.iterdir() if p.is_dir() and _ITER_NAME.match(p.name)]
    complete = sorted((p for p in folders if is_complete(p)),
                      key=lambda p: int(_ITER_NAME.match(p.name).group(1)))
    kept = set(complete[-keep:]) if keep > 0 else set()
    for folder in folders:
        if folder not in kept:
            _discard(folder)


def _discard(folder: Path) -> None:
    """Rename first, then delete: a kill mid-delete leaves an ``.old-*`` folder (cleared on the
    next checkpoint), never an ``iter_*`` that still holds its state file but lost its weights."""
    doomed = folder.with_name(f".old-{folder.name}")
    if doomed.exists():
        shutil.rmtree(doomed, ignore_errors=True)
    os.rename(folder, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


# --- the run's config ---------------------------------------------------------------------------


def read_saved_config(run_dir: Path) -> dict[str, Any] | None:
    """The run's ``config.yaml`` as a tree, or None when the folder has none."""
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        return None
    from agentrl.rundir.yaml_input import read_yaml_file

    tree = read_yaml_file(path, "The run's config file")  # not UTF-8, not YAML: one sentence
    if not isinstance(tree, dict):
        raise UserError(f"Cannot resume: '{path}' does not hold a run config.")
    return tree


def save_config(config: Any, run_dir: Path) -> None:
    """Write the resolved config atomically (a kill mid-write must not cost the run its config)."""
    atomic_write_text(run_dir / CONFIG_FILE, yaml.safe_dump(config.to_dict(), sort_keys=False))
