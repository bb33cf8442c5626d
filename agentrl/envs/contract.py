"""The text-env contract, and how agentrl finds and checks envs.

A text env is a plain :class:`gymnasium.Env` with these properties (DESIGN.md):

* ``observation_space`` and ``action_space`` are :class:`gymnasium.spaces.Text`
  (use :func:`text_space`, whose charset admits spaces and punctuation).
* ``reset(seed=s, options=None) -> (obs: str, info)``. The seed selects the task: the same seed
  on the same split gives the same task and the same initial state. GRPO relies on this to
  run k rollouts of one task.
* ``step(action: str) -> (obs, reward, terminated, truncated, info)``. ``terminated`` means the
  episode really ended (won or failed for good); ``truncated`` means it was cut by a step limit
  and the last state must be bootstrapped. An action the env does not understand is not an
  error: the state stays as it is and the observation says so.
* ``info`` always carries ``task`` (the instruction, str), ``admissible_actions`` (list of str,
  or None when actions are free-form) and ``won`` (bool); benchmarks add ``score`` (float) and
  ``task_type`` (str). An admissible action may end in the placeholder ``[...]`` (WebShop's
  ``search[...]``): it stands for that prefix followed by any text and a closing ``]``.
* ``metadata["r_max"]``: the largest return an episode can earn (SAPO scales its values by it).
* Optional: ``metadata["system_prompt"]`` (how the agent should see the env), and a method
  ``expert_action() -> str`` on the unwrapped env that returns a good next action from the
  current state (used for demonstrations and tests).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from agentrl.errors import UserError, cut, shown

#: Characters a text observation or action may contain: printable ASCII plus a few symbols
#: real pages use. Gymnasium's default charset is alphanumeric only, which rejects any sentence.
TEXT_CHARSET = string.printable + "°–—’“”…é×·€£"

#: Short names accepted on the command line for the registered envs.
ENV_ALIASES: dict[str, str] = {
    "keydoor": "agentrl/KeyDoor-v0",
    "alfworld": "agentrl/ALFWorld-v0",
    "webshop": "agentrl/WebShop-v0",
    "chain": "agentrl/Chain-v0",
    "locks": "agentrl/Locks-v0",
    "memory": "agentrl/Memory-v0",
    "corridor": "agentrl/Corridor-v0",
}

REQUIRED_INFO_KEYS = ("task", "admissible_actions", "won")


def text_space(max_length: int = 65536) -> spaces.Text:
    """A ``spaces.Text`` that admits ordinary sentences (see :data:`TEXT_CHARSET`)."""
    return spaces.Text(max_length=max_length, min_length=0, charset=TEXT_CHARSET)


def resolve_env_id(name: str) -> str:
    """Map a short name (``alfworld``), a full id (``agentrl/ALFWorld-v0``) or gymnasium's
    ``module:EnvId`` (the module is imported first, so its ``gym.register`` runs) to a registered id."""
    from agentrl.envs.modules import (
        ensure_builtin_envs_registered,
        import_env_module,
        split_module_id,
    )

    ensure_builtin_envs_registered()
    module, bare = split_module_id(name)
    if module is not None:
        added = import_env_module(module)
        if bare in gym.registry:
            return bare
        offered = f"it registers: {', '.join(added)}" if added else "it registers no env"
        raise UserError(f"Env '{bare}' is not registered after importing '{module}' ({offered}).")
    if name in gym.registry:
        return name
    alias = ENV_ALIASES.get(name.lower())
    if alias is not None and alias in gym.registry:
        return alias
    for env_id in gym.registry:
        if env_id.lower() == name.lower():
            return env_id
    known = ", ".join(sorted(set(ENV_ALIASES) | {i for i in gym.registry if i.startswith("agentrl/")}))
    raise UserError(f"Unknown env '{name}'; known agentrl envs are: {known} "
                    f"(or your own: --env yourmodule:YourEnv-v0, or --import yourmodule).")


def make_env(name: str, **kwargs: Any) -> gym.Env:
    """Create a text env by short name or id; kwargs go to the env's constructor.

    An env that refuses its options (an unknown keyword: TypeError; a value out of range or an
    unknown split: ValueError, as the built-in envs raise) is the user's mistake, reported with
    the env id and the options given.
    """
    import warnings

    env_id = resolve_env_id(name)
    try:
        with warnings.catch_warnings():  # render modes mean nothing to a text env; the warning is noise
            warnings.filterwarnings("ignore", message=".*doesn't include `render_modes`")
            return gym.make(env_id, **kwargs)
    except (TypeError, ValueError) as exc:
        options = ", ".join(f"{k}={shown(v, 80)}" for k, v in sorted(kwargs.items())) or "no options"
        reason = str(exc).strip().rstrip(".").replace("\n", " ")
        reason = reason if len(reason) <= 400 else reason[:400] + "..."  # it may echo every option
        raise UserError(f"Env '{env_id}' rejected its options ({options}): {reason}.") from exc


def r_max(env: gym.Env) -> float:
    """The env's largest possible return, from ``metadata['r_max']``."""
    value = env.unwrapped.metadata.get("r_max", env.metadata.get("r_max"))
    if value is None:
        raise UserError(f"Env {env.unwrapped.__class__.__name__} does not declare metadata['r_max'], which the text-env contract requires.")
    return float(value)


def expert_action(env: gym.Env) -> str:
    """The env's expert move from its current state (envs that offer ``expert_action``)."""
    method = getattr(env.unwrapped, "expert_action", None)
    if method is None:
        raise UserError(f"Env {env.unwrapped.__class__.__name__} has no expert_action() method, so it cannot make demonstrations.")
    return method()


class EnvContractError(UserError, ValueError):
    """An env breaks the text-env contract: one sentence naming the env, the method and the rule.

    A :class:`UserError` (the CLI shows the sentence and exits 2) and a ``ValueError`` (what
    :func:`check_text_env` has always raised).
    """


def check_info(info: Any, where: str) -> None:
    """Raise :class:`EnvContractError` if ``info`` misses a contract key or has the wrong type."""
    if not isinstance(info, dict):
        raise EnvContractError(f"{where}: info must be a dict, not {type(info).__name__}")
    for key in REQUIRED_INFO_KEYS:
        if key not in info:
            raise EnvContractError(f"{where}: info lacks '{key}'")
    if not isinstance(info["task"], str):
        raise EnvContractError(f"{where}: info['task'] must be a str")
    admissible = info["admissible_actions"]
    if admissible is not None and not (
        isinstance(admissible, Sequence) and not isinstance(admissible, str)
        and all(isinstance(a, str) for a in admissible)
    ):
        raise EnvContractError(f"{where}: info['admissible_actions'] must be a list of str or None")
    if not isinstance(info["won"], bool):
        raise EnvContractError(f"{where}: info['won'] must be a bool")


def _env_name(env: gym.Env) -> str:
    spec = getattr(env, "spec", None)
    return spec.id if spec is not None else env.unwrapped.__class__.__name__


def _called(env_name: str, where: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call one of the env's methods; an exception it raises is one sentence naming the call."""
    try:
        return method(*args, **kwargs)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 (the user's env code: any exception is reported)
        raise EnvContractError(f"Env '{env_name}' raised {type(exc).__name__} in {where}: "
                               f"{cut(str(exc)).rstrip('.')}.") from exc


def _checked_reset(env_name: str, base: gym.Env, seed: int) -> tuple[str, dict[str, Any]]:
    where = f"reset(seed={seed})"
    result = _called(env_name, where, base.reset, seed=seed)
    if not isinstance(result, tuple) or len(result) != 2:
        got = "the observation alone" if not isinstance(result, tuple) else f"{len(result)} values"
        raise EnvContractError(f"Env '{env_name}' breaks the text-env contract: {where} returned {got}; "
                               f"it must return (observation, info).")
    obs, info = result
    if not isinstance(obs, str):
        raise EnvContractError(f"Env '{env_name}' breaks the text-env contract: {where} returned an observation "
                               f"of type {type(obs).__name__}; observations must be str.")
    _checked_info(env_name, info, where)
    return obs, info


def _checked_step(env_name: str, base: gym.Env, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
    where = f"step({shown(action, 60)})"
    result = _called(env_name, where, base.step, action)
    if not isinstance(result, tuple) or len(result) != 5:
        got = f"{len(result)} values" if isinstance(result, tuple) else type(result).__name__
        old = " (gym's old obs, reward, done, info)" if isinstance(result, tuple) and len(result) == 4 else ""
        raise EnvContractError(f"Env '{env_name}' breaks the text-env contract: {where} returned {got}{old}; "
                               f"it must return (observation, reward, terminated, truncated, info).")
    obs, reward, terminated, truncated, info = result
    if not isinstance(obs, str):
        raise EnvContractError(f"Env '{env_name}' breaks the text-env contract: {where} returned an observation "
                               f"of type {type(obs).__name__}; observations must be str.")
    if isinstance(reward, bool) or not isinstance(reward, (int, float)) and not hasattr(reward, "__float__"):
        raise EnvContractError(f"Env '{env_name}' breaks the text-env contract: {where} returned a reward of type "
                               f"{type(reward).__name__}; rewards must be numbers.")
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        raise EnvContractError(f"Env '{env_name}' breaks the text-env contract: {where} returned terminated and "
                               f"truncated of types {type(terminated).__name__}, {type(truncated).__name__}; "
                               f"both must be bool.")
    _checked_info(env_name, info, where)
    return obs, float(reward), terminated, truncated, info


def _checked_info(env_name: str, info: Any, where: str) -> None:
    try:
        check_info(info, where)
    except EnvContractError as exc:
        raise EnvContractError(f"Env '{env_name}' breaks the text-env contract: {exc}.") from None


def check_text_env(env: gym.Env, seeds: Sequence[int] = (0, 1), max_steps: int = 5) -> None:
    """Check agentrl's contract on top of gymnasium's ``check_env``.

    Checks the spaces and ``r_max``, resets with each seed twice (same task and observation
    both times), steps one nonsense action and a few admissible ones, and checks what each call
    returns. The env's own methods are called (not gymnasium's checking wrappers), so the first
    violation is one sentence naming the env, the method and the rule: an
    :class:`EnvContractError`, which is both a ``UserError`` and a ``ValueError``.
    """
    name = _env_name(env)
    base = env.unwrapped
    for which in ("observation_space", "action_space"):
        space = getattr(base, which, None)
        if not isinstance(space, spaces.Text):
            raise EnvContractError(f"Env '{name}' breaks the text-env contract: its {which} is {shown(space, 80)}; "
                                   f"it must be gymnasium.spaces.Text (agentrl.text_space()).")
    r_max(env)
    for seed in seeds:
        obs, info = _checked_reset(name, base, seed)
        obs2, info2 = _checked_reset(name, base, seed)
        if obs != obs2 or info["task"] != info2["task"]:
            raise EnvContractError(f"Env '{name}' breaks the text-env contract: reset(seed={seed}) twice gave "
                                   f"different tasks or observations; the seed must select the task.")
        obs, reward, terminated, truncated, info = _checked_step(name, base, "xyzzy plugh")
        for _ in range(max_steps):
            if terminated or truncated:
                break
            actions = info["admissible_actions"]
            action = actions[0] if actions else "look"
            obs, reward, terminated, truncated, info = _checked_step(name, base, action)


PLACEHOLDER = "[...]"


def is_admissible(action: str, admissible: Sequence[str] | None) -> bool:
    """Whether ``action`` is one of ``admissible`` (None admits everything).

    Entries ending in ``[...]`` admit that prefix, any non-empty text without ``]``, and ``]``.
    """
    if admissible is None:
        return True
    for candidate in admissible:
        if candidate.endswith(PLACEHOLDER):
            prefix = candidate[: -len(PLACEHOLDER)] + "["
            if action.startswith(prefix) and action.endswith("]"):
                inner = action[len(prefix):-1]
                if inner.strip() and "]" not in inner:
                    return True
        elif action == candidate:
            return True
    return False
