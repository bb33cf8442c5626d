"""The built-in KeyDoor env honours gymnasium's and agentrl's contracts."""

import random

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentrl_envs  # noqa: F401
from agentrl.envs import check_text_env, expert_action, make_env, resolve_env_id
from agentrl.errors import UserError


def test_gymnasium_env_checker_passes():
    env = gym.make("agentrl/KeyDoor-v0")
    check_env(env.unwrapped, skip_render_check=True)
    check_text_env(env)


@pytest.mark.parametrize("n_rooms", [2, 3, 4, 6])
def test_expert_solves_every_layout_in_its_optimal_length(n_rooms):
    for seed in range(40):
        env = make_env("keydoor", n_rooms=n_rooms, max_steps=30)
        obs, info = env.reset(seed=seed)
        optimal = env.unwrapped.optimal_length()
        assert 3 <= optimal <= 2 * n_rooms
        steps, terminated = 0, False
        while not terminated:
            obs, reward, terminated, truncated, info = env.step(expert_action(env))
            steps += 1
            assert not truncated
        assert info["won"] and reward == 1.0 and steps == optimal


def test_default_layouts_take_three_to_six_moves():
    lengths = set()
    for seed in range(100):
        env = make_env("keydoor")
        env.reset(seed=seed)
        lengths.add(env.unwrapped.optimal_length())
    assert min(lengths) == 3 and max(lengths) <= 6


def test_random_agent_rarely_wins_and_seeds_reproduce():
    wins = 0
    for seed in range(200):
        env = make_env("keydoor", n_rooms=4)
        obs, info = env.reset(seed=seed)
        rng = random.Random(seed)
        while True:
            obs, reward, terminated, truncated, info = env.step(rng.choice(info["admissible_actions"]))
            if terminated or truncated:
                break
        wins += info["won"]
    assert 0.05 < wins / 200 < 0.35
    a, b = make_env("keydoor"), make_env("keydoor")
    assert a.reset(seed=9) == b.reset(seed=9)
    assert make_env("keydoor", split="eval").reset(seed=9) != a.reset(seed=9)


def test_invalid_action_changes_nothing_and_step_limit_truncates():
    env = make_env("keydoor", max_steps=2)
    obs, info = env.reset(seed=1)
    obs2, reward, terminated, truncated, info2 = env.step("dance wildly")
    assert obs2 == "Nothing happens. " + obs and reward == 0.0 and not terminated and not truncated
    assert info2["admissible_actions"] == info["admissible_actions"]
    *_, terminated, truncated, _ = env.step("look")
    assert truncated and not terminated


def test_unknown_env_is_a_user_error():
    with pytest.raises(UserError, match="Unknown env 'nowhere'"):
        resolve_env_id("nowhere")
