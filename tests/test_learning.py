"""All three algorithms learn the built-in KeyDoor env with a tiny random model.

A random tiny model never writes a well-formed action on its own, so decoding is constrained to
the admissible actions: it then starts as a near-random agent and RL has signal. Success is
measured on the same 32 held-out tasks (eval split, sampled at temperature 1) before and after
training. Fixed seeds; a few minutes of CPU each.
"""

import pytest

import agentrl

COMMON = [
    "rollout.action_mode=constrained", "rollout.history_window=0", "algorithm.lr=3e-3",
    "algorithm.epochs=2", "algorithm.minibatch_turns=32", "algorithm.kl_coef=0",
    "train.iterations=15", "train.samples_per_iteration=0", "train.save_every=1000",
    "train.eval_episodes=32", "train.eval_greedy=false",
]
SETTINGS = {
    "sapo": ["rollout.tasks_per_iteration=16"],
    "ppo": ["rollout.tasks_per_iteration=16", "algorithm.critic_lr=3e-3"],
    "grpo": ["rollout.tasks_per_iteration=2", "algorithm.group_size=8"],
}


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["sapo", "ppo", "grpo"])
def test_success_rate_rises_clearly_above_its_start(algo, tmp_path):
    cfg = agentrl.build_config(algo=algo, env="keydoor", model="tiny", overrides=[
        *COMMON, *SETTINGS[algo], f"train.run_dir={tmp_path / algo}"])
    trainer = agentrl.Trainer(cfg)
    try:
        before = trainer.run_eval(0)["eval/success_rate"]
        result = trainer.train()
    finally:
        trainer.close()
    after = result.final_eval["eval/success_rate"]
    curve = [round(r["rollout/success_rate"], 2) for r in result.history]
    assert all(r["rollout/invalid_action_rate"] == 0.0 for r in result.history)
    assert before < 0.5, (before, after, curve)  # a near-random agent on 32 fixed tasks
    assert after >= before + 0.25, (before, after, curve)
