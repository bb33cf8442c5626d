"""``agentrl/WebShop-v0`` through the HTTP transport: contract, oracle, random agent, config."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import random
import warnings

import pytest

pytest.importorskip("Stemmer")
pytest.importorskip("flask")
pytest.importorskip("bm25s")

import gymnasium as gym  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

import agentrl_envs  # noqa: E402, F401
from agentrl.envs import check_text_env, is_admissible, r_max  # noqa: E402
from agentrl.errors import UserError  # noqa: E402
from agentrl_envs.webshop.env import (  # noqa: E402
    INVALID_ACTION,
    WebShopConfig,
    WebShopEnv,
    parse_action,
    to_charset,
)
from agentrl_envs.webshop.oracle import instruction_query  # noqa: E402

pytestmark = pytest.mark.webshop
SMALL = {"transport": "http", "num_products": 300}


@pytest.fixture()
def env():
    env = gym.make("agentrl/WebShop-v0", split="test", **SMALL)
    yield env
    env.close()


def run_episode(env, seed, policy):
    obs, info = env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(policy(env, info))
        total += reward
        steps += 1
        done = terminated or truncated
    return total, steps, info


def oracle(env, info):
    return env.unwrapped.expert_action()


def test_gymnasium_and_agentrl_contracts(env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either
        check_env(env.unwrapped)
    check_text_env(env, seeds=(0, 1, 2), max_steps=6)


def test_defaults():
    env = gym.make("agentrl/WebShop-v0", transport="http", num_products=100)
    base = env.unwrapped
    assert base.config.split == "train" and base.config.max_steps == 15
    assert r_max(env) == 10.0 and "search[" in base.metadata["system_prompt"]
    assert WebShopEnv.metadata["r_max"] == 10.0
    assert gym.make("agentrl/WebShop-v0", transport="http", num_products=100,
                    reward_scale=1.0).unwrapped.metadata["r_max"] == 1.0
    assert WebShopConfig().transport == "browser"  # the browser is the default transport
    env.close()


def test_reset_picks_goal_by_seed(env):
    base = env.unwrapped
    obs, info = env.reset(seed=3)
    assert obs == "WebShop [SEP] Search" and info["admissible_actions"] == ["search[...]"]
    goals = base._shop.splits["test"]
    assert info["task"] == goals[3].instruction_text and info["goal_index"] == 3
    assert info["task_type"] == goals[3].category and info["score"] == 0.0
    assert env.reset(seed=3 + len(goals))[1]["task"] == info["task"]  # wraps around
    assert env.reset(seed=4)[1]["task"] == goals[4].instruction_text
    assert env.reset(options={"goal_index": 5})[1]["task"] == goals[5].instruction_text


def test_admissible_actions_and_placeholder(env):
    obs, info = env.reset(seed=0)
    assert is_admissible("search[red running shoes]", info["admissible_actions"])
    obs, _, _, _, info = env.step("search[" + instruction_query(env.unwrapped.goal) + "]")
    actions = info["admissible_actions"]
    assert "search[...]" not in actions and actions[0] == "click[back to search]"
    assert sum(a.startswith("click[b0") for a in actions) == 10
    assert all(f"{a[6:-1]}" in obs.lower() for a in actions)  # every name is on the page


def test_invalid_actions_change_nothing(env):
    obs, info = env.reset(seed=1)
    for bad in ("click[buy now]", "search[]", "buy the thing", "click[search]"):
        new_obs, reward, terminated, truncated, new_info = env.step(bad)
        assert new_obs == f"{INVALID_ACTION} [SEP] {obs}" and reward == 0.0
        assert not terminated and not truncated and new_info["invalid_action"]
        assert new_info["page"] == "search"


def test_case_and_spacing_of_actions(env):
    env.reset(seed=2)
    obs, *_ = env.step("  Search[ Green   TEA ]")
    assert env.unwrapped.page.meta["query"] == "green tea"
    first = env.unwrapped.page.clickables[2].name.upper()  # the first product's ASIN
    obs, *_ = env.step(f"CLICK[{first}]")
    assert env.unwrapped.page.kind == "item"
    assert parse_action("click[< Prev]") == ("click", "< Prev")
    assert parse_action("look around") == ("look around", None)


def test_oracle_wins_most_goals(env):
    wins = 0
    for seed in range(30):
        total, steps, info = run_episode(env, seed, oracle)
        wins += info["won"]
        assert total == pytest.approx(10.0 * info["score"])
        assert steps <= 10
    assert wins >= 27  # 90 %; on the generated catalog it is in fact 100 %


def test_random_agent_rarely_wins(env):
    rng = random.Random(0)

    def random_agent(env, info):
        if info["admissible_actions"] == ["search[...]"]:
            return "search[" + instruction_query(env.unwrapped.goal) + "]"
        return rng.choice(info["admissible_actions"])

    results = [run_episode(env, seed, random_agent)[2] for seed in range(30)]
    assert sum(r["won"] for r in results) <= 3
    assert sum(r["score"] for r in results) / len(results) < 0.5


def test_oracle_recovers_from_detours(env):
    rng = random.Random(1)
    wins = 0
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        for _ in range(3):  # wander: a search, then two random clicks (never "buy now")
            if info["admissible_actions"] == ["search[...]"]:
                action = "search[something to sit on]"
            else:
                action = rng.choice([a for a in info["admissible_actions"]
                                     if a != "click[buy now]"])
            obs, reward, terminated, truncated, info = env.step(action)
        while not (terminated or truncated):
            obs, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        wins += info["won"]
    assert wins >= 18


def test_buying_without_options_scores_the_hand_fraction(env):
    obs, info = env.reset(seed=0)
    goal = env.unwrapped.goal
    env.step(f"search[{goal.name}]")
    env.step(f"click[{goal.asin.lower()}]")
    obs, reward, terminated, truncated, info = env.step("click[buy now]")
    n_attr, n_opt = len(goal.attributes), len(goal.goal_options)
    expected = (n_attr + 0 + 1) / (n_attr + n_opt + 1)  # attributes and price right, no option
    assert terminated and not truncated and not info["won"]
    assert info["score"] == pytest.approx(expected) and reward == pytest.approx(10 * expected)
    assert info["admissible_actions"] == [] and info["reward_info"]["option_matches"] == 0
    assert obs.endswith(f"[SEP] {round(expected, 4)}")
    # after the purchase nothing happens any more
    again = env.step("click[buy now]")
    assert again[1] == 0.0 and again[2] is True


def test_truncation_after_max_steps():
    env = gym.make("agentrl/WebShop-v0", max_steps=4, **SMALL)
    env.reset(seed=0)
    flags = [env.step("click[nothing]")[2:4] for _ in range(4)]
    assert flags == [(False, False)] * 3 + [(False, True)]
    env.close()


def test_config_errors():
    with pytest.raises(UserError, match="split"):
        gym.make("agentrl/WebShop-v0", split="dev", transport="http")
    with pytest.raises(UserError, match="transport"):
        gym.make("agentrl/WebShop-v0", transport="ftp")
    with pytest.raises(UserError, match="no option colour"):
        gym.make("agentrl/WebShop-v0", transport="http", colour="red")
    with pytest.raises(UserError, match="chromium"):
        gym.make("agentrl/WebShop-v0", transport="browser", chromedriver="/nonexistent/driver")


def test_official_data_dir_missing_is_a_user_error():
    env = gym.make("agentrl/WebShop-v0", transport="http", data_dir="/nonexistent/webshop")
    with pytest.raises(UserError, match="does not exist"):
        env.reset(seed=0)
    env.close()


def test_to_charset():
    assert to_charset("Café – 5 × 2") == "Café – 5 × 2"  # these are in the charset
    assert to_charset("Ångström ✓") == "Angstrom "


def _episode_in_subprocess(seed: int) -> float:
    env = gym.make("agentrl/WebShop-v0", split="test", **SMALL)
    env.reset(seed=seed)
    done, info = False, {}
    while not done:
        _, _, terminated, truncated, info = env.step(env.unwrapped.expert_action())
        done = terminated or truncated
    env.close()
    return info["score"]


def test_env_runs_in_a_spawned_worker():
    pickle.dumps(WebShopConfig(transport="http"))
    with mp.get_context("spawn").Pool(1) as pool:
        assert pool.map(_episode_in_subprocess, [0, 1]) == [1.0, 1.0]
