"""The env declares which turns are invalid; the rollout engine applies it (agentrl.rollout.action_validity)."""

from __future__ import annotations

import pickle

import gymnasium as gym

from agentrl.backends.base import Generation
from agentrl.envs import text_space
from agentrl.rollout.action_format import ActionFormat
from agentrl.rollout.engine import EnvPool, RolloutConfig, RolloutEngine, Task
from agentrl.rollout.prompting import PromptBuilder
from agentrl_envs.alfworld.protocol import normalize_command

REPLIES = [
    "<think>go</think><action>Push The Red  Button</action>",  # admissible once normalised
    "<think>hm</think><action>dance</action>",  # well formed, not admissible
    "<action>wait</action>",  # admissible, but no think tags
    "<think>看看</think><action>wait</action>",  # a CJK ideograph
    "<think>no action tags</think> wait",  # malformed
]


class ButtonEnv(gym.Env):
    """Five steps whatever happens; lists two commands; the rule comes from ``metadata``."""

    def __init__(self, metadata: dict):
        self.metadata = {"r_max": 1.0, **metadata}
        self.observation_space = text_space()
        self.action_space = text_space()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return "a red button", self._info()

    def step(self, action):
        self.t += 1
        return "ok", 0.0, False, self.t >= len(REPLIES), self._info()

    def _info(self):
        return {"task": "press it", "admissible_actions": ["wait", "push the red button"],
                "won": False}


class ScriptedBackend:
    """Answers turn k with REPLIES[k] (as the tokenizer encodes it), whatever the prompt."""

    name = "scripted"

    def __init__(self, tokenizer, eot: int):
        self.tokenizer, self.eot, self.turn = tokenizer, eot, 0

    def generate(self, prompts, params, cursors=None):
        ids = self.tokenizer.encode(REPLIES[self.turn], add_special_tokens=False)
        self.turn += 1
        return [Generation(ids + [self.eot], [0.0] * (len(ids) + 1), True) for _ in prompts]

    def sync_weights(self):
        pass

    def reseed(self, seed):
        pass


def _valid_flags(tokenizer, metadata: dict) -> tuple[list[bool], list[float]]:
    fmt = ActionFormat(think=True)
    config = RolloutConfig(max_new_tokens=64, history_window=1, think=True)
    pool = EnvPool(lambda: ButtonEnv(metadata))
    pool.ensure(1)
    eot = tokenizer.eos_token_id
    engine = RolloutEngine(pool, ScriptedBackend(tokenizer, eot), PromptBuilder(tokenizer, fmt, None, 1, 2048),
                           fmt, config)
    trajectory = engine.run([Task(seed=0, group=0)]).trajectories[0]
    return [t.valid for t in trajectory.turns], [t.reward for t in trajectory.turns]


def test_the_rule_is_the_envs(tokenizer):
    for reply in REPLIES:  # the scripted replies survive the tokenizer round trip
        assert tokenizer.decode(tokenizer.encode(reply, add_special_tokens=False)) == reply
    default, rewards = _valid_flags(tokenizer, {})
    assert default == [False, False, True, True, False]  # exact string, admissible only
    assert rewards == [-0.1, -0.1, 0.0, 0.0, -0.1]
    normalised, _ = _valid_flags(tokenizer, {"normalize_action": normalize_command})
    assert normalised == [True, False, True, True, False]
    paper, rewards = _valid_flags(tokenizer, {"normalize_action": normalize_command,
                                              "invalid_action_rule": "malformed"})
    assert paper == [True, True, False, False, False]  # verl-agent: only malformed replies
    assert rewards == [0.0, 0.0, -0.1, -0.1, -0.1]


def test_the_normaliser_travels_to_env_workers():
    assert pickle.loads(pickle.dumps({"normalize_action": normalize_command}))[
        "normalize_action"] is normalize_command
