"""How fast is agentrl/WebShop-v0? Step latency and steps/s per transport and browser count.

Each worker is its own process (as parallel env workers would be) with its own env, store
server and, for the browser transport, its own headless Chromium. After a warm-up, all workers
start together and step for a fixed time with a shopper that mostly follows the oracle and
sometimes wanders (tabs, other products, result pages, options), resetting whenever an episode
ends; resets are timed apart from steps. Prints a markdown table.

    python benchmarks/bench_webshop_env.py                      # http x1, browser x1, x2, x4
    python benchmarks/bench_webshop_env.py --seconds 20 --num-products 2000
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import random
import statistics
import time
from dataclasses import dataclass


@dataclass
class WorkerResult:
    steps: int
    resets: int
    step_s: list[float]
    reset_s: list[float]
    start_s: float
    wall_s: float


def _worker(transport: str, num_products: int, seconds: float, seed: int, barrier, queue) -> None:
    import gymnasium as gym

    import agentrl_envs  # noqa: F401

    t0 = time.perf_counter()
    env = gym.make("agentrl/WebShop-v0", transport=transport, num_products=num_products,
                   split="test")
    obs, info = env.reset(seed=seed)  # builds the shop, starts the server (and the browser)
    start_s = time.perf_counter() - t0
    for _ in range(3):  # warm-up
        env.step(env.unwrapped.expert_action())
    rng = random.Random(seed)
    episode = seed
    obs, info = env.reset(seed=episode)
    barrier.wait()
    step_s, reset_s = [], []
    begin = time.perf_counter()
    while time.perf_counter() - begin < seconds:
        actions = [a for a in info["admissible_actions"]
                   if a not in ("click[buy now]", "search[...]")]
        action = (rng.choice(actions) if actions and rng.random() < 0.3
                  else env.unwrapped.expert_action())
        t = time.perf_counter()
        obs, reward, terminated, truncated, info = env.step(action)
        step_s.append(time.perf_counter() - t)
        if terminated or truncated:
            episode += 1
            t = time.perf_counter()
            obs, info = env.reset(seed=episode)
            reset_s.append(time.perf_counter() - t)
    wall = time.perf_counter() - begin
    env.close()
    queue.put(WorkerResult(len(step_s), len(reset_s), step_s, reset_s, start_s, wall))


def measure(transport: str, workers: int, num_products: int, seconds: float) -> dict:
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=_worker,
                         args=(transport, num_products, seconds, 1000 * i, barrier, queue))
             for i in range(workers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    steps = [s for r in results for s in r.step_s]
    resets = [s for r in results for s in r.reset_s]
    wall = max(r.wall_s for r in results)
    return {
        "transport": transport, "workers": workers,
        "step_ms_median": 1000 * statistics.median(steps),
        "step_ms_p90": 1000 * statistics.quantiles(steps, n=10)[-1],
        "reset_ms_median": 1000 * statistics.median(resets) if resets else float("nan"),
        "steps_per_s": sum(r.steps for r in results) / wall,
        "start_s": statistics.median(r.start_s for r in results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="timed stepping per case")
    parser.add_argument("--num-products", type=int, default=2000)
    parser.add_argument("--browsers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--http-workers", type=int, nargs="+", default=[1])
    args = parser.parse_args()

    cases = [("http", n) for n in args.http_workers] + [("browser", n) for n in args.browsers]
    rows = [measure(t, n, args.num_products, args.seconds) for t, n in cases]
    print(f"\nWebShop env, {args.num_products} products, {args.seconds:.0f} s per case, "
          f"{time.strftime('%Y-%m-%d')}, {platform.machine()} with {os.cpu_count()} CPUs\n")
    print("| transport | parallel envs | step median (ms) | step p90 (ms) | reset median (ms) "
          "| steps/s (total) | first reset (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['transport']} | {r['workers']} | {r['step_ms_median']:.1f} | "
              f"{r['step_ms_p90']:.1f} | {r['reset_ms_median']:.1f} | {r['steps_per_s']:.1f} | "
              f"{r['start_s']:.1f} |")


if __name__ == "__main__":
    main()
