"""Resume is exact, and the run directory survives a SIGKILL at any of its write points.

The crashed runs are real processes killed with SIGKILL (nothing flushed, no ``finally``): the
test hook ``AGENTRL_CRASH_AT=<point>@<iteration>`` (agentrl/rundir/durable.py) makes the CLI kill itself
at a named point, so the moment of the kill is exact and the test is not a race. Every run here
goes through ``python -m agentrl run`` in a subprocess, so the reference and the resumed runs
compute in identically set-up processes (threads, global RNGs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentrl.cli import app
from agentrl.rundir.checkpoints import latest_checkpoint
from agentrl.rundir.metrics import MetricsLog, read_records

ROOT = Path(__file__).resolve().parents[1]

#: A tiny run of 4 iterations that samples (temperature 1) during rollouts and in its evals
#: (iterations 2 and 4), so every random stream shows up in the metrics.
SETTINGS = ["--env", "keydoor", "--model", "tiny", "--iterations", "4",
            "--set", "rollout.tasks_per_iteration=2", "--set", "rollout.max_turns=4",
            "--set", "rollout.max_new_tokens=16", "--set", "algorithm.lr=1e-3",
            "--set", "train.save_every=1", "--set", "train.eval_every=2",
            "--set", "train.eval_episodes=2", "--set", "train.eval_greedy=false"]

#: The only keys not compared: what measures the machine rather than the run (wall-clock
#: times, rates per second, peak memory).
MACHINE_KEYS = ("time/", "memory/", "perf/tokens_per_s", "perf/env_steps_per_s", "wall_time")


def agentrl_run(args: list[str], crash: str | None = None) -> subprocess.CompletedProcess:
    """``python -m agentrl run ...`` (transformers backend), optionally killed at ``crash``."""
    env = {k: v for k, v in os.environ.items() if k != "AGENTRL_CRASH_AT"}
    env["AGENTRL_AUTO_BACKEND"] = "hf"
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if crash is not None:
        env["AGENTRL_CRASH_AT"] = crash
    done = subprocess.run([sys.executable, "-m", "agentrl", "run", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    if crash is not None:
        assert done.returncode == -signal.SIGKILL, f"no kill at {crash}:\n{done.stdout}\n{done.stderr}"
    else:
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done


def resume(run_dir: Path, crash: str | None = None) -> subprocess.CompletedProcess:
    """The documented command: the algorithm, the run directory, --resume, nothing else."""
    return agentrl_run(["sapo", "--run-dir", str(run_dir), "--resume"], crash)


def records(run_dir: Path) -> list[dict]:
    return read_records(run_dir / "metrics.jsonl")


def _flat_config(run_dir: Path) -> dict:
    from agentrl.rundir.checkpoints import read_saved_config
    from agentrl.rundir.settings import flatten

    return flatten(read_saved_config(run_dir))


def assert_same_run(got: Path, want: Path) -> None:
    """Every record key by key, all but :data:`MACHINE_KEYS` exactly equal."""
    mine, theirs = records(got), records(want)
    assert [r["iteration"] for r in mine] == [r["iteration"] for r in theirs] == [1, 2, 3, 4]
    for a, b in zip(mine, theirs, strict=True):
        keys_a = {k for k in a if not k.startswith(MACHINE_KEYS)}
        keys_b = {k for k in b if not k.startswith(MACHINE_KEYS)}
        assert keys_a == keys_b, (a["iteration"], keys_a ^ keys_b)
        differing = {k: (a[k], b[k]) for k in sorted(keys_a) if a[k] != b[k]}
        assert not differing, f"iteration {a['iteration']}: {differing}"
    assert any(k.startswith("eval/") for k in mine[-1]), "the final eval is compared too"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run."""
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    agentrl_run(["sapo", *SETTINGS, "--run-dir", str(run_dir)])
    return run_dir


@pytest.mark.slow
def test_killed_mid_iteration_3_then_resumed_equals_the_uninterrupted_run(reference, tmp_path):
    run_dir = tmp_path / "run"
    agentrl_run(["sapo", *SETTINGS, "--run-dir", str(run_dir)], crash="update@3")
    assert [r["iteration"] for r in records(run_dir)] == [1, 2]
    assert latest_checkpoint(run_dir).name == "iter_00002"
    config_before = _flat_config(run_dir)
    resume(run_dir)
    after = _flat_config(run_dir)
    assert {k: after.get(k) for k in config_before} == config_before  # the run's own, not defaults
    assert_same_run(run_dir, reference)


@pytest.mark.slow
def test_a_kill_at_each_write_point_leaves_a_run_that_resumes_exactly(reference, tmp_path):
    run_dir = tmp_path / "run"
    # 1. after iteration 1's record, before its checkpoint: records but no checkpoint
    agentrl_run(["sapo", *SETTINGS, "--run-dir", str(run_dir)], crash="metrics@1")
    assert [r["iteration"] for r in records(run_dir)] == [1]
    assert latest_checkpoint(run_dir) is None
    # 2. --resume starts it over; killed while writing the first checkpoint
    resume(run_dir, crash="checkpoint@1")
    checkpoints = run_dir / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [".tmp-iter_00001"]
    assert latest_checkpoint(run_dir) is None and [r["iteration"] for r in records(run_dir)] == [1]
    # 3. starts over again; killed while `latest` is written (iter_1 is in place, `latest` is not)
    resume(run_dir, crash="latest@1")
    assert not (checkpoints / "latest").exists() and latest_checkpoint(run_dir).name == "iter_00001"
    # 4. resumes from iter_1 without `latest`; killed after iteration 3's record, before its checkpoint
    resume(run_dir, crash="metrics@3")
    assert [r["iteration"] for r in records(run_dir)] == [1, 2, 3]
    # a hand-emptied `latest` and a cut-off last line on top
    (checkpoints / "latest").write_text("")
    with (run_dir / "metrics.jsonl").open("a") as fh:
        fh.write('{"iteration": 4, "rollout/succ')
    assert latest_checkpoint(run_dir).name == "iter_00002"
    # 5. killed while the log is cut back to iteration 2: the old log, whole, is still there
    resume(run_dir, crash="truncate@2")
    assert [r["iteration"] for r in records(run_dir)] == [1, 2, 3]
    # 6. and now to the end
    resume(run_dir)
    assert_same_run(run_dir, reference)
    assert sorted(p.name for p in checkpoints.iterdir()) == ["iter_00003", "iter_00004", "latest"]
    assert not [p for p in run_dir.rglob(".*")], "temporary files left behind"


# --- the pieces, without processes -----------------------------------------------------------------


def _checkpoint(root: Path, iteration: int, complete: bool = True) -> Path:
    folder = root / "checkpoints" / f"iter_{iteration:05d}"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    if complete:
        (folder / "trainer_state.pt").write_bytes(b"state")
    return folder


@pytest.mark.parametrize("pointer", [None, "", "\n", "iter_00003\n", "iter_00009\n", "../elsewhere\n"])
def test_a_bad_latest_falls_back_to_the_newest_complete_checkpoint(tmp_path, pointer):
    _checkpoint(tmp_path, 1)
    _checkpoint(tmp_path, 2)
    _checkpoint(tmp_path, 3, complete=False)  # a kill mid-write (in place, as versions before did)
    if pointer is not None:
        (tmp_path / "checkpoints" / "latest").write_text(pointer)
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoints" / "iter_00002"


def test_a_valid_latest_is_followed(tmp_path):
    _checkpoint(tmp_path, 1)
    _checkpoint(tmp_path, 2)
    (tmp_path / "checkpoints" / "latest").write_text("iter_00001\n")
    assert latest_checkpoint(tmp_path).name == "iter_00001"
    assert latest_checkpoint(tmp_path / "nothing") is None


def test_a_cut_off_last_metrics_line_is_skipped_and_truncation_drops_it(tmp_path):
    from agentrl.bench.supervise import _last_record
    from agentrl.reporting.runs import load_run

    log = MetricsLog(tmp_path / "metrics.jsonl")
    log.write({"iteration": 1, "loss/policy": 0.5, "rollout/return": 0.0})
    log.write({"iteration": 2, "loss/policy": 0.25, "rollout/return": 1.0})
    with log.path.open("a") as fh:
        fh.write('{"iteration": 3, "loss/pol')
    assert [r["iteration"] for r in log.read()] == [1, 2]
    assert _last_record(tmp_path)["iteration"] == 2  # bench's reader
    # a run's config holds every section (the report refuses a config that does not)
    (tmp_path / "config.yaml").write_text(
        "algo: sapo\n" + "".join(f"{name}: {{}}\n" for name in ("env", "model", "rollout", "train", "algorithm")))
    assert [r["iteration"] for r in load_run(tmp_path).records] == [1, 2]  # the report's reader
    log.truncate_after(2)
    assert log.path.read_text().count("\n") == 2 and log.path.read_text().endswith("\n")
    log.write({"iteration": 3})
    assert [r["iteration"] for r in log.read()] == [1, 2, 3]


def test_a_bad_line_before_the_last_is_one_sentence(tmp_path):
    from agentrl.errors import UserError

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"iteration": 1}\n{"itera\n{"iteration": 3}\n')
    with pytest.raises(UserError, match="line 2 is not JSON"):
        read_records(path)


runner = CliRunner()


def _saved_run(tmp_path: Path) -> Path:
    """A run directory holding only the config.yaml a run with :data:`SETTINGS` writes (all the
    checks read; they refuse before anything is loaded)."""
    from agentrl.rundir.checkpoints import save_config
    from agentrl.training.config import build_config

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    sets = [value for flag, value in zip(SETTINGS, SETTINGS[1:], strict=False) if flag == "--set"]
    config = build_config(algo="sapo", env="keydoor", model="tiny",
                          overrides=[*sets, "train.iterations=4", f"train.run_dir={run_dir}"])
    save_config(config, run_dir)
    return run_dir


def _error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output  # one sentence (soft-wrapped on one line)
    return lines[0]


def test_resume_refuses_settings_other_than_the_runs_own(tmp_path):
    run_dir = _saved_run(tmp_path)
    before = (run_dir / "config.yaml").read_text()
    line = _error(runner.invoke(app, ["run", "sapo", "--run-dir", str(run_dir), "--resume",
                                      "--set", "algorithm.lr=0.5", "--set", "rollout.tasks_per_iteration=3"]))
    assert "algorithm.lr" in line and "rollout.tasks_per_iteration" in line and "0.001" in line
    line = _error(runner.invoke(app, ["run", "sapo", "--run-dir", str(run_dir), "--resume", "--set", "rollout.temperature=0.5"]))
    assert "rollout.temperature" in line
    assert (run_dir / "config.yaml").read_text() == before


def test_resume_with_another_algorithm_blames_the_algorithm(tmp_path):
    run_dir = _saved_run(tmp_path)
    line = _error(runner.invoke(app, ["run", "ppo", "--run-dir", str(run_dir), "--resume"]))
    assert "with ppo: it is a sapo run" in line and "value tokens" not in line


def test_resume_accepts_the_same_settings_given_again(tmp_path):
    from agentrl.rundir.checkpoints import read_saved_config
    from agentrl.training.config import build_config
    from agentrl.training.resume import check_resume_config, resume_config

    reference = _saved_run(tmp_path)
    saved = read_saved_config(reference)
    again = resume_config(reference, "sapo", "agentrl/KeyDoor-v0", "tiny", None,
                          ["rollout.tasks_per_iteration=2", "train.iterations=6", "train.eval_episodes=5"])
    check_resume_config(reference, saved, again)  # same env by its full id; longer; more eval
    assert again.train.iterations == 6 and again.algorithm.lr == 1e-3  # the rest: the run's own
    check_resume_config(reference, saved, build_config(base=saved))


def test_save_every_0_checkpoints_only_at_the_end(tmp_path):
    import agentrl

    run_dir = tmp_path / "run"
    config = agentrl.build_config(algo="sapo", env="keydoor", model="tiny", overrides=[
        "rollout.tasks_per_iteration=1", "rollout.max_turns=2", "rollout.max_new_tokens=8",
        "train.iterations=2", "train.save_every=0", f"train.run_dir={run_dir}"])
    agentrl.train(config)
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["iter_00002", "latest"]


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_reseed_restarts_the_engines_sampling_stream():
    """vLLM samples requests without a per-request seed from torch's default generator, in this
    process: ``reseed`` must make the same prompts sample the same replies again."""
    from agentrl.backends.vllm import vllm_available

    if not vllm_available():
        pytest.skip("vllm is not installed (make vllm)")
    import torch

    from agentrl.backends.base import SamplingParams
    from agentrl.backends.vllm import VLLMBackend, VLLMOptions
    from agentrl.training.compose import load_for_training, stop_ids
    from agentrl.training.config import ModelConfig

    loaded = load_for_training(ModelConfig(name="embedded"), reserve_values=True)
    backend = VLLMBackend(loaded.model, stop_ids(loaded.tokenizer, loaded.model), loaded.value_tokens.ids,
                          VLLMOptions(dtype=torch.float32, max_model_len=512, cpu_kv_cache_gib=1), seed=0)
    prompts = [list(loaded.tokenizer(text)["input_ids"]) for text in
               ["Name a colour:", "Two plus two is", "The key is in the", "Open the"]]
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=12)

    def replies():
        return [g.token_ids for g in backend.generate(prompts, params)]

    backend.reseed(1234)
    first, second = replies(), replies()
    backend.reseed(1234)
    assert replies() == first
    assert second != first  # the stream moves on between calls: the equality above is the reseed's


@pytest.mark.slow
def test_eval_at_start_records_iteration_0_once_and_changes_no_training_number(reference, tmp_path):
    """``train.eval_at_start``: the starting model's eval is record 0 (and eval/iter_00000.jsonl);
    training's numbers equal a run without it (the eval draws from its own stream), and a run
    killed before its first checkpoint and resumed keeps the record it has instead of redoing it."""
    run_dir = tmp_path / "run"
    settings = [*SETTINGS, "--set", "train.eval_at_start=true"]
    agentrl_run(["sapo", *settings, "--run-dir", str(run_dir)], crash="metrics@1")
    assert [r["iteration"] for r in records(run_dir)] == [0, 1]
    assert latest_checkpoint(run_dir) is None
    first = records(run_dir)[0]
    resume(run_dir)
    got = records(run_dir)
    assert [r["iteration"] for r in got] == [0, 1, 2, 3, 4]
    assert got[0] == first  # not redone by the restart
    assert first["env_steps"] == first["trajectories"] == 0
    assert first["eval/episodes"] == 2 and 0.0 <= first["eval/success_rate"] <= 1.0
    assert len((run_dir / "eval" / "iter_00000.jsonl").read_text().splitlines()) == 2
    for at in (0, 2, 4):  # each eval episode records the updates its weights had made
        episodes = (run_dir / "eval" / f"iter_{at:05d}.jsonl").read_text().splitlines()
        assert {json.loads(line)["policy_version"] for line in episodes} == {at}
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in got[1:]))
    assert_same_run(run_dir, reference)
