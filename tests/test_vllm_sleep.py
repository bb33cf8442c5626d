"""``model.vllm_sleep``: the trainer puts a sleeping-capable engine to sleep for the update and
wakes it before the weight sync, timing both; on CPU the setting is ignored (vLLM's sleep mode
needs a GPU). The engine itself is replaced by a recording stand-in: no GPU here."""

from __future__ import annotations

import torch

from agentrl.backends.hf import HFBackend


def test_sleep_is_ignored_on_cpu():
    from agentrl.backends.vllm import VLLMBackend, VLLMOptions

    backend = VLLMBackend.__new__(VLLMBackend)  # no engine: only the decision is under test
    backend.options = VLLMOptions(sleep=True)
    backend.policy_model = torch.nn.Linear(2, 2)
    assert backend.sleeps is False


def test_trainer_sleeps_the_engine_during_the_update(tmp_path, monkeypatch):
    import agentrl.training.trainer as trainer_module
    from agentrl.training.config import build_config

    events: list[str] = []

    class SleepyBackend(HFBackend):
        sleeps = True

        def generate(self, *args, **kwargs):
            events.append("generate")
            return super().generate(*args, **kwargs)

        def sleep(self) -> None:
            events.append("sleep")

        def wake_up(self) -> None:
            events.append("wake")

        def sync_weights(self) -> None:
            events.append("sync")
            super().sync_weights()

    real = trainer_module.make_backend

    def make_backend(policy, cfg, seed, model_cfg=None):
        backend = real(policy, cfg, seed, model_cfg)
        backend.__class__ = SleepyBackend
        return backend

    monkeypatch.setattr(trainer_module, "make_backend", make_backend)

    config = build_config(algo="sapo", env="keydoor", model="tiny", overrides=[
        f"train.run_dir={tmp_path / 'run'}", "train.iterations=1", "train.samples_per_iteration=0",
        "rollout.tasks_per_iteration=2", "rollout.max_turns=2", "rollout.action_mode=constrained",
        "rollout.backend=hf", "model.vllm_sleep=true"])
    record = trainer_module.train(config).history[-1]
    first_sleep = events.index("sleep")
    assert "generate" in events[:first_sleep]  # after the rollout...
    assert events[first_sleep:] == ["sleep", "wake", "sync"]  # ...asleep for the update only
    assert record["time/vllm_sleep"] >= 0 and record["time/vllm_wake"] >= 0
