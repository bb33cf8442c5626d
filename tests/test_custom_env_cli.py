"""Custom envs from the command line, as a user outside the package uses them: a module of their
own named as ``module:EnvId`` or with ``--import``, env workers that import it again, the
``agentrl envs`` listing, ``python -m agentrl``; and ``agentrl eval`` of a run's checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from agentrl.cli import app

ENV_MODULE = '''
"""A tiny text env of the user's own (not agentrl's): say the word the task names."""
import string

import gymnasium as gym
from gymnasium import spaces

CHARSET = string.printable


class WordEnv(gym.Env):
    metadata = {"r_max": 1.0, "system_prompt": "Say the word you are asked for."}
    WORDS = ["alpha", "beta", "gamma"]

    def __init__(self, split=None):
        self.observation_space = spaces.Text(max_length=1000, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(max_length=1000, min_length=0, charset=CHARSET)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.answer = self.WORDS[(seed or 0) % 3]
        self.steps = 0
        return f"Say {self.answer}.", self._info(False)

    def step(self, action):
        self.steps += 1
        won = action == f"say {self.answer}"
        return ("Yes." if won else "No."), float(won), won, (not won and self.steps >= 2), self._info(won)

    def _info(self, won):
        return {"task": f"say {self.answer}", "won": won,
                "admissible_actions": [f"say {w}" for w in self.WORDS]}


gym.register("{env_id}", entry_point=WordEnv)
'''


def _write_module(folder: Path, name: str, env_id: str) -> None:
    (folder / f"{name}.py").write_text(ENV_MODULE.replace("{env_id}", env_id))


def test_module_env_trains_in_env_workers_through_python_m(tmp_path: Path) -> None:
    _write_module(tmp_path, "userwords", "UserWords-v0")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "AGENTRL_AUTO_BACKEND": "hf"}
    cmd = [sys.executable, "-m", "agentrl", "run", "grpo", "--env", "userwords:UserWords-v0", "--model", "tiny",
           "--iterations", "1", "--run-dir", str(tmp_path / "run"),
           "--set", "rollout.env_workers=2", "--set", "rollout.tasks_per_iteration=2",
           "--set", "algorithm.group_size=2", "--set", "rollout.action_mode=constrained",
           "--set", "algorithm.kl_coef=0"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [1]
    assert records[0]["rollout/episodes"] == 4


def test_envs_lists_an_imported_module_env(tmp_path: Path, monkeypatch) -> None:
    _write_module(tmp_path, "listedwords", "mylab/ListedWords-v0")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(app, ["--import", "listedwords", "envs"], prog_name="agentrl")
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "mylab/ListedWords-v0" in line)
    assert "module listedwords" in row
    assert "agentrl/KeyDoor-v0" in result.output


def test_eval_of_a_checkpoint_takes_the_runs_rollout_settings_and_picks_hf(tmp_path: Path, monkeypatch) -> None:
    runner = CliRunner()
    run_dir = tmp_path / "run"
    trained = runner.invoke(app, ["run", "sapo", "--env", "keydoor", "--model", "tiny", "--backend", "hf",
                                  "--iterations", "1", "--run-dir", str(run_dir),
                                  "--set", "rollout.action_mode=constrained", "--set", "rollout.tasks_per_iteration=2",
                                  "--set", "rollout.max_turns=3", "--set", "algorithm.kl_coef=0"])
    assert trained.exit_code == 0, trained.output
    checkpoint = run_dir / "checkpoints" / (run_dir / "checkpoints" / "latest").read_text().strip()
    assert (checkpoint / "config.json").exists()
    # backend auto, unpinned: the tiny model's head size (16) rules vLLM's CPU attention out
    monkeypatch.delenv("AGENTRL_AUTO_BACKEND", raising=False)
    out = tmp_path / "episodes.jsonl"
    result = runner.invoke(app, ["eval", "--model", str(checkpoint), "--episodes", "2", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"using the rollout settings of run {run_dir} (action mode constrained)" in " ".join(result.output.split())
    episodes = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(episodes) == 2
    assert all(len(e["turns"]) <= 3 for e in episodes)  # the run's max_turns
    # a setting given on the command line still wins over the run's
    again = runner.invoke(app, ["eval", "--model", str(checkpoint), "--episodes", "1",
                                "--set", "rollout.action_mode=free"])
    assert again.exit_code == 0, again.output
    assert "(action mode free)" in " ".join(again.output.split())


def test_backend_choice_respects_what_vllm_can_run() -> None:
    from types import SimpleNamespace

    import pytest

    from agentrl.backends.fit import vllm_unfit_reason
    from agentrl.errors import UserError
    from agentrl.training.compose import choose_backend

    tiny = SimpleNamespace(hidden_size=64, num_attention_heads=4)
    smollm = SimpleNamespace(hidden_size=576, num_attention_heads=9)
    assert vllm_unfit_reason(smollm, "cpu") is None
    assert "head size is 16" in vllm_unfit_reason(tiny, "cpu")
    assert vllm_unfit_reason(tiny, "cuda") is None
    assert choose_backend("auto", "some/folder", vllm_unfit_reason(tiny, "cpu")) == "hf"
    with pytest.raises(UserError, match="cannot run model"):
        choose_backend("vllm", "some/folder", vllm_unfit_reason(tiny, "cpu"))


def test_an_env_factory_carries_only_the_modules_its_env_needs(tmp_path: Path, monkeypatch) -> None:
    """Env workers import the factory's modules in a fresh process: a module another run imported
    earlier in this process (its folder no longer on the path) must not travel with KeyDoor's."""
    from agentrl.training.compose import env_factory
    from agentrl.training.config import EnvConfig

    _write_module(tmp_path, "otherwords", "mylab/OtherWords-v0")
    with monkeypatch.context() as patch:
        patch.syspath_prepend(str(tmp_path))
        mine = env_factory(EnvConfig(id="otherwords:mylab/OtherWords-v0"), "train")
        assert mine.modules == ("otherwords",) and mine().reset(seed=1)[0] == "Say beta."
    assert env_factory(EnvConfig(id="keydoor"), "train").modules == ()
    listed = env_factory(EnvConfig(id="keydoor", imports=["otherwords"]), "train")
    assert listed.modules == ("otherwords",)  # what the config names explicitly still travels
