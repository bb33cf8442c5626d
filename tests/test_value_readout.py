"""SAPO's value temperature, valid-turn advantages, the value learning rates and the time-limit
option, each checked against numbers worked out by hand."""

import copy
import json
import math

import pytest
import torch

from agentrl.algorithms import PPO, SAPO, PPOConfig, SAPOConfig
from agentrl.algorithms.losses import squash
from agentrl.algorithms.sapo import readout
from agentrl.algorithms.value_rows import RowAdam, fit_value_rows, value_difference
from agentrl.backends.hf import HFBackend
from agentrl.models.policy import Policy
from agentrl.models.value_tokens import ValueTokens, reserve_value_tokens, saved_readout
from agentrl.rollout.engine import Task
from agentrl.training.compose import env_factory, make_engine
from agentrl.training.config import EnvConfig, RolloutConfig


def test_readout_at_tau_one_quarter_is_four_times_the_logit_difference_clipped():
    d = torch.tensor([0.1, -0.2, 0.3, -0.5, 0.0])
    cfg = SAPOConfig(value_temperature=0.25)
    # 4 x d = 0.4, -0.8, 1.2 -> 1 (clipped), -2.0 -> -1 (clipped), 0
    assert readout(d, cfg).tolist() == pytest.approx([0.4, -0.8, 1.0, -1.0, 0.0])
    tanh = readout(d, SAPOConfig(value_temperature=0.25, value_squash="tanh"))
    assert tanh.tolist() == pytest.approx([math.tanh(0.4), math.tanh(-0.8), math.tanh(1.2), math.tanh(-2.0), 0.0])
    assert readout(d, SAPOConfig()).tolist() == pytest.approx(d.tolist())  # tau_v 1: the old readout


def test_clip_st_reads_as_the_papers_clip_and_passes_the_gradient_past_the_bound():
    for kind, grad in (("clip", [0.0, 1.0, 0.0]), ("clip_st", [2.0, 1.0, -2.0])):
        d = torch.tensor([2.0, 0.5, -3.0], requires_grad=True)
        value = squash(d, kind)
        assert value.tolist() == [1.0, 0.5, -1.0]  # the same values either way
        # loss sum(v^2) (target 0): dL/dv = 2v = 2, 1, -2; clip lets it through inside +-1 only
        (value ** 2).sum().backward()
        assert d.grad.tolist() == pytest.approx(grad), kind


def test_a_saturated_readout_stays_dead_under_clip_and_recovers_under_clip_st():
    # d_post = (w+ - w-) . h = 3 for every turn: Q reads 1.0 (clipped) against targets
    # 0.5 + 2x = 0.7, 0.3, 0.9, 0.1, which u = w+ - w- = (0.5, 2) fits exactly
    rows = torch.tensor([[3.0, 0.0], [0.0, 0.0]])
    hidden = torch.tensor([[1.0, 0.1], [1.0, -0.1], [1.0, 0.2], [1.0, -0.2]])
    target = torch.tensor([0.7, 0.3, 0.9, 0.1])
    for kind in ("clip", "clip_st"):
        def loss_of(d_pre, d_post, kind=kind):
            return ((squash(d_post, kind) - target) ** 2).mean()

        before = float(loss_of(None, value_difference(rows, hidden, 0)))
        assert before == pytest.approx((0.09 + 0.49 + 0.01 + 0.81) / 4)  # (1 - target)^2
        fitted = fit_value_rows(rows, 0, hidden, hidden, loss_of, steps=400, lr=0.05)
        after = float(loss_of(None, value_difference(fitted, hidden, 0)))
        if kind == "clip":  # no gradient at all: the rows never move
            assert torch.equal(fitted, rows) and after == before
        else:
            assert after < 0.01 * before


@pytest.fixture(scope="module")
def sapo_base():
    """A tiny model with its value rows, on a tokenizer of its own (reserving adds two tokens)."""
    from agentrl.models.loading import build_tiny_model, load_tokenizer, resolve_model

    tok = load_tokenizer(resolve_model("tiny"))
    model = build_tiny_model(len(tok), seed=0)
    values = reserve_value_tokens(model, tok)
    return model, values, tok


@pytest.fixture
def sapo_parts(sapo_base):
    model, values, tok = sapo_base
    return copy.deepcopy(model), values, tok


def test_valid_turn_normalisation_by_hand(sapo_parts):
    model, values, tokenizer = sapo_parts
    algo = SAPO(SAPOConfig(kl_coef=0.0), Policy(model, tokenizer, values), r_max=1.0)
    adv = torch.tensor([1.0, 2.0, 3.0, 10.0])
    valid = torch.tensor([True, True, True, False])
    # valid turns: mean 2, population std sqrt(2/3) = 0.81650; the invalid turn gets 0
    out = algo.normalize(adv, valid)
    assert out.tolist() == pytest.approx([-1.224745, 0.0, 1.224745, 0.0], abs=1e-5)
    # today's behaviour: all four turns, mean 4, std sqrt(((9+4+1+36)/4)) = sqrt(12.5)
    algo.config.advantage_turns = "all"
    s = math.sqrt(12.5)
    assert algo.normalize(adv, valid).tolist() == pytest.approx([-3 / s, -2 / s, -1 / s, 6 / s], abs=1e-5)


def test_value_rows_step_at_value_lr_and_the_rest_at_lr(sapo_parts):
    model, values, tokenizer = sapo_parts
    algo = SAPO(SAPOConfig(kl_coef=0.0, lr=1e-4, value_lr=1e-2), Policy(model, tokenizer, values), r_max=1.0)
    weight = model.get_output_embeddings().weight
    before = weight.detach().clone()
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    algo.optimizer_step()
    moved = (before - weight.detach())
    # Adam's first step moves every weight by lr * g / |g| = lr (bias-corrected moments)
    assert moved[values.ids].flatten().tolist() == pytest.approx([1e-2] * (2 * weight.shape[1]), rel=1e-3)
    assert moved[:values.policy_vocab].mean().item() == pytest.approx(1e-4, rel=1e-3)
    state = algo.state_dict()["value_rows"]
    assert state["step"] == 1 and state["lr"] == 1e-2


def test_row_adam_restores_what_another_optimizer_did_to_its_rows():
    w = torch.nn.Parameter(torch.zeros(4, 3))
    rows = RowAdam([(w, torch.tensor([2, 3]))], lr=0.5)
    main = torch.optim.AdamW([w], lr=0.1, weight_decay=0.1)
    w.grad = torch.ones(4, 3)
    grads = rows.take_gradients()
    assert w.grad[2:].abs().sum() == 0 and w.grad[:2].sum() == 6  # rows' gradient taken out
    saved = rows.values()
    main.step()
    rows.restore(saved)
    rows.step(grads)
    assert w[:2].detach().flatten().tolist() == pytest.approx([-0.1] * 6, rel=1e-4)
    assert w[2:].detach().flatten().tolist() == pytest.approx([-0.5] * 6, rel=1e-4)


def test_ppo_critic_head_has_its_own_rate(tiny_model, tokenizer):
    algo = PPO(PPOConfig(kl_coef=0.0, critic_lr=1e-5, critic_head_lr=1e-3),
               Policy(copy.deepcopy(tiny_model), tokenizer), r_max=1.0)
    body, head = algo.critic_optimizer.param_groups
    assert body["lr"] == 1e-5 and head["lr"] == 1e-3
    assert {id(p) for p in head["params"]} == {id(p) for p in algo.critic.head.parameters()}
    assert algo.value_lr_metrics() == {"optim/critic_lr": 1e-5, "optim/critic_head_lr": 1e-3}
    default = PPO(PPOConfig(kl_coef=0.0, critic_lr=2e-5), Policy(copy.deepcopy(tiny_model), tokenizer), r_max=1.0)
    assert [g["lr"] for g in default.critic_optimizer.param_groups] == [2e-5, 2e-5]


def test_checkpoint_records_the_readout(tmp_path):
    tokens = ValueTokens(plus=10, minus=11)
    tokens.save(tmp_path, readout={"value_temperature": 0.25, "value_squash": "clip"})
    assert ValueTokens.load(tmp_path) == tokens
    assert saved_readout(tmp_path) == {"value_temperature": 0.25, "value_squash": "clip"}
    tokens.save(tmp_path)  # an older checkpoint: ids only
    assert json.loads((tmp_path / "agentrl_value_tokens.json").read_text()) == {"plus": 10, "minus": 11}
    assert saved_readout(tmp_path) is None


def test_a_readout_differs_by_the_values_it_gives_not_by_its_gradient(tmp_path):
    from types import SimpleNamespace

    from agentrl.training.resume import readout_difference

    ValueTokens(plus=10, minus=11).save(tmp_path, readout={"value_temperature": 1.0, "value_squash": "clip"})

    def reading(**settings):
        return SimpleNamespace(readout_settings=lambda: settings)

    # clip_st gives the clip's values: a warm start under it starts from the same V and Q
    assert readout_difference(tmp_path, reading(value_temperature=1.0, value_squash="clip_st")) is None
    assert readout_difference(tmp_path, reading(value_temperature=1.0, value_squash="clip")) is None
    tanh = reading(value_temperature=1.0, value_squash="tanh")
    assert readout_difference(tmp_path, tanh) == ({"value_temperature": 1.0, "value_squash": "clip"},
                                                  {"value_temperature": 1.0, "value_squash": "tanh"})
    assert readout_difference(tmp_path, reading(value_temperature=0.25, value_squash="clip_st")) is not None


@pytest.mark.parametrize("setting, terminal", [("auto", True), ("bootstrap", False), ("terminal", True)])
def test_a_visible_time_limit_ends_the_episode_as_terminal(tiny_model, tokenizer, setting, terminal):
    """Corridor shows the moves left, so ``auto`` treats its step limit as terminal: no
    bootstrap prompt, last turn terminated. KeyDoor does not declare it: auto bootstraps there."""
    cfg = RolloutConfig(action_mode="constrained", history_window=0, time_limit=setting)
    policy = Policy(copy.deepcopy(tiny_model), tokenizer)
    backend = HFBackend(policy.model, [2], 2, [], seed=0)
    # length 5 in 5 moves: only five "go right" win, so nearly every episode hits the limit
    env_cfg = EnvConfig(id="corridor", kwargs={"length": 5, "max_steps": 5})
    engine = make_engine(policy, backend, cfg, env_factory(env_cfg, "train"))
    trajectories = engine.run([Task(seed=s, group=s) for s in range(4)]).trajectories
    limited = [t for t in trajectories if not t.won]
    assert limited, "some episode must reach the step limit"
    for traj in limited:
        assert len(traj.turns) == 5
        assert traj.turns[-1].terminated is terminal and traj.turns[-1].truncated is (not terminal)
        assert (traj.bootstrap_prompt_ids is None) is terminal
    keydoor = make_engine(policy, backend, RolloutConfig(action_mode="constrained", max_turns=2),
                          env_factory(EnvConfig(id="keydoor"), "train"))
    assert keydoor.time_limit_terminal is False


def test_value_epochs_under_lora_keep_the_value_rows_at_value_lr(sapo_parts):
    """With LoRA the value rows are a parameter group of the main AdamW. A value-only epoch
    steps that optimizer at ``value_epoch_lr`` (shared moments): the backbone's group takes that
    rate for the step, the value rows' group keeps ``value_lr``, and both get their rates back."""
    from agentrl.algorithms.readout import VALUE_ROWS_GROUP
    from agentrl.training.compose import apply_lora
    from agentrl.training.config import ModelConfig

    model, values, tokenizer = sapo_parts
    model = apply_lora(model, ModelConfig(lora_rank=4, lora_alpha=8.0), values)
    cfg = SAPOConfig(kl_coef=0.0, lr=1e-4, value_lr=1e-2, value_epochs=1, value_epoch_lr=1e-3)
    algo = SAPO(cfg, Policy(model, tokenizer, values), r_max=1.0)
    body, rows = algo.optimizer.param_groups
    assert rows.get(VALUE_ROWS_GROUP) and not body.get(VALUE_ROWS_GROUP)
    row_params = list(rows["params"])
    body_params = list(body["params"])
    before_rows = [p.detach().clone() for p in row_params]
    before_body = [p.detach().clone() for p in body_params]
    for p in row_params + body_params:
        p.grad = torch.ones_like(p)
    algo.value_pass_step(cfg.value_epoch_lr)
    # Adam's first step moves each weight by its group's rate (bias-corrected, g / |g| = 1)
    row_moves = torch.cat([(b - p.detach()).flatten() for b, p in zip(before_rows, row_params, strict=True)])
    body_moves = torch.cat([(b - p.detach()).flatten() for b, p in zip(before_body, body_params, strict=True)])
    assert row_moves.abs().max().item() == pytest.approx(1e-2, rel=1e-3)
    assert body_moves.abs().max().item() == pytest.approx(1e-3, rel=1e-3)
    assert (body["lr"], rows["lr"]) == (1e-4, 1e-2)  # restored after the step
    # a checkpoint from before the mark: loading keeps the rows' group marked
    state = algo.state_dict()
    for group in state["optimizer"]["param_groups"]:
        group.pop(VALUE_ROWS_GROUP, None)
    algo.load_state_dict(state)
    assert algo.optimizer.param_groups[1].get(VALUE_ROWS_GROUP)
