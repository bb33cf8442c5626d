"""Is a hub model reachable, decided in about a second instead of a minute of retries.

transformers asked for an id that is neither cached nor downloadable (no network, a typo, a
relative folder written without ``./``) retries for ~60 s before it fails with a long
traceback. A model that is already in the local hub cache is used as it is; otherwise one
metadata request with a short timeout tells "not on the hub" from "hub unreachable", each as
one sentence, and a model that exists is then downloaded by transformers as usual.
"""

from __future__ import annotations

import functools
import os

from agentrl.errors import UserError

TIMEOUT_S = 10.0


def _is_cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 (a malformed id: not cached)
        return False
    return isinstance(found, str)


def _offline() -> bool:
    return any(os.environ.get(name, "").lower() in ("1", "true", "yes", "on")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


@functools.cache
def check_hub_model(repo_id: str) -> None:
    """Raise :class:`UserError` unless ``repo_id`` is cached locally or exists on a reachable hub."""
    if _is_cached(repo_id):
        return
    if _offline():
        raise UserError(f"Model '{repo_id}' is not a local folder and not in the local hub cache "
                        f"(HF_HUB_OFFLINE is set, so it cannot be downloaded).")
    from huggingface_hub import model_info
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        model_info(repo_id, timeout=TIMEOUT_S)
    except GatedRepoError:
        return  # exists; the loader reports a missing token in its own words
    except RepositoryNotFoundError as exc:
        raise UserError(f"Model '{repo_id}' is not a local folder and not a model on the hub "
                        f"(or it is private and no token is set).") from exc
    except Exception as exc:  # noqa: BLE001 (connection errors come from httpx or requests)
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"Model '{repo_id}' is not a local folder and not in the local hub cache, "
                        f"and the hub cannot be reached ({reason}).") from exc
