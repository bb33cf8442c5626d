"""The rollout engine: batching, bookkeeping, truncation, invalid actions, exact records."""

import gymnasium as gym
import torch

from agentrl.backends.hf import HFBackend
from agentrl.envs import text_space
from agentrl.rollout.action_format import ActionFormat
from agentrl.rollout.constrained import ConstraintBuilder
from agentrl.rollout.engine import EnvPool, RolloutConfig, RolloutEngine, Task
from agentrl.rollout.prompting import PromptBuilder

EOT = 2


class CountdownEnv(gym.Env):
    """Ends (terminated, reward 1) after ``seed % 3 + 1`` steps whatever the agent does; with
    ``endless`` it never ends. Records every action it receives."""

    metadata = {"r_max": 1.0}

    def __init__(self, endless: bool = False):
        self.observation_space = text_space()
        self.action_space = text_space()
        self.endless = endless
        self.received: list[str] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.left = (seed or 0) % 3 + 1
        self.t = 0
        return f"obs 0 of task {seed}", self._info()

    def step(self, action):
        self.received.append(action)
        self.t += 1
        self.left -= 1
        done = self.left <= 0 and not self.endless
        return f"obs {self.t}", (1.0 if done else 0.0), done, False, self._info(won=done)

    def _info(self, won=False):
        return {"task": "count down", "admissible_actions": ["wait", "push the red button"], "won": won}


class CountingBackend(HFBackend):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batch_sizes = []

    def generate(self, prompts, params, cursors=None):
        self.batch_sizes.append(len(prompts))
        return super().generate(prompts, params, cursors)


def _engine(model, tokenizer, envs, **cfg):
    config = RolloutConfig(**{"max_new_tokens": 8, "history_window": 1, **cfg})
    fmt = ActionFormat()
    backend = CountingBackend(model, stop_ids=[EOT], pad_id=EOT, seed=0)
    constraints = ConstraintBuilder(tokenizer, fmt.render, EOT) if config.action_mode == "constrained" else None
    pool = EnvPool(lambda: envs.pop(0))
    builder = PromptBuilder(tokenizer, fmt, "Test system.", config.history_window, config.max_prompt_tokens)
    return RolloutEngine(pool, backend, builder, fmt, config, constraints), backend


def test_envs_of_different_lengths_leave_the_batch_and_records_are_exact(tiny_model, tokenizer):
    envs = [CountdownEnv() for _ in range(4)]
    engine, backend = _engine(tiny_model, tokenizer, list(envs), action_mode="constrained")
    result = engine.run([Task(seed=s, group=s) for s in (0, 1, 2, 3)])
    assert [len(t.turns) for t in result.trajectories] == [1, 2, 3, 1]
    assert backend.batch_sizes == [4, 2, 1]  # finished envs are not generated for
    assert result.turns == 7 and result.env_steps == 7
    for traj in result.trajectories:
        assert traj.terminated and traj.won and traj.bootstrap_prompt_ids is None
        for turn in traj.turns:
            assert tokenizer.decode(turn.prompt_ids) == turn.prompt_text
            assert tokenizer.decode(turn.action_ids) == turn.reply_text + "<|im_end|>"
            assert turn.valid and turn.action in ("wait", "push the red button")
            with torch.no_grad():
                logits = tiny_model(torch.tensor([turn.prompt_ids + turn.action_ids])).logits[0].float()
            p = len(turn.prompt_ids)
            for j, tok in enumerate(turn.action_ids):
                row = logits[p - 1 + j]
                allowed = torch.tensor(turn.allowed[j].ids)
                logp = row[tok] - torch.logsumexp(row[allowed], 0)
                assert abs(float(logp) - turn.rollout_logprobs[j]) < 1e-4  # fp32, cache vs fresh pass
    assert [e.received for e in envs][3] and all(len(e.received) == n for e, n in zip(envs, [1, 2, 3, 1], strict=True))


def test_max_turns_truncates_and_keeps_a_bootstrap_prompt(tiny_model, tokenizer):
    env = CountdownEnv(endless=True)
    engine, _ = _engine(tiny_model, tokenizer, [env], action_mode="constrained", max_turns=3)
    traj = engine.run([Task(seed=5, group=0)]).trajectories[0]
    assert len(traj.turns) == 3
    assert traj.truncated and not traj.terminated
    assert [t.truncated for t in traj.turns] == [False, False, True]
    boot = tokenizer.decode(traj.bootstrap_prompt_ids)
    assert "current observation: obs 3" in boot and "[step 4]" in boot


def test_malformed_replies_are_penalised_and_the_episode_goes_on(tiny_model, tokenizer):
    env = CountdownEnv(endless=True)
    engine, _ = _engine(tiny_model, tokenizer, [env], action_mode="free", max_turns=2,
                        invalid_action_penalty=0.25)
    traj = engine.run([Task(seed=0, group=0)]).trajectories[0]
    # a random tiny model does not write <action>...</action>: the env receives the empty action
    assert env.received == ["", ""]
    assert [t.valid for t in traj.turns] == [False, False]
    assert [t.reward for t in traj.turns] == [-0.25, -0.25]
    assert traj.episode_return == -0.5


def test_history_window_shows_only_recent_steps(tiny_model, tokenizer):
    env = CountdownEnv(endless=True)
    engine, _ = _engine(tiny_model, tokenizer, [env], action_mode="constrained", max_turns=3)
    traj = engine.run([Task(seed=0, group=0)]).trajectories[0]
    third = traj.turns[2].prompt_text
    assert "[step 2] observation: obs 1" in third and "obs 0 of task" not in third
    assert "[step 3] current observation: obs 2" in third
    assert "Test system." in third and "Admissible actions:\nwait\npush the red button" in third
