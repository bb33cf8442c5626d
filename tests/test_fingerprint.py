"""Data fingerprints in every run directory, eval output and report; differing ones flagged."""

from __future__ import annotations

import json
import shutil

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import agentrl_envs  # noqa: F401  (registers the ids)
from agentrl.cli import app
from agentrl.rundir.fingerprint import FILE, collect, coverage_note, describe, digest
from agentrl.training.config import build_config
from agentrl.training.fingerprints import for_config

runner = CliRunner()
TINY = ["--model", "tiny", "--set", "rollout.action_mode=constrained",
        "--set", "rollout.tasks_per_iteration=2", "--set", "rollout.max_turns=3",
        "--set", "algorithm.kl_coef=0", "--backend", "hf"]


def _run(run_dir, *extra: str) -> dict:
    result = runner.invoke(app, ["run", "sapo", "--env", "keydoor", *TINY, "--iterations", "1",
                                 "--set", "train.eval_episodes=2", "--run-dir", str(run_dir),
                                 *extra])
    assert result.exit_code == 0, result.output
    assert "train data: agentrl/KeyDoor-v0" in result.output
    assert "eval data: agentrl/KeyDoor-v0" in result.output
    return json.loads((run_dir / FILE).read_text())


@pytest.mark.slow
def test_run_eval_and_report_carry_the_fingerprint(tmp_path):
    first = _run(tmp_path / "a")
    assert set(first) == {"train", "eval"}
    assert first["train"]["split"] == "train" and first["eval"]["split"] == "eval"
    assert first["eval"]["eval_episodes"] == 2
    for fingerprint in first.values():
        assert fingerprint["env_id"] == "agentrl/KeyDoor-v0" and fingerprint["env_version"] == 0
        assert fingerprint["source"] == "generated" and len(fingerprint["games_sha256"]) == 64
        assert fingerprint["digest"] == digest(fingerprint)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["fingerprint"] == first

    episodes = tmp_path / "eval.jsonl"
    result = runner.invoke(app, ["eval", "--env", "keydoor", *TINY, "--episodes", "2",
                                 "-o", str(episodes)])
    assert result.exit_code == 0, result.output
    assert "data: agentrl/KeyDoor-v0" in result.output and first["eval"]["digest"] in result.output
    beside = json.loads((tmp_path / "eval.jsonl.fingerprint.json").read_text())
    assert beside["digest"] == first["eval"]["digest"] and beside["eval_episodes"] == 2

    # the same data under another seed: the same fingerprint (the seed picks tasks, not data)
    seeded = build_config(algo="sapo", env="keydoor", overrides=["train.seed=1"])
    assert for_config(seeded.env, "train")["digest"] == first["train"]["digest"]

    other = _run(tmp_path / "c", "--set", "env.kwargs={n_rooms: 4}")
    assert other["train"]["digest"] != first["train"]["digest"]
    shutil.copytree(tmp_path / "a", tmp_path / "old")
    (tmp_path / "old" / FILE).unlink()  # a run made before fingerprints existed
    report = runner.invoke(app, ["report", str(tmp_path / "a"), str(tmp_path / "c"),
                                 str(tmp_path / "old"), "-o", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert first["train"]["digest"] in text and other["train"]["digest"] in text
    assert "Not like-for-like: the runs' train data fingerprints differ" in text
    assert "Not like-for-like: the runs' eval data fingerprints differ" in text
    assert "No data fingerprint for" in text and "(old)" in text
    html = (tmp_path / "report" / "report.html").read_text()
    assert "fingerprints differ" in html


def test_fingerprint_without_the_optional_method_and_coverage():
    class Plain(gym.Env):
        metadata = {"r_max": 1.0}

    plain = collect(Plain(), "mylab/Plain-v0", {"level": 2})
    assert plain["env_id"] == "mylab/Plain-v0" and plain["options"] == {"level": 2}
    assert "fingerprint" in describe(plain)
    # local details (where the data lives) never change the digest
    assert digest({**plain, "local": {"data_root": "/a"}}) == digest({**plain, "local": {"data_root": "/b"}})
    assert digest({**plain, "options": {"data_path": "/a"}}) == digest({**plain, "options": {"data_path": "/b"}})
    assert coverage_note({"split_size": 134}, 134) is None
    assert "16 of the split's 134" in coverage_note({"split_size": 134}, 16)
    assert "repeat" in coverage_note({"split_size": 134}, 140)
    assert coverage_note({"split_size": None}, 16) is None


def test_webshop_fingerprint_digests_the_goal_list():
    from agentrl_envs.webshop.env import WebShopEnv

    eval_print = collect(WebShopEnv(transport="http", split="eval"), "agentrl/WebShop-v0", {})
    train_print = collect(WebShopEnv(transport="http", split="train"), "agentrl/WebShop-v0", {})
    assert eval_print["split_size"] > 0 and eval_print["products"] > 0
    assert eval_print["games_sha256"] != train_print["games_sha256"]
    assert "not comparable to published WebShop numbers" in describe(eval_print)


def test_resume_refuses_other_data(tmp_path):
    recorded = _run(tmp_path / "a")
    recorded["train"]["digest"] = "0" * 16  # as if the run had played other games
    (tmp_path / "a" / FILE).write_text(json.dumps(recorded))
    result = runner.invoke(app, ["run", "sapo", "--run-dir", str(tmp_path / "a"), "--resume",
                                 "--iterations", "2"])
    assert result.exit_code == 2, result.output
    assert "its train data differ from what it played" in " ".join(result.output.split())
