"""Asynchronous rollouts, measured side by side: the same run at ``rollout.max_staleness`` 0 and k.

Each setting trains the same config (same seed, same task seeds per iteration) in a process of
its own, one after the other, and the script prints and writes (``--out``) per setting the
median seconds per iteration (the first iteration apart: it has nothing to overlap), the
trajectories per hour that implies, the worker's own rollout seconds and the trainer's update
seconds (what overlapped), and the learning curve (training return per iteration) next to each
other, so that the correction's effect on learning is seen on the same seeds.

    python benchmarks/bench_async.py --env keydoor --latency 0.2 --workers 4 --iterations 8 \
        --out docs/results/async/keydoor

``--latency`` gives KeyDoor a per-step sleep (``env.kwargs.step_latency_s``), standing for an env
that answers over a network. ``--set`` passes any further setting to both runs (e.g.
``--env webshop`` with its own settings).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(args: argparse.Namespace, k: int, run_dir: Path) -> list[dict]:
    sets = [f"train.run_dir={run_dir}", f"train.iterations={args.iterations}", "train.eval_episodes=0",
            "train.samples_per_iteration=0", "train.save_every=0", f"train.seed={args.seed}",
            f"rollout.tasks_per_iteration={args.tasks}", f"rollout.env_workers={args.workers}",
            "rollout.backend=hf", "rollout.action_mode=constrained", f"rollout.max_staleness={k}", f"algorithm.lr={args.lr}",
            f"algorithm.tis_cap={args.tis_cap}", f"algorithm.off_policy={args.off_policy}", *args.set]
    if args.latency:
        sets.append(f"env.kwargs.step_latency_s={args.latency}")
    cmd = [sys.executable, "-m", "agentrl", "run", args.algo, "--env", args.env, "--model", args.model]
    for s in sets:
        cmd += ["--set", s]
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false")
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"max_staleness={k} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    print(f"max_staleness={k}: {time.perf_counter() - start:.0f} s in all", flush=True)
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def summary(records: list[dict]) -> dict:
    later = records[1:] or records
    per_iter = statistics.median(r["time/iteration"] for r in later)
    trajectories = statistics.median(r["trajectories"] / r["iteration"] for r in records)
    played = [r.get("time/rollout_played", r.get("time/rollout", 0.0)) for r in later]
    return {
        "s_per_iteration_median": per_iter,
        "trajectories_per_hour": 3600 * trajectories / per_iter,
        "rollout_played_s_median": statistics.median(played),
        "rollout_wait_s_median": statistics.median(r.get("time/rollout", 0.0) for r in later),
        "update_s_median": statistics.median(r.get("time/actor_update", 0.0) + r.get("time/old_logprob", 0.0)
                                             + r.get("time/critic_update", 0.0) for r in later),
        "returns": [r.get("rollout/return") for r in records],
        "staleness_max": [r.get("async/staleness_max", 0.0) for r in records],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", default="sapo")
    parser.add_argument("--env", default="keydoor")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds each env step sleeps (KeyDoor)")
    parser.add_argument("--workers", type=int, default=4, help="env worker processes")
    parser.add_argument("--tasks", type=int, default=8, help="tasks per iteration")
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--staleness", type=int, default=1, help="k compared with 0")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--tis-cap", type=float, default=2.0)
    parser.add_argument("--off-policy", default="decoupled")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], help="another setting for both runs")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for k in (0, args.staleness):
        results[k] = summary(run_once(args, k, args.out / f"k{k}"))
    a, b = results[0], results[args.staleness]
    lines = [
        "| max_staleness | s / iteration (median, it. 2+) | trajectories / hour | worker rollout s | "
        "trainer wait s | update s |",
        "|---|---|---|---|---|---|",
    ]
    for k, r in results.items():
        lines.append(f"| {k} | {r['s_per_iteration_median']:.2f} | {r['trajectories_per_hour']:.0f} | "
                     f"{r['rollout_played_s_median']:.2f} | {r['rollout_wait_s_median']:.2f} | {r['update_s_median']:.2f} |")
    lines.append("")
    lines.append(f"speed-up k={args.staleness} over k=0: {a['s_per_iteration_median'] / b['s_per_iteration_median']:.2f}x")
    lines.append("")
    lines.append("| iteration | " + " | ".join(f"return k={k}" for k in results) + " | staleness k=" + str(args.staleness) + " |")
    lines.append("|---|" + "---|" * (len(results) + 1))
    for i in range(len(a["returns"])):
        row = [str(i + 1)] + [f"{r['returns'][i]:.3f}" for r in results.values()] + [f"{b['staleness_max'][i]:.0f}"]
        lines.append("| " + " | ".join(row) + " |")
    table = "\n".join(lines)
    print(table)
    (args.out / "result.md").write_text(f"Command: {' '.join(sys.argv)}\n\n{table}\n")
    (args.out / "result.json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                      "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
