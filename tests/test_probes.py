"""The behaviour suite's probe envs: the text-env contract, the expert's return equal to the
declared optimum, and the declared random return equal to a uniform-random policy's, measured."""

import random

import pytest

from agentrl.envs import check_text_env, make_env
from agentrl_envs.probes.corridor import reach_probability

CASES = [("chain", {"delay": 3}), ("chain", {"delay": 0, "reward_noise": 0.2}), ("locks", {"n_locks": 4}),
         ("memory", {"n_codes": 3, "gap": 2}), ("corridor", {"length": 5, "max_steps": 8})]


def _play(env, seed, choose):
    obs, info = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(choose(env, info))
        total += reward
        done = terminated or truncated
    return total


@pytest.mark.parametrize("name, kwargs", CASES)
def test_probe_contract_expert_and_random_returns(name, kwargs):
    env = make_env(name, **kwargs)
    check_text_env(env)
    base = env.unwrapped
    expert = [_play(env, s, lambda e, i: e.unwrapped.expert_action()) for s in range(200)]
    assert sum(expert) / len(expert) == pytest.approx(base.optimal_return(), abs=0.07)
    rng = random.Random(0)
    plays = [_play(env, s, lambda e, i: rng.choice(i["admissible_actions"])) for s in range(3000)]
    # 3000 episodes: the standard error of a mean of 0/1 returns is at most 0.0092; 4 of them
    assert sum(plays) / len(plays) == pytest.approx(base.random_return(), abs=0.037)


def test_corridor_random_return_by_hand():
    # length 2 in 2 moves: only right-right wins: 1/4. In 3 moves: RR (first two) or L R R from
    # the wall (left at 0 stays at 0): 1/4 + 1/8 = 3/8. Length 5 in 5 moves: (1/2)^5.
    assert reach_probability(2, 2) == 0.25
    assert reach_probability(2, 3) == 0.375
    assert reach_probability(5, 5) == 1 / 32


def test_probe_tasks_differ_between_splits_and_repeat_per_seed():
    train, evaluation = make_env("locks"), make_env("locks", split="eval")
    firsts = {train.reset(seed=s)[0] for s in range(20)}
    assert len(firsts) == 2  # the first lock shows a sun or a moon
    assert [train.reset(seed=s)[0] for s in range(8)] == [train.reset(seed=s)[0] for s in range(8)]
    symbols = lambda env, s: (env.reset(seed=s), list(env.unwrapped.symbols))[1]  # noqa: E731
    assert [symbols(train, s) for s in range(10)] != [symbols(evaluation, s) for s in range(10)]


def test_wrong_or_malformed_actions_change_nothing():
    env = make_env("chain", delay=8)  # 9 steps: the four below do not reach the limit
    obs, _ = env.reset(seed=3)
    for bad in ("xyzzy", None, 42, "x" * 1000):
        again, reward, terminated, truncated, info = env.step(bad)
        assert reward == 0.0 and not terminated and info["admissible_actions"] == ["press left", "press right"]
