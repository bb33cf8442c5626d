"""One GPU, Qwen2.5-1.5B and 7B shapes: SAPO vs PPO on KeyDoor and ALFWorld, with vLLM sleeping.

    python benchmarks/gpu_check.py                 # one GPU (sized for an H200, ~8 minutes)
    python benchmarks/gpu_check.py --dry-run       # CPU, tiny model, transformers backend: seconds
    python benchmarks/gpu_check.py --models 1.5b --envs keydoor --out gpu_check.json

Why: every GPU path of agentrl (CUDA memory, vLLM colocated with the trainer and its sleep mode,
bf16, the weight sync) was written without a GPU. This script runs them all at once, prints what a
reader of docs/scale.md needs (per-phase times, peak CUDA memory, SAPO/PPO ratios, vLLM's sleep
and wake times) and writes them as JSON.

Models are *shapes*: Qwen2 configs written inline (hidden sizes, layers, heads, vocabulary
151936 as Qwen2.5-1.5B's; 7B's real vocabulary is 152064, the extra rows change nothing here)
with random weights, so nothing is downloaded. The tokenizer is the embedded SmolLM2's (49152
ids; the spare embedding rows hold SAPO's value tokens). Random weights play badly, which does
not matter: rollouts are constrained to admissible actions, so turns, tokens and therefore the
cost are those of a real run of that length.

Sizing (one H200, 141 GB): 1.5B trains in full (bf16 weights and AdamW state, a frozen bf16
reference; PPO adds a full critic). 7B full fine-tuning with PPO would need ~124 GB of model state
alone (benchmarks/fsdp_memory.py), so **7B runs LoRA r16 with gradient checkpointing**: the
reference is the base with adapters disabled; PPO's critic is still a full 7B body trained in
full (~57 GB), which is exactly the cost SAPO removes. vLLM takes ``--vllm-memory`` of the GPU
and sleeps during every update (``model.vllm_sleep``), so the update has the GPU to itself.

``--staleness K`` adds, per shape and env, SAPO on the transformers backend at
``rollout.max_staleness`` 0 and K (``sapo@k0``, ``sapo@kK``: asynchronous rollouts run on the hf
backend only so far, docs/async.md) and prints the k=0 / k=K iteration-time ratio: how much of the
rollout the update hides on a GPU.

Each run is its own process (a vLLM engine does not give all its memory back in-process), two
iterations; the second (warm) iteration's numbers are reported. Runs that would start after
``--budget-s`` are skipped and listed, so the script ends in time whatever the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Qwen2.5 shapes; ``dry`` is the CPU stand-in (the tiny test model's shape).
SHAPES: dict[str, dict[str, int | bool]] = {
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
                 max_position_embeddings=32768, rope_theta=1000000.0),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, vocab_size=151936, tie_word_embeddings=False,
               max_position_embeddings=32768, rope_theta=1000000.0),
    "dry": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=49152 + 64, tie_word_embeddings=True,
                max_position_embeddings=4096),
}
#: Per shape: what differs from full fine-tuning (see the module docstring for why).
MODEL_SETTINGS: dict[str, list[str]] = {
    "1.5b": [],
    "7b": ["model.lora_rank=16", "model.gradient_checkpointing=true"],
    "dry": [],
}
ENVS: dict[str, list[str]] = {
    "keydoor": ["env.id=keydoor", "rollout.max_turns=8"],
    "alfworld": ["env.id=alfworld", "env.kwargs={scene: small, max_steps: 12}", "rollout.max_turns=8"],
}
PHASE_KEYS = ("rollout", "old_logprob", "value_inference", "ref_logprob", "actor_update", "critic_update",
              "weight_sync", "vllm_sleep", "vllm_wake", "iteration")


def build_model_folder(shape: str, folder: Path, device: str) -> Path:
    """A transformers folder with random weights of ``shape`` and the embedded tokenizer (bf16 on
    GPU, fp32 on CPU), built directly on the device."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from agentrl.models.loading import load_tokenizer, resolve_model

    tokenizer = load_tokenizer(resolve_model("tiny"))
    config = Qwen2Config(**SHAPES[shape], bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        torch.manual_seed(0)
        model = Qwen2ForCausalLM(config).to(dtype)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return folder


def overrides_for(spec: dict, dry_run: bool) -> list[str]:
    """The run's ``--set`` overrides: small batches, constrained rollouts, two iterations."""
    common = [
        f"train.run_dir={spec['run_dir']}", "train.iterations=2", "train.save_every=0",
        "train.samples_per_iteration=0", "train.eval_episodes=0", "train.seed=0",
        "rollout.action_mode=constrained", "rollout.history_window=2", "rollout.max_new_tokens=24",
        "rollout.max_prompt_tokens=1024", "algorithm.kl_coef=0.01", "algorithm.micro_batch_tokens=8192",
        "algorithm.minibatch_turns=64",
    ]
    if dry_run:
        common += ["rollout.tasks_per_iteration=2", "rollout.backend=hf", "model.device=cpu",
                   "rollout.max_turns=3", "algorithm.micro_batch_tokens=2048"]
    else:
        common += ["rollout.tasks_per_iteration=16", "rollout.backend=vllm", "model.device=cuda",
                   "model.vllm_sleep=true", f"model.vllm_gpu_memory_utilization={spec['vllm_memory']}"]
    if "@k" in spec["algo"]:  # asynchronous rollouts (hf backend only so far): the same run at k
        k = int(spec["algo"].split("@k", 1)[1])
        common += ["rollout.backend=hf", "model.vllm_sleep=false", f"rollout.max_staleness={k}",
                   "algorithm.tis_cap=2", "train.iterations=3"]
    return ENVS[spec["env"]] + MODEL_SETTINGS[spec["shape"]] + common


def run_one(spec: dict) -> dict:
    """Train ``spec`` (shape, algo, env, model folder) for two iterations; the warm iteration's
    phase times, peak CUDA memory and vLLM sleep/wake times."""
    from agentrl.training.config import build_config
    from agentrl.training.trainer import train

    overrides = overrides_for(spec, spec["dry_run"])
    if spec["dry_run"]:  # ignore the engine's own backend choice: the dry run is transformers
        os.environ.setdefault("AGENTRL_AUTO_BACKEND", "hf")
    config = build_config(algo=spec["algo"].split("@", 1)[0], model=spec["model_dir"], overrides=overrides)
    start = time.perf_counter()
    result = train(config)
    warm = result.history[-1]
    out = {key: warm.get(f"time/{key}", 0.0) for key in PHASE_KEYS}
    out["update"] = sum(warm.get(f"time/{k}", 0.0) for k in
                        ("old_logprob", "value_inference", "ref_logprob", "actor_update", "critic_update"))
    out["peak_cuda_gb"] = max(r.get("memory/peak_cuda_gb", 0.0) for r in result.history)
    out["peak_rss_gb"] = max(r.get("memory/peak_rss_gb", 0.0) for r in result.history)
    out["turns"] = warm.get("env_steps", 0.0) - result.history[0].get("env_steps", 0.0)
    out["wall_s"] = time.perf_counter() - start
    return out


def _run_in_subprocess(spec: dict, timeout_s: float) -> dict:
    """:func:`run_one` in a fresh interpreter (a vLLM engine keeps GPU memory until exit)."""
    done = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], capture_output=True,
                          text=True, timeout=max(30.0, timeout_s))
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"run failed (exit {done.returncode}): {done.stderr[-3000:]}")


def ratios(results: dict[tuple[str, str, str], dict]) -> list[tuple[str, str, dict[str, float]]]:
    """PPO / SAPO per (shape, env): update time, iteration time, peak CUDA memory."""
    rows = []
    for (shape, env, algo), sapo in results.items():
        ppo = results.get((shape, env, "ppo"))
        if algo != "sapo" or ppo is None or "error" in sapo or "error" in ppo:
            continue
        rows.append((shape, env, {key: ppo[key] / sapo[key] if sapo[key] else float("nan")
                                  for key in ("update", "iteration", "peak_cuda_gb")}))
    return rows


def report(results: dict[tuple[str, str, str], dict], skipped: list[str]) -> str:
    lines = ["| shape | env | algo | turns | rollout s | old+ref+V s | actor s | critic s | sync s | "
             "vLLM sleep s | vLLM wake s | iteration s | peak CUDA GB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (shape, env, algo), r in results.items():
        if "error" in r:
            lines.append(f"| {shape} | {env} | {algo} | error: {r['error'][:80]} |")
            continue
        passes = r["old_logprob"] + r["ref_logprob"] + r["value_inference"]
        lines.append(f"| {shape} | {env} | {algo} | {r['turns']:.0f} | {r['rollout']:.1f} | {passes:.1f} | "
                     f"{r['actor_update']:.1f} | {r['critic_update']:.1f} | {r['weight_sync']:.1f} | "
                     f"{r['vllm_sleep']:.2f} | {r['vllm_wake']:.2f} | {r['iteration']:.1f} | "
                     f"{r['peak_cuda_gb']:.1f} |")
    lines += ["", "| shape | env | PPO/SAPO update time | PPO/SAPO iteration time | PPO/SAPO peak CUDA memory |",
              "|---|---|---|---|---|"]
    for shape, env, ratio in ratios(results):
        lines.append(f"| {shape} | {env} | {ratio['update']:.2f} | {ratio['iteration']:.2f} | "
                     f"{ratio['peak_cuda_gb']:.2f} |")
    overlap = [(shape, env, algo, r, results[(shape, env, "sapo@k0")]) for (shape, env, algo), r in results.items()
               if "@k" in algo and not algo.endswith("@k0") and "error" not in r
               and "error" not in results.get((shape, env, "sapo@k0"), {"error": 1})]
    if overlap:
        lines += ["", "| shape | env | run | iteration s at k=0 | iteration s at k | k=0 / k |", "|---|---|---|---|---|---|"]
        for shape, env, algo, r, base in overlap:
            lines.append(f"| {shape} | {env} | {algo} | {base['iteration']:.1f} | {r['iteration']:.1f} | "
                         f"{base['iteration'] / r['iteration']:.2f} |")
    if skipped:
        lines += ["", "Skipped (time budget): " + ", ".join(skipped)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny shape, transformers backend")
    parser.add_argument("--models", default="1.5b,7b")
    parser.add_argument("--algos", default="sapo,ppo")
    parser.add_argument("--envs", default="keydoor,alfworld")
    parser.add_argument("--vllm-memory", type=float, default=0.25, help="vLLM's share of the GPU")
    parser.add_argument("--budget-s", type=float, default=420.0, help="start no run after this many seconds")
    parser.add_argument("--staleness", type=int, default=0,
                        help="also SAPO at rollout.max_staleness 0 and K on the hf backend (0: not)")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:  # one run, in its own process
        print("RESULT " + json.dumps(run_one(json.loads(args.worker))), flush=True)
        return {}

    import torch

    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("gpu_check: no CUDA GPU here; use --dry-run to check the script on CPU.")
    shapes = ["dry"] if args.dry_run else args.models.split(",")
    algos = args.algos.split(",") + (["sapo@k0", f"sapo@k{args.staleness}"] if args.staleness > 0 else [])
    device = "cpu" if args.dry_run else "cuda"
    start = time.perf_counter()
    results: dict[tuple[str, str, str], dict] = {}
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="agentrl-gpu-check-") as tmp:
        for shape in shapes:
            if time.perf_counter() - start > args.budget_s:
                skipped += [f"{shape}/{e}/{a}" for e in args.envs.split(",") for a in algos]
                continue
            t0 = time.perf_counter()
            model_dir = build_model_folder(shape, Path(tmp) / f"model-{shape}", device)
            print(f"[gpu_check] {shape}: random weights written in {time.perf_counter() - t0:.0f} s", flush=True)
            for env in args.envs.split(","):
                for algo in algos:
                    name = f"{shape}/{env}/{algo}"
                    elapsed = time.perf_counter() - start
                    if elapsed > args.budget_s:
                        skipped.append(name)
                        continue
                    spec = dict(shape=shape, env=env, algo=algo, model_dir=str(model_dir), dry_run=args.dry_run,
                                vllm_memory=args.vllm_memory, run_dir=str(Path(tmp) / name.replace("/", "-")))
                    try:
                        results[(shape, env, algo)] = (run_one(spec) if args.dry_run else
                                                       _run_in_subprocess(spec, args.budget_s + 120 - elapsed))
                    except Exception as exc:  # report and go on: one failure must not hide the rest
                        results[(shape, env, algo)] = {"error": f"{type(exc).__name__}: {exc}"}
                    print(f"[gpu_check] {name}: {json.dumps(results[(shape, env, algo)])}", flush=True)
    text = report(results, skipped)
    print(text)
    print(f"\n[gpu_check] total {time.perf_counter() - start:.0f} s on "
          f"{torch.cuda.get_device_name() if device == 'cuda' else 'CPU (dry run)'}")
    payload = {"results": {"/".join(k): v for k, v in results.items()}, "skipped": skipped,
               "ratios": [{"shape": s, "env": e, **r} for s, e, r in ratios(results)]}
    if args.out is not None:
        args.out.write_text(json.dumps(payload, indent=2))
    return payload


if __name__ == "__main__":
    main()
