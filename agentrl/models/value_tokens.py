"""SAPO's two reserved value tokens ``w+`` and ``w-``.

SAPO reads a state value from the logits of two vocabulary ids that the policy never emits:
``d = logit[w+] - logit[w-]``. We always place them in the **last two rows** of the output
embedding (ours). Then the action vocabulary is the contiguous slice ``W[:rows-2]``: the policy
head is a view of the weight, with no masking copy and no -inf in the log-softmax, and the value
head is ``W[rows-2:]``.

* If the model already has at least two embedding rows past the tokenizer's length (Qwen2.5 pads
  its vocabulary), the last two of them are used as they are: no resize.
* Otherwise two special tokens are added to the tokenizer and the embeddings are resized to hold
  them (SmolLM2: 49152 rows = tokenizer length).

Both rows start at zero (ours), so ``d = 0`` and every value starts at 0 whatever the state.
The ids are written to ``agentrl_value_tokens.json`` beside every checkpoint and reused on load,
with the readout settings of the run that trained them (``value_temperature``, ``value_squash``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

VALUE_TOKENS_FILE = "agentrl_value_tokens.json"
VALUE_TOKEN_STRINGS = ("<|agentrl_value_plus|>", "<|agentrl_value_minus|>")


@dataclass(frozen=True)
class ValueTokens:
    plus: int
    minus: int

    @property
    def policy_vocab(self) -> int:
        """Size of the action vocabulary: every row before the two value rows."""
        return min(self.plus, self.minus)

    @property
    def ids(self) -> list[int]:
        return [self.plus, self.minus]

    def save(self, folder: str | Path, readout: dict[str, Any] | None = None) -> None:
        """Write the ids, and ``readout`` (how V is read from them: SAPO's ``value_temperature``
        and ``value_squash``) when a run trained them, so the values mean the same on reload."""
        data: dict[str, Any] = asdict(self)
        if readout:
            data["readout"] = readout
        Path(folder, VALUE_TOKENS_FILE).write_text(json.dumps(data) + "\n")

    @classmethod
    def load(cls, folder: str | Path) -> ValueTokens | None:
        path = Path(folder, VALUE_TOKENS_FILE)
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return cls(plus=int(data["plus"]), minus=int(data["minus"]))


def saved_readout(folder: str | Path) -> dict[str, Any] | None:
    """The readout settings a checkpoint recorded with its value ids (None: none recorded, as in
    checkpoints written before tau_v existed, which read V at tau_v 1)."""
    path = Path(folder, VALUE_TOKENS_FILE)
    if not path.exists():
        return None
    readout = json.loads(path.read_text()).get("readout")
    return dict(readout) if isinstance(readout, dict) else None


def output_rows(model: PreTrainedModel) -> int:
    return model.get_output_embeddings().weight.shape[0]


def reserve_value_tokens(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> ValueTokens:
    """Reserve ``w+``/``w-`` as the last two embedding rows (see the module docstring)."""
    rows = output_rows(model)
    if rows < len(tokenizer) + 2:
        added = tokenizer.add_tokens(list(VALUE_TOKEN_STRINGS), special_tokens=True)
        if added != 2:
            raise RuntimeError("the tokenizer already holds agentrl's value tokens but the model lacks their rows")
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
        rows = output_rows(model)
    tokens = ValueTokens(plus=rows - 2, minus=rows - 1)
    with torch.no_grad():
        model.get_output_embeddings().weight[tokens.policy_vocab:].zero_()
    return tokens


def check_value_tokens(model: PreTrainedModel, tokens: ValueTokens) -> None:
    """Value ids loaded from a checkpoint must still be the model's last two rows."""
    rows = output_rows(model)
    if sorted(tokens.ids) != [rows - 2, rows - 1]:
        raise ValueError(f"value token ids {tokens.ids} are not the last two of {rows} embedding rows")
