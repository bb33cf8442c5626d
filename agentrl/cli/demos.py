"""``agentrl play``, ``agentrl demos`` and ``agentrl sft``: an env played by hand, its expert
recorded as demonstrations, and the supervised warm start on them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

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
    ConfigOpt,
    EnvOpt,
    ModelOpt,
    SetOpt,
    _option_overrides,
    _quiet_libraries,
    app,
    console,
    user_errors,
)
from agentrl.cli.common import fmt as _fmt
from agentrl.errors import UserError


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
