"""A closed vLLM engine gives its memory back, in a process of its own.

Usage: python tests/scripts/vllm_release.py

Starts an engine on the embedded model (bf16, 1 GiB KV cache), closes it, and starts a second one
in the same process, as a notebook that trains twice does. Prints one JSON line: resident memory
at each point, whether the first engine's model object was still reachable after close, whether
the one-rank process group vLLM made was gone, and the second engine's weight-check gap.
"""

from __future__ import annotations

import gc
import json
import weakref

import torch


def main() -> None:
    from agentrl.backends.vllm import VLLMBackend, VLLMOptions
    from agentrl.rundir.metrics import resident_gb
    from agentrl.training.compose import load_for_training, stop_ids
    from agentrl.training.config import ModelConfig

    loaded = load_for_training(ModelConfig(name="embedded"), reserve_values=True)
    model = loaded.model
    stops, banned = stop_ids(loaded.tokenizer, model), loaded.value_tokens.ids

    def start() -> VLLMBackend:
        return VLLMBackend(model, stops, banned, VLLMOptions(dtype=torch.bfloat16, max_model_len=512,
                                                            cpu_kv_cache_gib=1), seed=0)

    before = resident_gb()
    first = start()
    owned = first.engine_owns_process_group
    engine_model = weakref.ref(first.llm.llm_engine._get_driver_model_for_cleanup())
    with_engine = resident_gb()
    first.close()
    first.close()  # twice is harmless
    gc.collect()
    after_close = resident_gb()
    group_left = torch.distributed.is_initialized()
    second = start()  # the next run in the same process
    print(json.dumps({
        "before": before, "with_engine": with_engine, "after_close": after_close,
        "engine_owned_group": owned, "engine_model_alive": engine_model() is not None,
        "group_after_close": group_left,
        "second_gap": second.last_sync.relative_gap if second.last_sync else None,
        "second_tolerance": second.sync_tolerance,
    }))


if __name__ == "__main__":
    main()
