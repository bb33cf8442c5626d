"""Memory and time of one training update: full vs LoRA, gradient checkpointing, bf16 autocast,
SAPO vs PPO. Each configuration runs in a fresh process, so peak RSS is its own.

The embedded SmolLM2-135M-Instruct, fp32 weights, a fixed batch of ``--turns`` turns of
``--tokens`` tokens (prompt + 64 action tokens, random ids), AdamW, one optimizer step per
update (all turns in one minibatch, micro-batches of ``--micro-tokens``). The update runs twice;
the table shows the second (warm) update's time and the process's peak RSS during it, plus the
RSS before it (weights, reference copy, optimizer state). Prints a markdown table.

    python benchmarks/bench_memory.py                          # every configuration
    python benchmarks/bench_memory.py --configs full lora --turns 8 --tokens 512
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

CONFIGS: dict[str, dict] = {
    "full": {"algo": "sapo"},
    "full+ckpt": {"algo": "sapo", "model": {"gradient_checkpointing": True}},
    "full+bf16-autocast": {"algo": "sapo", "model": {"autocast": "bf16"}},
    "lora16": {"algo": "sapo", "model": {"lora_rank": 16}},
    "lora16+ckpt": {"algo": "sapo", "model": {"lora_rank": 16, "gradient_checkpointing": True}},
    "ppo-full": {"algo": "ppo"},
    "ppo-full+ckpt": {"algo": "ppo", "model": {"gradient_checkpointing": True}},
}


def _rss_gb() -> tuple[float, float]:
    """(current RSS, peak RSS since the last reset) in GB."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) / 2**20
    return out.get("VmRSS", 0.0), out.get("VmHWM", 0.0)


def run_one(name: str, turns: int, tokens: int, micro_tokens: int) -> dict:
    import random

    import torch

    from agentrl.algorithms import get_algorithm
    from agentrl.models.policy import Policy
    from agentrl.parallel.offload import autocast
    from agentrl.rollout.trajectory import Trajectory, Turn
    from agentrl.rundir.metrics import PhaseTimer, reset_peak_memory
    from agentrl.training.compose import load_for_training
    from agentrl.training.config import ModelConfig

    spec = CONFIGS[name]
    model_cfg = ModelConfig(name="embedded", **spec.get("model", {}))
    algo_cls = get_algorithm(spec["algo"])
    loaded = load_for_training(model_cfg, algo_cls.reads_values)
    policy = Policy(loaded.model, loaded.tokenizer, loaded.value_tokens)
    config = algo_cls.config_class(lr=1e-6, minibatch_turns=turns, micro_batch_tokens=micro_tokens)
    algorithm = algo_cls(config, policy, r_max=1.0)
    rng = random.Random(0)
    vocab = policy.policy_vocab
    action = 64
    trajectories = []
    per = 4
    for k in range(0, turns, per):
        traj = Trajectory(task_seed=k, group=k, task="bench")
        count = min(per, turns - k)
        for j in range(count):
            prompt = [rng.randrange(vocab) for _ in range(tokens - action)]
            acts = [rng.randrange(vocab) for _ in range(action)]
            traj.turns.append(Turn(prompt, acts, [-3.0] * action, "", "", "", "", rng.random(),
                                   0.0, j == count - 1, False, True))
        trajectories.append(traj)
    times, before, peak = [], 0.0, 0.0
    for _ in range(2):
        before, _ = _rss_gb()
        reset_peak_memory()
        start = time.perf_counter()
        with autocast(model_cfg.autocast, policy.device):
            algorithm.update(trajectories, PhaseTimer())
        times.append(time.perf_counter() - start)
        _, peak = _rss_gb()
    trainable = sum(p.numel() for p in policy.model.parameters() if p.requires_grad)
    return {"name": name, "seconds": times[-1], "rss_before_gb": before, "peak_gb": peak,
            "trainable_m": trainable / 1e6, "threads": torch.get_num_threads()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--micro-tokens", type=int, default=4096)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.turns, args.tokens, args.micro_tokens)))
        return
    results = []
    for name in args.configs:
        cmd = [sys.executable, __file__, "--one", name, "--turns", str(args.turns),
               "--tokens", str(args.tokens), "--micro-tokens", str(args.micro_tokens)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"# {name} failed: {done.stderr.strip().splitlines()[-1:]}", flush=True)
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(result)
        print(f"# {json.dumps(result)}", flush=True)
    print(f"\n{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores; embedded SmolLM2-135M, fp32 weights, {args.turns} turns x "
          f"{args.tokens} tokens, one AdamW step, micro-batches of {args.micro_tokens} tokens\n")
    print("| configuration | trainable params | time per update | RSS before update | peak RSS |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['name']} | {r['trainable_m']:.1f} M | {r['seconds']:.1f} s | "
              f"{r['rss_before_gb']:.2f} GB | {r['peak_gb']:.2f} GB |")


if __name__ == "__main__":
    main()
