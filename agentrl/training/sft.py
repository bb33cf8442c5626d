"""Supervised warm start on demonstrations (``agentrl sft``).

The loss is the negative log-likelihood of the reply tokens only (the prompt is masked), computed
with the same memory-lean forward as RL (LM head applied to the reply positions alone).

Demonstrations recorded with ``rollout.history: conversation`` hold every turn of an episode as a
prefix of the next turn's prompt. Such turns are trained as one sequence per episode (one body
pass reads every reply, :class:`~agentrl.models.policy.SequenceItem`), not one sequence per turn: the
per-turn way would run an episode of T turns through the model ~T/2 times over. The loss and its
gradient are the same (causal attention: a reply's logits depend only on the tokens before it);
what changes is that a batch then gathers whole episodes (shuffled) until it holds
``sft.batch_turns`` turns, so no episode is split across optimizer steps. SAPO's
value tokens are reserved before training, so the checkpoint is ready for ``agentrl run sapo
--model DIR``: the value rows exist, the policy never learned to emit them (they are outside the
action vocabulary of the loss), and their ids are recorded beside the weights.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from agentrl.algorithms.base import micro_batches
from agentrl.algorithms.scoring import gather_until
from agentrl.errors import UserError
from agentrl.models.policy import Policy, ScoreItem, SequenceItem, Span
from agentrl.rollout.demos import read_demos
from agentrl.rollout.evaluation import episode_metrics, evaluate
from agentrl.rollout.prompting import PromptBuilder, end_of_turn_id
from agentrl.rundir.metrics import PhaseTimer
from agentrl.training.compose import (
    env_factory,
    load_for_training,
    make_backend,
    make_engine,
    prompt_builder,
)
from agentrl.training.config import RunConfig, SFTConfig

IGNORE = -100


@dataclass
class SFTExample:
    """One turn: the prompt and its labels (``IGNORE`` on the prompt, the reply tokens after)."""

    prompt_ids: list[int]
    labels: list[int]
    #: (env, split, task_seed) of the record's episode, when the record names it
    episode: tuple[Any, ...] | None = None

    @property
    def reply_ids(self) -> list[int]:
        return self.labels[len(self.prompt_ids):]

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.reply_ids


@dataclass
class SFTResult:
    output: Path
    losses: list[float] = field(default_factory=list)
    eval_before: dict[str, float] | None = None
    eval_after: dict[str, float] | None = None
    seconds: float = 0.0
    examples: int = 0
    sequences: int = 0  # rows trained on: = examples per-turn, one per episode for conversation demos
    # Wall-clock seconds of each phase: held-out eval before, training, held-out eval after.
    phase_seconds: dict[str, float] = field(default_factory=dict)


def make_examples(records: Sequence[dict[str, Any]], builder: PromptBuilder,
                  include_noise: bool = False) -> list[SFTExample]:
    """Tokenise demo turns with the model's own chat template and end-of-turn token."""
    tokenizer = builder.tokenizer
    eot = end_of_turn_id(tokenizer)
    examples = []
    for record in records:
        if not include_noise and record.get("expert") is False:
            continue
        prompt = builder.render_messages(record["messages"]) if "messages" in record else record["prompt"]
        prompt_ids = builder.encode(prompt)
        reply_ids = builder.encode(record["reply"]) + [eot]
        episode = (record.get("env"), record.get("split"), record["task_seed"]) if "task_seed" in record else None
        examples.append(SFTExample(prompt_ids, [IGNORE] * len(prompt_ids) + reply_ids, episode))
    return examples


@dataclass
class SFTUnit:
    """One row of a forward pass: a turn alone, or the consecutive turns of one conversation-mode
    episode read from its longest sequence (each turn a span)."""

    item: SequenceItem

    @property
    def turns(self) -> int:
        return len(self.item.spans)

    @property
    def reply_tokens(self) -> int:
        return sum(len(span.action_ids) for span in self.item.spans)


def training_units(examples: Sequence[SFTExample]) -> list[SFTUnit]:
    """Group consecutive examples of the same episode whose prompt + reply is a token prefix of the
    next example's prompt (a growing chat); every other example is a unit of its own.

    The prefix test is on the token ids SFT trains on, so a chat template or tokenizer that does
    not extend turns exactly falls back to per-turn sequences instead of training on wrong text.
    """
    units: list[SFTUnit] = []
    group: list[SFTExample] = []

    def close() -> None:
        if group:
            spans = [Span(len(ex.prompt_ids), ex.reply_ids) for ex in group]
            units.append(SFTUnit(SequenceItem(group[-1].input_ids, spans)))
            group.clear()

    for ex in examples:
        if group:
            last = group[-1]
            full = last.input_ids
            if not (ex.episode is not None and ex.episode == last.episode
                    and len(ex.prompt_ids) >= len(full) and ex.prompt_ids[:len(full)] == full):
                close()
        group.append(ex)
    close()
    return units


def batch_plan(units: Sequence[SFTUnit], batch_turns: int, rng: random.Random) -> list[list[int]]:
    """One epoch's optimizer steps (indices into ``units``): units shuffled, gathered until a step
    holds at least ``batch_turns`` turns. With one turn per unit this is the plain "every
    ``batch_turns`` shuffled turns" of per-turn SFT."""
    order = list(range(len(units)))
    rng.shuffle(order)
    return gather_until(order, [units[i].turns for i in order], batch_turns)


def sft_loss(policy: Policy, examples: Sequence[SFTExample], tokens_total: float) -> torch.Tensor:
    """Summed negative log-likelihood of the reply tokens divided by ``tokens_total``.

    Only ``labels`` past the prompt are read (what the prompt positions hold is never used), so
    the prompt is masked by construction.
    """
    items = [ScoreItem(ex.prompt_ids, ex.reply_ids) for ex in examples]
    scores = policy.score(items)
    return -scores.logprobs.sum() / tokens_total


def unit_loss(policy: Policy, units: Sequence[SFTUnit], tokens_total: float) -> torch.Tensor:
    """:func:`sft_loss` over units: one body pass per unit, every turn's reply read from it."""
    scores = policy.score_sequences([unit.item for unit in units])
    return -scores.logprobs.sum() / tokens_total


def run_sft(config: RunConfig, sft: SFTConfig, demo_files: Sequence[Path], output: Path,
            on_step: Callable[[int, int, float], None] | None = None,
            eval_before: bool = False,
            on_eval: Callable[[str, dict[str, float], float], None] | None = None) -> SFTResult:
    """Fine-tune ``config.model`` on the demos and save a checkpoint in ``output``.

    ``on_step(step, total, loss)`` is called after every optimizer step and ``on_eval(name,
    metrics, seconds)`` after each held-out evaluation ("before"/"after"), so a caller can show
    progress on long CPU runs instead of waiting for the final table.
    """
    if output.exists() and any(output.iterdir()):
        raise UserError(f"Output folder '{output}' is not empty; choose a new one.")
    # every demo file is read and checked before the model loads: a bad line is one sentence at once
    records = [r for path in demo_files for r in read_demos(Path(path))]
    if not records:
        raise UserError(f"The demonstration files ({', '.join(map(str, demo_files))}) hold no turns.")
    start = time.perf_counter()
    random.seed(sft.seed)
    torch.manual_seed(sft.seed)
    loaded = load_for_training(config.model, reserve_values=True, seed=sft.seed)
    policy = Policy(loaded.model, loaded.tokenizer, loaded.value_tokens, temperature=1.0)
    probe = env_factory(config.env, "train")()
    builder = prompt_builder(loaded.tokenizer, config.rollout, probe)
    probe.close()
    examples = make_examples(records, builder, sft.include_noise)
    if not examples:
        raise UserError("The demonstrations hold no turn to train on.")
    units = training_units(examples)
    result = SFTResult(output, examples=len(examples), sequences=len(units))
    timer = PhaseTimer()
    engine = None

    def held_out_eval(name: str) -> dict[str, float]:
        with timer.phase(f"eval_{name}"):
            metrics = episode_metrics(evaluate(engine, sft.eval_episodes), "eval")
        if on_eval is not None:
            on_eval(name, metrics, timer.seconds[f"eval_{name}"])
        return metrics

    if sft.eval_episodes > 0:
        backend = make_backend(policy, config.rollout, seed=sft.seed)
        engine = make_engine(policy, backend, config.rollout, env_factory(config.env, "eval"))
        if eval_before:
            result.eval_before = held_out_eval("before")

    policy.model.train()
    with timer.phase("train"):
        result.losses = fit(policy, units, sft, on_step)
    policy.model.eval()
    if engine is not None:
        engine.backend.sync_weights()
        result.eval_after = held_out_eval("after")
        engine.pool.close()
        engine.backend.close()
    result.phase_seconds = dict(timer.seconds)
    result.seconds = time.perf_counter() - start
    save_checkpoint(policy, output, {
        "demos": [str(p) for p in demo_files], "examples": len(examples),
        "sequences": len(units), "steps": len(result.losses),
        "final_loss": result.losses[-1], "first_loss": result.losses[0],
        "eval_before": result.eval_before, "eval_after": result.eval_after,
        "seconds": result.seconds, "phase_seconds": result.phase_seconds, "sft": sft.__dict__,
        "base_model": config.model.name,
    })
    return result


def fit(policy: Policy, units: Sequence[SFTUnit], sft: SFTConfig,
        on_step: Callable[[int, int, float], None] | None = None) -> list[float]:
    """``sft.epochs`` shuffled passes of at least ``sft.batch_turns`` turns per optimizer step
    (:func:`batch_plan`); returns each step's loss (reply tokens of a step weigh equally, however
    its micro-batches split)."""
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=sft.lr, weight_decay=sft.weight_decay)
    rng = random.Random(sft.seed)
    plans = [batch_plan(units, sft.batch_turns, rng) for _ in range(sft.epochs)]
    total_steps = sum(len(plan) for plan in plans)
    losses: list[float] = []
    for plan in plans:
        for step in plan:
            batch = [units[i] for i in step]
            tokens_total = float(sum(unit.reply_tokens for unit in batch))
            optimizer.zero_grad(set_to_none=True)
            loss_value = 0.0
            for micro in micro_batches([unit.item.length for unit in batch], sft.micro_batch_tokens):
                loss = unit_loss(policy, [batch[i] for i in micro], tokens_total)
                loss.backward()
                loss_value += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(params, sft.max_grad_norm)
            optimizer.step()
            losses.append(loss_value)
            if on_step is not None:
                on_step(len(losses), total_steps, loss_value)
    return losses


def save_checkpoint(policy: Policy, output: Path, meta: dict[str, Any]) -> None:
    output.mkdir(parents=True, exist_ok=True)
    model = policy.model
    if hasattr(model, "merge_and_unload"):  # LoRA: write a plain model that any loader reads
        model = model.merge_and_unload()
    model.save_pretrained(output)
    policy.tokenizer.save_pretrained(output)
    if policy.value_tokens is not None:
        policy.value_tokens.save(output)
    (output / "sft_metrics.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
