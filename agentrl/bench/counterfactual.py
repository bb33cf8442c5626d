"""Credit to the decisive press, asked directly: counterfactual values on the chain probes.

A critic's explained variance on eval traces says how well V follows the returns its policy got.
On a chain probe whose policy has settled on one button, that is the lamp's worth, and it says
nothing of whether V knows what the press was worth, which is the credit-assignment question.
This asks it: every task of the run's final eval is replayed twice through the run's own env
and prompts (:class:`agentrl.bench.replay.ReplayBackend`), once pressing left and once
right, then waiting, and the critic from the run's last checkpoint (SAPO's value rows in the
model, PPO's ``critic.pt``) reads V at the state after the press. The return that follows is
known from the env whatever the policy (:meth:`ChainEnv.return_after_press`), so a critic that
assigns credit to the press reads the two apart by as much as their returns differ:

    share = (V after the right button - V after the wrong one) / (their expected return gap)

per lamp (1: the whole gap; 0: the button is not read), in units of R_max. Beside it, for a
critic fitted in closed form (``value_head_fit: ridge``), how often each button was pressed at each
lamp in the batches of its last fit (``window_presses``): a share near 0 at a lamp whose wrong
press those batches never held is the on-policy limit, not a failed readout.

The answer needs the run's checkpoint, which exists only on the machine that trained the run
(checkpoints are not committed), so ``agentrl suite`` asks it as each chain run finishes and
keeps it in ``credit.json`` beside the run's metrics, where the report reads it.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentrl.rollout.trajectory import Trajectory
from agentrl.rundir.durable import atomic_write_text

CREDIT_FILE = "credit.json"
WAITS = 40  # more replies than any chain probe's delay: the env ends the episode first


def lamp_of(observation: str, colours: Sequence[str]) -> str:
    """The lamp colour an opening observation shows (``"... The lamp is red."``)."""
    for colour in colours:
        if f"lamp is {colour}" in observation:
            return colour
    raise ValueError(f"no lamp colour in the observation {observation!r}")


def press_credit(played: Sequence[Trajectory], rule: dict[str, str], expected: dict[bool, float],
                 gamma: float, r_max: float) -> dict[str, Any]:
    """Per lamp, V after the right and the wrong press (mean over tasks, in R_max units) beside
    the mean sampled return from there (discounted at ``gamma``) and the expected one, and V's gap
    as a share of the expected return gap; ``share`` is the mean over the lamps that saw both.

    ``played``: replayed episodes whose turn 1 carries ``stats["V"]`` (the value after the press);
    ``expected``: the env's expected return after the right (True) and wrong (False) press, from
    turn 1, in R_max units. The expected gap, not the sampled one, is the yardstick: on the noisy
    probe a few dozen coin flips would move the sampled gap by a tenth. A lamp missing either
    press is left out.
    """
    cells: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    for trajectory in played:
        turns = trajectory.turns
        if len(turns) < 2 or "V" not in turns[1].stats:
            continue
        lamp = lamp_of(turns[0].observation, list(rule))
        sampled = sum(gamma ** k * t.reward for k, t in enumerate(turns[1:])) / r_max
        cells.setdefault((lamp, turns[0].action == rule[lamp]), []).append((turns[1].stats["V"] / r_max, sampled))
    gap = expected[True] - expected[False]
    lamps: dict[str, dict[str, float]] = {}
    for lamp in rule:
        if (lamp, True) not in cells or (lamp, False) not in cells:
            continue
        (v_right, g_right), (v_wrong, g_wrong) = (
            tuple(statistics.fmean(column) for column in zip(*cells[(lamp, side)], strict=True))
            for side in (True, False))
        lamps[lamp] = {"tasks": len(cells[(lamp, True)]), "v_right": v_right, "v_wrong": v_wrong,
                       "return_right": g_right, "return_wrong": g_wrong,
                       "share": (v_right - v_wrong) / gap if gap else float("nan")}
    shares = [cell["share"] for cell in lamps.values()]
    return {"expected_right": expected[True], "expected_wrong": expected[False], "lamps": lamps,
            "share": statistics.fmean(shares) if shares else None}


def press_counts(openings: Iterable[tuple[str, str]], rule: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per lamp, how many episodes pressed the right button, the wrong one, or neither (an invalid
    or other reply), from each episode's opening (prompt text, reply text). Read from the batches
    a critic was last fitted on, it says whether a wrong press at a lamp was there to be valued:
    an on-policy critic cannot read a press its batches did not hold."""
    counts = {lamp: {"right": 0, "wrong": 0, "other": 0} for lamp in rule}
    for prompt, reply in openings:
        lamp = lamp_of(prompt, list(rule))
        pressed = [button for button in set(rule.values()) if button in reply]
        side = "other" if len(pressed) != 1 else "right" if pressed[0] == rule[lamp] else "wrong"
        counts[lamp][side] += 1
    return counts


def window_presses(window_state: dict[str, Any] | None, tokenizer: Any,
                   rule: dict[str, str]) -> dict[str, dict[str, int]] | None:
    """:func:`press_counts` over the batches of a ridge readout's window (the last fit's data, as
    :meth:`ReadoutWindow.state_dict` keeps it in the checkpoint: token ids only); None for a critic
    without one (the Adam head steps)."""
    from agentrl.algorithms.ridge_readout import ReadoutWindow

    if not window_state or not window_state.get("entries"):
        return None
    window = ReadoutWindow(int(window_state["size"]))
    window.load_state_dict(window_state)
    openings = [(tokenizer.decode(t.turns[0].prompt_ids), tokenizer.decode(t.turns[0].action_ids))
                for entry in window.entries for t in entry.batch.trajectories if t.turns]
    return press_counts(openings, rule)


def trace_check(played: Sequence[Trajectory], records: Sequence[dict[str, Any]]) -> dict[str, float | int]:
    """The largest |V| difference between the replay of the press the run's own eval made and the
    V its eval trace recorded there, over the tasks that can be matched: 0 (to float rounding)
    when the checkpoint, prompts and readout are the run's. ``max_abs`` is nan with ``count`` 0
    when nothing matched (no trace, or a critic-free trace)."""
    replayed = {(t.task_seed, t.turns[0].action): t.turns[1].stats["V"]
                for t in played if len(t.turns) > 1 and "V" in t.turns[1].stats}
    drift = [abs(replayed[key] - r["turns"][1]["V"]) for r in records
             if len(r["turns"]) > 1 and "V" in r["turns"][1]
             and (key := (r["task_seed"], r["turns"][0]["action"])) in replayed]
    return {"max_abs": max(drift) if drift else float("nan"), "count": len(drift)}


def write_press_credit(run_dir: Path) -> Path | None:
    """Judge a finished run once: ``RUN_DIR/credit.json`` from :func:`judge_press`, unless it is
    there already or the run cannot be judged here (no checkpoint, no critic). Returns the file
    written, or None."""
    path = run_dir / CREDIT_FILE
    if path.is_file():
        return None
    credit = judge_press(run_dir)
    if credit is None:
        return None
    atomic_write_text(path, json.dumps(credit, indent=2) + "\n")
    return path


@dataclass
class PressReplay:
    """A run's critic from its last checkpoint, and its final eval's tasks replayed pressing each
    button (:func:`replay_presses`). Kept apart from the judging so that a benchmark can ask the
    same replayed episodes again after changing the readout (``benchmarks/sapo_readout_refit.py``)."""

    checkpoint: Path
    algo: str  # the run's config.algo
    algorithm: Any  # the run's Algorithm, its critic loaded from ``checkpoint``
    tokenizer: Any
    tasks: int
    played: list[Trajectory]
    records: list[dict[str, Any]]  # the final eval's trace
    expected: dict[bool, float]  # return after the right (True) / wrong (False) press, R_max units
    gamma: float
    r_max: float
    #: a ridge readout's window as the checkpoint keeps it (token ids and targets); None without one
    head_window: dict[str, Any] | None

    def credit(self) -> dict[str, Any]:
        """The critic's reading after each press, as ``credit.json`` keeps it."""
        import torch

        from agentrl_envs.probes.chain import RULE

        with torch.no_grad():
            self.algorithm.value_trace(self.played)
        return {"checkpoint": self.checkpoint.name, "algo": self.algo, "tasks": self.tasks,
                "trace_check": trace_check(self.played, self.records),
                **press_credit(self.played, RULE, self.expected, self.gamma, self.r_max),
                "window_presses": window_presses(self.head_window, self.tokenizer, RULE)}


def replay_presses(run_dir: Path) -> PressReplay | None:
    """Load the run's critic from its last checkpoint and replay its final eval tasks pressing
    each button (module docstring). None when the run has no checkpoint here or its algorithm
    no critic."""
    import yaml

    from agentrl.algorithms import get_algorithm
    from agentrl.bench.replay import ReplayBackend
    from agentrl.envs import r_max as env_r_max
    from agentrl.models.policy import Policy
    from agentrl.rollout.engine import Task
    from agentrl.rundir.checkpoints import latest_checkpoint, read_state
    from agentrl.training.compose import env_factory, load_for_training, make_engine
    from agentrl.training.config import from_dict
    from agentrl_envs.probes.chain import RULE

    checkpoint = latest_checkpoint(run_dir)
    config = from_dict(yaml.safe_load((run_dir / "config.yaml").read_text()))
    algo_cls = get_algorithm(config.algo)
    if checkpoint is None or not (algo_cls.reads_values or algo_cls.needs_critic):
        return None
    traces = sorted((run_dir / "eval").glob("iter_*.jsonl"))
    records = [json.loads(line) for line in traces[-1].read_text().splitlines() if line.strip()] if traces else []
    # the final eval's tasks (a run stopped before it: the eval split's first tasks)
    seeds = [record["task_seed"] for record in records] or list(range(config.train.eval_episodes))
    loaded = load_for_training(replace(config.model, name=str(checkpoint), device="cpu"),
                               algo_cls.reads_values, seed=config.train.seed)
    policy = Policy(loaded.model, loaded.tokenizer, loaded.value_tokens, config.rollout.temperature)
    factory = env_factory(config.env, "eval")
    env = factory()
    r_max = env_r_max(env)
    gamma = config.algorithm.gamma
    expected = {right: env.unwrapped.return_after_press(right, gamma) / r_max for right in (True, False)}
    env.close()
    algorithm = algo_cls(config.algorithm, policy, r_max, seed=config.train.seed)
    algorithm.load_extra(checkpoint)
    backend = ReplayBackend(policy.tokenizer, config.rollout.max_new_tokens)
    engine = make_engine(policy, backend, replace(config.rollout, env_workers=0), factory)
    played: list[Trajectory] = []
    try:
        for seed in seeds:
            for first in sorted(RULE.values()):
                backend.load([engine.action_format.render(a) for a in [first] + ["wait"] * WAITS])
                played.extend(engine.run([Task(seed=int(seed), group=0)]).trajectories)
    finally:
        engine.pool.close()
    return PressReplay(checkpoint, config.algo, algorithm, policy.tokenizer, len(seeds), played, records,
                       expected, gamma, r_max, read_state(checkpoint)["algorithm"].get("head_window"))


def judge_press(run_dir: Path) -> dict[str, Any] | None:
    """Replay the run's final eval tasks pressing each button and read its critic after the press
    (module docstring). None when the run has no checkpoint here or its algorithm no critic."""
    replay = replay_presses(run_dir)
    return None if replay is None else replay.credit()
