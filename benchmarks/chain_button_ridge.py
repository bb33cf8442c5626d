"""Can a linear readout of the embedded model's frozen features tell the button pressed?

    python benchmarks/chain_button_ridge.py chain-d1

Plays 128 episodes of the probe with the embedded model (as ``bench_value_fit.py --probe``),
caches the final-layer features at V's positions, and fits V to the Monte-Carlo return three
ways on the training episodes: ridge (the linear ceiling), and the suite's head fit (Adam at
1e-3 from zero, 256 and 1,024 steps). For the held-out episodes it prints V after the press
grouped by (lamp, button) beside the return, as ``chain_button_gap.py`` does for run traces.
"""

from __future__ import annotations

import collections
import sys
import time
from dataclasses import replace


def main(probe: str = "chain-d1", episodes: int = 128) -> int:
    import torch
    from transformers.utils import logging as hf_logging

    from agentrl.bench import value_fit as vf
    from agentrl.bench.value_data import ridge_predict
    from agentrl.envs import r_max as env_r_max
    from agentrl.training.compose import env_factory, make_backend, make_engine

    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    t0 = time.time()
    config = vf.probe_config(probe, "embedded")
    policy = vf.load_policy("embedded", 0)
    factory = env_factory(config.env, "train")
    env = factory()
    r_max = env_r_max(env)
    env.close()
    rollout = replace(config.rollout, env_workers=0)
    engine = make_engine(policy, make_backend(policy, rollout, seed=0), rollout, factory)
    trajectories = vf.play(engine, episodes, 0)
    engine.pool.close()
    data = vf.FitData.build(trajectories, r_max, config.algorithm.gamma, config.algorithm.lam, 0.3, 0)
    pre, _ = vf.boundary_features(policy, data)
    print(f"{len(trajectories)} episodes, {sum(t.won for t in trajectories)} won, {time.time() - t0:.0f} s")

    train = data.turn_slots(False)
    episode_of = data.episode_of_slots()
    values = {}
    ridge, alpha = ridge_predict(pre[train], data.mc[train], episode_of[train], pre)
    values[f"ridge a={alpha:g}"] = ridge.float()
    for steps in (256, 1024):
        head = vf.PpoHead(pre, 1e-3, 0.0)
        vf.train_readout(data, head, vf.TrainSettings(steps=steps, checkpoints=(steps,), target="mc"), None)
        values[f"head 1e-3 x{steps}"] = head.values(None)[0].detach()

    groups: dict[tuple[str, str], list[int]] = collections.defaultdict(list)
    for k, trajectory in enumerate(trajectories):
        if len(trajectory.turns) < 2 or not bool(data.test_episode[k]):
            continue
        lamp = "red" if "red" in trajectory.turns[0].observation else "blue"
        groups[(lamp, trajectory.turns[0].action)].append(int(data.slot[k, 1]))
    for name, v in values.items():
        ev = vf.score(data, v, 0).test_ev_mc  # the value-fit benchmark's held-out EV
        cells = "  ".join(f"{lamp}/{action[6:]}:{len(slots)} V{v[slots].mean():.2f} R{data.mc[slots].mean():.2f}"
                          for (lamp, action), slots in sorted(groups.items()))
        print(f"{name:16s} held-out EV {ev:.3f}  {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:2]))
