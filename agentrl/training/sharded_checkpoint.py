"""Checkpoints of ``train.parallel: fsdp`` runs: sharded for resume, whole for everything else.

A checkpoint folder of an FSDP run holds, next to the usual tokenizer, value-token ids and
``trainer_state.pt``:

* ``sharded/``: ``torch.distributed.checkpoint`` (DCP) files of the policy's weights and AdamW
  state (and PPO's critic with its optimizer), each rank writing its own shards in parallel.
  Resume reads them back into the same sharding (or another world size: DCP reshards on load).
  No rank ever holds the optimizer state whole.
* ``model.safetensors`` + ``config.json``: the full weights, gathered one tensor at a time to
  rank 0's CPU and written by rank 0 with ``save_pretrained``, so that transformers, vLLM and
  ``agentrl eval`` load the folder like any other checkpoint.

The folder is written with :func:`agentrl.rundir.checkpoints.write_checkpoint`'s crash-safe protocol: rank 0
creates ``.tmp-iter_N``, every rank writes its shards into it, rank 0 adds the rest
(``trainer_state.pt`` last) and renames it. ``trainer_state.pt`` holds the algorithm's state
*without* its optimizers, which live in ``sharded/``.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from agentrl.errors import UserError
from agentrl.parallel.distributed import barrier, is_main
from agentrl.rundir.checkpoints import checkpoint_name, write_checkpoint
from agentrl.rundir.layout import CHECKPOINTS_DIR

SHARDED_DIR = "sharded"
#: Keys of ``Algorithm.state_dict()`` that are optimizer states: in ``sharded/`` under FSDP.
OPTIMIZER_KEYS = ("optimizer", "critic_optimizer")


def sharded_parts(algorithm: Any) -> dict[str, tuple[nn.Module, torch.optim.Optimizer]]:
    """The trained modules and their optimizers, by name: the policy, and PPO's critic."""
    parts = {"policy": (algorithm.policy.model, algorithm.optimizer)}
    critic = getattr(algorithm, "critic", None)
    if critic is not None:
        parts["critic"] = (critic, algorithm.critic_optimizer)
    return parts


def _state(algorithm: Any) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    state = {}
    for name, (module, optimizer) in sharded_parts(algorithm).items():
        model_state, optim_state = get_state_dict(module, optimizer)
        state[name] = {"model": model_state, "optim": optim_state}
    return state


def save_sharded(folder: Path, algorithm: Any) -> None:
    """Every rank writes its shards of weights and optimizer state to ``folder/sharded``."""
    import torch.distributed.checkpoint as dcp

    dcp.save(_state(algorithm), checkpoint_id=str(folder / SHARDED_DIR))


#: What DCP's ``.metadata`` pickles may name besides the classes of its own metadata modules.
_METADATA_GLOBALS = frozenset({("torch", "Size"), ("torch.serialization", "_get_layout"),
                               ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"),
                               ("collections", "OrderedDict")})
_METADATA_MODULES = ("torch.distributed.checkpoint.metadata", "torch.distributed.checkpoint.filesystem",
                     "torch.distributed.checkpoint.planner")


class _MetadataUnpickler(pickle.Unpickler):
    """Admits DCP's metadata records, torch dtypes and sizes; refuses any other global, so a
    crafted ``.metadata`` cannot name a function for the unpickler to call."""

    def find_class(self, module: str, name: str) -> Any:
        import torch

        found = super().find_class(module, name) if module in _METADATA_MODULES or module == "torch" else None
        if module in _METADATA_MODULES and isinstance(found, type):
            return found
        if module == "torch" and isinstance(found, torch.dtype):
            return found
        if (module, name) in _METADATA_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"it names {module}.{name}")


def check_metadata(sharded: Path) -> None:
    """Refuse a sharded checkpoint whose metadata could run code: ``dcp.load`` reads its
    ``.metadata`` files with plain ``pickle.load``, so they are first read here with an
    unpickler that admits only DCP's own records (a run folder may come from anywhere)."""
    for path in sorted(sharded.glob("*.metadata")):
        try:
            with open(path, "rb") as fh:
                _MetadataUnpickler(fh).load()
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
            raise UserError(f"Cannot resume from '{path}': it is not a plain sharded-checkpoint index "
                            f"({exc}), and agentrl does not run code from a run folder.") from exc


def load_sharded(folder: Path, algorithm: Any) -> None:
    """Read ``folder/sharded`` back into the sharded modules and optimizers (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict

    check_metadata(folder / SHARDED_DIR)  # DCP unpickles it without weights_only
    state = _state(algorithm)  # the target layout: DCP loads in place into these tensors
    dcp.load(state, checkpoint_id=str(folder / SHARDED_DIR))
    for name, (module, optimizer) in sharded_parts(algorithm).items():
        set_state_dict(module, optimizer, model_state_dict=state[name]["model"],
                       optim_state_dict=state[name]["optim"])


def export_full_model(model: nn.Module, folder: Path) -> None:
    """Gather the full weights onto rank 0's CPU (one tensor at a time) and write them there as a
    transformers folder. Collective: every rank calls it; only rank 0 writes."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if is_main():
        for name in tied_duplicates(model):  # gathered copies no longer share storage, so
            full.pop(name, None)             # save_pretrained would write the tied head twice
        model.save_pretrained(folder, state_dict=full)
    del full


def tied_duplicates(model: nn.Module) -> list[str]:
    """Names of parameters that are another name's parameter (a tied LM head): transformers
    re-ties them on load, as it does for folders written by an unsharded ``save_pretrained``."""
    first: dict[int, str] = {}
    duplicates = []
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in first:
            duplicates.append(name)
        else:
            first[id(param)] = name
    return duplicates


def without_optimizers(state: dict[str, Any]) -> dict[str, Any]:
    """An algorithm's state for ``trainer_state.pt`` under FSDP: its optimizers are in DCP."""
    return {k: v for k, v in state.items() if k not in OPTIMIZER_KEYS}


def write_sharded_checkpoint(run_dir: Path, iteration: int, algorithm: Any,
                             fill_rest: Callable[[Path], None]) -> Path | None:
    """Checkpoint ``iteration`` of an FSDP run; every rank calls it. ``fill_rest(folder)`` runs
    on rank 0 after the shards and the full model are written and must write
    ``trainer_state.pt`` last. Returns the folder on rank 0, None elsewhere."""
    tmp = run_dir / CHECKPOINTS_DIR / f".tmp-{checkpoint_name(iteration)}"

    def collective(folder: Path) -> None:
        if is_main():
            (folder / SHARDED_DIR).mkdir(parents=True, exist_ok=True)
        barrier()  # the folder exists before any rank writes into it
        save_sharded(folder, algorithm)
        export_full_model(algorithm.policy.model, folder)
        barrier()

    path = None
    if is_main():
        def fill(folder: Path) -> None:
            collective(folder)
            fill_rest(folder)

        path = write_checkpoint(run_dir, iteration, fill)
    else:
        collective(tmp)
    barrier()  # nobody moves on (e.g. to the next checkpoint) before the rename
    return path
