"""``agentrl bench`` and ``agentrl suite``: the commands, their canonical command line, and the
live table drawn while a bench runs (:mod:`agentrl.cli.bench_view`)."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from agentrl.cli.common import (
    ConfigOpt,
    EnvOpt,
    ModelOpt,
    SetOpt,
    _loggers_override,
    _quiet_libraries,
    app,
    console,
    user_errors,
)
from agentrl.errors import UserError


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
    from agentrl.bench.plan import BENCH_FILE, parse_algos, plan_bench
    from agentrl.bench.supervise import run_bench
    from agentrl.cli.bench_view import live_view

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
        plan, live_view(console), time_limit_s=None if stop_after_minutes is None else 60 * stop_after_minutes
    )
    console.print()
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
    import uuid

    from agentrl.bench.plan import parse_algos
    from agentrl.bench.suite import (
        SUITE_FILE,
        plan_suite,
        probe_by_name,
        probe_records,
        run_suite,
        write_manifest,
    )
    from agentrl.rundir.machine import suite_machine

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
    # the id, not the start time, tells this invocation's entry from an earlier one's: two short
    # invocations can start within the same second
    session = {"id": uuid.uuid4().hex[:12],
               "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
               "command": " ".join(shlex.quote(a) for a in sys.argv), "machine": suite_machine(),
               "runs_to_do": todo}
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
