"""Algorithm-level checks: micro-batching does not change gradients, phase keys are identical,
PPO's critic and GRPO's groups behave as specified."""

import copy

import pytest
import torch

from agentrl.algorithms import GRPO, PPO, SAPO, GRPOConfig, PPOConfig, SAPOConfig
from agentrl.backends.hf import HFBackend
from agentrl.models.policy import Policy, ScoreItem
from agentrl.models.value_tokens import reserve_value_tokens
from agentrl.rollout.engine import Task
from agentrl.rundir.metrics import PhaseTimer
from agentrl.training.compose import env_factory, make_engine
from agentrl.training.config import EnvConfig, RolloutConfig


@pytest.fixture(scope="module")
def episodes():
    """A few real KeyDoor trajectories from a tiny model (constrained, some truncated)."""
    from agentrl.models.loading import build_tiny_model, load_tokenizer, resolve_model

    tok = load_tokenizer(resolve_model("tiny"))
    model = build_tiny_model(len(tok), seed=0)
    values = reserve_value_tokens(model, tok)
    policy = Policy(model, tok, values)
    cfg = RolloutConfig(action_mode="constrained", max_turns=4, history_window=1)
    engine = make_engine(policy, HFBackend(model, [2], 2, values.ids, seed=0), cfg,
                         env_factory(EnvConfig(id="keydoor"), "train"))
    trajectories = engine.run([Task(seed=s, group=s // 2) for s in range(6)]).trajectories
    assert any(t.truncated for t in trajectories)
    return model, tok, values, trajectories


def _gradients(algo_cls, config, episodes):
    model, tok, values, trajectories = episodes
    clone = copy.deepcopy(model)
    algo = algo_cls(config, Policy(clone, tok, values if algo_cls is SAPO else None), r_max=1.0)
    metrics = algo.update(copy.deepcopy(trajectories), PhaseTimer())
    return {n: p.grad.clone() for n, p in clone.named_parameters() if p.grad is not None}, metrics


@pytest.mark.parametrize("algo_cls,config_cls", [(SAPO, SAPOConfig), (GRPO, GRPOConfig)])
def test_micro_batching_does_not_change_the_gradient(episodes, algo_cls, config_cls):
    common = dict(lr=1e-9, minibatch_turns=10_000, max_grad_norm=1e9, kl_coef=0.0, entropy_coef=0.01)
    if config_cls is GRPOConfig:
        common["group_size"] = 2
    whole, m1 = _gradients(algo_cls, config_cls(micro_batch_tokens=100_000, **common), episodes)
    split, m2 = _gradients(algo_cls, config_cls(micro_batch_tokens=256, **common), episodes)
    assert m1["optim/steps"] == m2["optim/steps"] == 1.0
    for name, grad in whole.items():
        torch.testing.assert_close(split[name], grad, rtol=1e-4, atol=1e-7)
    assert m1["loss/policy"] == pytest.approx(m2["loss/policy"], rel=1e-5, abs=1e-8)


def test_sapo_value_terms_stop_at_the_hidden_states_when_asked(episodes):
    """``value_backbone_grad: false``: the joint step's gradient on every weight but the two value
    rows is exactly the policy terms' alone (value_coef = q_coef = 0), and the rows still get the
    value terms'. With the default (the paper's), the value terms do reach the body. The rows are
    given weight first: zero rows send no gradient anywhere."""
    model, tok, values, trajectories = episodes
    trajs = _varied(trajectories)

    def grads(**cfg):
        clone = copy.deepcopy(model)
        with torch.no_grad():
            torch.manual_seed(3)
            clone.get_output_embeddings().weight[values.ids] = torch.randn(2, clone.config.hidden_size) * 3
        config = SAPOConfig(lr=1e-9, epochs=1, minibatch_turns=10_000, max_grad_norm=1e9, kl_coef=0.0, **cfg)
        algo = SAPO(config, Policy(clone, tok, values), r_max=1.0)
        algo.update(copy.deepcopy(trajs), PhaseTimer())
        out = {}
        for name, p in clone.named_parameters():
            g = p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
            if p is clone.get_output_embeddings().weight:
                out["value rows"] = g[values.ids].clone()
                g[values.ids] = 0.0
            out[name] = g
        return out

    cut = grads(value_backbone_grad=False)
    policy_only = grads(value_coef=0.0, q_coef=0.0)
    joint = grads()
    assert float(policy_only["value rows"].abs().sum()) == 0.0
    assert float(cut["value rows"].abs().sum()) > 0.0
    body = [name for name in cut if name != "value rows"]
    for name in body:
        torch.testing.assert_close(cut[name], policy_only[name], rtol=1e-5, atol=1e-9)
    assert any(not torch.allclose(joint[name], policy_only[name], rtol=1e-3, atol=1e-7) for name in body)


def test_every_algorithm_reports_the_same_phase_keys(episodes):
    model, tok, values, trajectories = episodes
    keys = []
    for algo_cls, cfg in ((SAPO, SAPOConfig(kl_coef=0.01)), (PPO, PPOConfig(kl_coef=0.01)),
                          (GRPO, GRPOConfig(kl_coef=0.01, group_size=2))):
        timer = PhaseTimer()
        algo = algo_cls(cfg, Policy(copy.deepcopy(model), tok, values), r_max=1.0)
        algo.update(copy.deepcopy(trajectories), timer)
        metrics = timer.metrics()
        keys.append(set(metrics))
        assert metrics["time/old_logprob"] > 0 and metrics["time/actor_update"] > 0
        assert metrics["time/ref_logprob"] > 0
        critic = metrics["time/value_inference"] > 0 and metrics["time/critic_update"] > 0
        assert critic == (algo_cls is PPO)
    assert keys[0] == keys[1] == keys[2]


def test_ppo_critic_is_a_separate_copy_that_learns(episodes):
    model, tok, values, trajectories = episodes
    algo = PPO(PPOConfig(critic_lr=1e-2, kl_coef=0.0), Policy(copy.deepcopy(model), tok), r_max=1.0)
    critic_params = {id(p) for p in algo.critic.parameters()}
    assert not critic_params & {id(p) for p in algo.policy.model.parameters()}
    assert float(algo.critic.head.weight.detach().abs().sum()) == 0.0  # V = 0 at the start
    trajs = copy.deepcopy(trajectories)
    trajs[0].turns[-1].reward = 1.0  # a return to regress towards
    metrics = algo.update(trajs, PhaseTimer())
    assert metrics["loss/value_v"] > 0
    item = ScoreItem(trajs[0].turns[-1].prompt_ids, trajs[0].turns[-1].action_ids)
    assert float(algo.critic_values([item], token_level=False)[0]) > 0.0  # moved towards the return


def test_sapo_records_values_and_grpo_logs_collapse(episodes):
    model, tok, values, trajectories = episodes
    trajs = copy.deepcopy(trajectories)
    SAPO(SAPOConfig(kl_coef=0.0), Policy(copy.deepcopy(model), tok, values), r_max=1.0).update(trajs, PhaseTimer())
    assert all({"V", "Q", "advantage"} <= set(t.stats) for traj in trajs for t in traj.turns)
    metrics = GRPO(GRPOConfig(kl_coef=0.0, group_size=2), Policy(copy.deepcopy(model), tok), r_max=1.0).update(
        copy.deepcopy(trajectories), PhaseTimer())
    groups = {}
    for traj in trajectories:
        groups.setdefault(traj.group, []).append(traj.episode_return)
    expected = sum(len(set(r)) == 1 for r in groups.values()) / len(groups)
    assert metrics["grpo/collapse_share"] == pytest.approx(expected)


def test_sapo_value_epochs_train_the_value_alone(episodes):
    """Value-only epochs: the policy's terms carry no gradient (with c_V = c_Q = 0 every
    value-epoch gradient is exactly zero), they run after the joint epochs, one step per
    minibatch, and with the value loss on they move V towards its targets."""
    model, tok, values, trajectories = episodes
    base = dict(lr=1e-3, minibatch_turns=10_000, kl_coef=0.0, entropy_coef=0.01, epochs=1)
    silent = SAPO(SAPOConfig(value_coef=0.0, q_coef=0.0, value_epochs=3, **base),
                  Policy(copy.deepcopy(model), tok, values), r_max=1.0)
    metrics = silent.update(copy.deepcopy(trajectories), PhaseTimer())
    assert metrics["optim/steps"] == 1.0 and metrics["optim/value_steps"] == 3.0
    assert metrics["optim/grad_norm"] > 0  # the joint epoch's policy gradient
    assert metrics["optim/value_grad_norm"] == 0.0  # the surrogate and entropy are cut in value epochs

    def value_error(value_epochs: int) -> float:
        trajs = copy.deepcopy(trajectories)
        for traj in trajs:  # a return to regress towards: every episode pays 1 at its end
            traj.turns[-1].reward = 1.0
        clone = copy.deepcopy(model)
        algo = SAPO(SAPOConfig(value_epochs=value_epochs, value_squash="tanh", value_clip=None, **base),
                    Policy(clone, tok, values), r_max=1.0)
        out = algo.update(trajs, PhaseTimer())
        assert out.get("optim/value_steps", 0.0) == float(value_epochs)
        algo.value_trace(trajs)  # V after the update
        return sum((1.0 - t.stats["V"]) ** 2 for traj in trajs for t in traj.turns)

    assert value_error(4) < value_error(0)


@pytest.mark.parametrize("which", ["own", "shared"])
def test_sapo_value_epochs_step_an_adam_of_their_own(episodes, which):
    """``value_epoch_optimizer: own``: the value epochs' Adam has seen no policy gradient, so
    its first step moves every weight with a value gradient by exactly ``value_epoch_lr``
    (Adam's first step is lr * g / |g|). ``shared``: the main Adam's moments, filled by the
    joint step's policy gradient, make the same step differ from lr, weight by weight."""
    model, tok, values, trajectories = episodes
    trajs = copy.deepcopy(trajectories)
    for traj in trajs:
        traj.turns[-1].reward = 1.0
    cfg = SAPOConfig(lr=1e-2, value_epoch_lr=1e-3, epochs=1, value_epochs=1, minibatch_turns=10_000,
                     kl_coef=0.0, entropy_coef=0.01, max_grad_norm=1e9, value_squash="tanh",
                     value_clip=None, value_epoch_optimizer=which)
    algo = SAPO(cfg, Policy(copy.deepcopy(model), tok, values), r_max=1.0)
    assert (algo.value_optimizer is not None) == (which == "own")
    params = [p for p in algo.policy.model.parameters() if p.requires_grad]
    ratios: list[torch.Tensor] = []
    step = algo.value_pass_step

    def watched(lr):
        before = [p.detach().clone() for p in params]
        grads = [p.grad.detach().clone() for p in params]
        step(lr)
        for p, b, g in zip(params, before, grads, strict=True):
            moved = (p.detach() - b)[g.abs() > 1e-4]  # Adam's eps (1e-8) is nothing beside these
            ratios.append(moved.abs() / 1e-3)

    algo.value_pass_step = watched
    metrics = algo.update(trajs, PhaseTimer())
    assert metrics["optim/value_steps"] == 1.0
    ratio = torch.cat(ratios)
    assert ratio.numel() > 1000  # the backbone has value gradients (the rows moved in the joint step)
    if which == "own":
        torch.testing.assert_close(ratio, torch.ones_like(ratio), rtol=1e-3, atol=1e-3)
    else:
        assert float((ratio - 1).abs().median()) > 0.05


def test_fit_value_rows_takes_adams_first_step_by_hand():
    """One head-only step on a hand case: H = 2, rows at zero, one turn with h_pre = (1, 0),
    V target 0.5, plain squared loss 0.5 (V - 0.5)^2 with V = d = w+ . h - w- . h. At d = 0
    dL/dd = -0.5, so dL/dw+ = (-0.5, 0) and dL/dw- = (0.5, 0): Adam's first step (lr * g / |g|)
    moves w+[0] up by lr and w-[0] down by lr and leaves the zero-gradient entries alone, so
    d becomes 2 lr. Q's term is weighted 0 here."""
    from agentrl.algorithms.losses import clipped_value_loss
    from agentrl.algorithms.value_rows import fit_value_rows

    rows = torch.zeros(2, 2)
    h_pre = torch.tensor([[1.0, 0.0]])

    def loss_of(d_pre, d_post):
        return clipped_value_loss(d_pre, torch.zeros(1), torch.tensor([0.5]), None).sum() + 0.0 * d_post.sum()

    fitted = fit_value_rows(rows, 0, h_pre, h_pre, loss_of, steps=1, lr=0.1)
    assert fitted.flatten().tolist() == pytest.approx([0.1, 0.0, -0.1, 0.0], abs=1e-6)
    assert rows.abs().sum() == 0  # the input is not changed in place
    # many steps reach the target: d -> 0.5
    far = fit_value_rows(rows, 0, h_pre, h_pre, loss_of, steps=300, lr=0.01)
    assert float((far[0] - far[1]) @ h_pre[0]) == pytest.approx(0.5, abs=1e-2)


def test_sapo_head_steps_refit_the_value_rows_without_another_forward(episodes):
    """``value_head_steps``: the rows are refit on the old pass's hidden states (the batch's value
    loss falls; on the tiny model's nearly collinear features V's spread barely moves, which the
    value-fit benchmark found too), and no token is scored more than without them."""
    model, tok, values, trajectories = episodes
    trajs = copy.deepcopy(trajectories)
    for i, traj in enumerate(trajs):
        traj.turns[-1].reward = float(i % 2)  # returns that vary
    scored = {}
    for steps in (0, 200):
        cfg = SAPOConfig(lr=1e-8, epochs=1, minibatch_turns=10_000, kl_coef=0.0, value_clip=None,
                         value_head_steps=steps, value_head_lr=1e-3, value_squash="tanh")
        algo = SAPO(cfg, Policy(copy.deepcopy(model), tok, values), r_max=1.0)
        weight = algo.policy.model.get_output_embeddings().weight
        before = weight.detach()[values.ids].clone()
        metrics = algo.update(copy.deepcopy(trajs), PhaseTimer())
        scored[steps] = metrics["tokens/scored"]
        moved = float((weight.detach()[values.ids] - before).abs().max())
        if steps:
            assert metrics["value/head_loss_after"] < 0.5 * metrics["value/head_loss_before"], metrics
            assert moved > 0.05  # the head steps moved the rows (the joint step at lr 1e-8 cannot)
        else:
            assert "value/head_ev_after" not in metrics and moved < 1e-6
    assert scored[200] == scored[0]


def test_ppo_head_steps_refit_the_critic_head_on_the_value_pass_features(episodes):
    """``critic_head_steps``: the head alone is refit on the value pass's features (loss falls,
    the head moves, the body does not), and no token is scored more than without them."""
    model, tok, values, trajectories = episodes
    trajs = copy.deepcopy(trajectories)
    for i, traj in enumerate(trajs):
        traj.turns[-1].reward = float(i % 2)
    scored = {}
    for steps in (0, 200):
        cfg = PPOConfig(lr=1e-8, critic_lr=1e-8, critic_head_lr=1e-2, critic_head_steps=steps, epochs=1,
                        minibatch_turns=10_000, kl_coef=0.0, value_clip=None)
        algo = PPO(cfg, Policy(copy.deepcopy(model), tok), r_max=1.0)
        head = algo.critic.head.weight.detach().clone()
        body = next(algo.critic.body.parameters()).detach().clone()
        metrics = algo.update(copy.deepcopy(trajs), PhaseTimer())
        scored[steps] = metrics["tokens/scored"]
        if steps:
            assert metrics["value/head_loss_after"] < 0.5 * metrics["value/head_loss_before"], metrics
            assert float((algo.critic.head.weight.detach() - head).abs().max()) > 0.1
        assert float((next(algo.critic.body.parameters()).detach() - body).abs().max()) < 1e-6
    assert scored[200] == scored[0]
    with pytest.raises(Exception, match="gae_level=turn only"):
        PPO(PPOConfig(critic_head_steps=4, gae_level="token"), Policy(copy.deepcopy(model), tok), r_max=1.0)


from agentrl.algorithms.losses import explained_variance  # noqa: E402


def _varied(trajectories):
    trajs = copy.deepcopy(trajectories)
    for i, traj in enumerate(trajs):
        traj.turns[-1].reward = float(i % 2)  # returns that vary
    return trajs


def test_sapo_ridge_head_fit_sets_the_row_difference_and_keeps_the_mean(episodes):
    """``value_head_fit=ridge``: after the update, V read on the batch by the model is what the fit
    computed (the rows were written as fitted, from hidden states read under the updated weights),
    the rows' difference is the readout times tau_v (a quarter at tau_v 0.25 of the one at 1), their
    mean is kept, and the window travels in the checkpoint state."""
    model, tok, values, trajectories = episodes
    trajs = _varied(trajectories)
    diffs = {}
    for tau, lr in ((1.0, 1e-3), (1.0, 1e-8), (0.25, 1e-8)):
        cfg = SAPOConfig(lr=lr, epochs=1, minibatch_turns=10_000, kl_coef=0.0, value_clip=None,
                         value_head_fit="ridge", value_head_window=2, value_temperature=tau, value_squash="clip",
                         value_lr=1e-2)  # a rate the joint step would move the rows by, were they not frozen
        algo = SAPO(cfg, Policy(copy.deepcopy(model), tok, values), r_max=1.0)
        weight = algo.policy.model.get_output_embeddings().weight
        before = weight.detach()[values.ids].clone().float()
        metrics = algo.update(copy.deepcopy(trajs), PhaseTimer())
        after = weight.detach()[values.ids].float()
        diffs[(tau, lr)] = after[0] - after[1]
        assert torch.allclose(after.mean(0), before.mean(0), atol=1e-6)
        assert metrics["value/head_window_turns"] == sum(len(t.turns) for t in trajs)
        assert -1.0 < metrics["value/head_cv_ev"] <= 1.0  # the fit's held-out EV (test_ridge_readout.py)
        again = copy.deepcopy(trajs)
        algo.value_trace(again)
        v = torch.tensor([t.stats["V"] for traj in again for t in traj.turns])
        targets = algo.head_window.stacked("v")
        assert explained_variance(v, targets) == pytest.approx(metrics["value/head_ev_after"], abs=1e-4)
        assert metrics["value/head_ev_after"] > 0.3
        fresh = SAPO(cfg, Policy(copy.deepcopy(model), tok, values), r_max=1.0)
        fresh.load_state_dict(algo.state_dict())
        (entry,), (copied,) = algo.head_window.entries, fresh.head_window.entries
        assert [i.prompt_ids for i in copied.batch.items] == [i.prompt_ids for i in entry.batch.items]
        assert torch.equal(copied.targets["q"], entry.targets["q"])
    # the same fit in units of d / tau_v: the rows' difference scales with tau_v (a still backbone)
    assert torch.allclose(diffs[(0.25, 1e-8)], 0.25 * diffs[(1.0, 1e-8)], rtol=1e-3, atol=1e-5)
    # at lr 1e-3 the fit read features the update had moved: another fit
    assert not torch.allclose(diffs[(1.0, 1e-3)], diffs[(1.0, 1e-8)], atol=1e-3)


def test_ppo_ridge_head_fit_solves_the_head_and_leaves_the_body(episodes):
    """``critic_head_fit=ridge``: after the update the critic reads on the batch what the fit
    computed, a second batch is fitted together with the first, and the window travels in the
    checkpoint state."""
    model, tok, values, trajectories = episodes
    trajs = _varied(trajectories)
    cfg = PPOConfig(lr=1e-8, critic_lr=1e-3, critic_head_fit="ridge", critic_head_window=2, epochs=1,
                    minibatch_turns=10_000, kl_coef=0.0, value_clip=None)
    algo = PPO(cfg, Policy(copy.deepcopy(model), tok), r_max=1.0)
    first = algo.update(copy.deepcopy(trajs), PhaseTimer())
    batch = algo.head_window.entries[-1].batch
    read, _ = algo.batch_values(batch, False)
    assert explained_variance(torch.cat(read), algo.head_window.stacked("y")) == pytest.approx(
        first["value/head_ev_after"], abs=1e-4)
    assert first["value/head_ev_after"] > 0.3
    assert -1.0 < first["value/head_cv_ev"] <= 1.0  # the fit's held-out EV (test_ridge_readout.py)
    second = algo.update(copy.deepcopy(trajs), PhaseTimer())
    turns = sum(len(t.turns) for t in trajs)
    assert (first["value/head_window_turns"], second["value/head_window_turns"]) == (turns, 2 * turns)
    fresh = PPO(cfg, Policy(copy.deepcopy(model), tok), r_max=1.0)
    fresh.load_state_dict(algo.state_dict())
    assert len(fresh.head_window.entries) == 2
