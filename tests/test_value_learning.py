"""Values that learn: on the suite's ``chain-d1`` probe, SAPO's V (its two value rows and the
transformer, through SAPO's own optimizers and clipped value loss) and PPO's critic (its body and
head, through PPO's) must explain at least 40% of the held-out Monte-Carlo return's variance
within 192 full-batch value steps, starting from the tiny random model.

Why these numbers (docs/benchmarks.md, "Value fit", ``docs/results/value-fit/chain-d1-tiny``):
with a random first press the best any V can do is about 0.5 (the press is a coin flip, so the
first turn's value is 0.5 whatever it reads; after the press the outcome is known). The ridge
ceiling on the tiny model's frozen features is 0.506; SAPO (lr 1e-3, value_lr 1e-2, tanh) and
PPO's critic (body 1e-3, head 1e-2) jump from 0 to 0.48-0.50 between 64 and 128 steps and hold
0.52 at 256 (this test's episodes, AMD EPYC with AVX-512 BF16: SAPO 0.009 at 96, 0.476 at 128,
0.515 at 160; PPO -0.269 at 96, 0.502 at 128, 0.520 at 160). 192 steps leave room for the jump to
come later on another CPU. A readout whose value gradient is cut stays at V = 0, explained
variance exactly 0: run ``AGENTRL_VALUE_GRADIENT=cut pytest tests/test_value_learning.py`` to see
both tests fail (they did, at EV 0.000: docs/suite.md).

The episodes are played once by the tiny model through the suite's own config (constrained
decoding, no history) and split by task; this trains the value objective alone, not the policy.
"""

import os
from dataclasses import replace

import pytest

from agentrl.algorithms.ppo import PPOConfig
from agentrl.bench import value_fit as vf

CUT = os.environ.get("AGENTRL_VALUE_GRADIENT") == "cut"
STEPS = 192
THRESHOLD = 0.4


@pytest.fixture(scope="module")
def chain_d1():
    config, policy, trajectories = vf.probe_episodes("chain-d1", "tiny", count=128, seed=0)
    data = vf.FitData.build(trajectories, 1.0, config.algorithm.gamma, config.algorithm.lam)
    return data, policy, config.algorithm


def _fit(data, model, value_clip, value_coef=1.0, q_coef=0.0):
    settings = vf.TrainSettings(steps=STEPS, refresh=2, checkpoints=(STEPS,), target="lambda")
    return vf.train_readout(data, model, settings, value_clip, value_coef, q_coef)


def test_sapo_value_learns_chain_d1(chain_d1):
    data, policy, suite_cfg = chain_d1
    cfg = replace(suite_cfg, lr=1e-3, value_lr=1e-2, value_squash="tanh", value_temperature=1.0)
    coef, q_coef = (0.0, 0.0) if CUT else (cfg.value_coef, cfg.q_coef)
    points = _fit(data, vf.SapoFull(data, vf.fresh_copy(policy), cfg), cfg.value_clip, coef, q_coef)
    assert points[0].test_ev_mc == pytest.approx(0.0)  # zero rows: V = 0 everywhere
    assert points[-1].test_ev_mc >= THRESHOLD, f"held-out EV {points[-1].test_ev_mc:.3f} after {STEPS} steps"


def test_ppo_critic_learns_chain_d1(chain_d1):
    data, policy, suite_cfg = chain_d1
    cfg = PPOConfig(gamma=suite_cfg.gamma, lam=suite_cfg.lam, kl_coef=0.0, critic_lr=1e-3, critic_head_lr=1e-2)
    if CUT:
        cfg = replace(cfg, critic_lr=0.0, critic_head_lr=0.0)
    points = _fit(data, vf.PpoFull(data, vf.fresh_copy(policy), cfg), cfg.value_clip)
    assert points[0].test_ev_mc == pytest.approx(0.0)
    assert points[-1].test_ev_mc >= THRESHOLD, f"held-out EV {points[-1].test_ev_mc:.3f} after {STEPS} steps"
