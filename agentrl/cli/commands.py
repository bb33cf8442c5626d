"""The ``agentrl`` commands that train and evaluate: run, eval, envs, algos.

Every command turns a user mistake (unknown env or algorithm, bad model path, malformed
``--set``, unreadable config) into one sentence on stderr and exit code 2; anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from agentrl.cli.common import (
    BackendOpt,
    ConfigOpt,
    EnvOpt,
    ModelOpt,
    SetOpt,
    _loggers_override,
    _option_overrides,
    _quiet_libraries,
    app,
    console,
    err_console,
    user_errors,
)
from agentrl.cli.common import fmt as _fmt
from agentrl.errors import UserError


@app.command()
@user_errors
def run(
    algo: Annotated[str, typer.Argument(help="Algorithm: sapo, ppo, grpo, or one registered by a plugin.")],
    env: EnvOpt = None,
    model: ModelOpt = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    backend: BackendOpt = None,
    iterations: Annotated[int | None, typer.Option(help="Training iterations (train.iterations).")] = None,
    run_dir: Annotated[str | None, typer.Option(help="Run directory (train.run_dir): a new or empty folder, or a run to --resume.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --run-dir from its last checkpoint.")] = False,
    logger: Annotated[str | None, typer.Option("--logger", help="Stream metrics to tensorboard and/or wandb (comma-separated; train.loggers).")] = None,
) -> None:
    """Train an agent with ALGO on an env."""
    _quiet_libraries()
    from agentrl.rundir.checkpoints import ResumeFallbackWarning, check_run_dir
    from agentrl.rundir.output_paths import given_path
    from agentrl.training.config import build_config
    from agentrl.training.trainer import Trainer

    folder = given_path(run_dir, "--run-dir")
    # the options first, then every --set: --set comes last, as docs/cli.md says
    overrides = _option_overrides(("rollout.backend", backend), ("train.iterations", iterations),
                                  ("train.run_dir", folder))
    if logger is not None:
        overrides.append(_loggers_override(logger))
    overrides += list(set_ or [])
    cfg = build_config(algo=algo, env=env, model=model, config_path=config, overrides=overrides)
    if resume and cfg.train.run_dir is None:
        raise UserError("--resume needs the run directory: pass --run-dir (or train.run_dir).")
    check_run_dir(cfg.train.run_dir)  # a new or empty folder, or a run: before its config.yaml is read
    if resume:  # the run's own config.yaml, what the command line gives again on top (checked)
        from agentrl.training.resume import resume_config

        cfg = resume_config(Path(cfg.train.run_dir), algo, env, model, config, overrides) or cfg
    target = _checked_run_dir(cfg)
    existed = target.exists()
    try:
        with console.status(f"loading {cfg.model.name} and {cfg.env.id} ..."), warnings.catch_warnings():
            warnings.simplefilter("ignore", ResumeFallbackWarning)  # one warning: line each, below
            trainer = Trainer(cfg, resume=resume)
    except BaseException:
        if not existed and target.is_dir() and not any(target.iterdir()):
            target.rmdir()  # a failed start leaves no empty run directory behind
        raise
    for line in trainer.resume_warnings:
        err_console.print(f"[yellow]warning:[/] {line}", highlight=False, soft_wrap=True)
    console.print(f"[bold]{cfg.algo}[/] on [bold]{cfg.env.id}[/] with [bold]{cfg.model.name}[/] -> {trainer.run_dir}")
    _print_data(trainer.fingerprints)
    if trainer.restarted:
        console.print("no complete checkpoint: the run starts over from iteration 1")
    columns = [TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn()]
    try:
        with Progress(*columns, console=console, transient=False) as progress:
            task = progress.add_task("iterations", total=cfg.train.iterations, completed=trainer.start_iteration)

            def on_iteration(record: dict[str, Any]) -> None:
                progress.update(task, advance=1, description=(
                    f"it {record['iteration']}  success {record.get('rollout/success_rate', 0):.2f}  "
                    f"return {record.get('rollout/return', 0):.2f}"))
                if not console.is_terminal:  # a log file or CI: the bar only shows at the end
                    console.print(iteration_line(record, cfg.train.iterations), highlight=False, soft_wrap=True)

            result = trainer.train(on_iteration)
    finally:
        trainer.close()
    from agentrl.envs.contract import resolve_env_id

    console.print(summary_table(cfg.algo, resolve_env_id(cfg.env.id), result.history, result.final_eval, result.run_dir))
    _print_data(trainer.fingerprints)


def _print_data(fingerprints: dict[str, dict[str, Any]]) -> None:
    """Which tasks a run plays (agentrl.rundir.fingerprint), said wherever its numbers are shown."""
    from agentrl.rundir.fingerprint import summary_text

    for which, fingerprint in fingerprints.items():
        console.print(f"{which} data: {summary_text(fingerprint)}", highlight=False, soft_wrap=True)


def _checked_run_dir(cfg: Any) -> Path:
    """Fix the run directory now (the default name has a timestamp) and check it can be written
    (a new or empty folder, or a run: :func:`agentrl.rundir.checkpoints.check_run_dir`), then check env,
    model and backend: all before the trainer loads anything."""
    from agentrl.cli.preflight import check_inputs
    from agentrl.rundir.checkpoints import check_run_dir
    from agentrl.training.trainer import default_run_dir

    if cfg.train.run_dir is None:
        cfg.train.run_dir = str(default_run_dir(cfg))
    target = Path(cfg.train.run_dir)
    check_run_dir(cfg.train.run_dir)
    check_inputs(cfg)
    return target


def iteration_line(record: dict[str, Any], total: int) -> str:
    """One plain line per iteration, for output that is not a terminal."""
    parts = [f"iteration {record['iteration']}/{total}"]
    for key, label in (("rollout/success_rate", "success"), ("rollout/return", "return"),
                       ("rollout/episode_length", "length"), ("loss/policy", "policy_loss"),
                       ("eval/success_rate", "eval_success"), ("time/iteration", "seconds")):
        if isinstance(record.get(key), (int, float)):
            parts.append(f"{label} {record[key]:.3f}")
    return "  ".join(parts)


def summary_table(algo: str, env: str, history: list[dict[str, Any]], final_eval: dict[str, float] | None,
                  run_dir: Path) -> Table:
    table = Table(title=f"{algo} on {env}", show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("first iteration", justify="right")
    table.add_column("last iteration", justify="right")
    if not history:
        return table
    first, last = history[0], history[-1]
    keys = ["rollout/success_rate", "rollout/return", "rollout/episode_length", "rollout/invalid_action_rate",
            "policy/entropy", "time/iteration", "time/rollout", "time/actor_update", "time/critic_update",
            "memory/peak_rss_gb", "memory/peak_cuda_gb", "params/trainable"]
    for key in keys:
        if key in last:
            table.add_row(key, _fmt(first.get(key)), _fmt(last.get(key)))
    for key, value in (final_eval or {}).items():
        if key.startswith("eval/") and not key.startswith("eval/episodes"):
            table.add_row(key, "", _fmt(value))
    table.caption = f"{len(history)} iterations, {last.get('env_steps', 0)} env steps; run dir {run_dir}"
    return table


# --- eval -----------------------------------------------------------------------------------------


@app.command("eval")
@user_errors
def eval_(
    env: EnvOpt = None,
    model: ModelOpt = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    backend: BackendOpt = None,
    episodes: Annotated[int, typer.Option(help="Episodes (eval seeds 0..N-1).")] = 16,
    split: Annotated[str | None, typer.Option(help="Env split to evaluate on (default: the env's eval split).")] = None,
    sample: Annotated[bool, typer.Option("--sample", help="Sample at rollout.temperature instead of greedy decoding.")] = False,
    output_: Annotated[str | None, typer.Option("--output", "-o", help="Write the episodes as JSONL here.")] = None,
) -> None:
    """Evaluate a model on an env (no training) and print success per task type."""
    _quiet_libraries()
    import json

    from agentrl.cli.checkpoint_settings import inherited_settings, run_checkpoint
    from agentrl.cli.preflight import check_inputs
    from agentrl.models.policy import Policy
    from agentrl.rollout.evaluation import episode_metrics, evaluate
    from agentrl.rundir.output_paths import check_output_file, given_path
    from agentrl.training.compose import env_factory, load_for_training, make_backend, make_engine
    from agentrl.training.config import build_config, check_option

    check_option("--episodes", episodes)
    output = given_path(output_, "--output", "file")
    overrides = [*_option_overrides(("rollout.backend", backend), ("env.eval_split", split)), *(set_ or [])]
    model, chosen = run_checkpoint(model)
    base, run_dir = inherited_settings(model)
    cfg = build_config(env=env, model=model, config_path=config, overrides=overrides, base=base)
    if output is not None:
        check_output_file(output, "episodes file")
    check_inputs(cfg)
    from agentrl.rundir.fingerprint import summary_text, write_beside
    from agentrl.training.fingerprints import for_eval

    played = for_eval(cfg.env, episodes)  # a data mistake is one sentence before the model loads
    if chosen:
        console.print(chosen, highlight=False, soft_wrap=True)
    if run_dir is not None:
        console.print(f"using the rollout settings of run {run_dir} (action mode {cfg.rollout.action_mode})",
                      highlight=False, soft_wrap=True)
    with console.status(f"loading {cfg.model.name} ..."):
        loaded = load_for_training(cfg.model, reserve_values=False)
        policy = Policy(loaded.model, loaded.tokenizer, loaded.value_tokens, cfg.rollout.temperature)
        backend = make_backend(policy, cfg.rollout, seed=cfg.train.seed)
        engine = make_engine(policy, backend, cfg.rollout, env_factory(cfg.env, "eval"))
    try:
        with console.status(f"playing {episodes} episodes of {cfg.env.id} ..."):
            trajectories = evaluate(engine, episodes, greedy=not sample)
    finally:
        engine.pool.close()
        backend.close()
    metrics = episode_metrics(trajectories, "eval")
    table = Table(title=f"{cfg.model.name} on {cfg.env.id}", header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in metrics.items():
        table.add_row(key, _fmt(value))
    console.print(table)
    console.print(f"data: {summary_text(played)}", highlight=False, soft_wrap=True)
    if output is not None:
        write_beside(output, played)
        output.parent.mkdir(parents=True, exist_ok=True)
        with output.open("w") as fh:
            for traj in trajectories:
                fh.write(json.dumps(traj.to_json()) + "\n")


# --- envs, algos, play ---------------------------------------------------------------------------------


@app.command()
@user_errors
def envs() -> None:
    """List the text envs: agentrl's, those of modules given with --import, and any other
    gymnasium-registered env with Text spaces and r_max."""
    from agentrl.envs.contract import ENV_ALIASES
    from agentrl.envs.modules import list_text_envs

    short = {v: k for k, v in ENV_ALIASES.items()}
    table = Table(title="agentrl envs", header_style="bold")
    table.add_column("id")
    table.add_column("short name")
    table.add_column("from")
    table.add_column("entry point")
    for env_id, origin, entry in list_text_envs():
        table.add_row(env_id, short.get(env_id, ""), origin, entry)
    console.print(table)


@app.command()
@user_errors
def algos() -> None:
    """List the registered algorithms."""
    from agentrl.algorithms import algorithm_names, get_algorithm

    table = Table(title="agentrl algorithms", header_style="bold")
    for col in ("name", "rollouts per task", "critic", "value tokens", "summary"):
        table.add_column(col)
    for name in algorithm_names():
        cls = get_algorithm(name)
        doc = (cls.__doc__ or sys.modules[cls.__module__].__doc__ or "").strip().splitlines()[0]
        k = getattr(cls.config_class(), "group_size", 1)
        table.add_row(name, str(k), "yes" if cls.needs_critic else "no", "yes" if cls.reads_values else "no", doc)
    console.print(table)
