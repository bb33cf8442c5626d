"""Rollout generation speed: ``--backend vllm`` against ``--backend hf`` on the same prompts.

The embedded SmolLM2-135M-Instruct with SAPO's value tokens reserved and banned (as in a SAPO
run), agent-like chat prompts of ~400 tokens (a shared system prompt and task, a distinct
observation per row), sampling at temperature 1, 48 new tokens. Reports new tokens per second
(median of ``--repeats`` after a warm-up) per batch size, free-form and constrained (a trie over
12 admissible actions), plus vLLM's start and weight-sync times. Prints markdown tables.

    python benchmarks/bench_backends.py                    # hf fp32, hf bf16, vllm bf16
    python benchmarks/bench_backends.py --batches 1 8 16 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time

ROOMS = ["kitchen", "hall", "study", "cellar", "garden", "attic", "pantry", "library"]
OBJECTS = ["a mug", "a key", "an apple", "a book", "a lamp", "a towel", "a knife", "a plate",
           "a spoon", "a candle", "a vase", "a box"]
SYSTEM = ("You are an agent in a household. Each turn you read what you see and choose exactly "
          "one admissible action, written inside <action></action> tags. Think about where "
          "objects usually are, do not repeat actions that did nothing, and finish the task in "
          "as few steps as you can. ") * 3


def observation(rng: random.Random, words: int) -> str:
    parts = []
    while len(" ".join(parts).split()) < words:
        parts.append(f"In the {rng.choice(ROOMS)} you see {rng.choice(OBJECTS)}, "
                     f"{rng.choice(OBJECTS)} and a closed cabinet {rng.randrange(1, 20)}.")
    return " ".join(parts)


def make_prompts(tokenizer, count: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    task = "Your task is to put a clean mug in the cabinet. "
    prompts = []
    for _ in range(count):
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": task + observation(rng, 150)}]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        prompts.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return prompts


def admissible(rng: random.Random) -> list[str]:
    return [f"go to {r}" for r in ROOMS[:4]] + [f"take {o[o.index(' ') + 1:]} from cabinet {rng.randrange(1, 9)}"
                                                for o in rng.sample(OBJECTS, 6)] + ["look", "inventory"]


def timed(backend, prompts, params, cursors_fn, repeats: int) -> tuple[float, float]:
    """(median new tokens/s, median seconds) over ``repeats`` runs after one warm-up."""
    backend.generate(prompts, params, cursors_fn())
    rates, secs = [], []
    for _ in range(repeats):
        cursors = cursors_fn()
        start = time.perf_counter()
        gens = backend.generate(prompts, params, cursors)
        elapsed = time.perf_counter() - start
        rates.append(sum(len(g.token_ids) for g in gens) / elapsed)
        secs.append(elapsed)
    return statistics.median(rates), statistics.median(secs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["hf-fp32", "hf-bf16", "vllm-bf16"],
                        help="hf-fp32, hf-bf16, vllm-bf16, vllm-fp32 (vLLM last: it holds threads)")
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8, 16])
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=["free", "constrained"])
    args = parser.parse_args()

    import torch

    from agentrl.backends.base import SamplingParams
    from agentrl.rollout.action_format import ActionFormat
    from agentrl.rollout.constrained import ConstraintBuilder
    from agentrl.rollout.prompting import end_of_turn_id
    from agentrl.training.compose import load_for_training, stop_ids
    from agentrl.training.config import ModelConfig

    loaded = load_for_training(ModelConfig(name="embedded"), reserve_values=True)
    model, tokenizer, value_tokens = loaded.model, loaded.tokenizer, loaded.value_tokens
    stops = stop_ids(tokenizer, model)
    prompts = make_prompts(tokenizer, max(args.batches))
    builder = ConstraintBuilder(tokenizer, ActionFormat().render, end_of_turn_id(tokenizer))
    params = SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens)
    length = statistics.mean(len(p) for p in prompts)
    rows: dict[tuple[str, str], dict[int, float]] = {}
    notes = []
    backends = {}
    for name in args.backends:  # every backend is built before any timing
        kind, dtype_name = name.split("-")
        dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
        if kind == "hf":
            from agentrl.backends.hf import HFBackend

            backends[name] = HFBackend(model, stops, tokenizer.pad_token_id, value_tokens.ids,
                                       dtype=None if dtype == torch.float32 else dtype, seed=0)
        else:
            from agentrl.backends.vllm import VLLMBackend, VLLMOptions

            backend = VLLMBackend(model, stops, value_tokens.ids,
                                  VLLMOptions(dtype=dtype, max_model_len=1024), seed=0)
            start = time.perf_counter()
            backend.sync_weights()
            notes.append(f"{name}: engine start {backend.start_seconds:.1f} s, weight sync "
                         f"{time.perf_counter() - start:.2f} s, "
                         f"threads bound to cores {os.environ.get('VLLM_CPU_OMP_THREADS_BIND')}")
            backends[name] = backend
    # Backends alternate on each setting, so a shared machine's load hits them alike.
    loads = []
    for mode in args.modes:
        for batch in args.batches:
            batch_prompts = prompts[:batch]
            rng = random.Random(batch)
            sets = [admissible(rng) for _ in batch_prompts]
            cursors_fn = ((lambda s=sets: [builder.cursor(a) for a in s]) if mode == "constrained"
                          else (lambda: None))
            for name, backend in backends.items():
                rate, secs = timed(backend, batch_prompts, params, cursors_fn, args.repeats)
                rows.setdefault((name, mode), {})[batch] = rate
                loads.append(os.getloadavg()[0])
                print(f"# {name} {mode} batch {batch}: {rate:.1f} new tokens/s ({secs:.2f} s), "
                      f"load {loads[-1]:.1f}", flush=True)
    notes.append(f"1-minute load average during the runs: {min(loads):.1f} to {max(loads):.1f} "
                 f"(other jobs on the machine)")

    print(f"\n{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, torch {torch.__version__}; prompts ~{length:.0f} tokens, "
          f"{args.new_tokens} new tokens, temperature 1, median of {args.repeats}\n")
    print("| backend | mode | " + " | ".join(f"batch {b}" for b in args.batches) + " |")
    print("|---|---|" + "---|" * len(args.batches))
    for (name, mode), by_batch in rows.items():
        print(f"| {name} | {mode} | " + " | ".join(f"{by_batch[b]:.0f}" for b in args.batches) + " |")
    for note in notes:
        print(f"\n{note}")


if __name__ == "__main__":
    main()
