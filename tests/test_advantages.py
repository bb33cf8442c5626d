"""Advantages and targets, checked against numbers worked out by hand."""

import pytest
import torch

from agentrl.algorithms.advantages import (
    gae,
    group_advantages,
    normalize,
    sarsa_targets,
    token_level_gae,
)

REWARDS = [0.0, 0.0, 1.0]
VALUES = [0.5, 0.6, 0.8]
GAMMA, LAM = 0.9, 0.8


def test_gae_terminated_episode():
    # delta_2 = 1 - 0.8 = 0.2 (terminal: no bootstrap)
    # delta_1 = 0.9 * 0.8 - 0.6 = 0.12 ; delta_0 = 0.9 * 0.6 - 0.5 = 0.04
    # A_2 = 0.2 ; A_1 = 0.12 + 0.72 * 0.2 = 0.264 ; A_0 = 0.04 + 0.72 * 0.264 = 0.23008
    adv, ret = gae(REWARDS, VALUES, [False, False, True], bootstrap_value=123.0, gamma=GAMMA, lam=LAM)
    assert adv.tolist() == pytest.approx([0.23008, 0.264, 0.2], abs=1e-6)
    assert ret.tolist() == pytest.approx([0.73008, 0.864, 1.0], abs=1e-6)


def test_gae_truncated_episode_bootstraps_from_last_value():
    # V(s_3) = 0.7: delta_2 = 1 + 0.9 * 0.7 - 0.8 = 0.83
    # A_1 = 0.12 + 0.72 * 0.83 = 0.7176 ; A_0 = 0.04 + 0.72 * 0.7176 = 0.556672
    adv, ret = gae(REWARDS, VALUES, [False, False, False], bootstrap_value=0.7, gamma=GAMMA, lam=LAM)
    assert adv.tolist() == pytest.approx([0.556672, 0.7176, 0.83], abs=1e-6)
    assert ret.tolist() == pytest.approx([1.056672, 1.3176, 1.63], abs=1e-6)


def test_gae_with_lambda_one_is_discounted_return_minus_value():
    adv, ret = gae(REWARDS, VALUES, [False, False, True], 0.0, gamma=0.9, lam=1.0)
    # returns: G_2 = 1, G_1 = 0.9, G_0 = 0.81
    assert ret.tolist() == pytest.approx([0.81, 0.9, 1.0], abs=1e-6)
    assert adv.tolist() == pytest.approx([0.31, 0.3, 0.2], abs=1e-6)


def test_sarsa_targets_terminated_and_truncated():
    q = [0.4, 0.7, 0.9]
    # y_0 = 0 + 0.9 * Q_1 = 0.63 ; y_1 = 0.9 * Q_2 = 0.81 ; y_2 = r_2 = 1 (terminated)
    y = sarsa_targets(REWARDS, q, [False, False, True], bootstrap_value=5.0, gamma=0.9)
    assert y.tolist() == pytest.approx([0.63, 0.81, 1.0], abs=1e-6)
    # truncated: the last target bootstraps with V(s_3) = 0.7 -> 1 + 0.63 = 1.63
    y = sarsa_targets(REWARDS, q, [False, False, False], bootstrap_value=0.7, gamma=0.9)
    assert y.tolist() == pytest.approx([0.63, 0.81, 1.63], abs=1e-6)


def test_batch_normalisation():
    # mean 2.5, population std sqrt(1.25) = 1.1180340
    out = normalize(torch.tensor([1.0, 2.0, 3.0, 4.0]), eps=0.0)
    assert out.tolist() == pytest.approx([-1.3416408, -0.4472136, 0.4472136, 1.3416408], abs=1e-6)


def test_group_normalisation_and_collapse_share():
    returns = torch.tensor([1.0, 0.0, 0.0, 5.0, 5.0])
    groups = [0, 0, 0, 1, 1]
    adv, collapse = group_advantages(returns, groups, use_std=True, eps=0.0 + 1e-12)
    # group 0: mean 1/3, std sqrt(2/9) = 0.4714045 -> (2/3)/0.4714 = 1.4142136, (-1/3)/0.4714 = -0.7071068
    # group 1: all equal -> advantages 0, and it is 1 collapsed group of 2
    assert adv.tolist() == pytest.approx([1.4142136, -0.7071068, -0.7071068, 0.0, 0.0], abs=1e-5)
    assert collapse == pytest.approx(0.5)
    adv, _ = group_advantages(returns, groups, use_std=False)
    assert adv.tolist() == pytest.approx([2 / 3, -1 / 3, -1 / 3, 0.0, 0.0], abs=1e-6)


def test_token_level_gae_discounts_only_across_turns():
    # two turns of 2 tokens each; reward 1 on the very last token; values all 0; lambda 1
    rewards = [0.0, 0.0, 0.0, 1.0]
    ends = [False, True, False, True]
    dones = [False, False, False, True]
    adv, ret = token_level_gae(rewards, [0.0] * 4, dones, ends, 0.0, gamma=0.5, lam=1.0)
    # tokens of the last turn see 1; the first turn's tokens see it discounted once: 0.5
    assert ret.tolist() == pytest.approx([0.5, 0.5, 1.0, 1.0])
    assert adv.tolist() == pytest.approx([0.5, 0.5, 1.0, 1.0])
