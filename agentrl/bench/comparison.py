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
algorithm before seed k+1), each in a process of its own (:mod:`agentrl.bench.process`) so that
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
import json
import shlex
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentrl.errors import UserError
from agentrl.rundir.layout import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    EVAL_DIR,
    METRICS_FILE,
    SAMPLES_DIR,
    SUMMARY_FILE,
)
from agentrl.rundir.machine import describe_machine
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
        key = text.split("=", 1)[0]
        if ":" not in key:
            shared.append(text)
            continue
        name, rest = text.split(":", 1)
        name = name.strip().lower()
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


# --- running -------------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def live_table(plan: BenchPlan, statuses: Sequence[RunStatus]) -> Any:
    """The rich table shown while the bench runs: one row per run."""
    from rich.table import Table

    table = Table(
        title=f"agentrl bench -> {plan.out}  ({plan.trajectories} trajectories / iteration)",
        header_style="bold",
    )
    for name, justify in (
        ("algo", "left"),
        ("seed", "right"),
        ("state", "left"),
        ("iteration", "right"),
        ("success", "right"),
        ("return", "right"),
        ("eval success", "right"),
        ("time/iteration (s)", "right"),
        ("elapsed (s)", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    now = time.monotonic()
    for status in statuses:
        planned = status.run.config.train.iterations
        elapsed = ""
        if status.started is not None:
            elapsed = f"{(status.finished or now) - status.started:.0f}"
        state = status.state + (f" ({status.warning})" if status.warning else "")
        table.add_row(
            status.run.algo,
            str(status.run.seed),
            state,
            f"{status.iteration}/{planned}",
            _fmt(status.record.get("rollout/success_rate")),
            _fmt(status.record.get("rollout/return")),
            _fmt(status.record.get("eval/success_rate")),
            _fmt(status.record.get("time/iteration"), 1),
            elapsed,
        )
    return table


class Manifest:
    """``OUT/bench.json``: every bench invocation on this folder, appended, never rewritten away."""

    def __init__(self, plan: BenchPlan):
        self.path = plan.out / BENCH_FILE
        data: dict[str, Any] = {}
        if self.path.is_file():
            try:
                data = json.loads(self.path.read_text())
            except json.JSONDecodeError:
                data = {}
            if not isinstance(data, dict) or not isinstance(data.get("sessions", []), list):
                raise UserError(f"'{self.path}' is not an agentrl bench manifest (a mapping with a list of "
                                f"sessions); move it away or choose another --out.")
        self.data = data
        self.data["trajectories_per_iteration"] = plan.trajectories
        self.session: dict[str, Any] = {
            "command": plan.command,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "finished": None,
            # each run in a process of its own (agentrl.bench.process): its memory is its own
            "run_isolation": "process",
            "machine": describe_machine(),
            "runs": [
                {
                    "algo": r.algo,
                    "seed": r.seed,
                    "run_dir": str(r.run_dir.resolve()),
                    "action": r.action,
                    "state": "queued",
                }
                for r in plan.runs
            ],
        }
        self.data.setdefault("sessions", []).append(self.session)

    def update(self, index: int, state: str, warning: str = "", **fields: Any) -> None:
        """Record a run's state; its own start and end times too, since a comparison run in
        pieces is usually killed, never finished, so the session's end says nothing about
        when a run inside it finished."""
        entry = self.session["runs"][index]
        entry["state"] = state
        now = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        if state == "running":
            entry["started"] = now
        elif state in ("done", "failed", "interrupted", "paused"):  # this session's work on it ended
            entry["finished"] = now
        if warning:
            entry["warning"] = warning
        entry.update(fields)
        self.write()

    def finish(self, ended: str = "completed") -> None:
        """The session's end and how it came (``ended``: completed, time limit, interrupted by
        SIGINT, ...), so an interrupted session does not read as still running."""
        self.session["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        self.session["ended"] = ended
        self.write()

    def write(self) -> None:
        from agentrl.rundir.durable import atomic_write_text

        self.path.parent.mkdir(parents=True, exist_ok=True)
        # replaced in one rename: a kill mid-write must not turn the sessions' history into {}
        atomic_write_text(self.path, json.dumps(self.data, indent=2) + "\n")


def how_it_ended(exc: BaseException) -> str:
    """A bench session's end, in words, from the exception that ended it."""
    import signal

    if isinstance(exc, KeyboardInterrupt):
        return "interrupted by SIGINT"
    if isinstance(exc, SystemExit) and isinstance(exc.code, int) and exc.code > 128:
        try:
            return f"stopped by {signal.Signals(exc.code - 128).name}"  # run_process's exit code
        except ValueError:
            pass
    if isinstance(exc, UserError):
        return f"stopped by a user error: {exc}"
    return f"failed: {type(exc).__name__}"


def _clear_partial(folder: Path) -> None:
    """A run that wrote records but no checkpoint cannot be resumed: drop what it wrote."""
    for name in (METRICS_FILE, SUMMARY_FILE, CONFIG_FILE):
        (folder / name).unlink(missing_ok=True)
    for name in (EVAL_DIR, SAMPLES_DIR, CHECKPOINTS_DIR):
        shutil.rmtree(folder / name, ignore_errors=True)


def run_bench(
    plan: BenchPlan,
    console: Any | None = None,
    on_iteration: Callable[[PlannedRun, dict[str, Any]], None] | None = None,
    time_limit_s: float | None = None,
) -> list[RunStatus]:
    """Run every planned run in order, showing a live table on ``console`` (rich).

    ``time_limit_s``: once the bench has run that long, the current run checkpoints at the end
    of its iteration (state ``paused``) and no further run starts; running the same plan again
    resumes there. A comparison done in pieces then ends each piece cleanly instead of being
    killed and losing the iterations since the last ``train.save_every`` checkpoint."""
    from rich.console import Console

    console = console or Console()
    plan.out.mkdir(parents=True, exist_ok=True)
    statuses = [
        RunStatus(r, state="done (kept)" if r.action == "skip" else "queued") for r in plan.runs
    ]
    for status in statuses:
        if status.run.action == "skip":
            status.iteration = status.run.config.train.iterations
            status.record = _last_record(status.run.run_dir)
    manifest = Manifest(plan)
    # wall-clock time: the run's own process reads the same deadline
    deadline = None if time_limit_s is None else time.time() + time_limit_s
    if time_limit_s is not None:
        manifest.session["time_limit_minutes"] = round(time_limit_s / 60, 2)
    manifest.write()
    try:
        _run_statuses(plan, statuses, manifest, console, on_iteration, deadline)
    except BaseException as exc:  # a kill or Ctrl-C too: the manifest says how the session ended
        manifest.finish(how_it_ended(exc))
        raise
    console.print()
    paused = any(status.state == "paused" for status in statuses)
    queued = any(status.state == "queued" for status in statuses)
    manifest.finish("time limit" if paused or queued else "completed")
    return statuses


def _run_statuses(
    plan: BenchPlan,
    statuses: list[RunStatus],
    manifest: Manifest,
    console: Any,
    on_iteration: Callable[[PlannedRun, dict[str, Any]], None] | None,
    deadline: float | None,
) -> None:
    """The bench's loop: each planned run in its own process, in order, under a live table."""
    from rich.live import Live

    from agentrl.bench.process import run_isolated

    def out_of_time() -> bool:
        return deadline is not None and time.time() >= deadline

    with Live(
        console=console, refresh_per_second=2, get_renderable=lambda: live_table(plan, statuses)
    ):
        for index, status in enumerate(statuses):
            planned = status.run
            if planned.action == "skip":
                manifest.update(index, "skipped")
                continue
            # the rest stay queued for the next piece; a piece always trains at least one
            # iteration, so each invocation makes progress whatever the limit
            if out_of_time() and any(st.started is not None for st in statuses):
                break
            if planned.action == "restart":
                _clear_partial(planned.run_dir)
            status.state = {"resume": "resuming", "extend": "extending"}.get(
                planned.action, "loading"
            )
            status.started = time.monotonic()

            def started(start_iteration: int, rss: float | None, index: int = index,
                        status: RunStatus = status) -> None:
                status.iteration = start_iteration
                status.state = "running"
                # what the run's process held before it loaded anything: libraries only
                manifest.update(index, "running", rss_at_start_gb=rss)

            def record_iteration(record: dict[str, Any], status: RunStatus = status) -> None:
                status.iteration = int(record.get("iteration", status.iteration))
                status.record = record
                seen, it = record.get("trajectories"), record.get("iteration")
                if (
                    isinstance(seen, (int, float))
                    and isinstance(it, int)
                    and seen != plan.trajectories * it
                ):
                    status.warning = (
                        f"{seen / it:g} trajectories/iteration, not {plan.trajectories}"
                    )
                if on_iteration is not None:
                    on_iteration(status.run, record)

            try:
                result = run_isolated(
                    planned.config,
                    planned.action in ("resume", "extend"),
                    f"{planned.algo} seed {planned.seed}",
                    started,
                    record_iteration,
                    deadline,
                )
                status.state = "paused" if result.stopped else "done"
            except BaseException as exc:
                stopped = isinstance(exc, (KeyboardInterrupt, SystemExit))
                status.state = "interrupted" if stopped else "failed"
                manifest.update(index, status.state)
                raise
            finally:
                status.finished = time.monotonic()
            manifest.update(index, status.state, status.warning)


def _last_record(run_dir: Path) -> dict[str, Any]:
    """The last whole record (a line cut off by a kill is skipped, not taken as no record)."""
    from agentrl.rundir.metrics import read_records

    records = read_records(run_dir / METRICS_FILE)
    return records[-1] if records else {}


def bench_command_text(
    algos: list[str],
    out: Path,
    env: str | None,
    model: str | None,
    config: Path | None,
    overrides: list[str],
    seeds: int,
    first_seed: int,
    iterations: int | None,
    trajectories: int,
    eval_episodes: int | None,
) -> str:
    """The bench invocation in canonical form (what the manifest and the report print).

    Built from the parsed options rather than ``sys.argv`` so that it reads the same however
    the command was started (console script, ``python -m``, a test) and states the resolved T.
    """
    parts = ["agentrl", "bench", "--algos", ",".join(algos)]
    for flag, value in (("--env", env), ("--model", model), ("--config", config)):
        if value is not None:
            parts += [flag, str(value)]
    parts += ["--seeds", str(seeds)]
    if first_seed:
        parts += ["--first-seed", str(first_seed)]
    if iterations is not None:
        parts += ["--iterations", str(iterations)]
    parts += ["--trajectories", str(trajectories)]
    if eval_episodes is not None:
        parts += ["--eval-episodes", str(eval_episodes)]
    for text in overrides:
        parts += ["--set", text]
    parts += ["--out", str(out)]
    return shlex.join(parts)
