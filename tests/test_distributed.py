"""Multi-process training: torchrun on CPU (gloo) against a single process, and the pieces.

The end-to-end test runs tests/distributed_job.py twice: once in one process, once under
``torchrun --nproc_per_node 2``. Both see the same global batch of 6 tasks (greedy, constrained
rollouts: a task plays the same way on any rank), so the parameters after the first update must
match. Tolerance: the update is Adam's first step, ~lr = 1e-3 per element; the two runs sum the
gradient in a different order, so elements whose gradient is near Adam's epsilon can differ by a
fraction of lr. Measured: 7e-6 at most. Asserted: 1e-4 (10% of lr), while a run that normalised
advantages per rank, or missed the other rank's gradient, is off by ~lr on many elements.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agentrl.parallel.distributed import merge_records, split_groups
from agentrl.rollout.engine import Task

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "tests" / "distributed_job.py"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(ROOT))
    return env


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _weights(run_dir: Path, iteration: int) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run_dir / "checkpoints" / f"iter_{iteration:05d}" / "model.safetensors"))


@pytest.mark.slow
def test_torchrun_two_ranks_match_one_process(tmp_path):
    single, dist = tmp_path / "single", tmp_path / "dist"
    done = subprocess.run([sys.executable, str(JOB), str(single)], env=_env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node", "2", str(JOB), str(dist)],
                          env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    one, two = _records(single), _records(dist)
    assert [r["iteration"] for r in two] == [1, 2]  # written once, by rank 0
    for key in ("rollout/episodes", "rollout/return", "rollout/episode_length", "trajectories",
                "env_steps"):
        assert two[0][key] == pytest.approx(one[0][key], rel=1e-9), key  # the global batch
    assert two[0]["rollout/episodes"] == 6.0
    assert two[0]["optim/grad_norm"] == pytest.approx(one[0]["optim/grad_norm"], rel=1e-4)

    after_single, after_dist = _weights(single, 1), _weights(dist, 1)
    # the first update moved the weights by ~lr...
    from agentrl.models.loading import build_tiny_model, load_tokenizer, resolve_model
    from agentrl.models.value_tokens import reserve_value_tokens

    tokenizer = load_tokenizer(resolve_model("tiny"))
    initial = build_tiny_model(len(tokenizer), seed=3)
    reserve_value_tokens(initial, tokenizer)
    before = {k: v.detach() for k, v in initial.state_dict().items()}
    moved = max(float((after_single[k] - before[k]).abs().max()) for k in after_single)
    assert moved == pytest.approx(1e-3, rel=0.05)
    # ...and both runs moved them the same way
    gap = max(float((after_single[k] - after_dist[k]).abs().max()) for k in after_single)
    assert gap < 1e-4, gap
    # one checkpoint folder per iteration, written once
    assert sorted(p.name for p in (dist / "checkpoints").iterdir()) == ["iter_00001", "iter_00002", "latest"]


def test_split_groups_keeps_each_group_on_one_rank():
    tasks = [Task(seed=100 + g, group=g) for g in range(5) for _ in range(3)]  # 5 groups of 3
    shares = [split_groups(tasks, r, 2) for r in range(2)]
    assert [t.group for t in shares[0]] == [0, 0, 0, 2, 2, 2, 4, 4, 4]
    assert [t.group for t in shares[1]] == [1, 1, 1, 3, 3, 3]
    assert split_groups(tasks, 0, 1) == tasks
    singles = [Task(seed=s, group=g) for g, s in enumerate([7, 8, 9, 10])]
    assert split_groups(singles, 1, 2) == singles[1::2]  # one rollout per task: round robin


def test_merge_records_gives_the_global_batch_statistics():
    # rank 0: 3 episodes, 2 won, 6 turns of which 1 invalid; rank 1: 1 episode, lost, 4 turns, 2 invalid
    r0 = {"iteration": 4, "env_steps": 60, "rollout/success_rate": 2 / 3, "rollout/episodes": 3.0,
          "rollout/invalid_action_rate": 1 / 6, "rollout/success/pick": 1.0,
          "rollout/episodes/pick": 2.0, "time/rollout": 5.0, "memory/peak_rss_gb": 1.5,
          "loss/value_v": 0.2, "optim/lr": 1e-5, "note": "a"}
    r1 = {"iteration": 4, "env_steps": 40, "rollout/success_rate": 0.0, "rollout/episodes": 1.0,
          "rollout/invalid_action_rate": 2 / 4, "rollout/success/pick": 0.0,
          "rollout/episodes/pick": 1.0, "time/rollout": 7.0, "memory/peak_rss_gb": 1.2,
          "loss/value_v": 0.6, "optim/lr": 1e-5, "note": "b"}
    merged = merge_records([r0, r1], episodes=[3, 1], turns=[6, 4])
    assert merged["iteration"] == 4
    assert merged["env_steps"] == 100
    assert merged["rollout/success_rate"] == pytest.approx(2 / 4)  # 2 wins in 4 episodes
    assert merged["rollout/episodes"] == 4.0
    assert merged["rollout/invalid_action_rate"] == pytest.approx(3 / 10)  # 3 invalid of 10 turns
    assert merged["rollout/success/pick"] == pytest.approx(2 / 3)  # 2 + 0 wins in 2 + 1 pick episodes
    assert merged["time/rollout"] == 7.0 and merged["memory/peak_rss_gb"] == 1.5
    assert merged["loss/value_v"] == pytest.approx((0.2 * 6 + 0.6 * 4) / 10)  # turn-weighted
    assert merged["optim/lr"] == 1e-5 and merged["note"] == "a"


@pytest.mark.slow
def test_torchrun_with_asynchronous_rollouts_matches_one_process(tmp_path):
    """``rollout.max_staleness: 1`` under torchrun: each rank's own worker plays its share of
    iteration 2 with version 0 while the ranks update on iteration 1. Rollouts are greedy, so both
    runs play the same global batches with the same weights, one update stale, and take the same
    second step."""
    extra = ["rollout.max_staleness=1", "algorithm.tis_cap=2"]
    single, dist = tmp_path / "single", tmp_path / "dist"
    done = subprocess.run([sys.executable, str(JOB), str(single), *extra], env=_env(), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node", "2", str(JOB), str(dist), *extra],
                          env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    one, two = _records(single), _records(dist)
    assert [r["async/staleness_max"] for r in two] == [r["async/staleness_max"] for r in one] == [0, 1]
    for a, b in zip(one, two, strict=True):
        for key in ("rollout/episodes", "rollout/return", "rollout/episode_length", "env_steps"):
            assert b[key] == pytest.approx(a[key], rel=1e-9), (a["iteration"], key)
        assert b["optim/grad_norm"] == pytest.approx(a["optim/grad_norm"], rel=1e-4)
    after_single, after_dist = _weights(single, 2), _weights(dist, 2)
    gap = max(float((after_single[k] - after_dist[k]).abs().max()) for k in after_single)
    assert gap < 1e-4, gap
