"""``agentrl/ALFWorld-v0`` end to end: contract, expert, random agent, splits, official files."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("textworld")
pytest.importorskip("alfworld")

import agentrl_envs  # noqa: E402,F401  (registers the ids)
from agentrl.envs import check_text_env  # noqa: E402
from agentrl.errors import UserError  # noqa: E402
from agentrl_envs.alfworld.catalog import TASK_TYPES  # noqa: E402
from agentrl_envs.alfworld.env import ALFWorldEnv  # noqa: E402

pytestmark = pytest.mark.alfworld


@pytest.fixture(scope="module")
def small() -> ALFWorldEnv:
    return ALFWorldEnv(split="train", scene="small")


@pytest.fixture(scope="module")
def default() -> ALFWorldEnv:
    return ALFWorldEnv(split="train")


def play_expert(env: ALFWorldEnv, seed: int) -> tuple[list[float], dict, bool, bool, int]:
    """Follow expert_action from reset to the end; returns rewards, last info, flags, steps."""
    env.reset(seed=seed)
    rewards, terminated, truncated, steps = [], False, False, 0
    info: dict = {}
    while not (terminated or truncated):
        _, reward, terminated, truncated, info = env.step(env.expert_action())
        rewards.append(reward)
        steps += 1
    return rewards, info, terminated, truncated, steps


def test_gymnasium_check_env_and_text_contract():
    from gymnasium.utils.env_checker import check_env

    env = gym.make("agentrl/ALFWorld-v0", split="eval_seen", scene="small")
    check_env(env.unwrapped, skip_render_check=True)
    check_text_env(env, seeds=(0, 1), max_steps=5)
    assert env.unwrapped.metadata["r_max"] == 10.0
    assert "household" in env.unwrapped.metadata["system_prompt"]


@pytest.mark.parametrize("split", ["train", "eval_unseen"])
def test_expert_walkthrough_wins_every_task_type(split):
    env = ALFWorldEnv(split=split, scene="small")
    seen_types = set()
    for seed in range(12):  # two games of each of the six types
        env.reset(seed=seed)
        walkthrough = env.walkthrough
        rewards, info, terminated, truncated, steps = play_expert(env, seed)
        # the planner's walkthrough is followed exactly: one reward of 10, on the last step
        assert (terminated, truncated, info["won"], info["score"]) == (True, False, True, 1.0)
        assert steps == len(walkthrough)
        assert rewards == [0.0] * (steps - 1) + [10.0]
        seen_types.add(info["task_type"])
    assert seen_types == set(TASK_TYPES)


def test_expert_wins_default_size_scenes(default):
    for seed in range(6):
        _, info, terminated, _, steps = play_expert(default, seed)
        assert terminated and info["won"] and steps <= 12, (seed, steps)


def test_expert_replans_after_random_actions_and_never_loops(default):
    rng = random.Random(1)
    for seed in range(6):
        _, info = default.reset(seed=seed)
        deviations = 0
        for _ in range(8):  # a noisy start: random admissible actions a demonstration injects
            action = rng.choice(info["admissible_actions"])
            if action != default.expert_action():
                deviations += 1
            _, _, terminated, _, info = default.step(action)
            if terminated:
                break
        if info["won"]:
            continue
        plan = default.expert_plan()  # from the current state
        assert plan and plan[0] == default.expert_action()
        steps = 0
        terminated = truncated = False
        while not (terminated or truncated):
            _, reward, terminated, truncated, info = default.step(default.expert_action())
            steps += 1
        # once the agent follows the expert, the current plan is executed exactly: no loop
        assert terminated and info["won"] and reward == 10.0
        assert steps == len(plan)
        assert deviations >= 1


def test_random_agent_rarely_wins(default):
    # Measured: a random admissible agent wins ~2% of default-size games within 50 steps
    # (1 of 48). With 12 games the expected number of wins is 0.25; 3 or more has p < 0.3%.
    rng = random.Random(0)
    wins = 0
    for seed in range(100, 112):
        _, info = default.reset(seed=seed)
        for _ in range(50):
            _, _, terminated, _, info = default.step(rng.choice(info["admissible_actions"]))
            if terminated:
                break
        wins += info["won"]
    assert wins <= 2


def test_invalid_commands_leave_the_state_unchanged(small):
    obs0, info0 = small.reset(seed=4)
    walkthrough = small.walkthrough
    holding_nothing = [a for a in info0["admissible_actions"] if a.startswith("go to ")][0]
    invalid = ["xyzzy plugh", "take the moon from the sky",
               f"move apple 1 to {holding_nothing[len('go to '):]}"]
    for command in invalid:
        obs, reward, terminated, truncated, info = small.step(command)
        assert (obs, reward, terminated, truncated) == ("Nothing happens.", 0.0, False, False)
        assert info["admissible_actions"] == info0["admissible_actions"]
    assert info["steps"] == 3  # invalid commands still use up steps
    replans = small._expert.replans
    for command in walkthrough:  # the walkthrough from reset still solves the game exactly
        assert small.expert_action() == command
        _, reward, terminated, _, info = small.step(command)
    assert terminated and reward == 10.0 and small._expert.replans == replans


def test_same_seed_reproduces_game_and_observations():
    a = ALFWorldEnv(split="train", scene="small")
    b = ALFWorldEnv(split="train", scene="small")
    rng = random.Random(5)
    obs_a, info_a = a.reset(seed=3)
    actions = [rng.choice(info_a["admissible_actions"])]
    trace_a = [a.step(actions[0])[0]]
    for _ in range(5):
        actions.append(rng.choice(a.step("look")[4]["admissible_actions"]))
        trace_a.append(a.step(actions[-1])[0])
    assert a.reset(seed=3)[0] == obs_a  # the same env, back to the same start
    obs_b, info_b = b.reset(seed=3)
    assert (obs_b, info_b["admissible_actions"], info_b["task"]) == (
        obs_a, info_a["admissible_actions"], info_a["task"])
    trace_b = [b.step(actions[0])[0]]
    for action in actions[1:]:
        b.step("look")
        trace_b.append(b.step(action)[0])
    assert trace_b == trace_a
    assert b.reset(seed=4)[0] != obs_a


def test_info_fields_and_observation_text(small):
    obs, info = small.reset(seed=0)
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert "You are in the middle of a room. Looking quickly around you, you see " in obs
    assert obs.endswith(f"Your task is to: {info['task']}")
    assert info["task_type"] == "pick_and_place"
    assert info["won"] is False and info["score"] == 0.0
    assert info["admissible_actions"] == sorted(info["admissible_actions"])
    assert {"look", "inventory"} <= set(info["admissible_actions"])
    go = [a for a in info["admissible_actions"] if a.startswith("go to ")][0]
    obs, *_ = small.step(f"  {go.upper()}   ")  # case and spacing do not matter
    assert obs.startswith(f"You arrive at {go[len('go to '):]}.")


def test_hidden_commands_are_left_out_of_the_list_but_still_work():
    env = ALFWorldEnv(split="train", scene="small",
                      hide_commands=("examine", "look", "inventory", "help"))
    _, info = env.reset(seed=0)
    verbs = {a.split()[0] for a in info["admissible_actions"]}
    assert verbs == {"go"}  # at the start only moves remain
    obs, *_ = env.step("inventory")
    assert obs == "You are not carrying anything."


def test_truncation_and_reward_knob():
    env = gym.make("agentrl/ALFWorld-v0", split="train", scene="small", max_steps=3,
                   success_reward=1.0)
    assert env.unwrapped.metadata["r_max"] == 1.0
    assert ALFWorldEnv.metadata["r_max"] == 10.0  # the class default is untouched
    env.reset(seed=0)
    flags = [env.step("look")[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]
    # winning on the last allowed step terminates; it is not a truncation
    env = ALFWorldEnv(split="train", scene="small", success_reward=1.0)
    env.reset(seed=0)
    env = ALFWorldEnv(split="train", scene="small", success_reward=1.0,
                      max_steps=len(env.walkthrough))
    rewards, info, terminated, truncated, _ = play_expert(env, 0)
    assert (rewards[-1], terminated, truncated) == (1.0, True, False)


def test_num_games_makes_the_split_finite(small):
    env = ALFWorldEnv(split="train", scene="small", num_games=4)
    assert env.reset(seed=6)[0] == env.reset(seed=2)[0] == small.reset(seed=2)[0]


def test_engine_matches_textworld_pddlenv():
    """Our faster engine shows exactly what ALFWorld's stack on TextWorld's PddlEnv shows.

    One game of each task type; the walk mixes the expert's commands (so heating, cleaning,
    cooling, lamps, opening and carrying all happen) with random admissible ones (examine,
    inventory, look, wrong turns), then replays part of it after fast's rewinding reset.
    """
    import textworld
    from textworld.envs import PddlEnv

    from agentrl_envs.alfworld.engine import alfworld_wrappers, make_textworld_env

    demangler, infos_wrapper = alfworld_wrappers()
    request = textworld.EnvInfos(admissible_commands=True, won=True)
    env = ALFWorldEnv(split="eval_seen", scene="small")
    fast = make_textworld_env(request)
    reference = infos_wrapper(demangler(PddlEnv(request), shuffle=False))
    rng = random.Random(2)
    kinds = set()
    for seed in range(6):
        env.reset(seed=seed)
        game = env.game_data()
        fast.load(game)
        reference.load(game)
        for steps in (14, 4):  # the second round starts from fast's rewinding reset
            a, b = fast.reset(), reference.reset()
            for _ in range(steps):
                assert (a.feedback, a.admissible_commands, a.won) == (
                    b.feedback, b.admissible_commands, b.won)
                plan = fast.plan()
                if plan and rng.random() < 0.6:
                    command = plan[0]
                else:
                    command = rng.choice(a.admissible_commands)
                kinds.add(command.split()[0])
                a, _, _ = fast.step(command)
                b, _, _ = reference.step(command)
            assert (a.feedback, a.admissible_commands, a.won) == (
                b.feedback, b.admissible_commands, b.won)
    assert {"go", "take", "move", "open", "heat", "clean", "cool", "use", "examine"} <= kinds


def test_import_and_use_have_no_side_effects(tmp_path):
    """A fresh process: no files outside the temp dir, ALFWORLD_DATA and sys.argv untouched,
    and the same game as here for the same seed."""
    home, work, tmp = tmp_path / "home", tmp_path / "work", tmp_path / "tmp"
    for folder in (home, work, tmp):
        folder.mkdir()
    script = textwrap.dedent("""
        import json, os, sys
        argv = sys.argv
        import gymnasium as gym, agentrl_envs
        env = gym.make("agentrl/ALFWorld-v0", split="train", scene="small")
        obs, info = env.reset(seed=1)
        env.step(env.unwrapped.expert_action())
        print(json.dumps({"argv_same": sys.argv is argv and sys.argv == ["-c", "x"],
                          "alfworld_data": os.environ.get("ALFWORLD_DATA"),
                          "obs": obs, "task": info["task"]}))
    """)
    environ = {k: v for k, v in os.environ.items() if k != "ALFWORLD_DATA"}
    environ.update(HOME=str(home), TMPDIR=str(tmp), XDG_CACHE_HOME=str(home / ".cache"),
                   PYTHONHASHSEED="12345")  # set iteration order differs from this process
    done = subprocess.run([sys.executable, "-c", script, "x"], cwd=work, env=environ,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["argv_same"], report["alfworld_data"]) == (True, None)
    assert list(home.rglob("*")) == [] and list(work.rglob("*")) == []
    # the same seed gives the same game in another process
    obs, info = ALFWorldEnv(split="train", scene="small").reset(seed=1)
    assert (report["obs"], report["task"]) == (obs, info["task"])


def test_official_files_are_loaded_and_played(tmp_path, monkeypatch):
    from agentrl_envs.alfworld.export import export_games

    paths = export_games(tmp_path, "eval_seen", 6, scene="small")
    assert all(p.name == "game.tw-pddl" for p in paths)
    assert (paths[0].parent / "traj_data.json").exists()
    generated = ALFWorldEnv(split="eval_seen", scene="small")
    expected = {}
    for seed in range(6):
        obs, info = generated.reset(seed=seed)
        expected[obs] = info["task_type"]

    env = ALFWorldEnv(split="eval_seen", data_path=tmp_path / "json_2.1.1")
    assert env.source == "official"
    got = {}
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        got[obs] = info["task_type"]
        assert obs.endswith(f"Your task is to: {info['task']}")
        _, info, terminated, _, _ = play_expert(env, seed)
        assert terminated and info["won"]
    assert got == expected  # the same six games, read back from files

    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))  # auto: files found -> official
    assert ALFWorldEnv(split="eval_seen").source == "official"
    with pytest.raises(UserError, match="no 'train' folder"):  # never a silent mix
        ALFWorldEnv(split="train")
    assert ALFWorldEnv(split="eval_seen", source="generated").source == "generated"

    # a file marked unsolvable is not in the split (as in alfworld's index): seed 0 plays the next
    files = sorted((tmp_path / "json_2.1.1" / "valid_seen").rglob("game.tw-pddl"))
    data = json.loads(files[0].read_text())
    data["solvable"] = False
    files[0].write_text(json.dumps(data))
    from agentrl_envs.alfworld import official

    official.list_games.cache_clear()
    env = ALFWorldEnv(split="eval_seen", data_path=tmp_path)
    assert env.reset(seed=0)[1]["game"] == str(files[1])
    assert env.reset(seed=0)[0] != env.reset(seed=1)[0]


def test_user_errors(tmp_path):
    with pytest.raises(UserError):
        ALFWorldEnv(split="valid")
    with pytest.raises(UserError):
        ALFWorldEnv(source="official", data_path=Path(tmp_path))
    with pytest.raises(UserError):
        ALFWorldEnv(scene="tiny")
    with pytest.raises(UserError):
        ALFWorldEnv(max_steps=0)
