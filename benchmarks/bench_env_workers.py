"""What env workers gain on WebShop with the browser transport (headless Chromium per env).

Two measurements, each with the envs in the trainer's process (``env_workers: 0``) and in W
worker processes:

* **pool**: N envs reset, then ``--turns`` rounds of one step for every live env (random
  admissible actions, seeded, so every setting plays the same actions): the env time of a
  rollout turn, which in one process is the sum of the N envs' latencies.
* **rollout**: the real rollout engine with the tiny model and constrained decoding on the same
  tasks: total rollout time and its env share.

    python benchmarks/bench_env_workers.py                     # 4 envs, workers 0, 2, 4
    python benchmarks/bench_env_workers.py --envs 8 --workers 0 2 4 8 --turns 6
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time


def choose(rng: random.Random, info: dict) -> str:
    actions = [a for a in info.get("admissible_actions") or [] if a != "click[buy now]"]
    if not actions:
        return "click[back to search]"
    action = rng.choice(actions)
    return "search[cotton shirt]" if action.endswith("[...]") else action


def bench_pool(factory, envs: int, workers: int, turns: int, seed: int) -> dict:
    from agentrl.envs.workers import EnvWorkerPool
    from agentrl.rollout.engine import EnvPool

    start = time.perf_counter()
    pool = EnvWorkerPool(factory, workers) if workers else EnvPool(factory)
    try:
        pool.ensure(envs)
        slots = list(range(envs))
        seeds = [seed + i for i in slots]
        pool.reset(slots, seeds)  # first reset starts stores and browsers
        ready = time.perf_counter() - start
        t0 = time.perf_counter()
        infos = [info for _, info in pool.reset(slots, seeds)]
        reset_s = time.perf_counter() - t0
        rngs = [random.Random(s) for s in seeds]
        round_s = []
        for _ in range(turns):
            actions = [choose(rng, info) for rng, info in zip(rngs, infos, strict=True)]
            t0 = time.perf_counter()
            outcomes = pool.step(slots, actions)
            round_s.append(time.perf_counter() - t0)
            infos = []
            for i, (_, _, terminated, truncated, info) in enumerate(outcomes):
                if terminated or truncated:
                    info = pool.reset([i], [seeds[i] + 1000])[0][1]
                infos.append(info)
    finally:
        pool.close()
    return {"start_s": ready, "reset_s": reset_s, "round_s": statistics.median(round_s)}


def bench_rollout(env_cfg, envs: int, workers: int, seed: int) -> dict:
    from agentrl.backends.hf import HFBackend
    from agentrl.models.policy import Policy
    from agentrl.rollout.engine import RolloutConfig, Task
    from agentrl.training.compose import env_factory, load_for_training, make_engine, stop_ids
    from agentrl.training.config import ModelConfig

    loaded = load_for_training(ModelConfig(name="tiny"), reserve_values=True)
    policy = Policy(loaded.model, loaded.tokenizer, loaded.value_tokens)
    cfg = RolloutConfig(action_mode="constrained", env_workers=workers, max_turns=6,
                        history_window=1, max_prompt_tokens=1024)
    backend = HFBackend(loaded.model, stop_ids(loaded.tokenizer, loaded.model),
                        loaded.tokenizer.pad_token_id, loaded.value_tokens.ids, seed=seed)
    engine = make_engine(policy, backend, cfg, env_factory(env_cfg, "train"))
    tasks = [Task(seed=seed + i, group=i) for i in range(envs)]
    try:
        engine.run(tasks)  # warm-up: stores and browsers start
        start = time.perf_counter()
        result = engine.run(tasks)
        total = time.perf_counter() - start
    finally:
        engine.pool.close()
    return {"total_s": total, "env_s": result.env_seconds, "generate_s": result.generate_seconds,
            "turns": result.turns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--workers", nargs="+", type=int, default=[0, 2, 4])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--num-products", type=int, default=1000)
    parser.add_argument("--transport", default="browser")
    parser.add_argument("--skip-rollout", action="store_true")
    args = parser.parse_args()

    from agentrl.training.compose import env_factory
    from agentrl.training.config import EnvConfig

    env_cfg = EnvConfig(id="webshop", kwargs={"transport": args.transport,
                                               "num_products": args.num_products})
    factory = env_factory(env_cfg, "train")
    pool_rows, rollout_rows = [], []
    for workers in args.workers:
        result = bench_pool(factory, args.envs, workers, args.turns, seed=100)
        pool_rows.append((workers, result))
        print(f"# pool workers={workers}: {result}", flush=True)
    if not args.skip_rollout:
        for workers in args.workers:
            result = bench_rollout(env_cfg, args.envs, workers, seed=100)
            rollout_rows.append((workers, result))
            print(f"# rollout workers={workers}: {result}", flush=True)

    print(f"\n{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores; WebShop ({args.transport} transport, {args.num_products} "
          f"products), {args.envs} envs\n")
    base = pool_rows[0][1]["round_s"]
    print("| env workers | start (stores + browsers) | reset of all envs | one step of every env | speed-up |")
    print("|---|---|---|---|---|")
    for workers, r in pool_rows:
        print(f"| {workers or 'in-process'} | {r['start_s']:.1f} s | {r['reset_s']:.2f} s | "
              f"{r['round_s']:.2f} s | {base / r['round_s']:.2f}x |")
    if rollout_rows:
        base = rollout_rows[0][1]["total_s"]
        print("\n| env workers | rollout (tiny model, constrained) | env time | generation time | turns | speed-up |")
        print("|---|---|---|---|---|---|")
        for workers, r in rollout_rows:
            print(f"| {workers or 'in-process'} | {r['total_s']:.1f} s | {r['env_s']:.1f} s | "
                  f"{r['generate_s']:.1f} s | {r['turns']} | {base / r['total_s']:.2f}x |")


if __name__ == "__main__":
    main()
