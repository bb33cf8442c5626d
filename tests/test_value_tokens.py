"""SAPO's value tokens: where they live, where V and Q are read, and that the policy ignores them."""

import torch

from agentrl.models.loading import build_tiny_model
from agentrl.models.policy import Policy, ScoreItem
from agentrl.models.value_tokens import ValueTokens, reserve_value_tokens


def test_reserve_adds_two_tokens_when_no_row_is_spare(tiny_model, fresh_tokenizer):
    before = len(fresh_tokenizer)
    assert tiny_model.get_output_embeddings().weight.shape[0] == before
    vt = reserve_value_tokens(tiny_model, fresh_tokenizer)
    assert (vt.plus, vt.minus) == (before, before + 1)
    assert len(fresh_tokenizer) == before + 2
    assert tiny_model.get_output_embeddings().weight.shape[0] == before + 2
    assert vt.policy_vocab == before
    assert torch.count_nonzero(tiny_model.get_output_embeddings().weight[before:]) == 0


def test_reserve_reuses_spare_rows(fresh_tokenizer):
    before = len(fresh_tokenizer)
    model = build_tiny_model(before, extra_rows=8)
    vt = reserve_value_tokens(model, fresh_tokenizer)
    assert (vt.plus, vt.minus) == (before + 6, before + 7)
    assert len(fresh_tokenizer) == before  # nothing added
    assert model.get_output_embeddings().weight.shape[0] == before + 8


def test_value_tokens_round_trip(tmp_path):
    vt = ValueTokens(plus=10, minus=11)
    vt.save(tmp_path)
    assert ValueTokens.load(tmp_path) == vt
    assert ValueTokens.load(tmp_path / "missing") is None


def _policy_with_nonzero_value_rows(tiny_model, tokenizer):
    vt = reserve_value_tokens(tiny_model, tokenizer)
    with torch.no_grad():  # give the value rows real weight so a mistake would show
        torch.manual_seed(1)
        tiny_model.get_output_embeddings().weight[vt.policy_vocab:] = torch.randn(2, tiny_model.config.hidden_size) * 3
    return Policy(tiny_model, tokenizer, vt), vt


def test_v_is_read_at_last_prompt_position_and_q_at_last_action_position(tiny_model, fresh_tokenizer):
    policy, vt = _policy_with_nonzero_value_rows(tiny_model, fresh_tokenizer)
    prompt = fresh_tokenizer("You are in the hall. Passages lead to: kitchen.")["input_ids"]
    action = fresh_tokenizer("<action>go to kitchen</action>")["input_ids"] + [2]
    with torch.no_grad():
        scores = policy.score([ScoreItem(prompt, action)], values=True)
        logits = tiny_model(torch.tensor([prompt + action])).logits[0]
    p, a = len(prompt), len(action)
    d = logits[:, vt.plus] - logits[:, vt.minus]
    torch.testing.assert_close(scores.pre[0], d[p - 1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(scores.post[0], d[p + a - 1], rtol=1e-5, atol=1e-5)
    assert abs(float(d[p - 1] - d[p + a - 1])) > 1e-4  # the two boundaries differ


def test_changing_an_action_token_changes_q_but_not_v(tiny_model, fresh_tokenizer):
    policy, _ = _policy_with_nonzero_value_rows(tiny_model, fresh_tokenizer)
    prompt = fresh_tokenizer("You see a key.")["input_ids"]
    a1 = fresh_tokenizer("<action>take key</action>")["input_ids"] + [2]
    a2 = list(a1)
    a2[-3] = fresh_tokenizer(" door")["input_ids"][0]
    with torch.no_grad():
        s = policy.score([ScoreItem(prompt, a1), ScoreItem(prompt, a2)], values=True)
    torch.testing.assert_close(s.pre[0], s.pre[1], rtol=1e-5, atol=1e-6)
    assert abs(float(s.post[0] - s.post[1])) > 1e-4


def test_action_logprobs_exclude_the_value_tokens(tiny_model, fresh_tokenizer):
    policy, vt = _policy_with_nonzero_value_rows(tiny_model, fresh_tokenizer)
    prompt = fresh_tokenizer("Task: unlock the door.")["input_ids"]
    action = fresh_tokenizer("<action>look</action>")["input_ids"] + [2]
    with torch.no_grad():
        scores = policy.score([ScoreItem(prompt, action)], entropy=True)
        logits = tiny_model(torch.tensor([prompt + action])).logits[0].float()
    p = len(prompt)
    rows = logits[p - 1: p - 1 + len(action)]
    without = torch.log_softmax(rows[:, : vt.policy_vocab], -1)[torch.arange(len(action)), torch.tensor(action)]
    with_all = torch.log_softmax(rows, -1)[torch.arange(len(action)), torch.tensor(action)]
    torch.testing.assert_close(scores.logprobs, without, rtol=1e-5, atol=1e-5)
    assert (scores.logprobs - with_all).abs().max() > 1e-4  # including w+/w- would have differed
    probs = torch.softmax(rows[:, : vt.policy_vocab], -1)
    entropy = -(probs * torch.log(probs)).sum(-1)
    torch.testing.assert_close(scores.entropy, entropy, rtol=1e-4, atol=1e-4)
