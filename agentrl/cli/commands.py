"""The ``agentrl`` command line (typer + rich).

Every command turns a user mistake (unknown env or algorithm, bad model path, malformed
``--set``, unreadable config) into one sentence on stderr and exit code 2; anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
import time
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

try:  # typer >= 0.24 carries its own copy of click; its parsing errors are that copy's classes
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover (older typer: the click package)
    from click import exceptions as click_exceptions
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from agentrl.errors import UserError

console = Console()
err_console = Console(stderr=True)


class OneLineUsageErrors(TyperGroup):
    """Command-line parsing mistakes (a missing argument, a word where a number goes, an unknown
    option) as one ``error:`` line and exit 2, like every other user mistake, instead of click's
    usage box."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_exceptions.NoArgsIsHelpError as exc:  # the help is already printed
            sys.exit(exc.exit_code)
        except click_exceptions.ClickException as exc:
            where = f" (see '{exc.ctx.command_path} --help')" if getattr(exc, "ctx", None) is not None else ""
            message = exc.format_message().strip().rstrip(".").replace("\n", " ")
            err_console.print(f"[bold red]error:[/] {message}{where}.", highlight=False, soft_wrap=True, markup=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            err_console.print("Aborted.")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, cls=OneLineUsageErrors,
                  help="Train LLM agents with RL on multi-turn text envs: SAPO, PPO, GRPO.")

EnvOpt = Annotated[str | None, typer.Option("--env", "-e", help="Env id or short name (keydoor, alfworld, webshop).")]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Hub id, alias (Qwen2.5-7B), folder, .gguf file, 'embedded' (default) or 'tiny'.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML file with the run's settings.")]
SetOpt = Annotated[list[str] | None, typer.Option("--set", "-s", help="Override a setting: section.key=value (repeatable).")]
BackendOpt = Annotated[str | None, typer.Option("--backend", help="Generation backend: auto (vLLM where installed), hf or vllm (rollout.backend).")]


#: The longest error sentence printed; a value a user pasted (a megabyte line) is cut to this.
MAX_MESSAGE_CHARS = 2000


def _one_line(message: str) -> str:
    """The sentence on one line, cut to :data:`MAX_MESSAGE_CHARS`."""
    message = " ".join(message.split("\n"))
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + " ..."


def user_errors(fn):
    """Report :class:`UserError` as one sentence and exit 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            err_console.print(f"[bold red]error:[/] {escape(_one_line(str(exc)))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper


ImportOpt = Annotated[list[str] | None, typer.Option(
    "--import", help="Import this module first (repeatable): your code that registers envs with gymnasium.")]


@app.callback()
@user_errors
def _main(imports: ImportOpt = None) -> None:
    """Train LLM agents with RL on multi-turn text envs: SAPO, PPO, GRPO."""
    if imports:
        from agentrl.envs.modules import import_all

        import_all(imports)


def _quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


# --- run ------------------------------------------------------------------------------------------


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


def _option_overrides(*pairs: tuple[str, Any]) -> list[str]:
    """``key=value`` overrides for the options given (None: not given), in order."""
    return [f"{key}={value}" for key, value in pairs if value is not None]


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


@app.command()
@user_errors
def play(
    env: Annotated[str, typer.Argument(help="Env id or short name.")],
    seed: Annotated[int, typer.Option(help="Task seed.")] = 0,
    split: Annotated[str | None, typer.Option(help="Env split.")] = None,
    set_: SetOpt = None,
) -> None:
    """Play an env yourself in the terminal: type an action, or its number in the list."""
    from agentrl.envs.contract import make_env
    from agentrl.training.config import build_config, check_option

    check_option("--seed", seed)
    cfg = build_config(env=env, overrides=list(set_ or []))
    kwargs = dict(cfg.env.kwargs)
    if split is not None:
        kwargs["split"] = split
    environment = make_env(cfg.env.id, **kwargs)
    try:
        obs, info = environment.reset(seed=seed)
        console.print(f"[bold]Task:[/] {info['task']}")
        total, steps = 0.0, 0
        while True:
            console.print(f"\n{obs}")
            admissible = info.get("admissible_actions")
            if admissible:
                for i, action in enumerate(admissible, 1):
                    console.print(f"  [cyan]{i:>2}[/] {action}", highlight=False)
            line = _read_move(steps + 1)
            if line is None:
                console.print(f"\ninput ended after {steps} steps (return {total:g}); the episode is left unfinished.")
                break
            if line in ("quit", "exit"):
                break
            if admissible and line.isascii() and line.isdigit() and 1 <= int(line) <= len(admissible):
                line = admissible[int(line) - 1]
            obs, reward, terminated, truncated, info = environment.step(line)
            total += float(reward)
            steps += 1
            if terminated or truncated:
                console.print(f"\n{obs}")
                outcome = "won" if info.get("won") else ("time is up" if truncated else "episode over")
                console.print(f"[bold]{outcome}[/] after {steps} steps, return {total:g}")
                break
    finally:
        environment.close()


#: The longest line ``agentrl play`` takes as a move (a pasted file is not an action).
MAX_PLAY_LINE = 10_000


def _read_move(number: int) -> str | None:
    """The player's next line, stripped; None at the end of the input. A line that is not UTF-8
    text or is longer than :data:`MAX_PLAY_LINE` ends the game with one sentence."""
    try:
        line = input("> ")
    except EOFError:
        return None
    except UnicodeDecodeError:
        raise UserError(f"Input line {number} is not UTF-8 text; type an action or its number.") from None
    if len(line) > MAX_PLAY_LINE:
        raise UserError(f"Input line {number} is {len(line):,} characters long; a move is at most "
                        f"{MAX_PLAY_LINE:,}.")
    return line.strip()


# --- warm start: demos and sft ---------------------------------------------------------------------


@app.command()
@user_errors
def demos(
    env: EnvOpt = None,
    episodes: Annotated[int, typer.Option(help="Expert episodes to record.")] = 100,
    split: Annotated[str | None, typer.Option(help="Env split (default: the env's train split).")] = None,
    output_: Annotated[str, typer.Option("--output", "-o", help="JSONL file to write.")] = "demos.jsonl",
    expert_noise: Annotated[float, typer.Option(help="Share of moves replaced by random admissible ones.")] = 0.0,
    model: ModelOpt = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    seed: Annotated[int, typer.Option(help="Seed of the noise.")] = 0,
) -> None:
    """Record an env's expert as demonstrations, prompted exactly as rollouts are."""
    _quiet_libraries()
    from agentrl.cli.preflight import check_inputs
    from agentrl.models.loading import load_tokenizer, resolve_model
    from agentrl.rollout.demos import record_demos
    from agentrl.rundir.output_paths import check_output_file, given_path
    from agentrl.training.compose import (
        conversation_builder,
        env_factory,
        prompt_builder,
        split_kwargs,
    )
    from agentrl.training.config import build_config, check_option

    output = given_path(output_, "--output", "file")
    check_option("--episodes", episodes)
    check_option("--seed", seed)
    if not 0.0 <= expert_noise < 1.0:
        raise UserError(f"--expert-noise must be in [0, 1), not {expert_noise}.")
    overrides = [*_option_overrides(("env.train_split", split)), *(set_ or [])]
    cfg = build_config(env=env, model=model, config_path=config, overrides=overrides)
    check_output_file(output, "demonstrations file")
    check_inputs(cfg, backend=False)
    tokenizer = load_tokenizer(resolve_model(cfg.model.name))
    make = env_factory(cfg.env, "train")
    probe = make()
    builder = prompt_builder(tokenizer, cfg.rollout, probe)
    probe.close()
    with console.status(f"recording {episodes} expert episodes of {cfg.env.id} ..."):
        stats = record_demos(make, builder, episodes, output, cfg.env.id,
                             split_kwargs(cfg.env, "train").get("split"), expert_noise, seed,
                             max_turns=cfg.rollout.max_turns,
                             conversation=conversation_builder(builder, cfg.rollout))
    console.print(f"wrote {int(stats['turns'])} turns of {episodes} episodes to {output} "
                  f"(expert success {stats['expert_success']:.2f})")


@app.command()
@user_errors
def sft(
    demos_: Annotated[list[Path], typer.Option("--demos", "-d", help="Demonstration JSONL files.")],
    output_: Annotated[str, typer.Option("--output", "-o", help="Checkpoint folder to write (new or empty).")],
    env: EnvOpt = None,
    model: ModelOpt = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    epochs: Annotated[int | None, typer.Option(help="Passes over the demonstrations (sft.epochs).")] = None,
    lr: Annotated[float | None, typer.Option(help="Learning rate (sft.lr).")] = None,
    eval_episodes: Annotated[int | None, typer.Option(help="Held-out episodes to evaluate at the end (sft.eval_episodes).")] = None,
    eval_before: Annotated[bool, typer.Option("--eval-before", help="Also evaluate before training.")] = False,
) -> None:
    """Supervised fine-tuning on demonstrations (reply tokens only); writes a checkpoint for run."""
    _quiet_libraries()
    from agentrl.rundir.output_paths import check_output_dir, given_path
    from agentrl.training.config import build_config
    from agentrl.training.sft import run_sft

    output = given_path(output_, "--output")
    overrides = [*_option_overrides(("sft.epochs", epochs), ("sft.lr", lr), ("sft.eval_episodes", eval_episodes)),
                 *(set_ or [])]
    cfg = build_config(env=env, model=model, config_path=config, overrides=overrides)
    from agentrl.cli.preflight import check_inputs
    from agentrl.rollout.demos import check_demo_files

    check_output_dir(output, "checkpoint folder", must_be_empty=True)
    check_demo_files(demos_)
    check_inputs(cfg, backend=cfg.sft.eval_episodes > 0)
    columns = [TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TimeRemainingColumn()]
    began = time.perf_counter()

    def on_eval(name: str, metrics: dict[str, float], seconds: float) -> None:
        success = metrics.get("eval/success_rate")
        console.print(f"held-out eval {name} SFT: success {_fmt(success)} "
                      f"over {cfg.sft.eval_episodes} episodes ({seconds / 60:.1f} min)")

    with Progress(*columns, console=console) as progress:
        task = progress.add_task("sft", total=None)

        def on_step(step: int, total: int, loss: float) -> None:
            progress.update(task, completed=step, total=total, description=f"sft  loss {loss:.3f}")
            if not console.is_terminal:  # a log file gets one plain line per step instead of a bar
                console.print(f"sft step {step}/{total} loss {loss:.4f} "
                              f"({(time.perf_counter() - began) / 60:.1f} min)")

        result = run_sft(cfg, cfg.sft, demos_, output, on_step, eval_before=eval_before, on_eval=on_eval)
    table = Table(title=f"SFT of {cfg.model.name} on {len(demos_)} demo file(s)", header_style="bold")
    table.add_column("metric")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    table.add_row("loss (first / last step)", _fmt(result.losses[0]), _fmt(result.losses[-1]))
    for key, value in (result.eval_after or {}).items():
        before = (result.eval_before or {}).get(key)
        table.add_row(key, _fmt(before), _fmt(value))
    phases = ", ".join(f"{name} {sec / 60:.1f}" for name, sec in result.phase_seconds.items())
    rows = f" in {result.sequences} episode sequences" if result.sequences < result.examples else ""
    table.caption = (f"{result.examples} turns{rows}, {result.seconds / 60:.1f} min in all ({phases}); "
                     f"checkpoint {output}")
    console.print(table)


# --- bench and report --------------------------------------------------------------------------
# Running a comparison is agentrl.bench.comparison's (beside the trainer); agentrl.reporting only reads
# run directories. Heavy imports happen when a command runs, so `agentrl --help` stays fast.


def _loggers_override(text: str) -> str:
    """``--logger tensorboard,wandb`` as the ``train.loggers`` override it stands for."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    return f"train.loggers=[{','.join(names)}]"


def _resumable_output(out_: str, kind: str, manifest: str, seeds: int, first_seed: int,
                      stop_after_minutes: float | None) -> Path:
    """The checks ``bench`` and ``suite`` share before any work: the output folder is new, empty
    or one of their own (it holds ``manifest``: they resume into it; any other non-empty folder
    is refused), the seed options are in range and the time budget is not negative."""
    from agentrl.rundir.output_paths import check_owned_dir, given_path
    from agentrl.training.config import check_option

    out = given_path(out_, "--out")
    check_owned_dir(out, f"{kind} output folder", f"a {kind}'s output", lambda p: (p / manifest).is_file())
    check_option("--seeds", seeds)
    check_option("--first-seed", first_seed)
    if stop_after_minutes is not None and not stop_after_minutes >= 0:
        raise UserError(f"--stop-after-minutes must be 0 or more, not {stop_after_minutes:g}.")
    return out


@app.command()
@user_errors
def bench(
    algos: Annotated[
        str, typer.Option(help="Comma-separated algorithms to compare.")
    ] = "sapo,ppo,grpo",
    env: EnvOpt = None,
    model: ModelOpt = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    seeds: Annotated[
        int, typer.Option(help="Seeds per algorithm (train.seed = first_seed + 0..N-1).")
    ] = 3,
    first_seed: Annotated[int, typer.Option(help="The first seed.")] = 0,
    iterations: Annotated[
        int | None, typer.Option(help="Training iterations per run (train.iterations).")
    ] = None,
    trajectories: Annotated[
        int | None,
        typer.Option(
            help="Trajectories per iteration for every algorithm; GRPO's k rollouts count "
            "toward it (default: what the config gives its own algorithm)."
        ),
    ] = None,
    eval_episodes: Annotated[
        int | None,
        typer.Option(
            help="Eval episodes at the end of each run (train.eval_episodes); reports "
            "need them."
        ),
    ] = None,
    out_: Annotated[
        str, typer.Option("--out", "-o", help="Output folder: OUT/<algo>/seed<k>/ (new, empty, or a bench's to resume).")
    ] = "runs/bench",
    logger: Annotated[
        str | None,
        typer.Option(
            "--logger",
            help="Stream every run's metrics to tensorboard and/or wandb (comma-separated; "
            "train.loggers). A resumed bench may add or drop it.",
        ),
    ] = None,
    stop_after_minutes: Annotated[
        float | None,
        typer.Option(
            help="Stop cleanly once the bench has run this long: the current run checkpoints "
            "at the end of its iteration, no new run starts, and the same command resumes "
            "there (a comparison done in pieces).",
        ),
    ] = None,
) -> None:
    """Run several algorithms like-for-like over several seeds (resumable)."""
    from agentrl.bench.comparison import (
        BENCH_FILE,
        bench_command_text,
        parse_algos,
        plan_bench,
        run_bench,
    )

    out = _resumable_output(out_, "bench", BENCH_FILE, seeds, first_seed, stop_after_minutes)
    names = parse_algos(algos)
    overrides = list(set_ or [])
    if logger is not None:
        overrides.append(_loggers_override(logger))
    plan = plan_bench(
        names,
        out,
        env=env,
        model=model,
        config_path=config,
        overrides=overrides,
        seeds=seeds,
        first_seed=first_seed,
        iterations=iterations,
        trajectories=trajectories,
        eval_episodes=eval_episodes,
    )
    plan.command = bench_command_text(
        names,
        out,
        env,
        model,
        config,
        overrides,
        seeds,
        first_seed,
        iterations,
        plan.trajectories,
        eval_episodes,
    )
    _quiet_libraries()
    todo = sum(r.action != "skip" for r in plan.runs)
    console.print(
        f"{len(plan.runs)} runs ({todo} to do, {len(plan.runs) - todo} already finished), "
        f"{plan.trajectories} trajectories per iteration -> {out}"
    )
    statuses = run_bench(
        plan, console, time_limit_s=None if stop_after_minutes is None else 60 * stop_after_minutes
    )
    warned = [s for s in statuses if s.warning]
    for status in warned:
        console.print(
            f"[yellow]warning:[/] {status.run.algo} seed {status.run.seed}: {status.warning}"
        )
    left = [s for s in statuses if s.state not in ("done", "done (kept)")]
    if left:
        paused = [f"{s.run.algo} seed {s.run.seed} at iteration {s.iteration}"
                  for s in left if s.state == "paused"]
        console.print(
            f"stopped at the time limit ({stop_after_minutes:g} min): {len(left)} of "
            f"{len(statuses)} runs not finished"
            + (f" ({', '.join(paused)} checkpointed)" if paused else "")
            + "; run the same command to resume."
        )
        return
    console.print(
        f"done; make the report with: agentrl report {shlex.quote(str(out))} "
        f"-o {shlex.quote(str(out / 'report'))}"
    )

@app.command()
@user_errors
def suite(
    algos: Annotated[str, typer.Option(help="Comma-separated algorithms.")] = "sapo,ppo,grpo",
    probes: Annotated[
        str | None, typer.Option(help="Comma-separated probes (default: all; see docs/suite.md).")
    ] = None,
    seeds: Annotated[int, typer.Option(help="Seeds per probe and algorithm.")] = 10,
    first_seed: Annotated[int, typer.Option(help="The first seed.")] = 0,
    model: Annotated[str, typer.Option(help="Model (tiny, or embedded for the slower variant).")] = "tiny",
    iterations: Annotated[int, typer.Option(help="Training iterations per run.")] = 20,
    trajectories: Annotated[int, typer.Option(help="Trajectories per iteration, every algorithm.")] = 16,
    eval_episodes: Annotated[int, typer.Option(help="Eval episodes at the end of each run.")] = 32,
    set_: SetOpt = None,
    out_: Annotated[str, typer.Option("--out", "-o", help="Output folder: OUT/<probe>/<algo>/seed<k>/ (new, empty, or a suite's to resume).")]
    = "runs/suite",
    stop_after_minutes: Annotated[
        float | None,
        typer.Option(help="Stop cleanly after this long; the same command resumes."),
    ] = None,
) -> None:
    """Run the behaviour suite: every probe x algorithm x seed, like-for-like (resumable)."""
    import datetime
    import platform

    from agentrl.bench.comparison import parse_algos
    from agentrl.bench.suite import (
        SUITE_FILE,
        plan_suite,
        probe_by_name,
        probe_records,
        run_suite,
        write_manifest,
    )

    out = _resumable_output(out_, "suite", SUITE_FILE, seeds, first_seed, stop_after_minutes)
    names = parse_algos(algos)
    chosen = probe_by_name(probes)
    overrides = list(set_ or [])
    plans = plan_suite(names, out, chosen, model=model, seeds=seeds, first_seed=first_seed,
                       iterations=iterations, trajectories=trajectories,
                       eval_episodes=eval_episodes, overrides=overrides)
    _quiet_libraries()
    total = sum(len(p.runs) for p in plans.values())
    todo = sum(r.action != "skip" for p in plans.values() for r in p.runs)
    console.print(f"{len(chosen)} probes x {len(names)} algorithms x {seeds} seeds: {total} runs "
                  f"({todo} to do) -> {out}")
    session = {"started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
               "command": " ".join(shlex.quote(a) for a in sys.argv), "machine": platform.processor()
               or platform.machine(), "runs_to_do": todo}
    settings = {"model": model, "seeds": seeds, "first_seed": first_seed, "iterations": iterations,
                "trajectories": trajectories, "eval_episodes": eval_episodes, "overrides": overrides}
    records = probe_records(chosen)
    write_manifest(out, records, names, settings, session)
    start = time.monotonic()

    def on_run(probe: str, planned: Any, state: str) -> None:
        if state != "start":
            console.print(f"{probe:10} {planned.algo:5} seed {planned.seed}: {state} "
                          f"({time.monotonic() - start:.0f} s)")

    done, left = run_suite(plans, on_run, None if stop_after_minutes is None else 60 * stop_after_minutes)
    session.update(finished=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                   seconds=round(time.monotonic() - start, 1), runs_done=done, runs_left=left)
    write_manifest(out, records, names, settings, session)
    if left:
        console.print(f"stopped at the time limit: {left} of {total} runs not finished; "
                      "run the same command to resume.")
        return
    console.print(f"done; make the report with: agentrl report {shlex.quote(str(out))} "
                  f"-o {shlex.quote(str(out / 'report'))}")


@app.command()
@user_errors
def report(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            help="Run directories, or folders holding them (a bench output).",
            show_default=False,
        ),
    ],
    output_: Annotated[
        str,
        typer.Option("--output", "-o", help="Folder for report.html, report.md and figures/ (new, empty, or a report's)."),
    ] = "report",
    traces: Annotated[int, typer.Option(help="Value-trace episodes per algorithm.")] = 2,
    title: Annotated[
        str | None, typer.Option(help="Report title (default: algorithms on env).")
    ] = None,
) -> None:
    """Build a self-contained HTML report and a Markdown twin from run directories."""
    from agentrl.errors import UserError
    from agentrl.reporting.report import build_report
    from agentrl.rundir.output_paths import check_owned_dir, given_path

    output = given_path(output_, "--output")
    if traces < 0:
        raise UserError(f"--traces cannot be negative ({traces}).")
    from agentrl.training.config import check_option

    check_option("--traces", traces)
    check_owned_dir(output, "report folder", "a report", _is_report)
    from agentrl.reporting.suite import build_suite_report, is_suite

    if len(run_dirs) == 1 and is_suite(run_dirs[0]):  # an `agentrl suite` output folder
        html, markdown, count = build_suite_report(run_dirs[0], output)
        console.print(f"behaviour suite, {count} finished runs\nHTML: {html}\nMarkdown: {markdown}")
        return
    files = build_report(run_dirs, output, traces, title)
    console.print(
        f"{files.runs} runs in {len(files.groups)} groups ({', '.join(files.groups)}); "
        f"{len(files.figures)} figures"
    )
    console.print(f"HTML: {files.html}\nMarkdown: {files.markdown}")


def _is_report(folder: Path) -> bool:
    """A folder ``agentrl report`` wrote before (rewriting it is what a user asks for)."""
    return (folder / "report.html").is_file() or (folder / "report.md").is_file()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
