"""Envs stepped in worker processes, behind the same interface as the in-process ``EnvPool``.

Slow envs (a headless browser per WebShop env, a planner per ALFWorld game) spend most of a turn
waiting in their own code. In one process the rollout engine steps N of them one after the other;
with ``rollout.env_workers: W`` the N envs live in W worker processes (slot ``s`` on worker
``s % W``) and each ``reset``/``step`` call sends every worker its share at once, so W envs make
progress at the same time and the call takes about the slowest worker's time instead of the sum.

The engine does not change: ``ensure(size)``, ``reset(slots, seeds)``, ``step(slots, actions)``
and ``close()`` behave exactly as :class:`agentrl.rollout.engine.EnvPool`'s, results in the order asked.
An env raising in a worker raises :class:`EnvWorkerError` here with the worker's traceback; a
worker that dies (killed, out of memory) is reported the same way instead of hanging the run.
With ``step_timeout_s`` (``rollout.env_step_timeout_s``) a step that hangs ends its episode as
truncated inside the worker (:mod:`agentrl.envs.step_timeout`); a worker that does not answer at
all within its steps' deadlines plus a grace period is killed and replaced, and its episodes
end as truncated.

Workers are started with ``spawn`` (never ``fork``: the trainer holds threads, a torch runtime
and perhaps a vLLM engine that must not be duplicated), so the env factory must be picklable and
the env importable in a fresh interpreter: the built-in ids, and any env registered by an
importable module or an ``entry_point`` string. Workers exit when the pool closes or when the
trainer's process goes away (their pipe closes).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import sys
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

import gymnasium as gym

from agentrl.envs.failures import EnvCallFailed, error_outcome, replaced, report_env_error
from agentrl.envs.step_timeout import (
    DeadlineRunner,
    EnvStepTimeout,
    abandon,
    report_timeout,
    timed_out_outcome,
)

log = logging.getLogger(__name__)

#: How much longer than its share of step deadlines a worker may take before it is presumed
#: stuck beyond what its own thread deadline can end (e.g. a hang that holds the GIL, or a
#: stopped process) and is killed and replaced.
WATCHDOG_GRACE_S = 30.0


class EnvWorkerError(RuntimeError):
    """An env failed (or its worker died) in a worker process."""


class EnvWorkerCallFailed(EnvCallFailed, EnvWorkerError):
    """An env raised in its worker (``rollout.env_errors: stop``): the engine's sentence names it;
    ``str()`` keeps the worker's traceback."""

    def __init__(self, method: str, slot: int, text: str, detail: str):
        super().__init__(method, slot, text=text)
        self.args = (detail,)


def _timed_step(envs: dict[int, gym.Env], last: dict[int, tuple[Any, dict]],
                runner: DeadlineRunner, factory: Callable[[], gym.Env], slot: int,
                action: Any, timeout_s: float) -> tuple:
    """One step under the deadline; a hung env's episode is truncated and its env replaced."""
    env = envs[slot]
    try:
        outcome = runner.call(lambda: env.step(action), timeout_s)
    except EnvStepTimeout:
        report_timeout(slot, action, timeout_s)
        abandon(env)
        envs[slot] = factory()
        obs, info = last.get(slot, ("", {}))
        return timed_out_outcome(obs, info, timeout_s)
    last[slot] = (outcome[0], outcome[4])
    return outcome


def _guarded_reset(envs: dict[int, gym.Env], factory: Callable[[], gym.Env], slot: int, seed: int,
                   env_errors: str) -> tuple:
    """One reset in a worker; an exception is :class:`EnvCallFailed`, or under ``truncate`` one
    retry on a fresh env (agentrl.envs.failures)."""
    try:
        return envs[slot].reset(seed=seed)
    except Exception as exc:  # noqa: BLE001 (the user's env: any exception)
        if env_errors != "truncate":
            raise EnvCallFailed("reset", slot, exc) from exc
        report_env_error(slot, "reset", exc)
        envs[slot] = replaced(envs[slot], factory)
    try:
        return envs[slot].reset(seed=seed)
    except Exception as exc:  # noqa: BLE001
        raise EnvCallFailed("reset", slot, exc) from exc


def _guarded_step(envs: dict[int, gym.Env], last: dict[int, tuple[Any, dict]], runner: DeadlineRunner,
                  factory: Callable[[], gym.Env], slot: int, action: Any, timeout_s: float,
                  env_errors: str) -> tuple:
    """:func:`_timed_step`; an exception the env raises is :class:`EnvCallFailed`, or under
    ``truncate`` ends the episode as truncated with a fresh env in its slot."""
    try:
        return _timed_step(envs, last, runner, factory, slot, action, timeout_s)
    except Exception as exc:  # noqa: BLE001 (the user's env: any exception)
        if env_errors != "truncate":
            raise EnvCallFailed("step", slot, exc) from exc
        report_env_error(slot, "step", exc)
        envs[slot] = replaced(envs[slot], factory)
        obs, info = last.get(slot, ("", {}))
        return error_outcome(obs, info, exc)


def _worker_main(conn: Connection, factory: Callable[[], gym.Env],
                 step_timeout_s: float = 0.0, env_errors: str = "stop") -> None:
    envs: dict[int, gym.Env] = {}
    last: dict[int, tuple[Any, dict]] = {}
    runner = DeadlineRunner()
    while True:
        try:
            command, payload = conn.recv()
        except (EOFError, OSError):  # the trainer went away
            break
        try:
            if command == "ensure":
                for slot in payload:
                    if slot not in envs:
                        envs[slot] = factory()
                result: Any = None
            elif command == "reset":
                result = [_guarded_reset(envs, factory, slot, seed, env_errors) for slot, seed in payload]
                last.update((slot, out) for (slot, _), out in zip(payload, result, strict=True))
            elif command == "step":
                result = [_guarded_step(envs, last, runner, factory, slot, action, step_timeout_s, env_errors)
                          for slot, action in payload]
            elif command == "metadata":
                env = envs[payload]
                result = dict(env.unwrapped.metadata)
            elif command == "close":
                for env in envs.values():
                    env.close()
                envs.clear()
                conn.send(("ok", None))
                break
            else:
                raise ValueError(f"unknown command {command!r}")
            conn.send(("ok", result))
        except EnvCallFailed as failure:  # the env raised: which call, which slot, what
            conn.send(("env_error", (failure.method, failure.slot,
                                     f"{failure.text}\n{traceback.format_exc()}")))
        except Exception as exc:  # report, keep serving: the caller decides what to do
            conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    for env in envs.values():
        try:
            env.close()
        except Exception:
            pass
    conn.close()


def _stop(processes: list[mp.Process], conns: list[Connection]) -> None:
    """Close pipes and end workers; safe to call twice (also the finaliser's job)."""
    for conn in conns:
        try:
            conn.send(("close", None))
        except (OSError, BrokenPipeError, ValueError):
            pass
    for proc, conn in zip(processes, conns, strict=True):
        try:
            if conn.poll(30):
                conn.recv()
        except (EOFError, OSError, ValueError):
            pass
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5)
        conn.close()
    processes.clear()
    conns.clear()


def _start_hint() -> str:
    """Why a worker may die before its first answer: a launcher script without a main guard.

    Workers are spawned: each re-imports the ``__main__`` script, and an unguarded script starts
    training again inside the worker, which Python stops during the worker's start-up.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or ""
    if not path or f"{os.sep}agentrl{os.sep}" in path or path.endswith(("pytest", "py.test")):
        return ""
    return (f" before it started; if '{os.path.basename(path)}' launches agentrl, put its entry "
            'point under `if __name__ == "__main__":` (env workers are spawned processes that '
            "re-import it; docs/custom_env.md)")


class EnvWorkerPool:
    """N env slots spread over ``workers`` processes; the interface of ``EnvPool``."""

    def __init__(self, factory: Callable[[], gym.Env], workers: int, step_timeout_s: float = 0.0,
                 watchdog_grace_s: float = WATCHDOG_GRACE_S, env_errors: str = "stop"):
        if workers < 1:
            raise ValueError("EnvWorkerPool needs at least one worker")
        self.factory = factory
        self.workers = workers
        self.size = 0
        self.step_timeout_s = step_timeout_s
        self.watchdog_grace_s = watchdog_grace_s
        self.env_errors = env_errors  # rollout.env_errors, applied inside each worker
        self._processes: list[mp.Process] = []
        self._conns: list[Connection] = []
        self._last: dict[int, tuple[Any, dict]] = {}  # slot -> last (obs, info), for a timeout
        self._answered: set[int] = set()  # workers that have answered once (so they did start)
        for index in range(workers):
            proc, conn = self._spawn(index)
            self._processes.append(proc)
            self._conns.append(conn)
        self._finalizer = weakref.finalize(self, _stop, self._processes, self._conns)

    def _spawn(self, index: int) -> tuple[mp.Process, Connection]:
        context = mp.get_context("spawn")
        parent, child = context.Pipe()
        proc = context.Process(target=_worker_main, args=(child, self.factory, self.step_timeout_s, self.env_errors),
                               name=f"agentrl-env-worker-{index}")
        proc.start()
        child.close()
        return proc, parent

    def _replace_worker(self, worker: int) -> None:
        """Kill a stuck worker and start a fresh one with fresh envs for its slots."""
        proc, conn = self._processes[worker], self._conns[worker]
        proc.kill()
        proc.join(timeout=10)
        conn.close()
        self._processes[worker], self._conns[worker] = self._spawn(worker)
        slots = [slot for slot in range(self.size) if self._worker_of(slot) == worker]
        if slots:
            self._call("ensure", {worker: slots})

    def _worker_of(self, slot: int) -> int:
        return slot % self.workers

    def _deadline(self, command: str, payload: list) -> float | None:
        """When a worker's answer to ``step`` is overdue (None: wait as long as it takes)."""
        if command != "step" or self.step_timeout_s <= 0:
            return None
        return time.monotonic() + self.step_timeout_s * len(payload) + self.watchdog_grace_s

    def _stuck(self, worker: int, payload: list) -> list[tuple]:
        """A worker that overran its steps' deadlines: replaced, its episodes truncated."""
        log.warning("env worker %d did not answer within its step deadlines "
                    "(rollout.env_step_timeout_s=%g s per step); it is killed and replaced, and "
                    "its %d episodes end as truncated", worker, self.step_timeout_s, len(payload))
        self._replace_worker(worker)
        return [timed_out_outcome(*self._last.get(slot, ("", {})), self.step_timeout_s)
                for slot, _ in payload]

    def _call(self, command: str, per_worker: dict[int, list]) -> dict[int, Any]:
        """Send every worker its share first, then collect: the workers run concurrently."""
        if not self._conns:
            raise EnvWorkerError("the env worker pool is closed")
        errors: list[str] = []
        failed: tuple[str, int, str] | None = None  # (method, slot, text) of an env that raised
        other = False  # a worker died, or failed outside an env call
        sent: dict[int, float | None] = {}
        for worker, payload in per_worker.items():
            try:
                self._conns[worker].send((command, payload))
                sent[worker] = self._deadline(command, payload)
            except (BrokenPipeError, OSError):
                code = self._processes[worker].exitcode
                errors.append(f"env worker {worker} died (exit code {code})")
                other = True
        results: dict[int, Any] = {}
        for worker, deadline in sent.items():
            try:
                if deadline is not None and not self._conns[worker].poll(
                        max(0.0, deadline - time.monotonic())):
                    results[worker] = self._stuck(worker, per_worker[worker])
                    continue
                status, value = self._conns[worker].recv()
            except (EOFError, OSError):
                code = self._processes[worker].exitcode
                errors.append(f"env worker {worker} died (exit code {code})"
                              + ("" if worker in self._answered else _start_hint()))
                other = True
                continue
            self._answered.add(worker)
            if status == "env_error":
                failed = failed or value
                errors.append(f"env worker {worker}: {value[2]}")
            elif status == "error":
                errors.append(f"env worker {worker}: {value}")
                other = True
            else:
                results[worker] = value
        if failed is not None and not other:  # envs raised (no worker died): the engine names the first
            method, slot, text = failed
            raise EnvWorkerCallFailed(method, slot, text=text.split("\n", 1)[0], detail="; ".join(errors))
        if errors:
            raise EnvWorkerError("; ".join(errors))
        return results

    def _scatter(self, command: str, slots: Sequence[int], values: Sequence[Any]) -> list[Any]:
        per_worker: dict[int, list] = {}
        where: list[tuple[int, int]] = []
        for slot, value in zip(slots, values, strict=True):
            if not 0 <= slot < self.size:
                raise IndexError(f"env slot {slot} does not exist (pool size {self.size})")
            worker = self._worker_of(slot)
            share = per_worker.setdefault(worker, [])
            where.append((worker, len(share)))
            share.append((slot, value))
        results = self._call(command, per_worker)
        return [results[worker][index] for worker, index in where]

    # --- the EnvPool interface ---------------------------------------------------------------
    def ensure(self, size: int) -> None:
        if size <= self.size:
            return
        per_worker: dict[int, list] = {}
        for slot in range(size):
            per_worker.setdefault(self._worker_of(slot), []).append(slot)
        self._call("ensure", per_worker)
        self.size = size

    def reset(self, slots: Sequence[int], seeds: Sequence[int]) -> list[tuple[str, dict]]:
        out = [tuple(r) for r in self._scatter("reset", slots, seeds)]
        self._last.update(zip(slots, out, strict=True))
        return out

    def step(self, slots: Sequence[int], actions: Sequence[str]) -> list[tuple]:
        out = [tuple(r) for r in self._scatter("step", slots, actions)]
        self._last.update((slot, (r[0], r[4])) for slot, r in zip(slots, out, strict=True))
        return out

    def metadata(self) -> dict[str, Any]:
        """The first env's ``metadata`` (the prompt builder reads its system prompt)."""
        self.ensure(1)
        return self._call("metadata", {0: 0})[0]

    def close(self) -> None:
        self._finalizer()
        self.size = 0

    def alive(self) -> list[bool]:
        return [p.is_alive() for p in self._processes]
