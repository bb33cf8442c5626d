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
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from agentrl.errors import UserError

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


def _ensure_builtin_envs_registered() -> None:
    import agentrl_envs  # noqa: F401  (registers the agentrl/... ids)


def resolve_env_id(name: str) -> str:
    """Map a short name (``alfworld``), a full id (``agentrl/ALFWorld-v0``) or gymnasium's
    ``module:EnvId`` (the module is imported first, so its ``gym.register`` runs) to a registered id."""
    from agentrl.env_modules import import_env_module, split_module_id

    _ensure_builtin_envs_registered()
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
    env_id = resolve_env_id(name)
    try:
        return gym.make(env_id, **kwargs)
    except (TypeError, ValueError) as exc:
        options = ", ".join(f"{k}={v!r}" for k, v in sorted(kwargs.items())) or "no options"
        reason = str(exc).strip().rstrip(".").replace("\n", " ")
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


def check_info(info: dict[str, Any], where: str) -> None:
    """Raise ValueError if ``info`` misses a contract key or has the wrong type."""
    for key in REQUIRED_INFO_KEYS:
        if key not in info:
            raise ValueError(f"{where}: info lacks '{key}'")
    if not isinstance(info["task"], str):
        raise ValueError(f"{where}: info['task'] must be a str")
    admissible = info["admissible_actions"]
    if admissible is not None and not (
        isinstance(admissible, Sequence) and all(isinstance(a, str) for a in admissible)
    ):
        raise ValueError(f"{where}: info['admissible_actions'] must be a list of str or None")
    if not isinstance(info["won"], bool):
        raise ValueError(f"{where}: info['won'] must be a bool")


def check_text_env(env: gym.Env, seeds: Sequence[int] = (0, 1), max_steps: int = 5) -> None:
    """Check agentrl's contract on top of gymnasium's ``check_env``.

    Resets with each seed twice (same task and observation both times), steps a few
    admissible actions and one nonsense action, and checks the types and info keys.
    Raises ValueError on the first violation.
    """
    base = env.unwrapped
    if not isinstance(base.observation_space, spaces.Text) or not isinstance(base.action_space, spaces.Text):
        raise ValueError("observation_space and action_space must be gymnasium.spaces.Text")
    r_max(env)
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        obs2, info2 = env.reset(seed=seed)
        if obs != obs2 or info["task"] != info2["task"]:
            raise ValueError(f"reset(seed={seed}) is not deterministic")
        if not isinstance(obs, str):
            raise ValueError("reset must return a str observation")
        check_info(info, f"reset(seed={seed})")
        obs_before = obs
        obs, reward, terminated, truncated, info = env.step("xyzzy plugh")
        if not isinstance(obs, str) or not isinstance(terminated, bool) or not isinstance(truncated, bool):
            raise ValueError("step must return (str, float, bool, bool, dict)")
        float(reward)
        check_info(info, "step(nonsense)")
        del obs_before
        for _ in range(max_steps):
            if terminated or truncated:
                break
            actions = info["admissible_actions"]
            action = actions[0] if actions else "look"
            obs, reward, terminated, truncated, info = env.step(action)
            check_info(info, f"step({action!r})")


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
