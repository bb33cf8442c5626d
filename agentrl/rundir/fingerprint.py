"""Data fingerprints: which tasks a run, an eval or a report's runs actually played.

Two runs with the same config can play different games (official ALFWorld files on one machine,
generated games on another; another data release; another WebShop catalog), and their numbers
are then not comparable. A fingerprint records what decides the tasks, so that every run
directory (``fingerprint.json``, ``summary.json``), every ``agentrl eval`` and every report can
say it, and a report can flag runs whose fingerprints differ.

An env may offer ``data_fingerprint() -> dict`` on its unwrapped object (optional, see
docs/custom_env.md). Its keys are the env's to choose; these have a meaning here:

* ``source``, ``split``, ``split_size`` (None: unbounded, seed ``s`` is task ``s``),
  ``games_sha256`` (a digest of the ordered task list), ``options``, ``reward``, ``versions``;
* ``comparability``: a sentence shown wherever the numbers are shown (e.g. "generated games:
  not comparable to published ALFWorld numbers");
* ``local``: machine-specific details (where the data lives), recorded but left out of the
  digest, so the same data in another folder compares equal.

:func:`collect` adds the env id, its class, the agentrl version and the constructor options,
and a ``digest`` over everything but ``local``. An env without the method still gets a
fingerprint from those generic fields alone.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentrl.rundir.layout import FINGERPRINT_FILE

FILE = FINGERPRINT_FILE
LOCAL_KEY = "local"
#: Left out of the digest: where the data lives, and how much of it an eval played.
_NOT_DIGESTED = (LOCAL_KEY, "digest", "eval_episodes", "coverage")
#: The fields :func:`describe` shows, in order.
_SHOWN = ("source", "split", "split_size", "protocol")


def _jsonable(value: Any) -> Any:
    """``value`` with tuples as lists and anything exotic as its text, so it round-trips JSON."""
    return json.loads(json.dumps(value, default=str, sort_keys=True))


def _agentrl_version() -> str:
    from agentrl import __version__

    return __version__


def collect(env: gym.Env, env_id: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fingerprint of ``env`` (made with ``options``) as a JSON-ready dict with a ``digest``."""
    base = env.unwrapped
    spec = getattr(env, "spec", None) or getattr(base, "spec", None)
    fingerprint: dict[str, Any] = {
        "env_id": env_id,
        "env_version": getattr(spec, "version", None),
        "env_class": f"{type(base).__module__}.{type(base).__qualname__}",
        "agentrl_version": _agentrl_version(),
        "options": dict(options or {}),
    }
    method = getattr(base, "data_fingerprint", None)
    if callable(method):
        offered = method()
        own_options = offered.pop("options", None)
        fingerprint.update(offered)
        if own_options is not None:  # the env's effective options, given ones kept as such
            fingerprint["options"] = {**fingerprint["options"], **own_options}
    fingerprint = _jsonable(fingerprint)
    fingerprint["digest"] = digest(fingerprint)
    return fingerprint


def digest(fingerprint: dict[str, Any]) -> str:
    """A short SHA-256 over everything but machine-specific details (``local``), the eval's
    episode count and coverage, and itself.

    ``options`` enter without paths to the data (``data_path``, ``data_dir``): where the data
    lives is ``local``; what it is, is ``games_sha256``.
    """
    kept = {k: v for k, v in fingerprint.items() if k not in _NOT_DIGESTED}
    if isinstance(kept.get("options"), dict):
        kept["options"] = {k: v for k, v in kept["options"].items()
                           if k not in ("data_path", "data_dir")}
    text = json.dumps(kept, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe(fingerprint: dict[str, Any] | None) -> str:
    """One line for tables and logs: source, split, size, digest, and the comparability note."""
    if not fingerprint:
        return "no data fingerprint recorded"
    parts = [str(fingerprint.get("env_id", "?"))]
    for key in _SHOWN:
        value = fingerprint.get(key)
        if value is None:
            if key == "split_size" and "source" in fingerprint:
                parts.append("unbounded split")
            continue
        parts.append(f"{value} tasks" if key == "split_size" else f"{key} {value}")
    parts.append(f"fingerprint {fingerprint.get('digest', '?')}")
    text = ", ".join(parts)
    note = fingerprint.get("comparability")
    return f"{text} ({note})" if note else text


def coverage_note(fingerprint: dict[str, Any] | None, episodes: int) -> str | None:
    """A sentence when ``episodes`` evaluation episodes do not play each game of a finite split
    exactly once (fewer: a subset; more: games repeat), else None."""
    size = (fingerprint or {}).get("split_size")
    if not isinstance(size, int) or episodes == size:
        return None
    if episodes < size:
        return f"evaluated on {episodes} of the split's {size} games (seeds 0..{episodes - 1})"
    return f"{episodes} episodes on a split of {size} games: games repeat"




def write(run_dir: Path, fingerprints: dict[str, dict[str, Any]]) -> Path:
    """``RUN/fingerprint.json``: ``{"train": ..., "eval": ...}`` beside ``config.yaml``."""
    from agentrl.rundir.durable import atomic_write_text

    path = Path(run_dir) / FILE
    atomic_write_text(path, json.dumps(fingerprints, indent=2, sort_keys=True) + "\n")
    return path


def read(run_dir: Path) -> dict[str, dict[str, Any]] | None:
    """A run's fingerprints, or None for runs made before fingerprints existed."""
    path = Path(run_dir) / FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None




def check_unchanged(run_dir: Path, now: dict[str, dict[str, Any]]) -> None:
    """Raise :class:`~agentrl.errors.UserError` when a split's digest differs from the one
    ``run_dir`` recorded (runs without ``fingerprint.json`` are not checked)."""
    from agentrl.errors import UserError

    before = read(run_dir) or {}
    for split, fingerprint in now.items():
        old = before.get(split)
        if isinstance(old, dict) and old.get("digest") != fingerprint.get("digest"):
            raise UserError(
                f"Cannot resume '{run_dir}': its {split} data differ from what it played "
                f"({describe(old)}; now {describe(fingerprint)})."
            )




def summary_text(fingerprint: dict[str, Any] | None) -> str:
    """:func:`describe` plus the coverage sentence, for the end of a command's output."""
    text = describe(fingerprint)
    coverage = (fingerprint or {}).get("coverage")
    return f"{text}; {coverage}" if coverage else text


def write_beside(output: Path, fingerprint: dict[str, Any]) -> Path:
    """``OUTPUT.fingerprint.json`` next to an eval's episodes file."""
    path = Path(f"{output}.fingerprint.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    from agentrl.rundir.durable import atomic_write_text

    atomic_write_text(path, json.dumps(fingerprint, indent=2, sort_keys=True) + "\n")
    return path
