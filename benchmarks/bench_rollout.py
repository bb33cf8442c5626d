"""Rollout throughput: the engine vs a bare batched ``model.generate`` on the same prompts.

    python benchmarks/bench_rollout.py --model embedded --envs 16 --max-new-tokens 48 --repeats 3

Three ways to produce one reply for each of N first-turn prompts of an env:

* ``bare generate``: transformers' ``model.generate`` on the left-padded prompt batch (sampling,
  same temperature and token budget), nothing else;
* ``backend``: agentrl's HF backend alone on the same prompt ids;
* ``engine``: the full rollout engine for one turn (env resets, prompt building, generation,
  parsing, env steps, records).

Prints generated tokens/s (only real tokens, padding excluded) and env steps/s, medians over
``--repeats`` runs after one warm-up, and the engine's share of bare generate. The target is
engine >= 90% of bare generate. The machine is shared and noisy: compare ratios measured in one
run, not numbers across runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from agentrl.models.policy import Policy
from agentrl.rollout.engine import Task
from agentrl.training.compose import env_factory, load_for_training, make_backend, make_engine
from agentrl.training.config import build_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--env", default="keydoor")
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backend", default="hf",
                        help="the engine's backend; hf compares like with like against bare generate")
    parser.add_argument("--dtype", default="float32",
                        help="generation dtype (bf16 pays only on CPUs with native bf16, docs/benchmarks.md)")
    args = parser.parse_args()

    torch.manual_seed(0)
    cfg = build_config(algo="grpo", env=args.env, model=args.model, overrides=[
        f"model.dtype={args.dtype}", f"rollout.max_new_tokens={args.max_new_tokens}",
        "rollout.max_turns=1", "rollout.action_mode=free", f"rollout.backend={args.backend}"])
    loaded = load_for_training(cfg.model, reserve_values=False)
    model, tok = loaded.model, loaded.tokenizer
    policy = Policy(model, tok, None, cfg.rollout.temperature)
    backend = make_backend(policy, cfg.rollout, seed=0)
    engine = make_engine(policy, backend, cfg.rollout, env_factory(cfg.env, "train"))
    tasks = [Task(seed=i, group=i) for i in range(args.envs)]
    prompts = [t.turns[0].prompt_ids for t in engine.run(tasks).trajectories]  # also a warm-up
    stop = list(backend.stop_ids)
    params = cfg.rollout.sampling()

    def bare() -> tuple[float, int]:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), tok.pad_token_id)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, top_p=1.0,
                                 temperature=params.temperature, max_new_tokens=params.max_new_tokens,
                                 eos_token_id=stop, pad_token_id=tok.pad_token_id)
        seconds = time.perf_counter() - start
        tokens = 0
        for row in out[:, width:].tolist():
            n = 0
            for t in row:
                n += 1
                if t in stop:
                    break
            tokens += n
        return seconds, tokens

    def ours() -> tuple[float, int]:
        start = time.perf_counter()
        gens = backend.generate(prompts, params)
        return time.perf_counter() - start, sum(len(g.token_ids) for g in gens)

    def full() -> tuple[float, int]:
        start = time.perf_counter()
        result = engine.run(tasks)
        return time.perf_counter() - start, result.generated_tokens

    bare()
    rows = {}
    for name, fn in (("bare generate", bare), ("backend", ours), ("engine", full)):
        runs = [fn() for _ in range(args.repeats)]
        rows[name] = (statistics.median(t / s for s, t in runs), statistics.median(s for s, _ in runs))
    base = rows["bare generate"][0]
    print(f"\n{args.envs} prompts of {args.env} (mean {sum(map(len, prompts)) / len(prompts):.0f} tokens), "
          f"{args.model} in {args.dtype}, backend {args.backend}, up to {args.max_new_tokens} new tokens, {torch.get_num_threads()} threads\n")
    print("| path | tokens/s | env steps/s | seconds per batch | share of bare generate |")
    print("|---|---|---|---|---|")
    for name, (tps, secs) in rows.items():
        steps = f"{args.envs / secs:.1f}" if name == "engine" else "-"
        print(f"| {name} | {tps:.1f} | {steps} | {secs:.2f} | {tps / base:.0%} |")
    engine.pool.close()


if __name__ == "__main__":
    main()
