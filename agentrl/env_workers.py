"""Envs stepped in worker processes, behind the same interface as the in-process ``EnvPool``.

Slow envs (a headless browser per WebShop env, a planner per ALFWorld game) spend most of a turn
waiting in their own code. In one process the rollout engine steps N of them one after the other;
with ``rollout.env_workers: W`` the N envs live in W worker processes (slot ``s`` on worker
``s % W``) and each ``reset``/``step`` call sends every worker its share at once, so W envs make
progress at the same time and the call takes about the slowest worker's time instead of the sum.

The engine does not change: ``ensure(size)``, ``reset(slots, seeds)``, ``step(slots, actions)``
and ``close()`` behave exactly as :class:`agentrl.rollout.EnvPool`'s, results in the order asked.
An env raising in a worker raises :class:`EnvWorkerError` here with the worker's traceback; a
worker that dies (killed, out of memory) is reported the same way instead of hanging the run.

Workers are started with ``spawn`` (never ``fork``: the trainer holds threads, a torch runtime
and perhaps a vLLM engine that must not be duplicated), so the env factory must be picklable and
the env importable in a fresh interpreter: the built-in ids, and any env registered by an
importable module or an ``entry_point`` string. Workers exit when the pool closes or when the
trainer's process goes away (their pipe closes).
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

import gymnasium as gym


class EnvWorkerError(RuntimeError):
    """An env failed (or its worker died) in a worker process."""


def _worker_main(conn: Connection, factory: Callable[[], gym.Env]) -> None:
    envs: dict[int, gym.Env] = {}
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
                result = [envs[slot].reset(seed=seed) for slot, seed in payload]
            elif command == "step":
                result = [envs[slot].step(action) for slot, action in payload]
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


class EnvWorkerPool:
    """N env slots spread over ``workers`` processes; the interface of ``EnvPool``."""

    def __init__(self, factory: Callable[[], gym.Env], workers: int):
        if workers < 1:
            raise ValueError("EnvWorkerPool needs at least one worker")
        self.factory = factory
        self.workers = workers
        self.size = 0
        self._processes: list[mp.Process] = []
        self._conns: list[Connection] = []
        context = mp.get_context("spawn")
        for index in range(workers):
            parent, child = context.Pipe()
            proc = context.Process(target=_worker_main, args=(child, factory),
                                   name=f"agentrl-env-worker-{index}")
            proc.start()
            child.close()
            self._processes.append(proc)
            self._conns.append(parent)
        self._finalizer = weakref.finalize(self, _stop, self._processes, self._conns)

    def _worker_of(self, slot: int) -> int:
        return slot % self.workers

    def _call(self, command: str, per_worker: dict[int, list]) -> dict[int, Any]:
        """Send every worker its share first, then collect: the workers run concurrently."""
        if not self._conns:
            raise EnvWorkerError("the env worker pool is closed")
        errors: list[str] = []
        sent = []
        for worker, payload in per_worker.items():
            try:
                self._conns[worker].send((command, payload))
                sent.append(worker)
            except (BrokenPipeError, OSError):
                code = self._processes[worker].exitcode
                errors.append(f"env worker {worker} died (exit code {code})")
        results: dict[int, Any] = {}
        for worker in sent:
            try:
                status, value = self._conns[worker].recv()
            except (EOFError, OSError):
                code = self._processes[worker].exitcode
                errors.append(f"env worker {worker} died (exit code {code})")
                continue
            if status == "error":
                errors.append(f"env worker {worker}: {value}")
            else:
                results[worker] = value
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
        return [tuple(r) for r in self._scatter("reset", slots, seeds)]

    def step(self, slots: Sequence[int], actions: Sequence[str]) -> list[tuple]:
        return [tuple(r) for r in self._scatter("step", slots, actions)]

    def metadata(self) -> dict[str, Any]:
        """The first env's ``metadata`` (the prompt builder reads its system prompt)."""
        self.ensure(1)
        return self._call("metadata", {0: 0})[0]

    def close(self) -> None:
        self._finalizer()
        self.size = 0

    def alive(self) -> list[bool]:
        return [p.is_alive() for p in self._processes]
