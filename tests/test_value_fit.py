"""The value-fit benchmark's parts (agentrl/bench/value_fit.py): returns and targets by hand, the ridge
reference recovering a known linear value, a replay that reproduces a played episode token for
token, and a head-only readout that learns a value its features hold (and stays flat at rate 0)."""

import copy
import json

import pytest
import torch

from agentrl.algorithms.advantages import gae, sarsa_targets
from agentrl.algorithms.sapo import SAPOConfig
from agentrl.backends.hf import HFBackend
from agentrl.bench import value_fit as vf
from agentrl.models.policy import Policy
from agentrl.rollout.engine import Task
from agentrl.rollout.trajectory import Trajectory, Turn
from agentrl.training.compose import env_factory, make_engine
from agentrl.training.config import EnvConfig, RolloutConfig


def _turn(reward, terminated=False, truncated=False):
    return Turn(prompt_ids=[1, 2], action_ids=[3], rollout_logprobs=[0.0], prompt_text="", reply_text="",
                action="a", observation="o", reward=reward, env_reward=reward, terminated=terminated,
                truncated=truncated, valid=True)


def _episodes():
    """Four episodes: won at turn 3, lost at turn 2, truncated after 2 (bootstrap), won at once."""
    won = Trajectory(0, 0, "t0", [_turn(0.0), _turn(0.0), _turn(2.0, terminated=True)])
    lost = Trajectory(1, 1, "t1", [_turn(0.0), _turn(0.0, terminated=True)])
    cut = Trajectory(2, 2, "t2", [_turn(0.0), _turn(0.0, truncated=True)], bootstrap_prompt_ids=[1, 2, 3, 4])
    quick = Trajectory(3, 3, "t3", [_turn(2.0, terminated=True)])
    return [won, lost, cut, quick]


def test_returns_and_targets_by_hand():
    data = vf.FitData.build(_episodes(), r_max=2.0, gamma=0.9, lam=0.5)
    # Monte-Carlo in units of R_max (2): 0.81, 0.9, 1 | 0, 0 | 0, 0 (no bootstrap) | 1
    assert data.mc.tolist() == pytest.approx([0.81, 0.9, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    v = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.25])  # 8 turns, then V(s_T) of "cut"
    lam = data.lambda_returns(v)
    expected = []
    for (start, stop), boot in zip(data.batch.spans, [0.0, 0.0, 0.25, 0.0], strict=True):
        turns = data.batch.turns[start:stop]
        _, ret = gae([t.reward / 2.0 for t in turns], v[start:stop].tolist(), [t.terminated for t in turns],
                     boot, 0.9, 0.5)
        expected += ret.tolist()
    assert lam.tolist() == pytest.approx(expected, abs=1e-6)
    # by hand for "cut" (V 0.6, 0.7, then V(s_T) 0.25): delta_1 = 0.9 * 0.25 - 0.7 = -0.475,
    # delta_0 = 0.9 * 0.7 - 0.6 = 0.03; G_1 = 0.7 - 0.475 = 0.225, G_0 = 0.6 + 0.03 + 0.45 * -0.475
    assert lam[5:7].tolist() == pytest.approx([0.41625, 0.225])
    q = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    sarsa = data.sarsa_targets(q, v)
    expected = []
    for (start, stop), boot in zip(data.batch.spans, [0.0, 0.0, 0.25, 0.0], strict=True):
        turns = data.batch.turns[start:stop]
        expected += sarsa_targets([t.reward / 2.0 for t in turns], q[start:stop].tolist(),
                                  [t.terminated for t in turns], boot, 0.9).tolist()
    assert sarsa.tolist() == pytest.approx(expected)
    assert sarsa[:3].tolist() == pytest.approx([1.8, 2.7, 1.0])


def test_split_keeps_every_task_on_one_side():
    eps = _episodes() * 3  # each (task, seed) three times
    data = vf.FitData.build([copy.deepcopy(t) for t in eps], r_max=2.0, gamma=0.9, lam=0.5, test_fraction=0.5)
    sides = {}
    for traj, test in zip(data.batch.trajectories, data.test_episode.tolist(), strict=True):
        sides.setdefault((traj.task, traj.task_seed), set()).add(test)
    assert all(len(s) == 1 for s in sides.values())
    assert sum(next(iter(s)) for s in sides.values()) == 2  # half of the 4 tasks held out


def test_split_holds_out_won_tasks_when_wins_are_rare():
    # 10 tasks, 2 of them won: 0.3 of each stratum -> round(0.6) = 1 won and round(2.4) = 2 lost held
    # out, for every split seed (an unstratified split would often hold out no win at all)
    eps = [Trajectory(k, k, f"t{k}", [_turn(0.0), _turn(2.0 if k < 2 else 0.0, terminated=True)]) for k in range(10)]
    for seed in range(6):
        data = vf.FitData.build(copy.deepcopy(eps), r_max=2.0, gamma=0.9, lam=0.5, split_seed=seed)
        held = [t.task_seed for t, test in zip(data.batch.trajectories, data.test_episode.tolist(), strict=True) if test]
        assert len(held) == 3 and sum(k < 2 for k in held) == 1
        assert data.mc[data.turn_slots(True)].var() > 0


def test_ridge_recovers_a_linear_value_and_its_alpha():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 5, generator=g)
    y = 2 * x[:, 0] - x[:, 3] + 3
    pred, alpha = vf.ridge_predict(x[:150], y[:150], torch.arange(150), x[150:])
    assert alpha == 0.01  # no noise: the smallest penalty wins the cross-validation
    assert pred.tolist() == pytest.approx(y[150:].tolist(), abs=0.01)


def _head_data(separation: float):
    """Episodes of one turn whose feature says the outcome: won -> +separation, lost -> -."""
    eps, feats = [], []
    for k in range(40):
        won = k % 2 == 0
        eps.append(Trajectory(k, k, f"t{k}", [_turn(1.0 if won else 0.0, terminated=True)]))
        feats.append([separation if won else -separation, 1.0])
    data = vf.FitData.build(eps, r_max=1.0, gamma=1.0, lam=1.0, test_fraction=0.25)
    return data, torch.tensor(feats)


def test_a_head_only_readout_learns_what_its_features_hold_and_not_at_rate_zero():
    data, pre = _head_data(1.0)
    cfg = SAPOConfig(value_squash="tanh", value_clip=None)
    settings = vf.TrainSettings(steps=200, refresh=1, checkpoints=(200,), target="mc")
    rows = torch.zeros(2, 2)
    points = vf.train_readout(data, vf.SapoHead(pre, pre, rows, cfg, lr=0.05), settings, None)
    # V = tanh(d) must reach 1 for wins and 0 for losses: d = w . h with h = (+-1, 1): w = (a, a),
    # tanh(2a) -> 1; the held-out EV against the 0/1 return climbs above 0.9 in 200 steps
    assert points[0].test_ev_mc == pytest.approx(0.0)
    assert points[-1].test_ev_mc > 0.9
    frozen = vf.train_readout(data, vf.SapoHead(pre, pre, rows, cfg, lr=0.0), settings, None)
    assert frozen[-1].test_ev_mc == pytest.approx(0.0) and frozen[-1].v_std == 0.0


def test_the_bench_scores_q_beside_v():
    data, pre = _head_data(1.0)
    cfg = SAPOConfig(value_squash="tanh", value_clip=None)
    settings = vf.TrainSettings(steps=200, refresh=1, checkpoints=(200,), target="mc")
    # Q alone is trained (c_V 0) on post-action features equal to the pre-action ones, so V reads
    # the same rows off the same features: both start flat (EV 0) and end scoring alike
    points = vf.train_readout(data, vf.SapoHead(pre, pre, torch.zeros(2, 2), cfg, lr=0.05), settings, None,
                              value_coef=0.0, q_coef=1.0)
    assert points[0].test_ev_q == pytest.approx(0.0)
    assert points[-1].test_ev_q > 0.9
    assert points[-1].test_ev_q == pytest.approx(points[-1].test_ev_mc)
    ppo = vf.train_readout(data, vf.PpoHead(pre, lr=0.05, weight_decay=0.0), settings, None)
    assert ppo[-1].test_ev_q != ppo[-1].test_ev_q  # nan: PPO's critic has no Q
    table = vf.markdown_table([vf.FitResult("sapo-head", {}, points), vf.FitResult("ppo-head", {}, ppo)], [200])
    assert table.splitlines()[0].endswith("| Q EV | s |") and "| n/a |" in table.splitlines()[3]


def test_replay_reproduces_a_played_episode_token_for_token(tiny_model, tokenizer, tmp_path):
    cfg = RolloutConfig(action_mode="constrained", history_window=1)
    policy = Policy(copy.deepcopy(tiny_model), tokenizer)
    factory = env_factory(EnvConfig(id="chain", kwargs={"delay": 2}), "train")
    played = make_engine(policy, HFBackend(policy.model, [2], 2, [], seed=0), cfg, factory).run(
        [Task(seed=s, group=s) for s in range(3)]).trajectories
    path = tmp_path / "iter_00001.jsonl"
    path.write_text("".join(json.dumps(t.to_json()) + "\n" for t in played))
    records = vf.read_records([path])
    backend = vf.ReplayBackend(tokenizer, cfg.max_new_tokens)
    replayed, skipped = vf.replay(make_engine(policy, backend, cfg, factory), backend, records)
    assert skipped == []
    for a, b in zip(played, replayed, strict=True):
        assert [t.prompt_ids for t in a.turns] == [t.prompt_ids for t in b.turns]
        assert [t.action_ids for t in a.turns] == [t.action_ids for t in b.turns]
        assert [t.reward for t in a.turns] == [t.reward for t in b.turns]
    # a record the env does not reproduce is left out with its reason, not trained on
    records[0]["turns"][0]["observation"] = "something else"
    kept, skipped = vf.replay(make_engine(policy, backend, cfg, factory), backend, records)
    assert len(kept) == 2 and skipped == [f"task_seed {records[0]['task_seed']}: turn 1 differs from the record"]
