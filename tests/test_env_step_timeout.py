"""rollout.env_step_timeout_s: a step that hangs ends its episode as truncated, the run goes on."""

from __future__ import annotations

import logging
import os
import signal
import time

import gymnasium as gym
import pytest

from agentrl.envs import text_space
from agentrl.envs.step_timeout import DeadlineRunner, EnvStepTimeout
from agentrl.envs.workers import EnvWorkerPool
from agentrl.rollout.engine import EnvPool, RolloutConfig


class SleepyEnv(gym.Env):
    """A text env whose step sleeps for a long time when told ``hang`` (and ``freeze`` stops
    its whole process, which no thread deadline can end)."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = text_space()
        self.action_space = text_space()
        self.closed = False
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return f"start {seed}", {"task": "t", "admissible_actions": ["go", "hang"], "won": False}

    def step(self, action):
        if action == "hang":
            time.sleep(3600)
        if action == "freeze":
            os.kill(os.getpid(), signal.SIGSTOP)
        self.steps += 1
        info = {"task": "t", "admissible_actions": ["go", "hang"], "won": False}
        return f"step {self.steps}", 0.0, False, False, info

    def close(self):
        self.closed = True


def test_default_is_generous_and_zero_turns_it_off():
    assert RolloutConfig().env_step_timeout_s == 120.0
    assert DeadlineRunner().call(lambda: 7, 0) == 7  # 0: called directly, no thread


def test_deadline_runner_reraises_and_times_out():
    runner = DeadlineRunner()
    with pytest.raises(ZeroDivisionError):
        runner.call(lambda: 1 / 0, 5)
    start = time.monotonic()
    with pytest.raises(EnvStepTimeout):
        runner.call(lambda: time.sleep(30), 0.2)
    assert time.monotonic() - start < 2
    assert runner.call(lambda: "next", 5) == "next"  # a fresh thread serves the next call


def test_in_process_pool_truncates_a_hung_step_and_replaces_the_env(caplog):
    pool = EnvPool(SleepyEnv, step_timeout_s=0.3)
    pool.ensure(2)
    pool.reset([0, 1], [5, 6])
    hung = pool.envs[1]
    start = time.monotonic()
    with caplog.at_level(logging.WARNING):
        (obs0, _, term0, trunc0, _), (obs1, rew1, term1, trunc1, info1) = pool.step(
            [0, 1], ["go", "hang"])
    assert time.monotonic() - start < 3
    assert (obs0, term0, trunc0) == ("step 1", False, False)
    assert obs1 == "start 6" and rew1 == 0.0 and trunc1 and not term1  # last observation kept
    assert "did not return within 0.3 s" in info1["env_error"]
    assert info1["task"] == "t" and info1["won"] is False
    lines = [r.getMessage() for r in caplog.records if "env slot 1" in r.getMessage()]
    assert len(lines) == 1 and "truncated" in lines[0]
    assert pool.envs[1] is not hung  # replaced; the old one is closed in the background
    deadline = time.monotonic() + 5
    while not hung.closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert hung.closed
    assert pool.reset([1], [7])[0][0] == "start 7"  # the new env plays the next episode
    assert pool.step([1], ["go"])[0][0] == "step 1"
    pool.close()


def test_worker_pool_truncates_a_hung_step_in_the_worker():
    pool = EnvWorkerPool(SleepyEnv, workers=1, step_timeout_s=0.5)
    try:
        pool.ensure(2)
        pool.reset([0, 1], [1, 2])
        start = time.monotonic()
        out = pool.step([0, 1], ["hang", "go"])
        assert time.monotonic() - start < 5
        assert out[0][0] == "start 1" and out[0][3] and "env_error" in out[0][4]
        assert out[1][0] == "step 1" and not out[1][3]  # the other slot is unaffected
        assert pool.reset([0], [3])[0][0] == "start 3"
        assert pool.step([0], ["go"])[0][0] == "step 1"
    finally:
        pool.close()


def test_a_stuck_worker_is_killed_and_replaced():
    pool = EnvWorkerPool(SleepyEnv, workers=2, step_timeout_s=0.5, watchdog_grace_s=1.0)
    try:
        pool.ensure(2)
        pool.reset([0, 1], [1, 2])
        old = pool._processes[1].pid
        start = time.monotonic()
        out = pool.step([0, 1], ["go", "freeze"])  # slot 1 stops its whole worker process
        assert time.monotonic() - start < 15
        assert out[0][0] == "step 1" and not out[0][3]
        assert out[1][0] == "start 2" and out[1][3] and "env_error" in out[1][4]
        assert pool._processes[1].pid != old and pool.alive() == [True, True]
        assert pool.reset([1], [9])[0][0] == "start 9"
        assert pool.step([0, 1], ["go", "go"])[1][0] == "step 1"
    finally:
        pool.close()


class StuckOnSeedEnv(SleepyEnv):
    """Hangs on its first step when reset with seed 1; other seeds win at once."""

    def reset(self, *, seed=None, options=None):
        self.seed_ = seed
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self.seed_ == 1:
            time.sleep(3600)
        info = {"task": "t", "admissible_actions": ["go", "hang"], "won": True}
        return "done", 1.0, True, False, info


def test_the_rollout_engine_truncates_the_hung_episode_and_goes_on(tiny_model, tokenizer):
    from agentrl.backends.hf import HFBackend
    from agentrl.rollout.action_format import ActionFormat
    from agentrl.rollout.constrained import ConstraintBuilder
    from agentrl.rollout.engine import RolloutEngine, Task
    from agentrl.rollout.prompting import PromptBuilder

    config = RolloutConfig(max_new_tokens=8, history_window=1, action_mode="constrained",
                           env_step_timeout_s=0.5)
    fmt = ActionFormat()
    backend = HFBackend(tiny_model, stop_ids=[2], pad_id=2, seed=0)
    builder = PromptBuilder(tokenizer, fmt, "Test system.", 1, config.max_prompt_tokens)
    pool = EnvPool(StuckOnSeedEnv, step_timeout_s=config.env_step_timeout_s)
    engine = RolloutEngine(pool, backend, builder, fmt, config,
                           ConstraintBuilder(tokenizer, fmt.render, 2))
    start = time.monotonic()
    result = engine.run([Task(seed=s, group=s) for s in (0, 1, 2)])
    assert time.monotonic() - start < 60
    stuck, *others = [result.trajectories[i] for i in (1, 0, 2)]
    assert len(stuck.turns) == 1 and stuck.turns[0].truncated and not stuck.won
    assert stuck.turns[0].env_reward == 0.0 and stuck.bootstrap_prompt_ids is not None
    assert all(t.won and t.turns[0].terminated for t in others)
    pool.close()
