"""The shared loss library, with hand-computed values."""

import math

import pytest
import torch

from agentrl.algorithms.base import AlgoConfig, clipped_policy_loss
from agentrl.algorithms.losses import (
    clipped_surrogate,
    clipped_value_loss,
    explained_variance,
    k3_kl,
    squash,
)
from agentrl.algorithms.sapo import SAPOConfig, sapo_value_loss
from agentrl.models.policy import token_logprobs


def test_clipped_surrogate_four_cases():
    ratio = torch.tensor([1.5, 1.5, 0.5, 0.5])
    adv = torch.tensor([2.0, -1.0, 1.0, -1.0])
    loss, clipped = clipped_surrogate(torch.log(ratio), torch.zeros(4), adv, clip_eps=0.2)
    # r=1.5,A=2: min(3.0, 1.2*2=2.4) = 2.4 (clipped)   r=1.5,A=-1: min(-1.5, -1.2) = -1.5
    # r=0.5,A=1: min(0.5, 0.8) = 0.5                    r=0.5,A=-1: min(-0.5, -0.8) = -0.8 (clipped)
    assert loss.tolist() == pytest.approx([-2.4, 1.5, -0.5, 0.8], abs=1e-6)
    assert clipped.tolist() == [1.0, 0.0, 0.0, 1.0]


def test_clipped_value_loss():
    pred = torch.tensor([0.9, 0.6])
    old = torch.tensor([0.5, 0.5])
    target = torch.tensor([1.0, 0.0])
    # 1st: plain (0.9-1)^2 = 0.01, clipped pred 0.7 -> 0.09; max 0.09 -> 0.045
    # 2nd: change 0.1 is inside the clip: 0.36 both -> 0.18
    assert clipped_value_loss(pred, old, target, clip=0.2).tolist() == pytest.approx([0.045, 0.18], abs=1e-6)
    assert clipped_value_loss(pred, old, target, clip=None).tolist() == pytest.approx([0.005, 0.18], abs=1e-6)


def test_k3_kl():
    # logp = ln 0.5, ref = ln 0.25: x = ln 0.5; e^x - x - 1 = 0.5 + 0.6931472 - 1 = 0.1931472
    kl = k3_kl(torch.log(torch.tensor([0.5, 0.3])), torch.log(torch.tensor([0.25, 0.3])))
    assert kl.tolist() == pytest.approx([0.1931472, 0.0], abs=1e-6)


def test_masked_logprob_and_entropy():
    logits = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    mask = torch.tensor([[True, True, False, True]])
    logp, ent = token_logprobs(logits, torch.tensor([3]), mask, want_entropy=True)
    z = math.exp(1) + math.exp(2) + math.exp(4)
    probs = [math.exp(1) / z, math.exp(2) / z, math.exp(4) / z]
    assert float(logp) == pytest.approx(4 - math.log(z), abs=1e-6)
    assert float(ent) == pytest.approx(-sum(p * math.log(p) for p in probs), abs=1e-6)
    # gradients stay finite although a masked logit is -inf inside
    logits.requires_grad_(True)
    _, ent = token_logprobs(logits, torch.tensor([3]), mask, want_entropy=True)
    ent.sum().backward()
    assert torch.isfinite(logits.grad).all()
    assert float(logits.grad[0, 2]) == 0.0


def test_policy_loss_is_a_token_mean_over_the_minibatch():
    cfg = AlgoConfig(clip_eps=0.2, kl_coef=0.0, entropy_coef=0.0)
    # turn A: 1 token, advantage 1 ; turn B: 3 tokens, advantage -2 ; ratios all 1
    logp = torch.zeros(4)
    adv = torch.tensor([1.0, -2.0, -2.0, -2.0])
    loss, _ = clipped_policy_loss(logp, torch.zeros(4), adv, None, None, tokens_total=4, cfg=cfg)
    # token mean of -A: (-1 + 2 + 2 + 2) / 4 = 1.25 (a turn mean would give (-1 + 2) / 2 = 0.5)
    assert float(loss) == pytest.approx(1.25)


def test_policy_loss_adds_kl_and_entropy():
    cfg = AlgoConfig(clip_eps=0.2, kl_coef=0.1, entropy_coef=0.01)
    logp = torch.log(torch.tensor([0.5, 0.5]))
    ref = torch.log(torch.tensor([0.25, 0.5]))
    ent = torch.tensor([1.0, 3.0])
    loss, sums = clipped_policy_loss(logp, logp.clone(), torch.zeros(2), ref, ent, tokens_total=2, cfg=cfg)
    # surrogate 0; KL token mean (0.1931472 + 0) / 2; entropy token mean 2
    assert float(loss) == pytest.approx(0.1 * 0.1931472 / 2 - 0.01 * 2.0, abs=1e-6)
    assert sums["policy/kl_ref"] == pytest.approx(0.1931472, abs=1e-6)


def test_sapo_value_losses_are_averaged_per_turn_not_per_token():
    cfg = SAPOConfig(value_coef=1.0, q_coef=0.5, value_clip=None, value_squash="clip")
    d_pre = torch.tensor([0.5, -0.2])
    d_post = torch.tensor([2.0, 0.0])  # clip -> 1.0
    v_t = torch.tensor([1.0, 0.0])
    q_t = torch.tensor([0.5, 0.5])
    loss, sums = sapo_value_loss(d_pre, d_post, torch.zeros(2), torch.zeros(2), v_t, q_t, turns_total=2, cfg=cfg)
    # L_V: 0.5*(0.5-1)^2 = 0.125 and 0.5*0.04 = 0.02 ; L_Q: 0.5*(1-0.5)^2 = 0.125 and 0.5*0.25 = 0.125
    # (1.0 * 0.145 + 0.5 * 0.25) / 2 turns = 0.135, whatever the turns' token counts
    assert float(loss) == pytest.approx(0.135, abs=1e-6)
    assert sums["loss/value_v"] == pytest.approx(0.145, abs=1e-6)


def test_squash_and_explained_variance():
    d = torch.tensor([-3.0, 0.5, 2.0])
    assert squash(d, "clip").tolist() == [-1.0, 0.5, 1.0]
    assert squash(d, "tanh").tolist() == pytest.approx([math.tanh(-3), math.tanh(0.5), math.tanh(2)])
    with pytest.raises(ValueError):
        squash(d, "sigmoid")
    y = torch.tensor([1.0, 2.0, 3.0])
    assert explained_variance(y.clone(), y) == pytest.approx(1.0)
    assert explained_variance(torch.full((3,), 2.0), y) == pytest.approx(0.0)
    # residuals [0.5, 0, -0.5]: var 1/6 ; var(y) = 2/3 -> 1 - 0.25 = 0.75
    assert explained_variance(torch.tensor([0.5, 2.0, 3.5]), y) == pytest.approx(0.75)
