"""Env workers: the same episodes as in-process envs, errors surfaced, no leftover processes."""

from __future__ import annotations

import time

import pytest

from agentrl.envs.workers import EnvWorkerError, EnvWorkerPool
from agentrl.models.policy import Policy
from agentrl.rollout.engine import EnvPool, RolloutConfig, Task
from agentrl.training.compose import EnvMaker, env_factory, make_engine
from agentrl.training.config import EnvConfig


class _Fails:
    """Picklable factory of an env whose step raises (module level: workers are spawned)."""

    def __call__(self):
        env = EnvMaker("agentrl/KeyDoor-v0", {"n_rooms": 2, "max_steps": 4})()

        def broken(action):
            raise ValueError(f"cannot do {action!r}")

        env.unwrapped.step = broken
        return env


def _episodes(result):
    return [[(t.observation, t.action, t.reward, t.terminated, t.truncated, t.valid) for t in traj.turns]
            + [(traj.won, traj.score, traj.task)] for traj in result.trajectories]


def test_workers_play_the_same_episodes_as_in_process_envs(tiny_model, tokenizer):
    from agentrl.backends.hf import HFBackend
    from agentrl.training.compose import stop_ids

    policy = Policy(tiny_model, tokenizer)
    factory = env_factory(EnvConfig(id="keydoor", kwargs={"n_rooms": 3, "max_steps": 5}), "train")
    tasks = [Task(seed=s, group=i) for i, s in enumerate([11, 12, 13, 14, 15])]
    results = []
    for workers in (0, 2):
        cfg = RolloutConfig(action_mode="constrained", env_workers=workers, history_window=1,
                            max_prompt_tokens=384, temperature=1.0)
        backend = HFBackend(tiny_model, stop_ids(tokenizer, tiny_model), tokenizer.pad_token_id, seed=5)
        engine = make_engine(policy, backend, cfg, factory)
        assert isinstance(engine.pool, EnvWorkerPool if workers else EnvPool)
        try:
            results.append(engine.run(tasks))
        finally:
            engine.pool.close()
    in_process, in_workers = results
    assert _episodes(in_workers) == _episodes(in_process)
    assert in_process.turns == in_workers.turns > len(tasks)  # several turns, not just one
    prompts = [[t.prompt_ids for t in traj.turns] for traj in in_process.trajectories]
    assert prompts == [[t.prompt_ids for t in traj.turns] for traj in in_workers.trajectories]


def test_pool_interface_and_slot_order():
    maker = EnvMaker("agentrl/KeyDoor-v0", {"n_rooms": 2, "max_steps": 4})
    local, remote = EnvPool(maker), EnvWorkerPool(maker, workers=2)
    try:
        for pool in (local, remote):
            pool.ensure(3)
        slots, seeds = [2, 0, 1], [7, 8, 9]  # out of order, across both workers
        assert remote.reset(slots, seeds) == local.reset(slots, seeds)
        actions = ["look", "take key", "go to hall"]
        assert remote.step(slots, actions) == local.step(slots, actions)
        assert remote.metadata()["r_max"] == local.envs[0].unwrapped.metadata["r_max"]
        with pytest.raises(IndexError):
            remote.step([3], ["look"])
    finally:
        local.close()
        remote.close()
    assert remote.alive() == []


def test_env_errors_reach_the_trainer_and_workers_end():
    pool = EnvWorkerPool(_Fails(), workers=2)
    processes = list(pool._processes)
    try:
        pool.ensure(2)
        pool.reset([0, 1], [1, 2])
        with pytest.raises(EnvWorkerError, match="cannot do 'look'"):
            pool.step([0, 1], ["look", "look"])
        assert pool.reset([0], [3])[0][0]  # the worker still serves after an env error
        processes[1].kill()
        processes[1].join()
        with pytest.raises(EnvWorkerError, match="worker 1 died"):
            pool.reset([0, 1], [4, 5])
    finally:
        pool.close()
    deadline = time.time() + 10
    while any(p.is_alive() for p in processes) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(p.is_alive() for p in processes)


def test_an_unguarded_launcher_is_named_when_its_workers_die(tmp_path):
    """A user's script that starts training at import time, with env workers: each spawned worker
    re-imports it and dies in its start-up; the error names the script and the missing guard."""
    import subprocess
    import sys

    script = tmp_path / "launch.py"
    script.write_text(
        "import agentrl\n"
        "config = agentrl.build_config(algo='grpo', env='keydoor', model='tiny', overrides=[\n"
        "    'rollout.env_workers=1', 'rollout.tasks_per_iteration=1', 'train.iterations=1',\n"
        f"    'train.run_dir={tmp_path / 'run'}'])\n"
        "agentrl.train(config)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert done.returncode != 0
    assert "env worker 0 died" in done.stderr
    assert "'launch.py' launches agentrl" in done.stderr and 'if __name__ == "__main__":' in done.stderr
