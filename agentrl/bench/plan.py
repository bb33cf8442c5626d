"""``agentrl bench``: several algorithms, several seeds, one like-for-like setting.

Like-for-like means a comparison changes only the algorithm:

* the same env, splits and model, and the same sampling settings (one config for all);
* the same task seeds: run ``seed<k>`` of every algorithm sets ``train.seed = k``, and the trainer
  draws iteration i's task seeds from (train.seed, i), so seed k of SAPO and of PPO play the same
  tasks (GRPO plays the first ``T / group_size`` of them, k times each), and evaluation always
  uses eval seeds 0..N-1;
* the same number of trajectories T per iteration: ``rollout.tasks_per_iteration`` is set to
  ``T // rollouts_per_task`` (GRPO's group size; 1 for SAPO and PPO), so GRPO's k rollouts
  count toward T. T not divisible by an algorithm's group size is an error, not a rounding.

Settings in the config's ``algorithm`` section (or ``--set algorithm.x=...``) apply to the
algorithms that have them (``group_size`` to GRPO only); a key no selected algorithm has is an
error, as anywhere else in agentrl. ``--set ALGO:key=value`` applies to one algorithm's runs only
(each algorithm's tuned learning rate, say); everything else stays one setting for all.

Runs go to ``OUT/<algo>/seed<k>/`` and run one after another, seed by seed (seed k of every
algorithm before seed k+1), each in a process of its own (:mod:`agentrl.bench.process`, supervised by :mod:`agentrl.bench.supervise`) so that
its time and peak memory are its own. A finished run
(``summary.json``) is skipped; one with a checkpoint is resumed; asking for more iterations than
a finished run has extends it from its last checkpoint. A run directory made with other settings
is an error (pick another OUT) so that a resumed benchmark can never mix settings; bookkeeping
(:data:`agentrl.rundir.settings.NOT_COMPARED`) may differ, and so may a setting agentrl gained after the run was
written, while it is planned at its default (the behaviour that run trained under).
``OUT/bench.json`` records each invocation: the command, the machine, dates and what was done
to each run; ``agentrl report`` prints it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentrl.errors import UserError
from agentrl.rundir.layout import (
    CONFIG_FILE,
    METRICS_FILE,
    SUMMARY_FILE,
)
from agentrl.rundir.settings import NOT_COMPARED, flatten
from agentrl.training.config import RunConfig, build_config, load_yaml, parse_override

#: The manifest ``agentrl bench`` keeps in its output folder: a folder holding it is a bench's.
BENCH_FILE = "bench.json"



@dataclass
class PlannedRun:
    algo: str
    seed: int
    run_dir: Path
    config: RunConfig
    rollouts_per_task: int
    action: str = "fresh"  # fresh | resume | extend | restart | skip


@dataclass
class BenchPlan:
    out: Path
    trajectories: int
    runs: list[PlannedRun]
    command: str = ""


@dataclass
class RunStatus:
    """One row of the live table."""

    run: PlannedRun
    state: str = "queued"
    iteration: int = 0
    record: dict[str, Any] = field(default_factory=dict)
    started: float | None = None
    finished: float | None = None
    warning: str = ""


def parse_algos(text: str) -> list[str]:
    """``"sapo, ppo,grpo"`` -> ``["sapo", "ppo", "grpo"]`` (each must be registered)."""
    from agentrl.algorithms import get_algorithm

    names = []
    for part in text.split(","):
        name = part.strip().lower()
        if not name:
            continue
        get_algorithm(name)  # one sentence naming the known algorithms when unknown
        if name not in names:
            names.append(name)
    if not names:
        raise UserError("--algos names no algorithm; give e.g. --algos sapo,ppo,grpo.")
    return names


def rollouts_per_task(config: RunConfig) -> int:
    """How many trajectories one task yields for ``config.algo``.

    Read from the algorithm's config (``group_size``, as ``agentrl algos`` does) rather than
    from an algorithm instance, which would need a model. The first iteration's record checks
    it: bench warns when ``trajectories / iteration`` is not the planned T.
    """
    value = getattr(config.algorithm, "group_size", 1)
    return int(value) if isinstance(value, int) and value > 0 else 1


def _set_dotted(tree: dict[str, Any], path: Sequence[str], value: Any) -> None:
    node = tree
    for part in path[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[path[-1]] = value


def algorithm_prefix(text: str) -> str | None:
    """The algorithm an ``ALGO:key=value`` ``--set`` text is for (lower-cased), or None when the
    key has no prefix and the setting is for every algorithm."""
    key = text.split("=", 1)[0]
    return key.split(":", 1)[0].strip().lower() if ":" in key else None


def split_algorithm_overrides(
    overrides: Sequence[str], algos: Sequence[str]
) -> tuple[list[str], dict[str, list[str]]]:
    """``--set`` texts split into those for every algorithm and those for one: ``ALGO:key=value``
    (e.g. ``sapo:algorithm.lr=3e-5``) applies to ALGO's runs only, so a comparison can give each
    algorithm the rate its pre-study chose while everything else stays shared. A prefix that
    names no chosen algorithm is an error, not a setting silently dropped."""
    shared: list[str] = []
    own: dict[str, list[str]] = {}
    for text in overrides:
        name = algorithm_prefix(text)
        if name is None:
            shared.append(text)
            continue
        rest = text.split(":", 1)[1]
        if name not in algos:
            raise UserError(
                f"--set {text} is for '{name}', which is not among the compared algorithms "
                f"({', '.join(algos)})."
            )
        own.setdefault(name, []).append(rest)
    return shared, own


def _algorithm_fields(algo: str) -> set[str]:
    import dataclasses

    from agentrl.algorithms import get_algorithm

    return {f.name for f in dataclasses.fields(get_algorithm(algo).config_class)}


def plan_bench(
    algos: Sequence[str],
    out: Path,
    *,
    env: str | None = None,
    model: str | None = None,
    config_path: Path | None = None,
    overrides: Sequence[str] = (),
    seeds: int = 3,
    first_seed: int = 0,
    iterations: int | None = None,
    trajectories: int | None = None,
    eval_episodes: int | None = None,
    command: str = "",
) -> BenchPlan:
    """The runs a bench will make, each with its resolved config and what to do with it."""
    if seeds < 1:
        raise UserError(f"--seeds must be at least 1, not {seeds}.")
    if iterations is not None and iterations < 1:
        raise UserError(f"--iterations must be at least 1, not {iterations}.")
    if trajectories is not None and trajectories < 1:
        raise UserError(f"--trajectories must be at least 1, not {trajectories}.")
    if eval_episodes is not None and eval_episodes < 0:
        raise UserError(f"--eval-episodes cannot be negative ({eval_episodes}).")
    tree: dict[str, Any] = load_yaml(config_path) if config_path is not None else {}
    shared, own_overrides = split_algorithm_overrides(overrides, algos)
    for text in shared:
        path, value = parse_override(text)
        if path == ["algo"]:  # every run's algorithm comes from --algos; this one would be ignored
            raise UserError(f"--set {text} is not used by a bench: the algorithms compared are --algos.")
        _set_dotted(tree, path, value)
    algorithm_section = tree.get("algorithm") or {}
    if not isinstance(algorithm_section, dict):
        raise UserError(f"Config section 'algorithm' must be a mapping, not {algorithm_section!r}.")
    fields = {algo: _algorithm_fields(algo) for algo in algos}
    for key in algorithm_section:
        if not any(key in names for names in fields.values()):
            raise UserError(f"None of {', '.join(algos)} has the setting 'algorithm.{key}'.")
    own_settings = {algo: [(text, *parse_override(text)) for text in texts]
                    for algo, texts in own_overrides.items()}
    for algo, settings in own_settings.items():
        for text, path, _ in settings:
            if path[0] == "algorithm" and len(path) == 2 and path[1] not in fields[algo]:
                raise UserError(f"{algo} has no setting 'algorithm.{path[1]}' (in --set {algo}:{text}).")

    def tree_for(algo: str) -> dict[str, Any]:
        own = copy.deepcopy(tree)
        own["algorithm"] = {
            k: v for k, v in algorithm_section.items() if k in fields.get(algo, set())
        }
        own["algo"] = algo
        for _, path, value in own_settings.get(algo, []):
            _set_dotted(own, path, copy.deepcopy(value))
        return own

    if trajectories is None:
        own_algo = str(tree.get("algo", RunConfig.algo)).lower()
        if own_algo not in fields:
            fields[own_algo] = _algorithm_fields(own_algo)
        base = build_config(env=env, model=model, base=tree_for(own_algo))
        trajectories = base.rollout.tasks_per_iteration * rollouts_per_task(base)

    runs = []
    # seed-major: a bench stopped part-way holds whole seeds of every algorithm (a like-for-like
    # partial comparison) rather than every seed of the first algorithm
    for seed in range(first_seed, first_seed + seeds):
        for algo in algos:
            own = tree_for(algo)
            run_dir = out / algo / f"seed{seed}"
            _set_dotted(own, ["train", "seed"], seed)
            _set_dotted(own, ["train", "run_dir"], str(run_dir))
            if iterations is not None:
                _set_dotted(own, ["train", "iterations"], iterations)
            if eval_episodes is not None:
                _set_dotted(own, ["train", "eval_episodes"], eval_episodes)
            cfg = build_config(algo=algo, env=env, model=model, base=own)
            k = rollouts_per_task(cfg)
            if trajectories % k:
                raise UserError(
                    f"{trajectories} trajectories per iteration is not a multiple of "
                    f"{algo}'s {k} rollouts per task; choose --trajectories divisible by {k}."
                )
            cfg.rollout.tasks_per_iteration = trajectories // k
            planned = PlannedRun(algo, seed, run_dir, cfg, k)
            planned.action = existing_action(planned)
            runs.append(planned)
    return BenchPlan(out, trajectories, runs, command)


def _normalised(tree: dict[str, Any]) -> dict[str, Any]:
    return flatten(yaml.safe_load(yaml.safe_dump(tree, sort_keys=True)) or {})


def _defaults(algo: str) -> dict[str, Any]:
    """Every setting's default for ``algo``, flattened like a saved config."""
    from agentrl.training.config import from_dict

    return _normalised(from_dict({"algo": algo}).to_dict())


def _added_since(key: str, old: dict[str, Any], new: dict[str, Any], defaults: dict[str, Any]) -> bool:
    """A setting the saved config lacks (agentrl gained it after that run was written), planned
    now at its default: the run trained under the default's behaviour, so it can be reused. A
    new setting at a non-default value is still a different setting."""
    return key not in old and key in defaults and new.get(key) == defaults[key]


def existing_action(planned: PlannedRun) -> str:
    """What to do with ``planned.run_dir`` as it is on disk.

    One of fresh, skip (finished), resume (checkpoint, no summary), extend (finished with fewer
    iterations than asked) or restart (records but no checkpoint: cannot be resumed).
    """
    from agentrl.training.trainer import latest_checkpoint

    folder = planned.run_dir
    saved_path = folder / CONFIG_FILE
    if not saved_path.is_file():
        return "fresh"
    from agentrl.rundir.yaml_input import read_yaml_file

    saved = read_yaml_file(saved_path, "The run's config file") or {}  # one sentence when unreadable
    if not isinstance(saved, dict):
        raise UserError(f"'{saved_path}' does not hold a run config; move that run away.")
    old, new = _normalised(saved), _normalised(planned.config.to_dict())
    defaults = _defaults(planned.config.algo)
    differing = sorted(
        k
        for k in set(old) | set(new)
        if k not in NOT_COMPARED
        and old.get(k) != new.get(k)
        and not _added_since(k, old, new, defaults)
    )
    if differing:
        shown = "; ".join(f"{k}: {old.get(k)!r} there, {new.get(k)!r} now" for k in differing[:3])
        raise UserError(
            f"'{folder}' holds a run made with other settings ({shown}); choose another "
            "output directory or remove it."
        )
    has_checkpoint = latest_checkpoint(folder) is not None
    if (folder / SUMMARY_FILE).is_file():
        done = int((saved.get("train") or {}).get("iterations", 0))
        if done >= planned.config.train.iterations:
            return "skip"
        if not has_checkpoint:
            raise UserError(
                f"'{folder}' finished {done} iterations and has no checkpoint to extend "
                f"to {planned.config.train.iterations}; choose another output directory."
            )
        return "extend"
    if has_checkpoint:
        return "resume"
    metrics = folder / METRICS_FILE
    if metrics.is_file() and metrics.read_text().strip():
        return "restart"
    return "fresh"
