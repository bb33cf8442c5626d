"""Value-fit benchmark: how much of the return can V learn from these states, at which settings?

    # recorded episodes of a run (eval or sample JSONL), replayed through the run's own env/prompts
    python benchmarks/bench_value_fit.py --records 'docs/results/alfworld-small-conversation/bench/*/seed*/eval/*.jsonl' \
        --model embedded --episodes 300 --out docs/results/value-fit/alfworld
    # freshly played episodes of a behaviour-suite probe (the suite's settings)
    python benchmarks/bench_value_fit.py --probe chain-d1 --episodes 256 --model tiny \
        --sapo-full 1e-2:1e-2:1:tanh --ppo-full 1e-2:1e-2 --out docs/results/value-fit/chain-d1

Every readout is trained on the value objective alone (agentrl/bench/value_fit.py) and scored by its
explained variance on held-out episodes (split by task) against the Monte-Carlo return, beside a
ridge probe on the frozen features (the linear ceiling of a head-only readout) and a turn-index +
task-type baseline, computed on the same split in the same run. The forward passes of the head-only
readouts are cached: a grid of value temperatures x rates costs seconds. Results go to
``OUT/value_fit.json`` and ``OUT/table.md`` (docs/benchmarks.md quotes them).
"""

from __future__ import annotations

import argparse
import glob
import json
import platform
import random
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--records", nargs="+", help="episode JSONL files or globs (a run's eval/ or samples/)")
    src.add_argument("--probe", help="a behaviour-suite probe to play fresh episodes of (agentrl suite --help)")
    ap.add_argument("--model", default=None, help="model whose features are fitted (default: tiny for a probe, "
                                                  "the run's model for records)")
    ap.add_argument("--episodes", type=int, default=256, help="probe: episodes played; records: at most this many, "
                                                              "sampled at random")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--test-fraction", type=float, default=0.3)
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("--refresh", type=int, default=2, help="steps per target refresh (an iteration's optimizer steps)")
    ap.add_argument("--checkpoints", default="2,8,32,128,256")
    ap.add_argument("--target", default="lambda", choices=["lambda", "mc"])
    ap.add_argument("--tau", default="1,0.25,0.05", help="sapo-head value temperatures")
    ap.add_argument("--value-lr", default="1e-5,1e-4,1e-3,1e-2", help="sapo-head rates of the value rows")
    ap.add_argument("--squash", default="clip,tanh")
    ap.add_argument("--critic-head-lr", default="1e-5,1e-4,1e-3,1e-2", help="ppo-head rates")
    ap.add_argument("--sapo-full", action="append", default=[], metavar="LR:VALUE_LR:TAU:SQUASH",
                    help="SAPO with its backbone, at these settings (repeatable)")
    ap.add_argument("--ppo-full", action="append", default=[], metavar="CRITIC_LR:HEAD_LR",
                    help="PPO's critic with its body (repeatable)")
    ap.add_argument("--out", type=Path, required=True)
    return ap.parse_args(argv)


def records_config(paths: list[Path]):
    """The config of the run(s) that wrote ``paths`` (RUN/eval/*.jsonl or RUN/samples/*.jsonl);
    every file must come from runs that agree on env and rollout."""
    from agentrl.errors import UserError
    from agentrl.training.config import build_config

    configs = {}
    for path in paths:
        run = path.parent.parent
        if run not in configs:
            if not (run / "config.yaml").exists():
                raise UserError(f"{path} is not inside a run folder (no {run / 'config.yaml'}).")
            configs[run] = build_config(config_path=run / "config.yaml")
    def played(cfg) -> tuple[dict, dict]:
        # what shapes an episode; how many tasks an iteration draws does not
        rollout = {k: v for k, v in asdict(cfg.rollout).items() if k != "tasks_per_iteration"}
        return asdict(cfg.env), rollout

    first = next(iter(configs.values()))
    for run, cfg in configs.items():
        if played(cfg) != played(first):
            raise UserError(f"{run} has other env or rollout settings than the first run: replay one kind at a time.")
    which = {"eval" if p.parent.name == "eval" else "train" for p in paths}
    if len(which) != 1:
        raise UserError("Give eval or sample files, not both (they are played on different splits).")
    return first, which.pop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    import torch

    from agentrl.algorithms.ppo import PPOConfig
    from agentrl.algorithms.sapo import SAPOConfig
    from agentrl.bench import value_fit as vf
    from agentrl.envs import r_max as env_r_max
    from agentrl.training.compose import env_factory, make_backend, make_engine

    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    if args.probe:
        config, which, records = vf.probe_config(args.probe, args.model or "tiny"), "train", None
        source = {"probe": args.probe, "played": args.episodes}
    else:
        paths = sorted({Path(p) for pattern in args.records for p in glob.glob(pattern)})
        if not paths:
            print(f"error: no file matches {' '.join(args.records)}", file=sys.stderr)
            return 2
        config, which = records_config(paths)
        records = vf.read_records(paths)
        if len(records) > args.episodes:
            records = random.Random(args.seed).sample(records, args.episodes)
        source = {"records": sorted({str(p.parent.parent) for p in paths}), "split": which,
                  "files": len(paths), "episodes_sampled": len(records)}
    model_name = args.model or config.model.name
    policy = vf.load_policy(model_name, args.seed)
    factory = env_factory(config.env, which)
    env = factory()
    r_max = env_r_max(env)
    env.close()
    rollout = replace(config.rollout, env_workers=0)
    if records is None:
        backend = make_backend(policy, rollout, seed=args.seed)
        engine = make_engine(policy, backend, rollout, factory)
        trajectories, skipped = vf.play(engine, args.episodes, args.seed), []
    else:
        backend = vf.ReplayBackend(policy.tokenizer, rollout.max_new_tokens)
        engine = make_engine(policy, backend, rollout, factory)
        trajectories, skipped = vf.replay(engine, backend, records)
    engine.pool.close()
    played_s = time.perf_counter() - t0
    algo_cfg = config.algorithm
    data = vf.FitData.build(trajectories, r_max, algo_cfg.gamma, algo_cfg.lam, args.test_fraction, args.seed)
    t1 = time.perf_counter()
    pre, post = vf.boundary_features(policy, data)
    cache_s = time.perf_counter() - t1
    won = sum(t.won for t in trajectories)
    print(f"{len(trajectories)} episodes ({won} won, {len(skipped)} not reproduced), {data.n_turns} turns, "
          f"{int(data.test_episode.sum())} held out; features {tuple(pre.shape)} in {cache_s:.1f} s", flush=True)
    for reason in skipped[:5]:
        print(f"  not reproduced: {reason}")

    checkpoints = tuple(int(k) for k in args.checkpoints.split(","))
    settings = vf.TrainSettings(steps=args.steps, refresh=args.refresh, checkpoints=checkpoints, target=args.target)
    sapo_base = algo_cfg if isinstance(algo_cfg, SAPOConfig) else SAPOConfig()
    results = vf.references(data, pre)
    rows = policy.model.get_output_embeddings().weight[policy.value_tokens.ids]

    def run(model: vf.Readout, value_clip, value_coef=1.0, q_coef=0.0) -> None:
        start = time.perf_counter()
        points = vf.train_readout(data, model, settings, value_clip, value_coef, q_coef)
        result = vf.FitResult(model.name, model.settings(), points, time.perf_counter() - start)
        results.append(result)
        best = result.best()
        print(f"{result.name:10s} {json.dumps(result.settings)}: held-out EV {result.final.test_ev_mc:.3f} "
              f"(best {best.test_ev_mc:.3f} at K={best.steps}) in {result.seconds:.1f} s", flush=True)

    for squash in args.squash.split(","):
        for tau in floats(args.tau):
            for lr in floats(args.value_lr):
                cfg = replace(sapo_base, value_temperature=tau, value_squash=squash)
                run(vf.SapoHead(pre, post, rows, cfg, lr), cfg.value_clip, cfg.value_coef, cfg.q_coef)
    ppo_base = PPOConfig(gamma=algo_cfg.gamma, lam=algo_cfg.lam, kl_coef=0.0)
    for lr in floats(args.critic_head_lr):
        run(vf.PpoHead(pre, lr, ppo_base.weight_decay), ppo_base.value_clip)
    for spec in args.sapo_full:
        lr, value_lr, tau, squash = spec.split(":")
        cfg = replace(sapo_base, lr=float(lr), value_lr=float(value_lr), value_temperature=float(tau),
                      value_squash=squash, kl_coef=0.0)
        run(vf.SapoFull(data, vf.fresh_copy(policy), cfg), cfg.value_clip, cfg.value_coef, cfg.q_coef)
    for spec in args.ppo_full:
        lr, head_lr = spec.split(":")
        cfg = replace(ppo_base, critic_lr=float(lr), critic_head_lr=float(head_lr))
        run(vf.PpoFull(data, vf.fresh_copy(policy), cfg), cfg.value_clip)

    table = vf.markdown_table(results, (0, *checkpoints))
    args.out.mkdir(parents=True, exist_ok=True)
    record = {
        "source": source, "model": model_name, "episodes": len(trajectories), "won": won,
        "turns": data.n_turns, "held_out_episodes": int(data.test_episode.sum()), "skipped": skipped,
        "env": config.env.id, "env_kwargs": config.env.kwargs, "history": config.rollout.history,
        "gamma": algo_cfg.gamma, "lam": algo_cfg.lam, "r_max": r_max, "train": asdict(settings),
        "seconds": {"episodes": played_s, "features": cache_s, "total": time.perf_counter() - t0},
        "machine": {"cpu": platform.processor() or platform.machine(), "torch_threads": torch.get_num_threads()},
        "results": [{"name": r.name, "settings": r.settings, "seconds": r.seconds,
                     "points": [asdict(p) for p in r.points]} for r in results],
    }
    (args.out / "value_fit.json").write_text(json.dumps(record, indent=1))
    (args.out / "table.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
