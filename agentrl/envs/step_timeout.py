"""A deadline on ``env.step``: an env that hangs ends its episode instead of the whole run.

Envs wait on things that can hang for good: a browser that stops answering without dying, a
planner on a pathological game, a remote service. One such step would stall a training run
forever, since the rollout engine waits for every live env each turn. With
``rollout.env_step_timeout_s`` > 0 each step runs on a helper thread and the caller waits at
most that long; a step that does not return in time ends its episode as truncated (reward 0,
the last observation kept, ``info["env_error"]`` says why), one warning line is logged, and
the env object is abandoned: closed in the background and replaced by a fresh one from the
factory, because an env whose step is still running cannot be trusted with another call.

A thread cannot be killed, so a hung step keeps its (daemon) thread until it returns, if ever;
that costs a thread, not the run. Code that hangs while holding the GIL cannot be timed out
from a thread at all; :mod:`agentrl.envs.workers` covers that case by killing the worker
process.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import gymnasium as gym

log = logging.getLogger(__name__)

StepOutcome = tuple[Any, float, bool, bool, dict[str, Any]]


class EnvStepTimeout(TimeoutError):
    """``env.step`` did not return within the configured time."""


class _Job:
    __slots__ = ("call", "done", "ok", "value")

    def __init__(self, call: Callable[[], Any]):
        self.call = call
        self.done = threading.Event()
        self.ok = False
        self.value: Any = None


class DeadlineRunner:
    """Runs calls on one reusable daemon thread and waits for each at most ``timeout_s``.

    One thread is reused (starting a thread per step would cost ~0.1 ms, a few percent of a
    fast env's step); when a call overruns, that thread is abandoned and the next call gets a
    new one. Daemon threads, not an executor: an executor's threads are joined at interpreter
    exit, so a hung step would also hang the exit.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] | None = None

    def call(self, fn: Callable[[], Any], timeout_s: float) -> Any:
        """``fn()``; its exception is re-raised here; :class:`EnvStepTimeout` if it overruns."""
        if timeout_s <= 0:
            return fn()
        if self._jobs is None:
            self._jobs = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(self._jobs,), daemon=True,
                             name="agentrl-env-step").start()
        job = _Job(fn)
        self._jobs.put(job)
        if not job.done.wait(timeout_s):
            self._jobs.put(None)  # the thread exits if the hung call ever returns
            self._jobs = None
            raise EnvStepTimeout(f"env.step did not return within {timeout_s:g} s")
        if not job.ok:
            raise job.value
        return job.value


def _serve(jobs: queue.SimpleQueue[_Job | None]) -> None:
    while (job := jobs.get()) is not None:
        try:
            job.value, job.ok = job.call(), True
        except BaseException as exc:  # handed to the waiting caller, which re-raises it
            job.value = exc
        job.done.set()


def timed_out_outcome(last_obs: Any, last_info: dict[str, Any] | None,
                      timeout_s: float) -> StepOutcome:
    """The step result that ends a hung env's episode: truncated, reward 0, last observation."""
    info = dict(last_info or {})
    info["won"] = False
    info["env_error"] = f"env.step did not return within {timeout_s:g} s"
    return last_obs, 0.0, False, True, info


def abandon(env: gym.Env) -> None:
    """Close a hung env on a daemon thread (its ``close`` may hang too), without waiting."""

    def close() -> None:
        try:
            env.close()
        except Exception as exc:  # nothing to be done about it: the env is being dropped
            log.debug("closing an abandoned env failed: %s", exc)

    threading.Thread(target=close, daemon=True, name="agentrl-env-abandon").start()


def report_timeout(slot: int, action: Any, timeout_s: float) -> None:
    """The one log line of a timed-out step."""
    log.warning("env slot %d: step(%.80r) did not return within %g s "
                "(rollout.env_step_timeout_s); its episode ends as truncated and the env is "
                "replaced", slot, action, timeout_s)
