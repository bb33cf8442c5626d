"""LoRA through peft: the lean forward sees the adapters and SAPO's trainable value rows, the
reference is the base with adapters disabled, effective weights and merged checkpoints are exact."""

from __future__ import annotations

import copy

import pytest
import torch

from agentrl.models.lora import (
    is_adapter_checkpoint,
    merge,
    merged_state_dict,
)
from agentrl.models.policy import Policy, ScoreItem
from agentrl.models.value_tokens import reserve_value_tokens
from agentrl.training.compose import apply_lora
from agentrl.training.config import ModelConfig

ITEMS = [ScoreItem([5, 6, 7, 8], [9, 10, 11]), ScoreItem([12, 13], [14])]


def _sequences():
    return [list(i.prompt_ids) + list(i.action_ids) for i in ITEMS]


def _adapted(tiny_model, tokenizer):
    """Tiny model with value tokens and LoRA whose matrices and value rows are all non-zero."""
    value_tokens = reserve_value_tokens(tiny_model, tokenizer)
    base = copy.deepcopy(tiny_model)
    model = apply_lora(tiny_model, ModelConfig(lora_rank=4, lora_alpha=8.0), value_tokens)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=gen) * (0.5 if "trainable_tokens" in name else 0.05))
    return model, base, value_tokens


def _full_forward(model, value_tokens, temperature=1.0):
    """Log-probs and d = logit(w+) - logit(w-) from the model's ordinary forward, one item at a time."""
    logps, pre, post = [], [], []
    for item, seq in zip(ITEMS, _sequences(), strict=True):
        logits = model(input_ids=torch.tensor([seq])).logits[0].float()
        p = len(item.prompt_ids)
        policy_logits = logits[:, : value_tokens.policy_vocab] / temperature
        logp = torch.log_softmax(policy_logits, -1)
        logps += [logp[p - 1 + j, t] for j, t in enumerate(item.action_ids)]
        d = logits[:, value_tokens.plus] - logits[:, value_tokens.minus]
        pre.append(d[p - 1])
        post.append(d[len(seq) - 1])
    return torch.stack(logps), torch.stack(pre), torch.stack(post)


def test_lean_forward_sees_adapters_and_trained_value_rows(tiny_model, fresh_tokenizer):
    model, _, value_tokens = _adapted(tiny_model, fresh_tokenizer)
    policy = Policy(model, fresh_tokenizer, value_tokens)
    scores = policy.score(ITEMS, values=True)
    logp, pre, post = _full_forward(model, value_tokens)
    assert torch.allclose(scores.logprobs, logp, atol=1e-5)
    assert torch.allclose(scores.pre, pre, atol=1e-4) and torch.allclose(scores.post, post, atol=1e-4)
    assert float(scores.pre.detach().abs().min()) > 1e-3  # the trained value rows are really read
    (scores.logprobs.sum() + scores.pre.sum()).backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    delta = [g for n, g in grads.items() if "trainable_tokens_delta" in n]
    assert delta and float(delta[0].abs().sum()) > 0  # the value rows learn through the lean head
    assert all(g is not None and float(g.abs().sum()) > 0 for n, g in grads.items() if "lora_B" in n)


def test_reference_is_the_base_with_adapters_disabled(tiny_model, fresh_tokenizer):
    from agentrl.algorithms import get_algorithm
    from agentrl.algorithms.base import TurnBatch
    from agentrl.rollout.trajectory import Trajectory, Turn

    model, base, value_tokens = _adapted(tiny_model, fresh_tokenizer)
    policy = Policy(model, fresh_tokenizer, value_tokens)
    sapo = get_algorithm("sapo")
    algo = sapo(sapo.config_class(kl_coef=0.01), policy, r_max=1.0)
    assert algo.reference is None  # no second copy of the model
    turns = [Turn(list(i.prompt_ids), list(i.action_ids), [0.0] * len(i.action_ids), "", "", "",
                  "", 0.0, 0.0, True, False, True) for i in ITEMS]
    batch = TurnBatch.from_trajectories([Trajectory(0, 0, "t", turns)])
    reference = torch.cat(algo.reference_logprobs(batch))
    base_logp, _, _ = _full_forward(base, value_tokens)
    adapted_logp, _, _ = _full_forward(model, value_tokens)
    assert torch.allclose(reference, base_logp, atol=1e-5)
    assert float((reference - adapted_logp).abs().max()) > 1e-3


def test_merged_state_dict_equals_peft_merge(tiny_model, fresh_tokenizer):
    model, base, _ = _adapted(tiny_model, fresh_tokenizer)
    ours = dict(merged_state_dict(model))
    reference = copy.deepcopy(model).merge_and_unload().state_dict()
    assert set(ours) == set(base.state_dict()) == set(reference)  # plain transformers names
    for name, tensor in reference.items():
        assert torch.allclose(ours[name], tensor, atol=1e-6), name
    changed = [n for n in ours if not torch.equal(ours[n], base.state_dict()[n])]
    assert "model.layers.0.self_attn.q_proj.weight" in changed and "model.embed_tokens.weight" in changed
    # the live model is untouched (no merge/unmerge drift)
    assert all(not getattr(m, "merged", False) for m in model.modules())


def test_adapter_checkpoint_merges_into_a_plain_model_and_resumes(tmp_path):
    import distributed_job  # the coin env: rewards vary, so every trainable weight moves
    import gymnasium as gym
    from transformers import AutoModelForCausalLM

    from agentrl.training.config import build_config
    from agentrl.training.trainer import Trainer

    if "agentrl-test/Coin-v0" not in gym.registry:
        gym.register("agentrl-test/Coin-v0", entry_point=distributed_job.CoinEnv)
    overrides = [f"train.run_dir={tmp_path / 'run'}", "train.iterations=1", "train.save_every=1",
                 "train.eval_episodes=0", "train.seed=5", "model.lora_rank=4",
                 "rollout.tasks_per_iteration=4", "rollout.action_mode=constrained",
                 "rollout.max_prompt_tokens=256", "algorithm.lr=1e-2", "rollout.backend=hf"]
    config = build_config(algo="sapo", env="agentrl-test/Coin-v0", model="tiny", overrides=overrides)
    trainer = Trainer(config)
    try:
        trainer.train()
        trained = trainer.policy.model
        folder = tmp_path / "run" / "checkpoints" / "iter_00001"
        assert is_adapter_checkpoint(folder) and not (folder / "model.safetensors").exists()
        out = merge(folder, tmp_path / "merged")
        plain = AutoModelForCausalLM.from_pretrained(out)
        with torch.no_grad():
            for seq in _sequences():
                ids = torch.tensor([seq])
                assert torch.allclose(plain(input_ids=ids).logits, trained(input_ids=ids).logits, atol=1e-4)
        value_rows = plain.get_output_embeddings().weight[-2:]
        assert float(value_rows.abs().sum()) > 0  # SAPO's trained value rows survived the merge
        assert (out / "agentrl_value_tokens.json").exists()
        effective = dict(merged_state_dict(trained))
    finally:
        trainer.close()
    config.train.iterations = 2
    resumed = Trainer(config, resume=True)
    try:
        assert resumed.start_iteration == 1
        again = dict(merged_state_dict(resumed.policy.model))
        for name, tensor in effective.items():
            assert torch.allclose(again[name], tensor, atol=1e-6), name
    finally:
        resumed.close()


def test_merge_refuses_a_folder_without_adapters(tmp_path):
    from agentrl.errors import UserError

    with pytest.raises(UserError, match="not a LoRA adapter checkpoint"):
        merge(tmp_path, tmp_path / "out")
