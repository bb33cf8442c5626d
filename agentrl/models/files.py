"""A local model's files, checked before anything loads them.

A copy cut short (a full disk, an interrupted ``scp``) or a file that is not what its name says
otherwise fails deep inside safetensors, tokenizers or the GGUF reader with a traceback that
names neither the file nor the cause. These checks read only headers (a few bytes to a few KB;
``tokenizer.json`` in full, a few MB at most) and name the broken file in one sentence.
"""

from __future__ import annotations

import json
from pathlib import Path

from agentrl.errors import UserError

GGUF_MAGIC = b"GGUF"
#: safetensors caps its JSON header at 100 MB; a larger length means the first bytes are not one.
MAX_SAFETENSORS_HEADER = 100_000_000
#: Tokenizer and config files parsed as JSON to prove they are whole.
JSON_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")


def check_model_folder(folder: str | Path) -> None:
    """Every weight file's header is whole, sharded weights are all there, and the tokenizer's
    JSON files parse; the first problem is a :class:`UserError` naming the file."""
    folder = Path(folder)
    for path in sorted(folder.glob("*.safetensors")):
        check_safetensors(path)
    for index in sorted(folder.glob("*.safetensors.index.json")):
        _check_shards(index)
    for path in sorted(folder.glob("*.bin")):
        if path.stat().st_size == 0:
            raise UserError(f"Model file '{path}' is empty; copy the model folder again.")
    for name in JSON_FILES:
        if (folder / name).is_file():
            _check_json(folder / name)


def check_safetensors(path: Path) -> None:
    """The 8-byte header length, the JSON header and the last tensor's end fit in the file."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise UserError(f"Model file '{path}' is truncated: {size} bytes, less than a safetensors header.")
        length = int.from_bytes(head, "little")
        if length > min(size - 8, MAX_SAFETENSORS_HEADER):
            raise UserError(f"Model file '{path}' is truncated or not a safetensors file: its header claims "
                            f"{length:,} bytes and the file has {size:,}.")
        raw = fh.read(length)
    try:
        header = json.loads(raw)
        ends = [int(entry["data_offsets"][1]) for key, entry in header.items() if key != "__metadata__"]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        raise UserError(f"Model file '{path}' has a corrupt safetensors header; copy it again.") from None
    needed = 8 + length + max(ends, default=0)
    if needed > size:
        raise UserError(f"Model file '{path}' is truncated: its tensors need {needed:,} bytes and the file "
                        f"has {size:,}; copy it again.")


def _check_shards(index: Path) -> None:
    """Every shard a ``model.safetensors.index.json`` lists exists (each is checked as a file above)."""
    _check_json(index)
    weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map") or {}
    for shard in sorted(set(weight_map.values()) if isinstance(weight_map, dict) else ()):
        if not (index.parent / str(shard)).is_file():
            raise UserError(f"Model folder '{index.parent}' lacks the weight shard '{shard}' that {index.name} lists.")


def _check_json(path: Path) -> None:
    try:
        json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"Model file '{path}' is not UTF-8 text; copy the model folder again.") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"Model file '{path}' is not valid JSON (line {exc.lineno}: {exc.msg}); "
                        f"copy the model folder again.") from None


def check_gguf(path: str | Path) -> None:
    """The file starts with GGUF's magic bytes (a renamed or half-downloaded file does not)."""
    path = Path(path)
    with path.open("rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise UserError(f"Model file '{path}' is not a GGUF file: it does not start with the bytes 'GGUF'.")
