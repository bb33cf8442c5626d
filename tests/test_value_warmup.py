"""Value warm-up (algorithm.value_warmup_iterations): the first updates train the value readout
only, the policy stays exactly where it was, and then training goes on as usual."""

import copy

import pytest
import torch
from test_algorithms import episodes  # noqa: F401  (the module fixture of real KeyDoor episodes)

from agentrl.algorithms import GRPO, PPO, SAPO, GRPOConfig, PPOConfig, SAPOConfig
from agentrl.models.policy import Policy
from agentrl.rundir.metrics import PhaseTimer


def _rewarded(trajectories):
    """A copy in which every other episode earned 1 at its last turn: targets that vary, so the
    value losses (and GRPO's group advantages) are not all zero as a random model's are."""
    out = copy.deepcopy(trajectories)
    for k, traj in enumerate(out):
        if k % 2 == 0:
            traj.turns[-1].reward = 1.0
    return out


def _snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _changed(model, before):
    return {n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])}


def test_sapo_warmup_moves_only_the_value_rows_then_everything(episodes):  # noqa: F811
    model, tok, values, trajectories = episodes
    clone = copy.deepcopy(model)
    algo = SAPO(SAPOConfig(lr=1e-3, value_warmup_iterations=2, kl_coef=0.0, entropy_coef=0.01,
                           weight_decay=0.1), Policy(clone, tok, values), r_max=1.0)
    head = clone.get_output_embeddings().weight
    for update in (1, 2):
        before = _snapshot(clone)
        rows_before = head.detach().clone()
        metrics = algo.update(_rewarded(trajectories), PhaseTimer())
        assert metrics["optim/value_warmup"] == 1.0 and metrics["optim/steps"] >= 1
        # tied embeddings: the one matrix that holds the value rows is the only one that moved,
        # and in it only the two value rows (weight decay and Adam leave the others exactly)
        assert _changed(clone, before) == {n for n, p in clone.named_parameters() if p is head}
        moved = (head.detach() != rows_before).any(dim=1).nonzero().flatten().tolist()
        assert moved == sorted(values.ids), update
    before = _snapshot(clone)
    metrics = algo.update(_rewarded(trajectories), PhaseTimer())
    assert metrics["optim/value_warmup"] == 0.0
    assert len(_changed(clone, before)) > 5  # the whole model trains again
    assert algo.updates_done == 3 and algo.state_dict()["updates_done"] == 3


@pytest.mark.parametrize("algo_cls,config", [
    (PPO, PPOConfig(lr=1e-3, critic_lr=1e-2, value_warmup_iterations=1, kl_coef=0.0)),
    (GRPO, GRPOConfig(lr=1e-3, value_warmup_iterations=1, kl_coef=0.0, group_size=2)),
])
def test_ppo_and_grpo_leave_the_policy_during_the_warmup(episodes, algo_cls, config):  # noqa: F811
    model, tok, values, trajectories = episodes
    clone = copy.deepcopy(model)
    algo = algo_cls(config, Policy(clone, tok), r_max=1.0)
    before = _snapshot(clone)
    critic_before = _snapshot(algo.critic) if algo_cls is PPO else None
    timer = PhaseTimer()
    metrics = algo.update(_rewarded(trajectories), timer)
    assert metrics["optim/value_warmup"] == 1.0 and metrics["optim/steps"] == 0.0
    assert _changed(clone, before) == set()
    assert "time/actor_update" in timer.metrics()  # same phase keys as any other iteration
    if algo_cls is PPO:
        assert _changed(algo.critic, critic_before)  # the critic alone learned
    metrics = algo.update(_rewarded(trajectories), PhaseTimer())
    assert metrics["optim/value_warmup"] == 0.0 and _changed(clone, before)


def test_warmup_ends_early_at_the_explained_variance_threshold(episodes):  # noqa: F811
    model, tok, values, trajectories = episodes
    algo = SAPO(SAPOConfig(value_warmup_iterations=5, value_warmup_ev=-1e9, kl_coef=0.0),
                Policy(copy.deepcopy(model), tok, values), r_max=1.0)
    first = algo.update(_rewarded(trajectories), PhaseTimer())
    ev = first["value/explained_variance_v"]
    assert first["optim/value_warmup"] == 1.0
    second = algo.update(_rewarded(trajectories), PhaseTimer())
    # an explained variance above -1e9 ends the warm-up after the first update (nan never does)
    assert second["optim/value_warmup"] == (1.0 if ev != ev else 0.0)


def test_warmup_state_survives_a_checkpoint(episodes):  # noqa: F811
    model, tok, values, trajectories = episodes
    cfg = SAPOConfig(lr=1e-3, value_warmup_iterations=3, kl_coef=0.0)
    algo = SAPO(cfg, Policy(copy.deepcopy(model), tok, values), r_max=1.0)
    algo.update(_rewarded(trajectories), PhaseTimer())
    state = copy.deepcopy(algo.state_dict())
    resumed = SAPO(cfg, Policy(copy.deepcopy(algo.policy.model), tok, values), r_max=1.0)
    resumed.load_state_dict(state)
    assert resumed.updates_done == 1 and resumed.value_warmup_active()
    a = algo.update(_rewarded(trajectories), PhaseTimer())
    b = resumed.update(_rewarded(trajectories), PhaseTimer())
    assert a["optim/value_warmup"] == b["optim/value_warmup"] == 1.0
    assert a["loss/value_v"] == pytest.approx(b["loss/value_v"], rel=1e-6)
