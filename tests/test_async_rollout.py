"""Asynchronous rollouts (agentrl/training/producer.py): the schedule's versions and staleness
worked out by hand, the importance weights against hand-computed numbers, the producer at lag 0
equal to the synchronous loop key by key, and a k = 1 run deterministic and resumable."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest
import torch

from agentrl.algorithms.batch import behaviour_logprobs, tis_weights
from agentrl.errors import UserError
from agentrl.rollout.engine import RolloutResult, Task
from agentrl.rollout.trajectory import Trajectory, Turn
from agentrl.training.config import build_config
from agentrl.training.producer import RolloutProducer, fresh_episodes
from agentrl.training.trainer import Trainer

#: what measures the machine, not the run; plus the producer's own keys
MACHINE_KEYS = ("time/", "memory/", "perf/tokens_per_s", "perf/env_steps_per_s", "wall_time", "async/")


def _traj(version: int) -> Trajectory:
    t = Trajectory(task_seed=0, group=0, task="t")
    t.policy_version = version
    return t


def test_staleness_accounting_by_hand():
    # trainer at version 5, episodes played by 5, 4, 3 and 2: staleness 0, 1, 2, 3
    kept, metrics = fresh_episodes([_traj(5), _traj(4), _traj(3), _traj(2)], version=5, max_staleness=2)
    assert [t.policy_version for t in kept] == [5, 4, 3]
    assert metrics == {"async/staleness_mean": 1.5, "async/staleness_max": 3.0, "async/dropped": 1.0}


class _FakeEngine:
    """Plays one empty trajectory per task and notes which weights version it saw."""

    def __init__(self):
        self.weights = -1
        self.busy = threading.Lock()
        self.seen: dict[int, int] = {}

    def run(self, tasks):
        with self.busy:
            iteration = tasks[0].seed
            self.seen[iteration] = self.weights
            return RolloutResult([Trajectory(task_seed=t.seed, group=t.group, task="x") for t in tasks])


def _producer(engine: _FakeEngine, trainer_weights: list[int], lag: int) -> RolloutProducer:
    def sync():
        assert not engine.busy.locked(), "weights copied while a batch was playing"
        engine.weights = trainer_weights[0]

    return RolloutProducer(engine, sync, lambda i: [Task(seed=i, group=0)], lambda i: None,
                           lag=lag, last_iteration=6)


def test_the_schedule_plays_batch_i_with_version_i_minus_1_minus_k():
    engine, weights = _FakeEngine(), [0]
    producer = _producer(engine, weights, lag=2)
    versions, restarted = [], []
    for i in range(1, 7):
        batch = producer.next_batch(i)
        versions.append(batch.version)
        restarted.append(batch.restarted)
        assert {t.policy_version for t in batch.rollout.trajectories} == {batch.version}
        weights[0] = i  # the update of iteration i makes version i
    producer.close()
    # batch j: version max(0, j - 1 - 2); the trainer holds j - 1, so staleness 0, 1, 2, 2, 2, 2
    assert versions == [0, 0, 0, 1, 2, 3]
    assert [i - 1 - v for i, v in zip(range(1, 7), versions, strict=True)] == [0, 1, 2, 2, 2, 2]
    assert engine.seen == {i: v for i, v in zip(range(1, 7), versions, strict=True)}
    assert restarted == [False] * 6


def test_after_a_resume_the_batches_in_flight_are_replayed_with_the_checkpoint():
    # resumed from checkpoint 3 (version 3): batches 4 and 5 were in flight with versions 1 and 2;
    # they are played again with version 3 (restarted), batch 6 is on schedule again
    engine, weights = _FakeEngine(), [3]
    producer = _producer(engine, weights, lag=2)
    got = []
    for i in (4, 5, 6):
        batch = producer.next_batch(i)
        got.append((batch.version, batch.restarted))
        weights[0] = i
    producer.close()
    assert got == [(3, True), (3, True), (3, False)]


def _turn(action_ids, logprobs) -> Turn:
    return Turn(prompt_ids=[1], action_ids=action_ids, rollout_logprobs=logprobs, prompt_text="", reply_text="",
                action="", observation="", reward=0.0, env_reward=0.0, terminated=False, truncated=False, valid=True)


def test_importance_weights_by_hand():
    # turn 1 recorded by the engine: -0.7, -0.9; turn 2 has no record (its old log-prob is used)
    turns = [_turn([5, 6], [-0.7, -0.9]), _turn([7], [])]
    old = torch.tensor([-0.5, -1.0, -2.0])
    assert behaviour_logprobs(turns, old).tolist() == pytest.approx([-0.7, -0.9, -2.0])
    # min(exp(old - behaviour), cap): exp(0.2) = 1.2214, exp(-0.1) = 0.9048, exp(0) = 1
    assert tis_weights(turns, old, cap=2.0).tolist() == pytest.approx([math.exp(0.2), math.exp(-0.1), 1.0], rel=1e-6)
    assert tis_weights(turns, old, cap=1.1).tolist() == pytest.approx([1.1, math.exp(-0.1), 1.0], rel=1e-6)


def _config(run_dir: Path, *extra: str):
    return build_config(algo="sapo", env="keydoor", model="tiny", overrides=[
        f"train.run_dir={run_dir}", "train.iterations=4", "train.eval_episodes=0", "train.save_every=2",
        "rollout.tasks_per_iteration=2", "rollout.max_turns=3", "rollout.max_new_tokens=12",
        "rollout.backend=hf", "algorithm.lr=1e-3", "algorithm.tis_cap=2", "train.samples_per_iteration=0", *extra])


def _train(config, lag=None, resume=False, stop_after=None):
    trainer = Trainer(config, resume=resume, rollout_lag=lag)
    done = []
    try:
        result = trainer.train(on_iteration=lambda r: done.append(r["iteration"]),
                               should_stop=(lambda: stop_after is not None and done[-1] >= stop_after))
    finally:
        trainer.close()
    return result.history


def _same(a: list[dict], b: list[dict]) -> None:
    assert [r["iteration"] for r in a] == [r["iteration"] for r in b]
    for x, y in zip(a, b, strict=True):
        kx = {k for k in x if not k.startswith(MACHINE_KEYS)}
        ky = {k for k in y if not k.startswith(MACHINE_KEYS)}
        assert kx == ky
        for key in kx:
            same = x[key] == y[key] or (isinstance(x[key], float) and math.isnan(x[key]) and math.isnan(y[key]))
            assert same, (x["iteration"], key, x[key], y[key])


def test_the_producer_at_lag_0_equals_the_synchronous_loop_key_by_key(tmp_path):
    loop = _train(_config(tmp_path / "loop"))
    worker = _train(_config(tmp_path / "worker"), lag=0)
    _same(worker, loop)
    assert all(r["async/staleness_max"] == 0 and r["async/dropped"] == 0 for r in worker)
    assert not any(k.startswith("async/") for r in loop for k in r)


def test_k1_is_deterministic_k_updates_stale_and_resumes_by_replaying_the_batch_in_flight(tmp_path):
    first = _train(_config(tmp_path / "a", "rollout.max_staleness=1"))
    second = _train(_config(tmp_path / "b", "rollout.max_staleness=1"))
    _same(first, second)
    assert [r["async/staleness_max"] for r in first] == [0, 1, 1, 1]
    assert [r["async/dropped"] for r in first] == [0, 0, 0, 0]
    # stopped after iteration 2 (checkpoint 2), then resumed: 1-2 as before; batch 3 was in flight
    # with version 1 and is replayed with version 2 (staleness 0, restarted); batch 4 on schedule
    part = _train(_config(tmp_path / "c", "rollout.max_staleness=1"), stop_after=2)
    _same(part, first[:2])
    rest = _train(_config(tmp_path / "c", "rollout.max_staleness=1"), resume=True)
    assert [r["iteration"] for r in rest] == [3, 4]
    assert [(r["async/staleness_max"], r["async/restarted"]) for r in rest] == [(0, 1), (1, 0)]
    again = _train(_config(tmp_path / "d", "rollout.max_staleness=1"), stop_after=2)
    _same(again, part)
    _same(_train(_config(tmp_path / "d", "rollout.max_staleness=1"), resume=True), rest)


def test_decoupled_staleness_without_a_cap_is_refused(tmp_path):
    with pytest.raises(UserError, match="tis_cap"):
        build_config(algo="ppo", env="keydoor", model="tiny", overrides=[
            f"train.run_dir={tmp_path}", "rollout.max_staleness=1"])


@pytest.mark.parametrize("mode", ["decoupled", "behaviour"])
def test_off_policy_modes_take_the_ratio_against_what_they_say(mode):
    """Episodes recorded as played by a much less likely policy (behaviour log-prob -5 on every
    token): ``behaviour`` takes the ratio against those log-probs, r = exp(logp + 5), and the
    logged k3 estimate r - log r - 1 is large (a token forced by the constraint, logp = 0, gives
    e^5 - 6 = 142.4); ``decoupled`` takes it against the old pass (r exactly 1 on the first step:
    0) and only weights the tokens by min(pi_old / pi_behaviour, tis_cap)."""
    import copy

    from agentrl.algorithms import PPO, PPOConfig
    from agentrl.models.loading import build_tiny_model, load_tokenizer, resolve_model
    from agentrl.models.policy import Policy
    from agentrl.rundir.metrics import PhaseTimer
    from agentrl.training.compose import env_factory, make_backend, make_engine
    from agentrl.training.config import EnvConfig, RolloutConfig

    tok = load_tokenizer(resolve_model("tiny"))
    policy = Policy(build_tiny_model(len(tok), seed=0), tok)
    cfg = RolloutConfig(tasks_per_iteration=4, max_turns=2, action_mode="constrained", backend="hf")
    engine = make_engine(policy, make_backend(policy, cfg, seed=0), cfg, env_factory(EnvConfig(id="keydoor"), "train"))
    try:
        trajectories = engine.run([Task(seed=s, group=s) for s in range(4)]).trajectories
    finally:
        engine.pool.close()
    for traj in trajectories:
        for turn in traj.turns:
            turn.rollout_logprobs = [-5.0] * len(turn.action_ids)
    algo = PPO(PPOConfig(lr=1e-3, epochs=1, minibatch_turns=10_000, kl_coef=0.0, tis_cap=2.0, off_policy=mode),
               Policy(copy.deepcopy(policy.model), tok), r_max=1.0)
    algo.asynchronous = True
    metrics = algo.update(trajectories, PhaseTimer())
    if mode == "behaviour":
        assert metrics["policy/approx_kl"] > 10.0
    else:
        assert metrics["policy/approx_kl"] == pytest.approx(0.0, abs=1e-6)
