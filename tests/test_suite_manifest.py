"""``suite.json`` across invocations: a suite resumed for part of its probes, algorithms or seeds
keeps what the earlier invocations recorded, and one resumed with other run-shaping settings is
refused (the report reads the probes, algorithms and settings from this file alone)."""

import pytest

from agentrl.bench.suite import merged_manifest, write_manifest
from agentrl.errors import UserError

SETTINGS = {"model": "embedded", "seeds": 3, "first_seed": 0, "iterations": 12, "trajectories": 16,
            "eval_episodes": 32, "overrides": ["algorithm.lr=1e-5", "sapo:algorithm.value_epochs=0"]}


def _probe(name, optimal=1.0):
    return {"name": name, "optimal_return": optimal}


def test_a_partial_invocation_keeps_the_recorded_probes_algorithms_and_seeds():
    old = {"probes": [_probe("chain-d1"), _probe("locks")], "algos": ["sapo", "ppo"], "settings": SETTINGS,
           "sessions": [{"started": "t0"}]}
    # one more seed (3..4) of locks and memory, GRPO added, overrides in another order
    now = {**SETTINGS, "seeds": 2, "first_seed": 3, "overrides": list(reversed(SETTINGS["overrides"]))}
    merged = merged_manifest(old, [_probe("locks", 0.5), _probe("memory")], ["grpo", "sapo"], now)
    assert [p["name"] for p in merged["probes"]] == ["chain-d1", "locks", "memory"]
    assert merged["probes"][1]["optimal_return"] == 0.5  # the invocation's record of a probe wins
    assert merged["algos"] == ["sapo", "ppo", "grpo"]
    # seeds 0-2 before and 3-4 now: 5 seeds from 0
    assert (merged["settings"]["first_seed"], merged["settings"]["seeds"]) == (0, 5)
    assert merged["sessions"] == [{"started": "t0"}]


def test_a_first_invocation_is_recorded_as_given():
    merged = merged_manifest({}, [_probe("corridor")], ["ppo"], SETTINGS)
    assert merged == {"probes": [_probe("corridor")], "algos": ["ppo"], "settings": SETTINGS}


@pytest.mark.parametrize("key, value", [("model", "tiny"), ("trajectories", 8), ("eval_episodes", 16),
                                        ("overrides", ["algorithm.lr=1e-5"])])
def test_other_run_shaping_settings_are_refused(key, value):
    old = {"probes": [_probe("chain-d1")], "algos": ["sapo"], "settings": SETTINGS}
    with pytest.raises(UserError, match=f"made with {key} "):
        merged_manifest(old, [_probe("chain-d1")], ["sapo"], {**SETTINGS, key: value})


def test_more_iterations_are_allowed_and_recorded():
    old = {"probes": [], "algos": ["sapo"], "settings": SETTINGS}
    assert merged_manifest(old, [], ["sapo"], {**SETTINGS, "iterations": 20})["settings"]["iterations"] == 20


def test_each_invocation_keeps_its_own_session_even_within_one_second(tmp_path):
    """A session is found again by its id: two invocations that start in the same second are two
    entries (keyed by the start time, the second once replaced the first), and an invocation's
    closing write replaces its own entry."""
    import json

    first = {"id": "a", "started": "2026-12-06T05:23:00+00:00", "runs_to_do": 1}
    write_manifest(tmp_path, [], ["sapo"], SETTINGS, first)
    write_manifest(tmp_path, [], ["sapo"], SETTINGS, {**first, "runs_done": 1})
    write_manifest(tmp_path, [], ["sapo"], SETTINGS, {"id": "b", "started": first["started"], "runs_to_do": 2})
    sessions = json.loads((tmp_path / "suite.json").read_text())["sessions"]
    assert [(s["id"], s.get("runs_done")) for s in sessions] == [("a", 1), ("b", None)]


def test_a_suite_resumed_for_another_probe_reports_both(tmp_path):
    """End to end with the tiny model: chain-d1, then the same folder for locks only; suite.json
    keeps both probes and the report renders a row for each (before the merge it lost chain-d1)."""
    import json

    from typer.testing import CliRunner

    from agentrl.cli import app

    runner = CliRunner()
    out = tmp_path / "suite"
    common = ["suite", "--algos", "sapo", "--seeds", "1", "--iterations", "1", "--trajectories", "4",
              "--eval-episodes", "4", "--set", "sapo:algorithm.value_epochs=1", "-o", str(out)]
    for probe in ("chain-d1", "locks"):
        result = runner.invoke(app, [*common, "--probes", probe])
        assert result.exit_code == 0, result.output
    manifest = json.loads((out / "suite.json").read_text())
    assert [p["name"] for p in manifest["probes"]] == ["chain-d1", "locks"]
    assert len(manifest["sessions"]) == 2 and manifest["sessions"][1]["runs_done"] == 1
    result = runner.invoke(app, ["report", str(out), "-o", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| chain-d1 | sapo | 1 |" in text and "| locks | sapo | 1 |" in text


def test_an_invocation_for_one_algorithm_repeats_the_folders_settings_whole(tmp_path):
    """The embedded suite's --set list names sapo: and ppo: settings; resuming it with
    ``--algos ppo`` repeats that list, so sapo's settings are held back, not refused, and ppo's
    reach its runs. A prefix naming no algorithm is still a typo refused in one sentence."""
    from agentrl.bench.suite import plan_suite, probe_by_name

    sets = ["algorithm.lr=1e-5", "sapo:algorithm.value_lr=3e-3", "ppo:algorithm.critic_lr=2e-5"]
    plans = plan_suite(["ppo"], tmp_path / "out", probe_by_name("chain-d1"), seeds=1, iterations=2,
                       overrides=sets)
    (run,) = plans["chain-d1"].runs
    assert (run.algo, run.config.algorithm.lr, run.config.algorithm.critic_lr) == ("ppo", 1e-5, 2e-5)
    with pytest.raises(UserError, match="'sapoo', which is not an algorithm"):
        plan_suite(["ppo"], tmp_path / "out", probe_by_name("chain-d1"), seeds=1,
                   overrides=["sapoo:algorithm.value_lr=3e-3"])
