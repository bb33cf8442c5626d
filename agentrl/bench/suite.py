"""``agentrl suite``: the behaviour suite, every probe x algorithm x seed, like-for-like, resumable.

bsuite did this for classic RL: small tasks that each isolate one property, run for many seeds,
so that "does the critic help?" gets an answer with an interval rather than an anecdote. Here the
probes are text envs (agentrl_envs/probes) played multi-turn by an LLM policy, and the question
is the one SAPO stakes its claim on: does a value function learned inside the policy model give
better credit assignment than PPO's separate critic or GRPO's group baseline?

Each probe is one ``agentrl bench`` (:mod:`agentrl.bench.plan`: same tasks per seed, same
trajectory budget per iteration, GRPO's k rollouts counted in it) under ``OUT/<probe>/``. Runs go
seed by seed (seed k of every probe and algorithm before seed k+1), so a suite stopped part-way
holds whole seeds. Unlike ``bench``, runs train in this process: a tiny model's run takes seconds
and a fresh interpreter per run would cost as much as the run; the suite reports no per-run
memory. A finished run is kept, a checkpointed one resumed, exactly as ``bench`` does.
``OUT/suite.json`` records the probes (with their optimal and random returns), the settings and
every invocation; ``agentrl report OUT`` renders it (agentrl/reporting/suite.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentrl.bench.plan import BenchPlan, PlannedRun, algorithm_prefix, plan_bench
from agentrl.bench.supervise import _clear_partial
from agentrl.errors import UserError
from agentrl.rundir.durable import atomic_write_text

SUITE_FILE = "suite.json"


@dataclass(frozen=True)
class Probe:
    """One probe of the suite: an env with its options, and any rollout setting it needs."""

    name: str
    env: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    overrides: tuple[str, ...] = ()
    #: True where a state value is learnable from what the model reads (every probe here); the
    #: report holds V's explained variance to the threshold only on those
    value_learnable: bool = True
    #: a chain probe: each finished run's critic is asked what the decisive press was worth
    #: (agentrl/bench/counterfactual.py), while its checkpoint is still on this machine
    judge_press: bool = False


PROBES: tuple[Probe, ...] = (
    Probe("chain-d1", "agentrl/Chain-v0", {"delay": 1}, judge_press=True),
    Probe("chain-d4", "agentrl/Chain-v0", {"delay": 4}, judge_press=True),
    Probe("noisy-d1", "agentrl/Chain-v0", {"delay": 1, "reward_noise": 0.2}, judge_press=True),
    Probe("locks", "agentrl/Locks-v0", {"n_locks": 4}),
    Probe("memory", "agentrl/Memory-v0", {"n_codes": 3, "gap": 2}, ("rollout.history=conversation",)),
    # length 5 in 8 moves (random 11%) was solved by every algorithm within a few iterations in
    # the first suite; 7 in 10 leaves a random walk 3.3% (docs/suite.md)
    Probe("corridor", "agentrl/Corridor-v0", {"length": 7, "max_steps": 10}),
)

#: The settings every run shares (the tiny model; a random tiny model writes no well-formed
#: action alone, so decoding is constrained to the admissible actions). Measured, not guessed:
#: docs/suite.md says where each came from.
SUITE_SETTINGS: tuple[str, ...] = (
    "rollout.action_mode=constrained", "rollout.history_window=0",
    "algorithm.lr=1e-2", "algorithm.epochs=2", "algorithm.minibatch_turns=16", "algorithm.kl_coef=0",
    "grpo:algorithm.group_size=8",
    # at lr 1e-2 the clipped readout overshoots |d| > tau_v in a few steps and its gradient is
    # then zero for good (V pinned at +-R_max, explained variance 0 for 25 iterations on
    # chain-d3); with tanh it reached explained variance 0.99 by iteration 8 (docs/suite.md)
    "sapo:algorithm.value_squash=tanh", "sapo:algorithm.value_coef=2",
    # the values' own steps: at the policy's 2 epochs of 16-turn minibatches V had too few steps
    # to learn (train EV < 0.05 on chain-d1); 8 value-only passes at a body rate of 1e-3 (the
    # value-fit benchmark's: 1e-2 collapses on the tiny model) with the head / value rows at 1e-2,
    # the same for SAPO's shared model and PPO's critic (docs/suite.md)
    "sapo:algorithm.value_epochs=8", "sapo:algorithm.value_epoch_lr=1e-3", "sapo:algorithm.value_lr=1e-2",
    "ppo:algorithm.critic_epochs=8", "ppo:algorithm.critic_lr=1e-3", "ppo:algorithm.critic_head_lr=1e-2",
    "train.samples_per_iteration=0", "train.save_every=10", "train.eval_every=0",
    "train.eval_greedy=false",
)
TRAJECTORIES = 16
ITERATIONS = 20
EVAL_EPISODES = 32


def probe_by_name(names: str | None) -> list[Probe]:
    """``"chain-d1,locks"`` -> those probes; None or "all": every probe."""
    if names is None or names.strip().lower() == "all":
        return list(PROBES)
    known = {p.name: p for p in PROBES}
    out = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name not in known:
            raise UserError(f"Unknown probe '{name}'; the suite has: {', '.join(known)}.")
        out.append(known[name])
    if not out:
        raise UserError("--probes names no probe.")
    return out


def probe_returns(probe: Probe) -> dict[str, float]:
    """The probe's exact optimal and uniform-random expected returns (from the env itself)."""
    from agentrl.envs.contract import make_env

    env = make_env(probe.env, **probe.kwargs)
    try:
        base = env.unwrapped
        return {"optimal_return": float(base.optimal_return()), "random_return": float(base.random_return()),
                "measures": str(getattr(base, "measures", ""))}
    finally:
        env.close()


def plan_suite(algos: Sequence[str], out: Path, probes: Sequence[Probe], *, model: str = "tiny",
               seeds: int = 10, first_seed: int = 0, iterations: int = ITERATIONS,
               trajectories: int = TRAJECTORIES, eval_episodes: int = EVAL_EPISODES,
               overrides: Sequence[str] = ()) -> dict[str, BenchPlan]:
    """One bench plan per probe, under ``OUT/<probe>/``."""
    # the suite's own ALGO: settings apply where ALGO is compared. So do the user's: a suite
    # folder's --set list is one, recorded in suite.json, and an invocation for part of its
    # algorithms (--algos ppo) repeats it whole; a prefix naming no registered algorithm stays
    # an error (a typo is not a setting silently dropped)
    shared = [s for s in SUITE_SETTINGS if _applies_to(s, algos)]
    overrides = [s for s in overrides if _applies_to(s, algos)]
    plans = {}
    for probe in probes:
        sets = [*shared, *probe.overrides,
                *(f"env.kwargs.{k}={json.dumps(v)}" for k, v in probe.kwargs.items()), *overrides]
        plans[probe.name] = plan_bench(list(algos), out / probe.name, env=probe.env, model=model,
                                       overrides=sets, seeds=seeds, first_seed=first_seed,
                                       iterations=iterations, trajectories=trajectories,
                                       eval_episodes=eval_episodes)
    return plans


def _applies_to(text: str, algos: Sequence[str]) -> bool:
    """Whether the ``--set`` text ``text`` concerns one of ``algos`` (unprefixed ones concern all);
    a prefix that names no registered algorithm is refused in one sentence."""
    from agentrl.algorithms import algorithm_names

    name = algorithm_prefix(text)
    if name is None:
        return True
    if name not in algorithm_names():
        raise UserError(f"--set {text} is for '{name}', which is not an algorithm "
                        f"({', '.join(algorithm_names())}).")
    return name in algos


def ordered_runs(plans: dict[str, BenchPlan]) -> list[tuple[str, PlannedRun]]:
    """Seed-major: every probe and algorithm of seed k before seed k+1."""
    runs = [(name, run) for name, plan in plans.items() for run in plan.runs]
    order = {name: i for i, name in enumerate(plans)}
    return sorted(runs, key=lambda item: (item[1].seed, order[item[0]]))


def probe_records(probes: Sequence[Probe]) -> list[dict[str, Any]]:
    """What ``suite.json`` says of each probe: its definition and exact returns."""
    return [{**asdict(p), "overrides": list(p.overrides), **probe_returns(p)} for p in probes]


#: settings that shape every run: a suite folder holds one value of each (``--iterations`` may
#: grow: finished runs are extended; ``--seeds`` and ``--probes`` may differ between invocations)
RUN_SHAPING = ("model", "trajectories", "eval_episodes", "overrides")


def merged_manifest(old: dict[str, Any], probes: list[dict[str, Any]], algos: Sequence[str],
                    settings: dict[str, Any]) -> dict[str, Any]:
    """What ``suite.json`` says after an invocation with ``probes``, ``algos`` and ``settings``.

    An invocation may cover part of a suite (``--probes locks``, ``--algos sapo``, one more
    seed): the probes and algorithms already recorded stay, so the report still covers every
    run on disk. Settings that shape runs must match the recorded ones, or the folder would hold
    runs the report describes wrongly; that is refused in one sentence. The seeds recorded span
    every invocation's.
    """
    if old.get("settings"):
        before = old["settings"]
        for key in RUN_SHAPING:
            was, now = before.get(key), settings.get(key)
            if key == "overrides":
                was, now = sorted(was or []), sorted(now or [])
            if was != now:
                raise UserError(
                    f"This suite folder was made with {key} {was!r}, not {now!r}; resume it with the "
                    "settings in its suite.json or choose another --out.")
        first = min(before.get("first_seed", 0), settings["first_seed"])
        end = max(before.get("first_seed", 0) + before.get("seeds", 0), settings["first_seed"] + settings["seeds"])
        settings = {**settings, "first_seed": first, "seeds": end - first}
    named = {p["name"]: p for p in probes}
    kept = [named.pop(p["name"], p) for p in old.get("probes", [])]
    known = list(old.get("algos", []))
    return {**old, "probes": kept + list(named.values()),
            "algos": known + [a for a in algos if a not in known], "settings": settings}


def write_manifest(out: Path, probes: list[dict[str, Any]], algos: Sequence[str], settings: dict[str, Any],
                   session: dict[str, Any]) -> None:
    """``OUT/suite.json``: the probes (:func:`probe_records`), the shared settings and every
    invocation (appended), merged with what an earlier invocation wrote (:func:`merged_manifest`).
    A session written again (at its end, with what it did) replaces its own entry, found by its
    ``id``."""
    path = out / SUITE_FILE
    data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    data = merged_manifest(data, probes, algos, settings)
    sessions = data.setdefault("sessions", [])
    if sessions and session.get("id") is not None and sessions[-1].get("id") == session["id"]:
        sessions[-1] = session
    else:
        sessions.append(session)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def run_suite(plans: dict[str, BenchPlan], on_run: Callable[[str, PlannedRun, str], None] | None = None,
              time_limit_s: float | None = None) -> tuple[int, int]:
    """Train every planned run in this process, in :func:`ordered_runs` order.

    Returns (runs done or kept, runs left). With ``time_limit_s``, the run under way when the
    time is up checkpoints at the end of its iteration and no further run starts; the same
    command resumes there. A finished run of a :attr:`Probe.judge_press` probe is judged for
    credit to the press (:func:`_judge`), a kept one too if it has not been yet.
    """
    from agentrl.training.trainer import Trainer

    deadline = None if time_limit_s is None else time.time() + time_limit_s
    done = left = 0
    started_any = False
    for probe, planned in ordered_runs(plans):
        if planned.action == "skip":
            done += 1
            _judge(probe, planned, on_run)
            continue
        if deadline is not None and time.time() >= deadline and started_any:
            left += 1
            continue
        if planned.action == "restart":
            _clear_partial(planned.run_dir)
        if on_run is not None:
            on_run(probe, planned, "start")
        started_any = True
        trainer = Trainer(planned.config, resume=planned.action in ("resume", "extend"))
        try:
            result = trainer.train(should_stop=lambda: deadline is not None and time.time() >= deadline)
        finally:
            trainer.close()
        if result.stopped:
            left += 1
            if on_run is not None:
                on_run(probe, planned, "paused")
        else:
            done += 1
            if on_run is not None:
                on_run(probe, planned, "done")
            _judge(probe, planned, on_run)
    return done, left


def _judge(probe: str, planned: PlannedRun, on_run: Callable[[str, PlannedRun, str], None] | None) -> None:
    """``credit.json`` for a finished run of a chain probe (agentrl/bench/counterfactual.py).

    Only the machine that trained a run holds its checkpoint, so this is the one chance to ask.
    A judge that fails is said in one line and the suite goes on: the run itself is kept, and the
    next invocation on this machine asks again."""
    from agentrl.bench.counterfactual import write_press_credit

    if not any(p.name == probe and p.judge_press for p in PROBES):
        return
    try:
        path = write_press_credit(planned.run_dir)
    except Exception as exc:  # noqa: BLE001 - reported, and the run is already safe on disk
        state = f"credit to the press not judged ({type(exc).__name__}: {exc})"
    else:
        if path is None:
            return
        share = json.loads(path.read_text()).get("share")
        state = "credit to the press: " + ("no lamp saw both presses" if share is None else
                                           f"V gap {share:.2f} of the return gap")
    if on_run is not None:
        on_run(probe, planned, state)
