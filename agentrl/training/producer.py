"""Asynchronous rollouts: the next iterations' episodes are played while the trainer updates.

With ``rollout.max_staleness: k`` > 0 the trainer does not wait for its own episodes. A worker
thread owns a generation backend with a copy of the weights of its own (so the update never
changes weights under a running generation) and the env pool; while the trainer updates on
iteration i, it plays iteration i+k. The schedule is fixed, not "as soon as possible":

- At the start of iteration i the trainer holds version i-1 (the weights after i-1 updates). It
  takes batch i, waits until the worker is idle, copies version i-1 into the worker's weights
  (:meth:`RolloutProducer.publish`) and submits batch i+k, which the worker plays during update i.
- So every batch in steady state is exactly k updates stale when it is trained on, and the first
  k of a run (played at the start, with the starting weights) are 0..k-1 updates stale.
- Each batch's sampling stream is reseeded from (seed, iteration), as in the synchronous loop,
  and the worker's weights are a fixed version while it plays: a run is deterministic whatever
  the threads' timing (two runs with the same seed give the same metrics).

Every trajectory records ``policy_version``; the trainer keeps only episodes at most k updates
stale (:func:`fresh_episodes`; with this schedule none are dropped, and ``async/dropped`` says so).

Resume restarts the batches that were in flight: a checkpoint holds the weights of its
iteration s only, not the older versions that were playing s+1..s+k, so after ``--resume`` those
k batches are played again with version s and their own task seeds and sampling streams
(``async/restarted`` 1 on them); the run then continues on the same schedule. A resumed run is
deterministic, but its k restarted batches are fresher than the uninterrupted run's.

How the update corrects for staleness: ``algorithm.off_policy`` (:class:`agentrl.algorithms.base.AlgoConfig`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from agentrl.rollout.engine import RolloutEngine, RolloutResult, Task
from agentrl.rollout.trajectory import Trajectory


@dataclass
class PlayedBatch:
    """One iteration's episodes as the worker played them."""

    iteration: int
    version: int  # the weights' version that played them (updates made before)
    rollout: RolloutResult
    seconds: float  # the worker's time on it (overlapped with the update, except at the start)
    restarted: bool = False  # replayed after a resume with fresher weights than the schedule's


def fresh_episodes(trajectories: Sequence[Trajectory], version: int,
                   max_staleness: int) -> tuple[list[Trajectory], dict[str, float]]:
    """The episodes at most ``max_staleness`` updates older than ``version`` (the trainer's),
    with ``async/staleness_mean``, ``async/staleness_max`` (over every episode offered) and
    ``async/dropped`` (how many were too stale to train on)."""
    staleness = [version - t.policy_version for t in trajectories]
    kept = [t for t, s in zip(trajectories, staleness, strict=True) if s <= max_staleness]
    metrics = {
        "async/staleness_mean": sum(staleness) / len(staleness) if staleness else 0.0,
        "async/staleness_max": float(max(staleness, default=0)),
        "async/dropped": float(len(trajectories) - len(kept)),
    }
    return kept, metrics


class RolloutProducer:
    """The worker thread that plays batches ahead of the update (see the module docstring).

    ``tasks_of(i)``: iteration i's tasks; ``reseed(i)``: reseed the worker backend's sampling
    stream for iteration i; ``lag``: k (0 plays each batch when it is needed, through the same
    worker: the synchronous schedule, used by the tests to check the worker against the loop)."""

    def __init__(self, engine: RolloutEngine, sync_weights: Callable[[], None],
                 tasks_of: Callable[[int], list[Task]], reseed: Callable[[int], None],
                 lag: int, last_iteration: int, backend: Any = None):
        self.engine = engine
        self.backend = backend  # the generation backend the engine plays with (evaluation uses it too)
        #: vLLM samples from torch's global generator (VLLMBackend.reseed): the worker then owns it,
        #: and the trainer's thread leaves it alone (no global reseed per iteration)
        self.owns_global_rng = getattr(backend, "name", "hf") == "vllm"
        self._sync_weights = sync_weights
        self.tasks_of = tasks_of
        self.reseed = reseed
        self.lag = lag
        self.last_iteration = last_iteration
        self.version: int | None = None
        self.pending: dict[int, Future[PlayedBatch]] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentrl-rollout")

    def wait(self) -> None:
        """Until every submitted batch is played (before evaluation, checkpoints, new weights)."""
        for future in list(self.pending.values()):
            future.exception()  # waits; a failure is raised where the batch is taken

    def publish(self, version: int) -> None:
        """Copy the trainer's weights (``version``) into the worker's, once it is idle."""
        if self.version == version:
            return
        self.wait()
        self._sync_weights()
        self.version = version

    def submit(self, iteration: int) -> None:
        assert self.version is not None, "publish weights before submitting"
        version, tasks = self.version, self.tasks_of(iteration)
        # the schedule plays batch i with version max(0, i - 1 - lag); only a resume plays fresher
        restarted = version > max(0, iteration - 1 - self.lag)

        def play() -> PlayedBatch:
            start = time.perf_counter()
            self.reseed(iteration)
            rollout = self.engine.run(tasks)
            for traj in rollout.trajectories:
                traj.policy_version = version
            return PlayedBatch(iteration, version, rollout, time.perf_counter() - start, restarted)

        self.pending[iteration] = self._executor.submit(play)

    def next_batch(self, iteration: int) -> PlayedBatch:
        """Iteration ``iteration``'s batch (the trainer holds version ``iteration - 1``), after
        which the worker is given that version and the batch ``lag`` ahead to play."""
        version = iteration - 1
        if iteration not in self.pending:  # the first iteration of this process
            self.publish(version)
            self.submit(iteration)
        batch = self.pending.pop(iteration).result()
        self.publish(version)
        for ahead in range(iteration + 1, min(iteration + self.lag, self.last_iteration) + 1):
            if ahead not in self.pending:
                self.submit(ahead)
        return batch

    def close(self) -> None:
        """Let a batch being played finish (a thread cannot be interrupted), drop the rest."""
        for future in self.pending.values():
            future.cancel()
        self._executor.shutdown(wait=True)
        self.pending.clear()


def start_producer(policy: Any, config: Any, factory: Callable[[], Any], tasks_of: Callable[[int], list[Task]],
                   lag: int) -> RolloutProducer:
    """The trainer's producer: a generation backend whose weights are its own (the hf backend
    with a copy), refreshed only by :meth:`RolloutProducer.publish`; an engine
    with its own env pool; each batch's sampling stream reseeded from (seed, iteration) as the
    synchronous loop does."""
    from agentrl.parallel.distributed import rank
    from agentrl.training.compose import make_backend, make_engine
    from agentrl.training.seeds import stream_seed

    backend = make_backend(policy, config.rollout, seed=config.train.seed + rank(), model_cfg=config.model,
                           separate=True)
    engine = make_engine(policy, backend, config.rollout, factory)
    seed = config.train.seed
    return RolloutProducer(engine, backend.sync_weights, tasks_of,
                           lambda i: backend.reseed(stream_seed(seed, i, "sampling", rank())),
                           lag=lag, last_iteration=config.train.iterations, backend=backend)
