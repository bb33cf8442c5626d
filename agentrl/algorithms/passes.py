"""The scoring passes :class:`~agentrl.algorithms.base.ClippedPolicyGradient` runs over a batch
without gradients or with them: the old, reference and value passes over scoring units, and the
token counts they log. A part of that class, kept in a file of its own."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from agentrl.algorithms.batch import ItemScores, TurnBatch, micro_batches, split_tokens
from agentrl.algorithms.lockstep import equal_micro_batches, idle_pass
from agentrl.models.policy import ScoreItem, Scores, SequenceItem
from agentrl.parallel.distributed import (
    all_reduce_max,
)
from agentrl.parallel.fsdp import is_sharded
from agentrl.rollout.trajectory import Trajectory


class ScoringPasses:
    """The passes of :class:`~agentrl.algorithms.base.ClippedPolicyGradient` (its state lives there)."""

    def new_batch(self, trajectories: Sequence[Trajectory]) -> TurnBatch:
        """The iteration's batch; resets the scored-token and skipped-step counters."""
        self.scored_tokens.clear()
        self.nonfinite_skipped = 0
        return TurnBatch.from_trajectories(trajectories)

    def count_tokens(self, pass_name: str, rows: Sequence[SequenceItem | ScoreItem]) -> None:
        self.scored_tokens[pass_name] += float(sum(row.length for row in rows))

    def token_metrics(self, batch: TurnBatch) -> dict[str, float]:
        """``tokens/scored/<pass>`` (tokens through the model per pass, unpadded),
        ``tokens/scored`` (all passes) and ``tokens/unique`` (distinct positions of the batch)."""
        out = {f"tokens/scored/{name}": value for name, value in self.scored_tokens.items()}
        out["tokens/scored"] = float(sum(self.scored_tokens.values()))
        out["tokens/unique"] = float(batch.unique_tokens())
        return out

    def exactly_on_policy(self, batch: TurnBatch) -> bool:
        """True when the old log-probs would equal the first training forward's: one epoch, one
        minibatch, no dropout (the old pass runs in eval mode, training in train mode) and
        ``old_logprob_pass: auto``."""
        cfg = self.config
        if cfg.old_logprob_pass != "auto" or cfg.epochs != 1:
            return False
        # more than one minibatch (in any shuffle) on any rank: every rank must decide alike, as
        # under FSDP the old pass is a collective
        if all_reduce_max([len(batch.items)])[0] > cfg.minibatch_turns:
            return False
        model = self.policy.model
        dropout = any(isinstance(m, nn.Dropout) and m.p > 0 for m in model.modules())
        config = getattr(model, "config", None)
        for key in ("attention_dropout", "hidden_dropout", "dropout", "resid_pdrop", "attn_pdrop"):
            value = getattr(config, key, 0.0)
            dropout = dropout or (isinstance(value, (int, float)) and value > 0)
        return not dropout

    # --- passes without gradients ---------------------------------------------------------------
    @torch.no_grad()
    def score_batch(self, batch: TurnBatch, *, values: bool = False, reference: bool = False,
                    bootstrap: bool = False, pass_name: str = "old_logprob", keep_hidden: bool = False) -> ItemScores:
        """Score every turn of ``batch`` (and, with ``bootstrap``, every bootstrap prompt after
        them) by running each unit once; per-slot log-probs and value readouts (``keep_hidden``:
        and the boundary hidden states they were read from)."""
        n = len(batch.items)
        size = n + (len(batch.bootstrap_items) if bootstrap else 0)
        rows: list[tuple[SequenceItem, list[int]]] = []
        for unit in batch.units:
            if bootstrap:
                rows.append((unit.sequence, unit.slots))
            elif unit.training is not None:
                rows.append((unit.training, unit.turn_slots))
        logprobs: list[torch.Tensor] = [torch.zeros(0)] * size
        pre = torch.zeros(size) if values else None
        post = torch.zeros(size) if values else None
        hidden: list[torch.Tensor | None] = [None] * size  # per slot: [2, H] (pre, post)
        was_training = self.policy.model.training
        self.policy.model.eval()
        try:
            groups = micro_batches([seq.length for seq, _ in rows], self.config.micro_batch_tokens)
            for group in equal_micro_batches(groups, is_sharded(self.policy.model)):
                if not group:  # FSDP: this rank is done; run the other ranks' collectives
                    idle_pass(lambda r: self._score_sequences(r, values=values, reference=reference,
                                                              entropy=False), backward=False)
                    continue
                chunk = [rows[i][0] for i in group]
                slots = [slot for i in group for slot in rows[i][1]]
                self.count_tokens(pass_name, chunk)
                scores = self._score_sequences(chunk, values=values, reference=reference, entropy=False)
                counts = [len(span.action_ids) for seq in chunk for span in seq.spans]
                parts = split_tokens(scores.logprobs.cpu(), counts)
                for j, slot in enumerate(slots):
                    logprobs[slot] = parts[j]
                    if values:
                        pre[slot] = scores.pre[j].cpu()
                        post[slot] = scores.post[j].cpu()
                        if keep_hidden and scores.boundary_hidden is not None:
                            half = len(scores.pre)
                            hidden[slot] = scores.boundary_hidden[[j, half + j]].float().cpu()
        finally:
            self.policy.model.train(was_training)
        if keep_hidden and values and all(h is not None for h in hidden):
            both = torch.stack(hidden)  # type: ignore[arg-type]
            return ItemScores(logprobs, pre, post, both[:, 0], both[:, 1])
        return ItemScores(logprobs, pre, post)

    @torch.no_grad()
    def score_all(self, items: Sequence[ScoreItem], values: bool = False,
                  reference: bool = False) -> ItemScores:
        """Score many turns in micro-batches: per-item log-probs (and value readouts)."""
        logprobs: list[torch.Tensor | None] = [None] * len(items)
        pre = torch.zeros(len(items)) if values else None
        post = torch.zeros(len(items)) if values else None
        groups = micro_batches([it.length for it in items], self.config.micro_batch_tokens)
        was_training = self.policy.model.training
        self.policy.model.eval()
        try:
            for group in groups:
                chunk = [items[i] for i in group]
                scores = self._score(chunk, values=values, reference=reference, entropy=False)
                parts = split_tokens(scores.logprobs.cpu(), [len(c.action_ids) for c in chunk])
                for j, i in enumerate(group):
                    logprobs[i] = parts[j]
                    if values:
                        pre[i] = scores.pre[j].cpu()
                        post[i] = scores.post[j].cpu()
        finally:
            self.policy.model.train(was_training)
        return ItemScores([lp if lp is not None else torch.zeros(0) for lp in logprobs], pre, post)

    def _score(self, chunk: Sequence[ScoreItem], *, values: bool, reference: bool,
               entropy: bool) -> Scores:
        return self._score_sequences([SequenceItem.of(item) for item in chunk], values=values,
                                     reference=reference, entropy=entropy)

    def _score_sequences(self, chunk: Sequence[SequenceItem], *, values: bool, reference: bool,
                         entropy: bool) -> Scores:
        if not reference:
            return self.policy.score_sequences(chunk, entropy=entropy, values=values)
        if self.reference is not None:
            return self.policy.score_sequences(chunk, entropy=entropy, values=values, model=self.reference)
        with self.policy.model.disable_adapter():  # LoRA: the base weights are the reference
            return self.policy.score_sequences(chunk, entropy=entropy, values=values)

    def reference_logprobs(self, batch: TurnBatch) -> list[torch.Tensor] | None:
        """The frozen reference's log-probs, or None (no pass at all) when ``kl_coef`` is 0."""
        if self.config.kl_coef <= 0:
            return None
        return self.score_batch(batch, reference=True, pass_name="ref_logprob").logprobs

    def old_logprobs(self, batch: TurnBatch) -> list[torch.Tensor] | None:
        """The old log-prob pass, or None when :meth:`exactly_on_policy` (``optimize`` then takes
        the first training forward's log-probs, detached)."""
        if self.exactly_on_policy(batch):
            return None
        return self.score_batch(batch).logprobs
