"""Users' own env modules: ``--env module:EnvId``, ``--import MODULE`` and ``env.imports``.

A custom env is registered with gymnasium by the user's module (``gym.register(...)`` at import
time). agentrl has to import that module before it looks the id up, and so does every process
that builds envs: ``rollout.env_workers`` starts workers with ``spawn``, which run a fresh
interpreter where nothing the main process imported exists. So the names of the imported
modules are recorded here and travel with the env factory (:class:`agentrl.training.compose.EnvMaker`),
and each worker imports them again before making its envs.

gymnasium's own ``module:EnvId`` form is accepted everywhere an env is named, with the same
meaning as in ``gymnasium.make``: import ``module``, then make ``EnvId``.
"""

from __future__ import annotations

import importlib
import os
import re

import gymnasium as gym

from agentrl.errors import UserError, cut, shown

_imported: dict[str, list[str]] = {}  # module name -> env ids its import registered


def ensure_builtin_envs_registered() -> None:
    """Import ``agentrl_envs``, whose import registers the ``agentrl/...`` ids."""
    import agentrl_envs  # noqa: F401


def split_module_id(name: str) -> tuple[str | None, str]:
    """``"mymod:MyEnv-v0"`` -> ``("mymod", "MyEnv-v0")``; a plain id -> ``(None, id)``."""
    if ":" not in name:
        return None, name
    module, env_id = name.split(":", 1)
    module, env_id = module.strip(), env_id.strip()
    if not module or not env_id:
        raise UserError(f"Env '{name}' is not of the form module:EnvId (e.g. mylab.envs:Guess-v0).")
    return module, env_id


def check_module_name(module: str) -> None:
    """An absolute dotted module name (``mylab.envs``): there is no package for ``.x`` to be
    relative to, and an empty name imports nothing."""
    if not module.strip():
        raise UserError("An env module name is empty; name a module such as mylab.envs.")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module):
        raise UserError(f"Env module name {shown(module, 80)} is not an absolute module name such as mylab.envs"
                        f"{' (a relative import has no package to start from here)' if module.startswith('.') else ''}.")


def import_env_module(module: str) -> list[str]:
    """Import a user's module so that its ``gym.register`` calls run; return the ids it added.

    Any failure is one sentence: a module that cannot be found, or one whose own code fails
    (raises at import, a SyntaxError, a missing dependency). The latter names the error's last
    line and writes the full traceback to a file the sentence names, which is what the module's
    author needs to fix it.
    """
    check_module_name(module)
    if module in _imported:
        return _imported[module]
    before = set(gym.registry)
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        if not (module == missing or module.startswith(missing + ".")):
            raise _import_failure(module, exc) from exc  # the module exists but imports something missing
        raise UserError(f"Cannot import env module '{module}': no such module on the Python path "
                        f"(add its folder to PYTHONPATH or install it).") from exc
    except Exception as exc:  # noqa: BLE001 (the user's module code: any exception, a SyntaxError too)
        raise _import_failure(module, exc) from exc
    added = sorted(set(gym.registry) - before)
    _imported[module] = added
    return added


def _import_failure(module: str, exc: BaseException) -> UserError:
    """The sentence for a module whose own code failed; its traceback goes to a file."""
    import tempfile
    import traceback

    last = traceback.format_exception_only(exc)[-1].strip()
    fd, name = tempfile.mkstemp(prefix=f"agentrl-import-{module}-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("".join(traceback.format_exception(exc)))
    return UserError(f"Cannot import env module '{module}': {cut(last, 300)} (full traceback in {name}).")


def ids_registered_by_imports() -> dict[str, str]:
    """env id -> the imported module that registered it."""
    return {env_id: module for module, ids in _imported.items() for env_id in ids}


def import_all(modules: tuple[str, ...] | list[str]) -> None:
    """Import each module (an env worker calls this before making envs)."""
    for module in modules:
        import_env_module(module)


def _entry_module(entry_point: object) -> str:
    if isinstance(entry_point, str):
        return entry_point.split(":", 1)[0]
    return getattr(entry_point, "__module__", "") or ""


def _is_text_env(env_id: str) -> bool:
    """The cheap part of the contract: both spaces are ``Text`` and ``metadata['r_max']`` exists.

    Used to pick agentrl-capable envs out of everything gymnasium knows without stepping them;
    an env that cannot even be built with no options is not listed.
    """
    import warnings

    from gymnasium import spaces

    try:
        with warnings.catch_warnings():  # gymnasium's metadata warnings are noise in a listing
            warnings.simplefilter("ignore")
            env = gym.make(env_id, disable_env_checker=True)
    except Exception:  # noqa: BLE001 (a third-party env failing to build is simply not listed)
        return False
    try:
        base = env.unwrapped
        return (isinstance(base.observation_space, spaces.Text) and isinstance(base.action_space, spaces.Text)
                and "r_max" in base.metadata)
    finally:
        try:
            env.close()
        except Exception:  # noqa: BLE001
            pass


def list_text_envs() -> list[tuple[str, str, str]]:
    """``(id, origin, entry point)`` of every env agentrl can train on.

    origin: ``agentrl`` (the built-in ``agentrl/...`` ids), ``module <name>`` (registered by a
    module imported with ``--import`` or ``module:EnvId``), ``registered`` (any other gymnasium
    id, outside gymnasium's own envs, whose spaces are Text and that declares ``r_max``).
    """
    ensure_builtin_envs_registered()
    by_import = ids_registered_by_imports()
    rows = []
    for env_id, spec in sorted(gym.registry.items()):
        point = spec.entry_point
        entry = point if isinstance(point, str) else f"{_entry_module(point)}:{getattr(point, '__qualname__', point)}"
        if env_id.startswith("agentrl/"):
            rows.append((env_id, "agentrl", entry))
        elif env_id in by_import:
            rows.append((env_id, f"module {by_import[env_id]}", entry))
        elif not _entry_module(spec.entry_point).startswith(("gymnasium.", "shimmy", "ale_py")) \
                and _is_text_env(env_id):
            rows.append((env_id, "registered", entry))
    return rows
