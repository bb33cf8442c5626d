"""SAPO vs PPO vs GRPO: per-phase time and peak memory per iteration, as ratios to PPO.

    python benchmarks/bench_algorithms.py --model embedded --env keydoor --trajectories 16 --iterations 3

Like-for-like: the same env, model, seed, sampling and number of trajectories per iteration
(SAPO and PPO: T tasks x 1 rollout; GRPO: T/8 tasks x 8 rollouts). Each algorithm runs in its own
process so that its peak memory is its own; the first iteration is a warm-up and the table
gives medians over the others. Extra ``--set key=value`` options apply to every run.

The paper's claim to check: SAPO's time per iteration <= 0.67x PPO's (451.2 s -> 301.4 s on
ALFWorld, 33.2% less), and its peak memory clearly below PPO's (no critic weights, gradients or
optimizer state). The machine is shared and noisy: compare ratios from one invocation.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PHASES = ["rollout", "old_logprob", "value_inference", "ref_logprob", "actor_update", "critic_update", "iteration"]


def child(args: argparse.Namespace) -> None:
    """Run one algorithm and print its per-iteration records as JSON on the last line."""
    from transformers.utils import logging as hf_logging

    import agentrl

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    k = 8 if args.algo == "grpo" else 1
    overrides = [
        f"rollout.tasks_per_iteration={max(1, args.trajectories // k)}",
        f"train.iterations={args.iterations}", f"train.run_dir={args.run_dir}",
        "train.save_every=100000", "train.samples_per_iteration=0", f"train.seed={args.seed}",
        *args.set,
    ]
    cfg = agentrl.build_config(algo=args.algo, env=args.env, model=args.model,
                               config_path=args.config, overrides=overrides)
    result = agentrl.train(cfg)
    print(json.dumps(result.history))


def summarise(records: list[dict]) -> dict[str, float]:
    steady = records[1:] or records
    out = {p: statistics.median(r.get(f"time/{p}", 0.0) for r in steady) for p in PHASES}
    out["peak_rss_gb"] = max(r.get("memory/peak_rss_gb", 0.0) for r in records)
    out["peak_cuda_gb"] = max(r.get("memory/peak_cuda_gb", 0.0) for r in records)
    out["params_total_m"] = records[-1].get("params/total", 0.0) / 1e6
    out["params_trainable_m"] = records[-1].get("params/trainable", 0.0) / 1e6
    out["trajectories"] = records[-1].get("rollout/episodes", 0.0)
    out["turns_per_episode"] = statistics.mean(r.get("rollout/episode_length", 0.0) for r in records)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algos", default="sapo,ppo,grpo")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--env", default="keydoor")
    parser.add_argument("--config", default=None)
    parser.add_argument("--trajectories", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--algo", help=argparse.SUPPRESS)
    parser.add_argument("--run-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.algo:
        child(args)
        return

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for algo in args.algos.split(","):
            cmd = [sys.executable, __file__, "--algo", algo, "--run-dir", str(Path(tmp) / algo),
                   "--model", args.model, "--env", args.env, "--trajectories", str(args.trajectories),
                   "--iterations", str(args.iterations), "--seed", str(args.seed)]
            if args.config:
                cmd += ["--config", args.config]
            for item in args.set:
                cmd += ["--set", item]
            print(f"running {algo} ...", file=sys.stderr, flush=True)
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results[algo] = summarise(json.loads(out.strip().splitlines()[-1]))

    ref = results.get("ppo")
    print(f"\n{args.model} on {args.env}, {args.trajectories} trajectories per iteration, "
          f"medians over iterations 2..{args.iterations}; ratios to PPO in brackets\n")
    header = "| phase (s) | " + " | ".join(results) + " |"
    print(header)
    print("|" + "---|" * (len(results) + 1))
    for key in PHASES + ["peak_rss_gb", "peak_cuda_gb"]:
        if key == "peak_cuda_gb" and not any(r[key] for r in results.values()):
            continue
        cells = []
        for r in results.values():
            value = r[key]
            ratio = f" ({value / ref[key]:.2f}x)" if ref and ref[key] > 0 else ""
            cells.append(f"{value:.2f}{ratio}")
        label = key if key.startswith("peak") else f"time/{key}"
        print(f"| {label} | " + " | ".join(cells) + " |")
    for key in ("params_total_m", "params_trainable_m", "trajectories", "turns_per_episode"):
        print(f"| {key} | " + " | ".join(f"{r[key]:.1f}" for r in results.values()) + " |")


if __name__ == "__main__":
    main()
