"""Where does SAPO's joint gradient come from? The policy's terms against the value terms.

    python benchmarks/sapo_gradient_split.py [--probe chain-d1] [--model embedded]
        [--temperature 2.0] [--episodes 16] [--updates 2] [--set key=value ...]

SAPO trains one model on ``policy loss + c_V L_V + c_Q L_Q``, clipped to one global norm. This
plays ``updates + 1`` batches of a suite probe through the suite's own config (at the given
sampling temperature), takes ``updates`` real SAPO updates (so a ``ridge`` head fit has set the
value rows), then measures one more update on the last batch without stepping, three times: the
joint loss, the policy terms alone (``value_coef = q_coef = 0``) and the value terms alone. For
each it prints the L2 norm of the gradient on the two value rows, on the rest of the embedding
matrix and on the rest of the body, averaged over the update's optimizer steps. Defaults: the
embedded suite's SAPO settings (policy ``lr`` 1e-6, ``value_lr`` 1e-3, ``value_head_fit`` ridge,
no value-only epochs); ``--set algorithm.value_backbone_grad=false`` shows the cut.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probe", default="chain-d1")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--updates", type=int, default=2)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="algorithm.KEY=VALUE on top of the defaults (repeatable)")
    args = parser.parse_args()

    from agentrl.algorithms import base
    from agentrl.algorithms.sapo import SAPO
    from agentrl.bench.value_data import load_policy, play, probe_config
    from agentrl.rundir.metrics import PhaseTimer
    from agentrl.training.compose import env_factory, make_backend, make_engine
    from agentrl.training.config import build_config

    torch.manual_seed(0)
    config = probe_config(args.probe, args.model)
    settings = {"lr": 1e-6, "value_epochs": 0, "value_lr": 1e-3, "value_head_fit": "ridge"}
    cfg = replace(config.algorithm, **settings)
    if args.overrides:  # parsed and checked as `agentrl run --set` would
        checked = build_config(algo="sapo", env="keydoor", model="tiny", overrides=args.overrides).algorithm
        keys = [o.split("=", 1)[0].removeprefix("algorithm.") for o in args.overrides]
        cfg = replace(cfg, **{key: getattr(checked, key) for key in keys})
    policy = load_policy(args.model, 0)
    policy.temperature = args.temperature
    rollout = replace(config.rollout, env_workers=0, temperature=args.temperature, backend="hf")
    engine = make_engine(policy, make_backend(policy, rollout, seed=0), rollout, env_factory(config.env, "train"))
    try:
        batches = [play(engine, args.episodes, s) for s in range(args.updates + 1)]
    finally:
        engine.pool.close()
    algo = SAPO(cfg, policy, 1.0, seed=0)  # R_max 1: the probes' rewards are 0 or 1
    matrix = policy.model.get_output_embeddings().weight
    ids = torch.tensor(policy.value_tokens.ids)
    clip = base.clip_gradients
    seen: list[tuple[float, float, float]] = []

    def measuring_clip(params, max_norm):
        rows = embedding = body = 0.0
        for p in params:
            if p.grad is None:
                continue
            g = p.grad.detach().float()
            if p is matrix:
                rows += g[ids].pow(2).sum().item()
                g = g.clone()
                g[ids] = 0.0
                embedding += g.pow(2).sum().item()
            else:
                body += g.pow(2).sum().item()
        seen.append((math.sqrt(rows), math.sqrt(embedding), math.sqrt(body)))
        return clip(params, max_norm)

    def report(label: str) -> None:
        means = [sum(s[i] for s in seen) / len(seen) for i in range(3)]
        print(f"{label:26s} value rows {means[0]:10.3f}   rest of the embedding {means[1]:10.3f}   "
              f"rest of the body {means[2]:10.3f}   ({len(seen)} steps)", flush=True)
        seen.clear()

    base.clip_gradients = measuring_clip
    print(f"{args.probe}, {args.model}, T {args.temperature}, {args.episodes} episodes a batch; "
          f"lr {cfg.lr}, value_lr {cfg.value_lr}, value_head_fit {cfg.value_head_fit}, "
          f"value_backbone_grad {cfg.value_backbone_grad}, c_V {cfg.value_coef}, c_Q {cfg.q_coef}")
    for k in range(args.updates):
        algo.update(batches[k], PhaseTimer())
        report(f"update {k + 1} (stepped)")
        norms = matrix.detach()[ids].float().norm(dim=1).tolist()
        print(f"  value row norms {norms[0]:.1f}, {norms[1]:.1f}; median token row "
              f"{float(matrix.detach().float().norm(dim=1).median()):.2f}")
    # measure without stepping or refitting: every pass sees the same weights
    algo.optimizer_step = lambda: None  # type: ignore[method-assign]
    if getattr(algo, "value_rows", None) is not None:
        algo.value_rows.step = lambda *a, **k: None  # type: ignore[method-assign]
    algo.refit_rows = lambda *a, **k: {}  # type: ignore[method-assign]
    last = batches[-1]

    def measure(label: str) -> None:
        algo.generator.manual_seed(1)  # the same minibatches in every measuring pass
        algo.update(last, PhaseTimer())
        report(label)

    measure("joint loss")
    algo.config = replace(cfg, value_coef=0.0, q_coef=0.0)
    measure("policy terms only")
    algo.config = cfg
    policy_loss = base.clipped_policy_loss
    base.clipped_policy_loss = lambda *a, **k: (lambda out: (out[0] * 0.0, out[1]))(policy_loss(*a, **k))
    measure("value terms only")


if __name__ == "__main__":
    main()
