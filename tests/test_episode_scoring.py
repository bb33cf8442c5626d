"""One forward per episode: reading every turn of a conversation-mode episode from its final
sequence gives the per-turn path's log-probs, entropy, V, Q, critic values and gradient (fp32),
for SAPO, PPO and GRPO, constrained or free, with or without LoRA; and the pass skips."""

import copy
import math

import pytest
import torch

from agentrl.algorithms import GRPO, PPO, SAPO, GRPOConfig, PPOConfig, SAPOConfig, TurnBatch
from agentrl.backends.hf import HFBackend
from agentrl.models.policy import Policy
from agentrl.models.value_tokens import reserve_value_tokens
from agentrl.rollout.engine import Task
from agentrl.rollout.prompting import end_of_turn_id
from agentrl.rundir.metrics import PhaseTimer
from agentrl.training.compose import apply_lora, env_factory, make_engine
from agentrl.training.config import EnvConfig, ModelConfig, RolloutConfig

ALGOS = {"sapo": (SAPO, SAPOConfig, {}), "ppo": (PPO, PPOConfig, {}),
         "ppo-token": (PPO, PPOConfig, {"gae_level": "token"}), "grpo": (GRPO, GRPOConfig, {"group_size": 2})}


def _play(action_mode: str):
    from agentrl.models.loading import build_tiny_model, load_tokenizer, resolve_model

    tok = load_tokenizer(resolve_model("tiny"))
    model = build_tiny_model(len(tok), seed=0)
    values = reserve_value_tokens(model, tok)
    with torch.no_grad():  # value rows start at 0; make V and Q differ between positions
        head = model.get_output_embeddings().weight
        head[list(values.ids)] = torch.randn(2, head.shape[1], generator=torch.Generator().manual_seed(1)) * 0.5
    eot = end_of_turn_id(tok)
    cfg = RolloutConfig(action_mode=action_mode, max_turns=4, history="conversation", max_new_tokens=12)
    engine = make_engine(Policy(model, tok, values), HFBackend(model, [eot], eot, values.ids, seed=0), cfg,
                         env_factory(EnvConfig(id="keydoor"), "train"))
    trajectories = engine.run([Task(seed=s, group=s // 2) for s in range(4)]).trajectories
    assert all(t.conversation for t in trajectories) and any(t.truncated for t in trajectories)
    assert sum(len(t.turns) for t in trajectories) > len(trajectories)
    trajectories[0].turns[-1].reward = 1.0  # something to learn from
    return model, tok, values, trajectories


@pytest.fixture(scope="module")
def constrained():
    return _play("constrained")


@pytest.fixture(scope="module")
def free():
    return _play("free")


def _per_turn(trajectories):
    """The same trajectories, scored turn by turn (the window-mode path)."""
    out = copy.deepcopy(trajectories)
    for traj in out:
        traj.conversation = False
    return out


def _policy(episodes, lora: bool, with_values: bool) -> Policy:
    model, tok, values, _ = episodes
    model = copy.deepcopy(model)
    if lora:
        model = apply_lora(model, ModelConfig(lora_rank=4, lora_alpha=8.0), values)
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_" in name:
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    return Policy(model, tok, values if with_values else None)


def test_episode_units_read_every_turn_and_the_bootstrap(constrained):
    _, _, _, trajectories = constrained
    batch = TurnBatch.from_trajectories(trajectories)
    assert batch.by_episode and len(batch.units) == len(trajectories)
    window = TurnBatch.from_trajectories(_per_turn(trajectories))
    assert not window.by_episode and len(window.units) == len(window.items) + len(window.bootstrap_items)
    assert batch.unique_tokens() < window.unique_tokens()
    slots = sorted(s for u in batch.units for s in u.slots)
    assert slots == list(range(len(batch.items) + len(batch.bootstrap_items)))


@pytest.mark.parametrize("mode", ["constrained", "free"])
@pytest.mark.parametrize("lora", [False, True])
def test_scores_from_the_episode_sequence_equal_the_per_turn_scores(request, mode, lora):
    episodes = request.getfixturevalue(mode)
    policy = _policy(episodes, lora, with_values=True)
    batch = TurnBatch.from_trajectories(episodes[3])
    rows = [u.sequence for u in batch.units]
    slots = [s for u in batch.units for s in u.slots]
    items = batch.items + batch.bootstrap_items
    with torch.no_grad():
        whole = policy.score_sequences(rows, entropy=True, values=True)
        alone = policy.score([items[s] for s in slots], entropy=True, values=True)
    torch.testing.assert_close(whole.logprobs, alone.logprobs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(whole.entropy, alone.entropy, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(whole.pre, alone.pre, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(whole.post, alone.post, rtol=1e-5, atol=1e-5)
    assert float(whole.pre.std()) > 0  # the value readout is not trivially 0
    assert torch.equal(whole.token_item, alone.token_item)


def _update(algo_name, episodes, trajectories, lora=False, **overrides):
    algo_cls, config_cls, extra = ALGOS[algo_name]
    config = config_cls(**{"lr": 1e-9, "minibatch_turns": 10_000, "max_grad_norm": 1e9, "kl_coef": 0.01,
                           "entropy_coef": 0.01, "micro_batch_tokens": 512, **extra, **overrides})
    policy = _policy(episodes, lora, with_values=algo_cls is SAPO)
    algo = algo_cls(config, policy, r_max=1.0)
    if algo_cls is PPO:  # a critic head that reads something
        with torch.no_grad():
            algo.critic.head.weight.normal_(0, 0.1, generator=torch.Generator().manual_seed(2))
    trajs = copy.deepcopy(trajectories)
    metrics = algo.update(trajs, PhaseTimer())
    modules = [("policy", policy.model)] + ([("critic", algo.critic)] if algo_cls is PPO else [])
    grads = {f"{k}.{n}": p.grad.clone() for k, m in modules for n, p in m.named_parameters() if p.grad is not None}
    return grads, metrics, trajs


@pytest.mark.parametrize("algo_name", list(ALGOS))
@pytest.mark.parametrize("mode", ["constrained", "free"])
@pytest.mark.parametrize("lora", [False, True])
def test_the_gradient_of_one_forward_per_episode_equals_the_per_turn_gradient(request, algo_name, mode, lora):
    episodes = request.getfixturevalue(mode)
    trajectories = episodes[3]
    whole, m1, t1 = _update(algo_name, episodes, trajectories, lora)
    split, m2, t2 = _update(algo_name, episodes, _per_turn(trajectories), lora)
    assert m1["optim/steps"] == m2["optim/steps"] == 1.0
    assert set(whole) == set(split) and whole
    for name, grad in whole.items():
        torch.testing.assert_close(grad, split[name], rtol=1e-4, atol=1e-6, msg=name)
    for key in ("loss/policy", "policy/entropy", "policy/kl_ref", "loss/value_v", "loss/value_q"):
        if key in m2:
            assert m1[key] == pytest.approx(m2[key], rel=1e-4, abs=1e-6), key
    for a, b in zip(t1, t2, strict=True):  # V, Q and advantages recorded per turn agree
        for ta, tb in zip(a.turns, b.turns, strict=True):
            for key, value in tb.stats.items():
                assert ta.stats[key] == pytest.approx(value, rel=1e-4, abs=1e-5), key
    assert m1["tokens/unique"] < m2["tokens/unique"]
    assert m1["tokens/scored/actor_update"] < m2["tokens/scored/actor_update"]


@pytest.mark.parametrize("algo_name", ["ppo", "grpo"])
def test_skipping_the_old_pass_when_exactly_on_policy_keeps_the_gradient(constrained, algo_name):
    trajectories = constrained[3]
    skipped, m1, _ = _update(algo_name, constrained, trajectories, old_logprob_pass="auto")
    ran, m2, _ = _update(algo_name, constrained, trajectories, old_logprob_pass="always")
    assert m1["optim/old_pass_skipped"] == 1.0 and m2["optim/old_pass_skipped"] == 0.0
    assert "tokens/scored/old_logprob" not in m1 and m2["tokens/scored/old_logprob"] > 0
    for name, grad in ran.items():
        torch.testing.assert_close(skipped[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    assert m1["policy/clip_fraction"] == 0.0 and m1["policy/approx_kl"] == 0.0  # ratio exactly 1
    assert m1["rollout/logprob_gap"] == pytest.approx(m2["rollout/logprob_gap"], abs=1e-5)
    # two epochs are not on-policy for the second: the pass runs
    _, m3, _ = _update(algo_name, constrained, trajectories, epochs=2)
    assert m3["optim/old_pass_skipped"] == 0.0


def test_sapo_keeps_its_pass_and_no_reference_pass_without_kl(constrained):
    _, m1, _ = _update("sapo", constrained, constrained[3], kl_coef=0.0)
    assert m1["tokens/scored/old_logprob"] > 0 and "tokens/scored/ref_logprob" not in m1
    _, m2, _ = _update("sapo", constrained, constrained[3], kl_coef=0.01)
    assert m2["tokens/scored/ref_logprob"] == m2["tokens/scored/old_logprob"] - sum(
        len(t.bootstrap_prompt_ids) - t.turns[-1].num_tokens
        for t in constrained[3] if t.bootstrap_prompt_ids is not None)  # the reference needs no bootstrap


def test_truncated_importance_weights_scale_the_policy_gradient(constrained):
    """Hand-checked: rollout log-probs shifted by +log 4 give weight exp(-log 4) = 1/4 on every
    token; shifted by -log 4 the weight 4 is capped at 2. Unshifted (same fp32 path) it is 1."""
    trajectories = constrained[3]
    plain, _, _ = _update("grpo", constrained, trajectories, kl_coef=0.0, entropy_coef=0.0)

    def shifted(delta):
        out = copy.deepcopy(trajectories)
        for traj in out:
            for turn in traj.turns:
                turn.rollout_logprobs = [lp + delta for lp in turn.rollout_logprobs]
        return out

    same, _, _ = _update("grpo", constrained, trajectories, kl_coef=0.0, entropy_coef=0.0, tis_cap=2.0)
    quarter, _, _ = _update("grpo", constrained, shifted(math.log(4)), kl_coef=0.0, entropy_coef=0.0, tis_cap=2.0)
    capped, _, _ = _update("grpo", constrained, shifted(-math.log(4)), kl_coef=0.0, entropy_coef=0.0, tis_cap=2.0)
    assert any(float(g.abs().sum()) > 0 for g in plain.values())
    for name, grad in plain.items():
        torch.testing.assert_close(same[name], grad, rtol=1e-3, atol=1e-6)
        torch.testing.assert_close(quarter[name], grad / 4, rtol=1e-3, atol=1e-6)
        torch.testing.assert_close(capped[name], grad * 2, rtol=1e-3, atol=1e-6)
