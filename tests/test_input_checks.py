"""Input checks that do not fit the one-row table of tests/user_error_cases.py: the ranges table
covers every number, YAML bounds, model-file checks that must not refuse good files, and an env
that raises during training (``rollout.env_errors``: stop, resumable; or truncate)."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrl.algorithms import algorithm_names, get_algorithm
from agentrl.cli import app
from agentrl.errors import UserError
from agentrl.models.files import check_model_folder
from agentrl.rollout.engine import RolloutConfig
from agentrl.rundir.yaml_input import parse_yaml
from agentrl.training.config import (
    RANGES,
    EnvConfig,
    ModelConfig,
    SFTConfig,
    TrainConfig,
    build_config,
)
from agentrl.training.trainer import task_seeds


@pytest.fixture(autouse=True)
def _forget_user_envs(tmp_path: Path):
    """The flaky envs these tests register leave gymnasium's registry as it was (`agentrl envs`
    in a later test lists every registered text env)."""
    from user_error_cases import forgetting_user_envs

    with forgetting_user_envs(tmp_path):
        yield


# --- config numbers ------------------------------------------------------------------------------


def _numeric_keys() -> set[str]:
    sections = [("env", EnvConfig), ("model", ModelConfig), ("rollout", RolloutConfig), ("train", TrainConfig),
                ("sft", SFTConfig), *(("algorithm", get_algorithm(n).config_class) for n in algorithm_names())]
    keys = set()
    for name, cls in sections:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            args = typing.get_args(hints[f.name]) or (hints[f.name],)
            if int in args or float in args:
                keys.add(f"{name}.{f.name}")
    return keys


def test_every_number_in_the_config_has_a_stated_range() -> None:
    assert _numeric_keys() - set(RANGES) == set()


def test_the_defaults_and_shipped_configs_are_within_their_ranges() -> None:
    build_config(algo="sapo", model="tiny")
    for path in sorted(Path(__file__).resolve().parents[1].glob("benchmarks/configs/*.yaml")):
        build_config(model="tiny", config_path=path)


@pytest.mark.parametrize("setting, rule", [
    ("algorithm.lr=.nan", "must be a finite number in \\(0, 10]"),
    ("algorithm.max_grad_norm=.inf", "must be a finite number greater than 0"),
    ("train.seed=9223372036854775808", "must be in [0, 9223372036854775807]"),
    ("sft.seed=-5", "must be in [0, 9223372036854775807]"),
    ("rollout.max_new_tokens=10000000", "must be at most 1048576"),
])
def test_out_of_range_numbers_are_one_sentence(setting: str, rule: str) -> None:
    with pytest.raises(UserError, match=rule.replace("[", r"\[").replace("]", r"\]")):
        build_config(algo="sapo", model="tiny", overrides=[setting])


def test_the_largest_seed_is_accepted() -> None:
    assert build_config(algo="sapo", model="tiny", overrides=["train.seed=9223372036854775807"]).train.seed == 2**63 - 1


# --- YAML ----------------------------------------------------------------------------------------


def test_yaml_refuses_a_nested_duplicate_key_and_names_both_lines() -> None:
    with pytest.raises(UserError, match=r"sets 'lr' twice \(lines 2 and 3\)"):
        parse_yaml("algorithm:\n  lr: 1\n  lr: 2\n", "Config file 'c.yaml'")


def test_yaml_refuses_a_recursive_alias() -> None:
    with pytest.raises(UserError, match="refers to itself"):
        parse_yaml("a: &x [1, *x]\n", "Config file 'c.yaml'")


def test_yaml_keeps_merge_keys_and_small_aliases() -> None:
    text = "base: &b {lr: 1}\nalgorithm:\n  <<: *b\n  epochs: 2\nlist: [*b, *b]\n"
    assert parse_yaml(text, "x")["algorithm"] == {"lr": 1, "epochs": 2}


def test_an_alias_bomb_in_a_set_value_is_refused_in_one_short_sentence() -> None:
    bomb = "{a: &a [x,x,x,x,x,x,x,x,x,x], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], " + ", ".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]" for p, c in zip("bcdef", "cdefg", strict=True)) + "}"
    with pytest.raises(UserError) as raised:
        build_config(algo="sapo", model="tiny", overrides=[f"env.kwargs={bomb}"])
    assert "expands to more than" in str(raised.value) and len(str(raised.value)) < 300


def test_a_long_value_is_cut_in_the_sentence() -> None:
    with pytest.raises(UserError) as raised:
        build_config(algo="sapo", model="tiny", overrides=["rollout.action_tag=" + "<" * 100_000])
    assert len(str(raised.value)) < 400


# --- model files ---------------------------------------------------------------------------------


def test_a_saved_model_folder_passes_its_checks(tiny_model, tokenizer, tmp_path: Path) -> None:
    tiny_model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    check_model_folder(tmp_path)


def test_a_missing_weight_shard_is_named(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}}))
    with pytest.raises(UserError, match="lacks the weight shard 'model-00001-of-00002.safetensors'"):
        check_model_folder(tmp_path)


# --- an env that raises while a run trains -------------------------------------------------------

FLAKY_ENV = """import gymnasium as gym
import agentrl

BOOM_SEEDS = set()


class Flaky(gym.Env):
    \"\"\"Fine, except that step raises on the task seeds named in boom_seeds.\"\"\"

    metadata = {{"r_max": 1.0}}

    def __init__(self, split="train", boom_seeds=()):
        self.observation_space = agentrl.text_space()
        self.action_space = agentrl.text_space()
        self.boom_seeds = set(boom_seeds)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed_, self.turn = seed, 0
        return "a room", self._info()

    def step(self, action):
        self.turn += 1
        if self.seed_ in self.boom_seeds:
            raise RuntimeError("licence server went away")
        done = self.turn >= 2
        return "a room", float(done), done, False, self._info()

    def _info(self):
        return {{"task": "wait", "admissible_actions": ["wait", "go"], "won": False}}


gym.register("{env_id}", entry_point=Flaky)
"""


def _flaky_run(tmp_path: Path, monkeypatch, env_id: str, *extra: str) -> tuple[list[str], Path]:
    """argv of a 2-iteration run whose env raises on iteration 2's first task (seed 0)."""
    module = env_id.split("/")[1].replace("-", "_").lower()
    (tmp_path / f"{module}.py").write_text(FLAKY_ENV.format(env_id=env_id))
    monkeypatch.syspath_prepend(str(tmp_path))
    boom = task_seeds(0, 2, 2)[0]
    run_dir = tmp_path / "run"
    argv = ["run", "sapo", "--env", f"{module}:{env_id}", "--model", "tiny", "--backend", "hf", "--iterations", "2",
            "--run-dir", str(run_dir), "--set", "rollout.tasks_per_iteration=2", "--set", "train.save_every=1",
            "--set", "rollout.max_new_tokens=4", "--set", "rollout.max_turns=3", "--set", "train.samples_per_iteration=0",
            "--set", f"env.kwargs={{boom_seeds: [{boom}]}}", *extra]
    return argv, run_dir


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def test_an_env_that_raises_stops_the_run_in_one_sentence_and_it_resumes(tmp_path: Path, monkeypatch) -> None:
    argv, run_dir = _flaky_run(tmp_path, monkeypatch, "flaky/StopsRun-v0")
    result = CliRunner().invoke(app, argv, prog_name="agentrl")
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.stdout + result.stderr
    boom = task_seeds(0, 2, 2)[0]
    assert lines[0].startswith("error: Env 'flaky/StopsRun-v0' raised RuntimeError: licence server went away in step "
                               f"at turn 1 of task seed {boom}; the run stopped in iteration 2"), lines[0]
    assert [r["iteration"] for r in _records(run_dir)] == [1]
    assert (run_dir / "checkpoints" / "iter_00001").is_dir()
    resumed = CliRunner().invoke(app, [*argv, "--resume"], prog_name="agentrl")
    assert resumed.exit_code == 2 and "the run stopped in iteration 2" in resumed.stderr  # resumed after iteration 1
    assert [r["iteration"] for r in _records(run_dir)] == [1]


def test_env_errors_truncate_ends_only_that_episode_and_counts_it(tmp_path: Path, monkeypatch) -> None:
    argv, run_dir = _flaky_run(tmp_path, monkeypatch, "flaky/Truncates-v0", "--set", "rollout.env_errors=truncate")
    result = CliRunner().invoke(app, argv, prog_name="agentrl")
    assert result.exit_code == 0, result.stdout + result.stderr
    records = _records(run_dir)
    assert [r["iteration"] for r in records] == [1, 2]
    assert [r["rollout/env_errors"] for r in records] == [0.0, 1.0]


def test_env_errors_truncate_records_the_episode_as_truncated(tmp_path: Path, monkeypatch) -> None:
    from agentrl.envs.failures import RAISED_KEY
    from agentrl.rollout.engine import EnvPool
    from agentrl.training.compose import env_factory

    env_id = "flaky/Pool-v0"
    (tmp_path / "flaky_pool.py").write_text(FLAKY_ENV.format(env_id=env_id))
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = build_config(env=f"flaky_pool:{env_id}", model="tiny", overrides=["env.kwargs={boom_seeds: [7]}"])
    pool = EnvPool(env_factory(cfg.env, "train"), env_errors="truncate")
    pool.ensure(2)
    pool.reset([0, 1], [7, 8])
    broken = pool.envs[0]
    (_, reward, terminated, truncated, info), fine = pool.step([0, 1], ["wait", "wait"])
    assert truncated and not terminated and reward == 0.0 and info[RAISED_KEY]
    assert info["env_error"] == "RuntimeError: licence server went away"
    assert pool.envs[0] is not broken and fine[3] is False
    pool.close()


# --- agentrl play --------------------------------------------------------------------------------


def _play(data: bytes, *extra: str):
    return CliRunner().invoke(app, ["play", "keydoor", *extra], input=data, prog_name="agentrl")


def test_play_says_when_the_input_ends() -> None:
    result = _play(b"1\n")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "input ended after 1 steps" in result.stdout and result.exception is None


def test_play_refuses_a_line_that_is_not_utf8() -> None:
    result = _play(b"\xff\xfe\x00binary\n")
    assert result.exit_code == 2 and result.stderr.strip() == (
        "error: Input line 1 is not UTF-8 text; type an action or its number."), result.stderr


def test_play_refuses_a_megabyte_line() -> None:
    result = _play(b"x" * 1_048_576 + b"\n")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: Input line 1 is 1,048,576 characters long; a move is at most 10,000."


def test_play_takes_a_superscript_digit_as_an_action_not_a_number() -> None:
    result = _play("²\n".encode())
    assert result.exit_code == 0 and result.exception is None, result.stdout + result.stderr
    assert "input ended after 1 steps" in result.stdout


def test_the_ranges_table_in_the_docs_is_up_to_date() -> None:
    """Rerun ``python docs/tools/ranges_table.py`` after changing config.RANGES."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("ranges_table", root / "docs" / "tools" / "ranges_table.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    page = (root / "docs" / "cli.md").read_text()
    assert tool.rewrite(page) == page


@pytest.mark.parametrize("mode", ["stop", "truncate"])
def test_env_errors_apply_inside_env_workers(tmp_path: Path, monkeypatch, mode: str) -> None:
    from agentrl.envs.failures import RAISED_KEY, EnvCallFailed
    from agentrl.envs.workers import EnvWorkerPool
    from agentrl.training.compose import env_factory

    env_id = f"flaky/Workers{mode.title()}-v0"
    module = f"flaky_workers_{mode}"
    (tmp_path / f"{module}.py").write_text(FLAKY_ENV.format(env_id=env_id))
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = build_config(env=f"{module}:{env_id}", model="tiny", overrides=["env.kwargs={boom_seeds: [7]}"])
    pool = EnvWorkerPool(env_factory(cfg.env, "train"), workers=1, env_errors=mode)
    try:
        pool.ensure(2)
        pool.reset([0, 1], [8, 7])
        if mode == "stop":
            with pytest.raises(EnvCallFailed) as raised:
                pool.step([0, 1], ["wait", "wait"])
            assert (raised.value.method, raised.value.slot) == ("step", 1)
            assert raised.value.text == "RuntimeError: licence server went away"
        else:
            fine, (_, _, terminated, truncated, info) = pool.step([0, 1], ["wait", "wait"])
            assert truncated and not terminated and info[RAISED_KEY] and fine[3] is False
            assert pool.reset([1], [8])[0][0] == "a room"  # the slot has a working env again
    finally:
        pool.close()
