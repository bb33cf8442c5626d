"""Resuming a run with its own settings: the config ``--resume`` starts from, and the check that
settings given again do not differ from the run's own, except those in
:data:`agentrl.rundir.settings.NOT_LEARNED`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from agentrl.envs.contract import resolve_env_id
from agentrl.errors import UserError
from agentrl.rundir.checkpoints import read_saved_config
from agentrl.rundir.settings import NOT_LEARNED, UNREAD_SECTIONS, flatten
from agentrl.training.config import build_config


def _comparable(tree: dict[str, Any]) -> dict[str, Any]:
    """Flattened, through a YAML round trip (tuples become lists, as in config.yaml), with the
    env id resolved (``keydoor`` and ``agentrl/KeyDoor-v0`` are the same env)."""
    flat = flatten(yaml.safe_load(yaml.safe_dump(tree)) or {})
    if isinstance(flat.get("algo"), str):
        flat["algo"] = flat["algo"].lower()  # SAPO and sapo are one algorithm
    if isinstance(flat.get("env.id"), str):
        try:
            flat["env.id"] = resolve_env_id(flat["env.id"])
        except UserError:
            pass  # an env no longer registered: compare the names as written
    return flat


def config_conflicts(saved: dict[str, Any], config: Any) -> list[str]:
    """The settings (dotted keys) whose value in ``config`` differs from the run's own.

    Only keys the saved config has are compared: a key added to agentrl after the run started
    keeps its default, which is what the run had.
    """
    old, new = _comparable(saved), _comparable(config.to_dict())
    return sorted(
        key for key in old.keys() & new.keys()
        if key not in NOT_LEARNED and not key.startswith(UNREAD_SECTIONS)
        and old[key] != new[key]
    )


def check_algorithm(run_dir: Path, saved: dict[str, Any], algo: str) -> None:
    """Refuse to resume a run with another algorithm than its own, blaming the algorithm."""
    own = saved.get("algo")
    if own is not None and str(own).lower() != algo.lower():  # names are case-insensitive
        raise UserError(f"Cannot resume '{run_dir}' with {algo}: it is a {own} run; "
                        f"resume it with `agentrl run {own} --run-dir {run_dir} --resume`.")


def check_resume_config(run_dir: Path, saved: dict[str, Any], config: Any) -> None:
    """Refuse, in one sentence naming the keys, settings that differ from the run's own."""
    check_algorithm(run_dir, saved, config.algo)
    conflicts = config_conflicts(saved, config)
    if not conflicts:
        return
    old, new = _comparable(saved), _comparable(config.to_dict())
    shown = "; ".join(f"{k}: {old[k]!r} in its config.yaml, {new[k]!r} now" for k in conflicts)
    allowed = ", ".join(sorted(NOT_LEARNED))
    raise UserError(f"Cannot resume '{run_dir}' with settings other than its own ({shown}); "
                    f"drop them (only {allowed} may change on resume).")


def resume_config(run_dir: Path, algo: str, env: str | None, model: str | None,
                  config_path: Path | None, overrides: list[str]) -> Any | None:
    """The config of ``agentrl run ALGO --run-dir DIR --resume``: the run's own ``config.yaml``
    with what the command line gives again on top (checked by :func:`check_resume_config` when
    the trainer starts). None when the folder has no ``config.yaml``."""
    saved = read_saved_config(run_dir)
    if saved is None:
        return None
    check_algorithm(run_dir, saved, algo)
    return build_config(algo=algo, env=env, model=model, config_path=config_path,
                        overrides=overrides, base=saved)


def warn_on_readout_change(model_name: str | None, checkpoint: Path | None, algorithm: Any) -> None:
    """A warm start from a SAPO checkpoint read at another value temperature: its trained
    values arrive rescaled (V = squash(d / tau_v)); say so once, do not refuse (it may be
    what the user wants)."""
    import os
    import warnings

    if checkpoint is not None or not model_name or not Path(os.path.expanduser(model_name)).is_dir():
        return
    differs = readout_difference(Path(os.path.expanduser(model_name)), algorithm)
    if differs is not None:
        warnings.warn(f"model '{model_name}' was trained reading values with {differs[0]}; this run "
                      f"reads them with {differs[1]}, so its starting values are rescaled.", stacklevel=3)


def readout_difference(folder: Path, algorithm: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(recorded, current) when ``folder`` recorded a value readout other than ``algorithm``'s."""
    from agentrl.models.value_tokens import saved_readout

    recorded, current = saved_readout(folder), algorithm.readout_settings()
    return (recorded, current) if recorded and current and _values_of(recorded) != _values_of(current) else None


def _values_of(readout: dict[str, Any]) -> dict[str, Any]:
    """A readout as the values it gives (:func:`agentrl.algorithms.losses.squash_reading`)."""
    from agentrl.algorithms.losses import squash_reading

    if "value_squash" not in readout:
        return readout
    return {**readout, "value_squash": squash_reading(readout["value_squash"])}


def nonfinite_message(latest: Path | None, iteration: int, exc: Any) -> str:
    """One sentence for a run stopped by a non-finite number (``exc``: a
    :class:`agentrl.algorithms.base.NonFiniteUpdate`): the iteration, the quantity, and which
    checkpoint (``latest``) a resume would start from (nothing of this iteration is saved)."""
    kept = f"checkpoint {latest.name} stays the latest" if latest is not None else "no checkpoint was written"
    if exc.quantity.endswith("weights"):
        owner = exc.quantity.removesuffix("weights")
        return (f"Iteration {iteration} stopped the run: a {owner}weight is {exc.value} after a step "
                f"(a step too large: lower the learning rate); {kept}.")
    return (f"Iteration {iteration} stopped the run: the {exc.quantity} is {exc.value}, so its step was not "
            f"applied (algorithm.nonfinite=skip would drop such minibatches instead); {kept}.")
