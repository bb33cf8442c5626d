"""LoRA adapters: the effective full weights of a peft model, adapter checkpoints, and merging.

With ``model.lora_rank > 0`` the trained model is a peft ``PeftModel``: frozen base weights,
LoRA matrices on every linear layer and, for SAPO, two trainable rows of the (tied) embedding
(``trainable_token_indices``). Three things need the *effective* weights (base + adapters):

* the vLLM engine, which is pushed full weights after every update (:func:`merged_state_dict`;
  computing ``W + B A * scale`` on the fly instead of peft's in-place merge/unmerge, which would
  add rounding drift to the live weights at every sync);
* ``agentrl.models.lora.merge(checkpoint, out)``, which turns an adapter checkpoint into a plain
  ``save_pretrained`` folder that transformers and vLLM load like any model;
* resuming a run, which loads the adapters back into a freshly built peft model.

An adapter checkpoint holds peft's files (``adapter_config.json``, ``adapter_model.safetensors``),
the tokenizer (with SAPO's added tokens), ``agentrl_value_tokens.json`` and ``agentrl_lora.json``,
which names the base model the way the run's config did (e.g. ``embedded``), so the base can be
rebuilt exactly: loaded, resized to the tokenizer and its value rows zeroed, as at the start of
training.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn
from transformers import PreTrainedModel

from agentrl.errors import UserError

LORA_FILE = "agentrl_lora.json"
ADAPTER_CONFIG = "adapter_config.json"


def is_peft_model(model: nn.Module) -> bool:
    return hasattr(model, "get_base_model") and hasattr(model, "peft_config")


def base_model_of(model: nn.Module) -> nn.Module:
    """The transformers model (with peft's layers injected, when there are any)."""
    return model.get_base_model() if is_peft_model(model) else model


def merged_state_dict(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, tensor)`` of the effective weights, named as in a plain transformers model.

    For a plain model this is its state dict. For a peft model, each LoRA layer yields
    ``base + delta`` under the base layer's name and each trainable-tokens wrapper yields the
    embedding with its trained rows in place; nothing of peft's own bookkeeping is yielded.
    Tensors are detached; a generator, so a caller converting dtypes holds one copy at a time.
    """
    if not is_peft_model(model):
        for name, tensor in model.state_dict().items():
            yield name, tensor.detach()
        return
    from peft.tuners.lora import LoraLayer
    from peft.utils.other import TrainableTokensWrapper

    base = model.get_base_model()
    special: list[str] = []
    with torch.no_grad():
        for name, module in base.named_modules():
            if any(name.startswith(prefix) for prefix in special):
                continue
            if isinstance(module, LoraLayer):
                layer = module.get_base_layer()
                weight = layer.weight.detach()
                if not module.merged:
                    for adapter in module.active_adapters:
                        if adapter in module.lora_A:
                            weight = weight + module.get_delta_weight(adapter).to(weight.dtype)
                yield f"{name}.weight", weight
                if getattr(layer, "bias", None) is not None:
                    yield f"{name}.bias", layer.bias.detach()
                special.append(name + ".")
            elif isinstance(module, TrainableTokensWrapper):
                adapter = module.token_adapter
                weight = adapter.get_merged_weights(adapter.active_adapters).detach()
                yield f"{name}.weight", weight
                special.append(name + ".")
        for name, tensor in base.state_dict().items():
            if not any(name.startswith(prefix) for prefix in special):
                yield name, tensor.detach()


def save_adapter_checkpoint(model: nn.Module, folder: Path, base_name: str, seed: int = 0) -> None:
    """peft's adapter files plus the base model's name and build seed (the ``tiny`` test model
    is random: its seed is part of its identity)."""
    model.save_pretrained(folder)
    info = {"base_model": base_name, "seed": seed}
    (Path(folder) / LORA_FILE).write_text(json.dumps(info) + "\n")


def is_adapter_checkpoint(folder: str | Path) -> bool:
    return (Path(folder) / ADAPTER_CONFIG).exists()


def load_adapter_weights(model: nn.Module, folder: str | Path) -> None:
    """Load an adapter checkpoint's weights into a peft model built with the same settings."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(folder) / "adapter_model.safetensors"
    if not path.exists():
        raise UserError(f"'{folder}' has no adapter_model.safetensors: not a LoRA checkpoint.")
    state = load_file(str(path), device=str(next(model.parameters()).device))
    result = set_peft_model_state_dict(model, state)
    unexpected = getattr(result, "unexpected_keys", None) or []
    if unexpected:
        raise UserError(f"The LoRA checkpoint '{folder}' does not fit this model (unexpected weights such as {unexpected[0]}).")


def rebuild_base(folder: str | Path, dtype: torch.dtype = torch.float32):
    """The base model an adapter checkpoint was trained from, as it was at the start of training
    (resized to the tokenizer, value rows zeroed), and the checkpoint's tokenizer."""
    from transformers import AutoTokenizer

    from agentrl.models.loading import load_model, load_tokenizer, resolve_model
    from agentrl.models.value_tokens import ValueTokens, check_value_tokens

    folder = Path(folder)
    info_path = folder / LORA_FILE
    if not info_path.exists():
        raise UserError(f"'{folder}' has no {LORA_FILE}: it does not say which base model its adapters belong to.")
    info = json.loads(info_path.read_text())
    source = resolve_model(info["base_model"])
    tokenizer = AutoTokenizer.from_pretrained(folder)
    # built as at the start of training: with the base tokenizer, then resized
    model = load_model(source, dtype, load_tokenizer(source), seed=int(info.get("seed", 0)))
    value_tokens = ValueTokens.load(folder)
    if model.get_output_embeddings().weight.shape[0] < len(tokenizer):
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    if value_tokens is not None:
        check_value_tokens(model, value_tokens)
        with torch.no_grad():
            model.get_output_embeddings().weight[value_tokens.policy_vocab:].zero_()
    return model, tokenizer, value_tokens


def merge(checkpoint: str | Path, out: str | Path, dtype: torch.dtype = torch.float32) -> Path:
    """Merge an adapter checkpoint into a full model folder that transformers and vLLM load.

    The folder gets ``save_pretrained`` weights and config, the tokenizer and the value-token
    ids, so ``--model <out>`` resumes SAPO with the same value tokens.
    """
    from peft import PeftModel

    checkpoint, out = Path(checkpoint), Path(out)
    if not is_adapter_checkpoint(checkpoint):
        raise UserError(f"'{checkpoint}' is not a LoRA adapter checkpoint (no {ADAPTER_CONFIG}).")
    base, tokenizer, value_tokens = rebuild_base(checkpoint, dtype)
    peft_model = PeftModel.from_pretrained(base, checkpoint)
    merged: PreTrainedModel = peft_model.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if value_tokens is not None:
        value_tokens.save(out)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m agentrl.models.lora CHECKPOINT OUT``: merge adapters into a full model folder."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m agentrl.models.lora", description=main.__doc__)
    parser.add_argument("checkpoint")
    parser.add_argument("out")
    args = parser.parse_args(argv)
    try:
        print(merge(args.checkpoint, args.out))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
