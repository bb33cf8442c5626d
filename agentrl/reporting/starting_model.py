"""Where a report's runs started: the model named by ``model.name``, and how it was made.

RL from a warm start is only as reproducible as the warm start. ``agentrl sft`` leaves
``sft_metrics.json`` beside the weights (base model, demonstrations, epochs, losses); a report
built where that folder exists says how the starting model was made and which weights it was
(a digest of the weight files), and says so plainly when the folder is not on this machine
instead of falling silent. The RL runs' own ``sft.*`` settings are config defaults an RL run
never reads, so the report does not show them (:data:`agentrl.rundir.settings.UNREAD_SECTIONS`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin")


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def weights_digest(folder: Path) -> str | None:
    """sha256 of the weight file (what ``sha256sum`` prints); for sharded weights, the sha256
    of the lines ``<name> <sha256>`` in name order."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    if not files:
        return None
    if len(files) == 1:
        return file_digest(files[0])
    lines = "".join(f"{path.name} {file_digest(path)}\n" for path in files)
    return hashlib.sha256(lines.encode()).hexdigest()


def describe(name: str) -> tuple[str, bool] | None:
    """``(sentence, found)`` for a model given as a local folder; ``None`` for a hub or embedded
    name (nothing to say beyond the name itself)."""
    folder = Path(name).expanduser()
    # the way agentrl.models.loading.resolve_model tells them apart (not imported: it loads torch)
    looks_local = folder.exists() or name.startswith(("/", "./", "../", "~")) or name.count("/") > 1
    if not looks_local:  # embedded, tiny, an alias or a hub id (owner/name)
        return None
    if not folder.is_dir():
        return (
            f"The starting model {name} is not on the machine that built this report: how it "
            "was made is not shown here (see the docs that published these runs).",
            False,
        )
    digest = weights_digest(folder)
    weights = f" Weights sha256 {digest}." if digest else ""
    meta_path = folder / "sft_metrics.json"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError):
        return (f"The starting model {name} holds no readable sft_metrics.json: it was not "
                f"made by `agentrl sft` (or the file was removed).{weights}", True)
    sft = meta.get("sft") or {}
    demos = ", ".join(str(d) for d in meta.get("demos") or []) or "unrecorded demonstrations"
    losses = ""
    if isinstance(meta.get("first_loss"), (int, float)) and isinstance(
        meta.get("final_loss"), (int, float)
    ):
        losses = f"; loss {meta['first_loss']:.3f} -> {meta['final_loss']:.3f}"
    minutes = (
        f", {meta['seconds'] / 60:.1f} min" if isinstance(meta.get("seconds"), (int, float)) else ""
    )
    return (
        f"Starting model {name}: `agentrl sft` of {meta.get('base_model', '?')} on "
        f"{meta.get('examples', '?')} turns of {meta.get('sequences', '?')} demonstration "
        f"episodes ({demos}), {sft.get('epochs', '?')} epochs = {meta.get('steps', '?')} steps "
        f"of {sft.get('batch_turns', '?')} turns at lr {sft.get('lr', '?')}, seed "
        f"{sft.get('seed', '?')}{losses}{minutes}.{weights}",
        True,
    )
