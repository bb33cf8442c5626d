"""Demonstrations and SFT: the warm start that gives RL something to work with."""

import json

import pytest
import torch

from agentrl.backends.base import Generation
from agentrl.envs import make_env
from agentrl.errors import UserError
from agentrl.models.policy import Policy
from agentrl.rollout.action_format import ActionFormat
from agentrl.rollout.demos import read_demos, record_demos
from agentrl.rollout.engine import EnvPool, RolloutEngine, Task
from agentrl.training.compose import env_factory, prompt_builder
from agentrl.training.config import EnvConfig, RolloutConfig, build_config
from agentrl.training.sft import IGNORE, make_examples, run_sft, sft_loss

ENV = EnvConfig(id="keydoor", kwargs={"n_rooms": 4})


@pytest.fixture
def demo_file(tmp_path, tokenizer):
    make = env_factory(ENV, "train")
    builder = prompt_builder(tokenizer, RolloutConfig(history_window=2), make())
    path = tmp_path / "demos.jsonl"
    stats = record_demos(make, builder, episodes=6, output=path, env_name="keydoor", split="train",
                         noise=0.3, seed=1)
    assert stats["episodes"] == 6
    return path


def test_demonstrations_replayed_through_the_env_win(demo_file):
    records = list(read_demos(demo_file))
    assert any(not r["expert"] for r in records)  # noise really was injected
    by_episode: dict[int, list] = {}
    for r in records:
        by_episode.setdefault(r["task_seed"], []).append(r)
    assert len(by_episode) == 6
    for seed, turns in by_episode.items():
        env = make_env("keydoor", n_rooms=4, split="train")
        env.reset(seed=seed)
        for turn in turns:
            assert turn["reply"] == f"<action>{turn['action']}</action>"
            *_, terminated, truncated, info = env.step(turn["action"])
        assert terminated and info["won"] and turns[-1]["episode_won"]


class ScriptedBackend:
    """Writes the demonstrations' replies, in order, per env slot."""

    name = "scripted"

    def __init__(self, tokenizer, replies_per_slot):
        self.tokenizer = tokenizer
        self.replies = replies_per_slot

    def generate(self, prompts, params, cursors=None):
        out = []
        for i, _ in enumerate(prompts):
            ids = self.tokenizer(self.replies[i].pop(0), add_special_tokens=False)["input_ids"] + [2]
            out.append(Generation(ids, [0.0] * len(ids), True))
        return out

    def sync_weights(self):
        pass


def test_demo_prompts_are_byte_identical_to_the_engine_prompts(demo_file, tokenizer):
    records = [r for r in read_demos(demo_file) if r["task_seed"] == 2]
    make = env_factory(ENV, "train")
    cfg = RolloutConfig(history_window=2)
    builder = prompt_builder(tokenizer, cfg, make())
    backend = ScriptedBackend(tokenizer, [[r["reply"] for r in records]])
    engine = RolloutEngine(EnvPool(make), backend, builder, ActionFormat(), cfg)
    traj = engine.run([Task(seed=2, group=0)]).trajectories[0]
    assert len(traj.turns) == len(records)
    for turn, record in zip(traj.turns, records, strict=True):
        assert turn.prompt_text == record["prompt"]
        assert builder.render_messages(record["messages"]) == record["prompt"]
    assert traj.won


def test_sft_masks_the_prompt(demo_file, tokenizer, tiny_model):
    cfg = RolloutConfig(history_window=2)
    builder = prompt_builder(tokenizer, cfg, make_env("keydoor"))
    examples = make_examples(list(read_demos(demo_file))[:3], builder)
    policy = Policy(tiny_model, tokenizer)
    with torch.no_grad():
        base = float(sft_loss(policy, examples, tokens_total=10.0))
        ex = examples[0]
        assert ex.labels[:len(ex.prompt_ids)] == [IGNORE] * len(ex.prompt_ids)
        ex.labels[3] = 1234  # a prompt label: never read
        assert float(sft_loss(policy, examples, tokens_total=10.0)) == base
        ex.labels[-2] = 1234  # a reply label: part of the loss
        assert float(sft_loss(policy, examples, tokens_total=10.0)) != base


def test_sft_skips_noise_turns_unless_asked(demo_file, tokenizer):
    builder = prompt_builder(tokenizer, RolloutConfig(), make_env("keydoor"))
    records = list(read_demos(demo_file))
    expert_only = make_examples(records, builder)
    everything = make_examples(records, builder, include_noise=True)
    assert len(expert_only) == sum(r["expert"] for r in records) < len(everything) == len(records)


def test_sft_loss_falls_and_writes_a_checkpoint_ready_for_sapo(demo_file, tmp_path):
    cfg = build_config(env="keydoor", model="tiny", overrides=[
        "env.kwargs={n_rooms: 4}", "sft.epochs=6", "sft.lr=3e-3", "sft.batch_turns=8", "sft.eval_episodes=0"])
    out = tmp_path / "sft"
    result = run_sft(cfg, cfg.sft, [demo_file], out)
    first = sum(result.losses[:3]) / 3
    last = sum(result.losses[-3:]) / 3
    assert last < 0.5 * first
    meta = json.loads((out / "sft_metrics.json").read_text())
    assert meta["examples"] == result.examples
    assert (out / "agentrl_value_tokens.json").exists()
    # the checkpoint starts an RL run, which reuses its value tokens
    run = build_config(algo="sapo", env="keydoor", model=str(out), overrides=[
        "rollout.action_mode=constrained", "rollout.tasks_per_iteration=2", "train.iterations=1",
        f"train.run_dir={tmp_path / 'rl'}", "algorithm.kl_coef=0"])
    import agentrl

    history = agentrl.train(run).history
    assert len(history) == 1
    with pytest.raises(UserError, match="not empty"):
        run_sft(cfg, cfg.sft, [demo_file], out)


def test_bad_demo_file_is_a_user_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"reply": "x"}\n')
    with pytest.raises(UserError, match="lacks"):
        list(read_demos(bad))
    with pytest.raises(UserError, match="Cannot read"):
        list(read_demos(tmp_path / "missing.jsonl"))


def test_sft_command_logs_each_step_and_phase_times_when_not_on_a_terminal(demo_file, tmp_path):
    """A long CPU warm start written to a log file shows its progress line by line."""
    from typer.testing import CliRunner

    from agentrl.cli import app

    out = tmp_path / "sft"
    result = CliRunner().invoke(app, [
        "sft", "--env", "keydoor", "--model", "tiny", "--demos", str(demo_file), "-o", str(out),
        "--set", "env.kwargs={n_rooms: 4}", "--set", "sft.batch_turns=8", "--set", "rollout.backend=hf",
        "--epochs", "2", "--eval-episodes", "2", "--eval-before"])
    assert result.exit_code == 0, result.output
    turns = sum(1 for r in read_demos(demo_file) if r["expert"])
    steps = 2 * ((turns + 7) // 8)  # two epochs of ceil(turns / 8) optimizer steps
    for step in range(1, steps + 1):
        assert f"sft step {step}/{steps} loss" in result.output
    assert "held-out eval before SFT: success" in result.output
    assert "held-out eval after SFT: success" in result.output
    meta = json.loads((out / "sft_metrics.json").read_text())
    assert set(meta["phase_seconds"]) == {"eval_before", "train", "eval_after"}
    assert meta["steps"] == steps
