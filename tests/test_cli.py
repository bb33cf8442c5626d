"""The command line: user mistakes give one sentence and exit 2; the commands do their job."""

import json

import pytest
from typer.testing import CliRunner

from agentrl.cli import app

runner = CliRunner()
TINY_RUN = ["--model", "tiny", "--set", "rollout.action_mode=constrained", "--set", "rollout.tasks_per_iteration=2",
            "--set", "algorithm.kl_coef=0"]


def _error_line(result) -> str:
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    return " ".join(lines)


@pytest.mark.parametrize("args,expected", [
    (["run", "nosuchalgo"], "Unknown algorithm 'nosuchalgo'"),
    (["run", "sapo", "--env", "nosuchenv", "--model", "tiny"], "Unknown env 'nosuchenv'"),
    (["run", "sapo", "--model", "/no/such/model"], "Model path '/no/such/model' does not exist"),
    (["run", "sapo", "--model", "not-a-model-or-alias"], "Unknown model 'not-a-model-or-alias'"),
    (["run", "sapo", "--set", "algorithm.lr"], "Malformed --set 'algorithm.lr'"),
    (["run", "sapo", "--set", "algorithm.nope=1"], "Unknown config key 'algorithm.nope'"),
    (["run", "sapo", "--set", "train.iterations=many"], "must be an integer"),
    (["run", "sapo", "--config", "/no/such.yaml"], "Cannot read config file '/no/such.yaml'"),
    (["eval", "--env", "nosuchenv", "--model", "tiny"], "Unknown env 'nosuchenv'"),
    (["run", "sapo", "--env", "keydoor", "--model", "tiny", "--backend", "vlm"], "'rollout.backend' must be one of auto, hf, vllm, not 'vlm'"),
    (["eval", "--env", "keydoor", "--model", "tiny", "--backend", "vlm"], "'rollout.backend' must be one of auto, hf, vllm, not 'vlm'"),
    (["play", "nosuchenv"], "Unknown env 'nosuchenv'"),
])
def test_user_errors_are_one_sentence_and_exit_2(args, expected):
    assert expected in _error_line(runner.invoke(app, args))


def test_invalid_yaml_and_wrong_shapes(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("rollout: [unclosed\n")
    assert "is not valid YAML" in _error_line(runner.invoke(app, ["run", "sapo", "--config", str(bad)]))
    bad.write_text("- a list\n")
    assert "must hold a mapping" in _error_line(runner.invoke(app, ["run", "sapo", "--config", str(bad)]))
    bad.write_text("colour: blue\n")
    assert "Unknown config section 'colour'" in _error_line(runner.invoke(app, ["run", "sapo", "--config", str(bad)]))


def test_resume_without_checkpoint_is_a_user_error(tmp_path):
    result = runner.invoke(app, ["run", "sapo", *TINY_RUN, "--run-dir", str(tmp_path / "empty"), "--resume"])
    assert "no checkpoint" in _error_line(result)


def test_run_trains_and_prints_a_summary_table(tmp_path):
    run_dir = tmp_path / "run"
    result = runner.invoke(app, ["run", "grpo", "--env", "keydoor", *TINY_RUN, "--set", "algorithm.group_size=2",
                                 "--iterations", "2", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "grpo on agentrl/KeyDoor-v0" in result.output and "rollout/success_rate" in result.output
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records] == [1, 2]
    assert records[0]["rollout/episodes"] == 4  # 2 tasks x group of 2
    again = runner.invoke(app, ["run", "grpo", *TINY_RUN, "--iterations", "2", "--run-dir", str(run_dir)])
    assert "already holds a run" in _error_line(again)


def test_eval_reports_success(tmp_path):
    out = tmp_path / "episodes.jsonl"
    result = runner.invoke(app, ["eval", "--env", "keydoor", "--model", "tiny", "--episodes", "3",
                                 "--set", "rollout.action_mode=constrained", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "eval/success_rate" in result.output
    assert len(out.read_text().splitlines()) == 3


def test_play_takes_numbers_and_actions():
    # KeyDoor seed 3: the key is one room away, then the door (see `agentrl play keydoor --seed 3`)
    from agentrl.envs import make_env

    env = make_env("keydoor")
    env.reset(seed=3)
    moves = []
    while True:
        action = env.unwrapped.expert_action()
        moves.append(action)
        *_, terminated, _, _ = env.step(action)
        if terminated:
            break
    first_number = str(make_env("keydoor").reset(seed=3)[1]["admissible_actions"].index(moves[0]) + 1)
    result = runner.invoke(app, ["play", "keydoor", "--seed", "3"], input="\n".join([first_number, *moves[1:]]) + "\n")
    assert result.exit_code == 0, result.output
    assert f"won after {len(moves)} steps, return 1" in result.output


def test_envs_and_algos_list_everything():
    envs = runner.invoke(app, ["envs"])
    assert envs.exit_code == 0, envs.output
    rows = {line.split("│")[1].strip(): line for line in envs.output.splitlines() if line.count("│") >= 4}
    for env_id, short in (("agentrl/KeyDoor-v0", "keydoor"), ("agentrl/ALFWorld-v0", "alfworld"),
                          ("agentrl/WebShop-v0", "webshop")):
        assert env_id in rows, envs.output
        assert short in rows[env_id]
    assert not any(name.startswith("CartPole") for name in rows)  # gymnasium's own envs are not text envs
    algos = runner.invoke(app, ["algos"])
    assert algos.exit_code == 0, algos.output
    rows = {line.split("│")[1].strip(): line for line in algos.output.splitlines() if line.count("│") >= 5}
    assert {"sapo", "ppo", "grpo"} <= set(rows), algos.output
    assert "8" in rows["grpo"].split("│")[2]  # GRPO's default group of 8 rollouts per task
    assert "yes" in rows["ppo"].split("│")[3] and "yes" in rows["sapo"].split("│")[4]  # critic; value tokens


@pytest.mark.slow
def test_readme_demo_config_runs_sapo_on_the_embedded_model(tmp_path):
    result = runner.invoke(app, ["run", "sapo", "--env", "keydoor", "--config", "benchmarks/configs/demo_keydoor.yaml",
                                 "--iterations", "1", "--set", "train.eval_episodes=2", "--run-dir", str(tmp_path / "demo")])
    assert result.exit_code == 0, result.output
    assert "sapo on agentrl/KeyDoor-v0" in result.output and "eval/success_rate" in result.output
