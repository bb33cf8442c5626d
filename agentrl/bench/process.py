"""One training run in a process of its own, reporting back to the process that started it.

``agentrl bench`` trains its runs one after another; in one process each run inherited what the
previous one left resident (freed heap glibc kept mapped, and objects such as vLLM engines that
are not released on ``close``): on this project's comparison a GRPO run after PPO read PPO's
20 GB as its peak RSS, and even after ``malloc_trim`` a run after PPO started at 8.4 GB. A fresh
process per run makes each run's time and memory its own, whatever the libraries keep.

The child builds the :class:`~agentrl.training.trainer.Trainer` and sends messages on a queue:
``("start", start_iteration, rss_gb)``, one ``("record", record)`` per iteration, then
``("end", stopped)``, or ``("user_error", message)`` / ``("error", traceback)``. The parent
(:func:`run_isolated`) turns them back into callbacks and exceptions, so a user's mistake is
still one sentence and a crash still names the run.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentrl.errors import UserError
from agentrl.training.config import RunConfig

POLL_S = 0.5  # how often the parent checks a silent child is still alive


@dataclass
class IsolatedResult:
    start_iteration: int
    rss_at_start_gb: float | None
    stopped: bool


def _exit_with_parent() -> None:
    """End this process if its parent dies (killed with SIGKILL, say), rather than train on
    as an orphan nobody reads."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(2.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="agentrl-parent-watch", daemon=True).start()


def _raise_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _child(
    config: RunConfig, resume: bool, deadline: float | None, threads: int, messages: Any
) -> None:
    """The child's whole life: train, stream records, say how it ended."""
    _exit_with_parent()
    try:
        import torch

        torch.set_num_threads(threads)  # what the parent runs with (tests pin it to 1)
        from agentrl.rundir.metrics import resident_gb
        from agentrl.training.trainer import Trainer

        rss = resident_gb()  # before the run loads anything: libraries only
        trainer = Trainer(config, resume=resume)
        try:
            messages.put(("start", trainer.start_iteration, rss))
            result = trainer.train(
                lambda record: messages.put(("record", record)),
                should_stop=lambda: deadline is not None and time.time() >= deadline,
            )
        finally:
            trainer.close()
        messages.put(("end", result.stopped))
    except UserError as exc:
        messages.put(("user_error", str(exc)))
    except BaseException:  # noqa: BLE001 - everything goes back to the parent, by name
        messages.put(("error", traceback.format_exc()))


def run_isolated(
    config: RunConfig,
    resume: bool,
    name: str,
    on_start: Callable[[int, float | None], None],
    on_record: Callable[[dict[str, Any]], None],
    deadline: float | None = None,
) -> IsolatedResult:
    """Train ``config`` in a spawned process (``deadline``: a ``time.time()`` after which it
    checkpoints and stops at its iteration's end). Raises :class:`UserError` for the child's
    user errors and :class:`RuntimeError` naming ``name`` for anything else; an interrupt here
    stops the child."""
    import torch

    context = multiprocessing.get_context("spawn")  # no fork of a process holding threads
    messages = context.Queue()
    # not a daemon: the run may start processes of its own (env workers, vLLM)
    child = context.Process(
        target=_child,
        args=(config, resume, deadline, torch.get_num_threads(), messages),
        name=f"agentrl-{name}",
    )
    # `kill PID` of the bench: leave through the finally below, which stops the child too
    previous = (
        signal.signal(signal.SIGTERM, _raise_exit)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    child.start()
    start: tuple[int, float | None] | None = None
    try:
        while True:
            try:
                message = messages.get(timeout=POLL_S)
            except queue_module.Empty:
                if not child.is_alive():
                    code = child.exitcode
                    hint = " (killed: out of memory?)" if code == -9 else ""
                    raise RuntimeError(
                        f"{name}: its training process exited with code {code}{hint} "
                        "before it finished."
                    ) from None
                continue
            kind = message[0]
            if kind == "start":
                start = (message[1], message[2])
                on_start(*start)
            elif kind == "record":
                on_record(message[1])
            elif kind == "end":
                child.join()
                assert start is not None
                return IsolatedResult(start[0], start[1], bool(message[1]))
            elif kind == "user_error":
                child.join()
                raise UserError(message[1])
            else:
                child.join()
                raise RuntimeError(f"{name} failed in its training process:\n{message[1]}")
    finally:
        if child.is_alive():
            child.terminate()
            child.join(30)
            if child.is_alive():
                child.kill()
                child.join()
        messages.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
