"""Does the trained critic know what the press was worth? Counterfactual values on the chain probes.

    python benchmarks/chain_counterfactual.py RUN_DIR [RUN_DIR ...]

``chain_button_gap.py`` can judge a critic only where its policy pressed both buttons at one
lamp, and a policy that has settled presses one. This asks every critic the question directly:
for each task seed of the run's final eval, the episode is replayed twice through the run's own
env and prompts (:class:`agentrl.bench.value_data.ReplayBackend`), once pressing left and once
right, then waiting, and the critic loaded from the run's last checkpoint (SAPO's value rows in
the model, PPO's ``critic.pt``) reads V at the state after the press. After the right button the
discounted return is ``gamma^(delay - 1)`` (noisy-d1: its noisy reward), after the wrong one 0, at
every lamp and under every policy: a critic that assigns credit to the press reads the two apart.

Prints, per run and lamp, the mean V after the right and the wrong button beside the mean return,
and the gap ``V(right) - V(wrong)`` as a fraction of the return gap. Needs each run's checkpoint:
suite runs keep their final one on the machine that trained them (checkpoints are not committed).
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

WAITS = 40  # more replies than any chain probe's delay: the env ends the episode first


def counterfactual(run_dir: Path) -> str:
    import torch
    import yaml

    from agentrl.algorithms import get_algorithm
    from agentrl.bench.value_data import ReplayBackend
    from agentrl.envs import r_max as env_r_max
    from agentrl.models.policy import Policy
    from agentrl.rollout.engine import Task
    from agentrl.rundir.checkpoints import latest_checkpoint
    from agentrl.training.compose import env_factory, load_for_training, make_engine
    from agentrl.training.config import from_dict
    from agentrl_envs.probes.chain import RULE

    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        return f"{run_dir}: no checkpoint here (checkpoints are not committed)"
    config = from_dict(yaml.safe_load((run_dir / "config.yaml").read_text()))
    traces = sorted((run_dir / "eval").glob("iter_*.jsonl"))
    # the final eval's tasks (a run stopped before it: the eval split's first tasks, as it plays them)
    records = [json.loads(line) for line in traces[-1].read_text().splitlines() if line.strip()] if traces else []
    seeds = [record["task_seed"] for record in records] or list(range(config.train.eval_episodes))
    algo_cls = get_algorithm(config.algo)
    loaded = load_for_training(replace(config.model, name=str(checkpoint), device="cpu"),
                               algo_cls.reads_values, seed=config.train.seed)
    policy = Policy(loaded.model, loaded.tokenizer, loaded.value_tokens, config.rollout.temperature)
    factory = env_factory(config.env, "eval")
    env = factory()
    r_max = env_r_max(env)
    env.close()
    algorithm = algo_cls(config.algorithm, policy, r_max, seed=config.train.seed)
    algorithm.load_extra(checkpoint)
    backend = ReplayBackend(policy.tokenizer, config.rollout.max_new_tokens)
    engine = make_engine(policy, backend, replace(config.rollout, env_workers=0), factory)
    played = []
    try:
        for seed in seeds:
            for first in sorted(RULE.values()):
                backend.load([engine.action_format.render(action) for action in [first] + ["wait"] * WAITS])
                played.extend(engine.run([Task(seed=int(seed), group=0)]).trajectories)
    finally:
        engine.pool.close()
    with torch.no_grad():
        algorithm.value_trace(played)
    gamma = config.algorithm.gamma
    cells: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    for trajectory in played:
        turns = trajectory.turns
        if len(turns) < 2:
            continue
        lamp = "red" if "red" in turns[0].observation else "blue"
        right = turns[0].action == RULE[lamp]
        ret = sum(gamma ** k * t.reward for k, t in enumerate(turns[1:])) / r_max
        cells.setdefault((lamp, right), []).append((turns[1].stats["V"] / r_max, ret))
    # the replay of the press the run's own eval made must read the V its trace recorded: a check
    # that the checkpoint, the prompts and the readout are the run's
    replayed = {(t.task_seed, t.turns[0].action): t.turns[1].stats["V"] for t in played if len(t.turns) > 1}
    drift = [abs(replayed[(r["task_seed"], r["turns"][0]["action"])] - r["turns"][1]["V"]) for r in records
             if len(r["turns"]) > 1 and "V" in r["turns"][1] and (r["task_seed"], r["turns"][0]["action"]) in replayed]
    check = f"max |V - the eval trace's V| {max(drift):.3f} over {len(drift)}" if drift else "no trace V to check"
    lines = [f"{run_dir} ({config.algo}, checkpoint {checkpoint.name}, {len(seeds)} tasks; {check})"]
    for lamp in ("red", "blue"):
        if (lamp, True) not in cells or (lamp, False) not in cells:
            continue
        (v_r, g_r), (v_w, g_w) = ([sum(c) / len(cells[(lamp, side)]) for c in zip(*cells[(lamp, side)], strict=True)]
                                  for side in (True, False))
        share = (v_r - v_w) / (g_r - g_w) if g_r != g_w else float("nan")
        lines.append(f"  {lamp:4s} lamp ({len(cells[(lamp, True)])} tasks): V after right {v_r:+.2f} "
                     f"(return {g_r:.2f}), after wrong {v_w:+.2f} (return {g_w:.2f}); "
                     f"V gap {v_r - v_w:+.2f} = {share:.2f} of the return gap")
    return "\n".join(lines)


def main(paths: list[str]) -> int:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if not paths:
        print(__doc__)
        return 2
    for path in paths:
        print(counterfactual(Path(path)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
