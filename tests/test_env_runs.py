"""`agentrl run sapo` on the two benchmarks with the embedded model (short CPU runs)."""

import json

import pytest
from typer.testing import CliRunner

from agentrl.cli import app

runner = CliRunner()


def _run(tmp_path, env, *sets):
    args = ["run", "sapo", "--env", env, "--iterations", "1", "--run-dir", str(tmp_path / env),
            "--set", "rollout.tasks_per_iteration=2", "--set", "rollout.action_mode=constrained",
            "--set", "rollout.history_window=1", "--set", "algorithm.micro_batch_tokens=2048"]
    for item in sets:
        args += ["--set", item]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / env / "metrics.jsonl").read_text().splitlines()[0])
    assert record["rollout/episodes"] == 2 and record["optim/steps"] >= 1
    assert record["rollout/invalid_action_rate"] == 0.0
    return record


@pytest.mark.slow
@pytest.mark.alfworld
def test_sapo_trains_on_alfworld_with_the_embedded_model(tmp_path):
    pytest.importorskip("textworld")
    record = _run(tmp_path, "alfworld", "env.kwargs={scene: small, max_steps: 6}")
    assert record["rollout/episode_length"] <= 6


@pytest.mark.slow
@pytest.mark.webshop
@pytest.mark.browser
def test_sapo_trains_on_webshop_with_the_embedded_model(tmp_path):
    pytest.importorskip("selenium")
    from pathlib import Path

    if not Path("/usr/bin/chromedriver").exists():
        pytest.skip("chromium-driver is not installed (make system-deps installs it)")
    record = _run(tmp_path, "webshop", "env.kwargs={num_products: 200, max_steps: 4}",
                  "rollout.max_prompt_tokens=1024")
    assert record["rollout/episode_length"] <= 4
