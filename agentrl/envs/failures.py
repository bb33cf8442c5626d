"""An exception raised by a user's env inside ``reset`` or ``step`` while episodes are played.

``rollout.env_errors`` decides what it means:

* ``stop`` (default): the run ends with one sentence naming the env, the task seed, the turn and
  the exception; the run directory keeps its last checkpoint, so ``--resume`` continues it once
  the env is fixed. A bug in an env should be seen, not averaged into the returns.
* ``truncate``: only that episode ends, as truncated at the turn that failed (bootstrapped like a
  hung step, :mod:`agentrl.envs.step_timeout`); the env is closed and replaced by a fresh one, one
  warning line is logged and the iteration's ``rollout/env_errors`` counts it. For a flaky env
  (a browser that crashes once in a thousand steps) that should not cost a long run.

A reset that raises under ``truncate`` is retried once on a fresh env (an episode that never
started has no turn to truncate); a second failure stops the run as under ``stop``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from agentrl.errors import UserError, cut

log = logging.getLogger(__name__)

#: What ``rollout.env_errors`` may be.
ENV_ERROR_MODES = ("stop", "truncate")
#: ``info`` key of an outcome made up for a step that raised (counted as ``rollout/env_errors``).
RAISED_KEY = "env_exception"


class EnvCallFailed(Exception):
    """A pool's env raised in ``method`` ("reset" or "step") for ``slot``; the engine, which knows
    the slot's task seed and turn, turns it into :class:`EnvStopped`."""

    def __init__(self, method: str, slot: int, error: BaseException | None = None, text: str | None = None):
        self.text = text if text is not None else exception_text(error) if error is not None else "an error"
        super().__init__(f"{method} of slot {slot}: {self.text}")
        self.method, self.slot, self.error = method, slot, error


class EnvStopped(UserError):
    """A run or evaluation stopped because an env raised (``rollout.env_errors: stop``)."""


def exception_text(error: BaseException) -> str:
    """``RuntimeError('boom')`` as ``RuntimeError: boom`` (first line, cut to 200 characters)."""
    message = cut(str(error))
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def stop_sentence(env_id: str, failure: EnvCallFailed, task_seed: int, turn: int) -> str:
    """The sentence for an env that raised: env id, method, turn, task seed and the exception."""
    where = "reset" if failure.method == "reset" else f"step at turn {turn}"
    return f"Env '{env_id}' raised {failure.text} in {where} of task seed {task_seed}"


def error_outcome(last_obs: Any, last_info: dict[str, Any] | None, error: BaseException) -> tuple:
    """The step outcome of a step that raised: the episode ends truncated, reward 0, with the
    last observation and info kept and the exception named in ``info['env_error']``."""
    info = dict(last_info or {})
    info["env_error"] = exception_text(error)
    info[RAISED_KEY] = True
    return last_obs, 0.0, False, True, info


def replaced(env: gym.Env, factory: Callable[[], gym.Env]) -> gym.Env:
    """A fresh env in place of one that raised (closing the broken one may raise too)."""
    try:
        env.close()
    except Exception:  # noqa: BLE001 (the env is already broken; its close is best effort)
        pass
    return factory()


def report_env_error(slot: int, method: str, error: BaseException) -> None:
    log.warning("env slot %d: %s raised %s; the episode ends truncated and the env is replaced "
                "(rollout.env_errors=truncate)", slot, method, exception_text(error))
