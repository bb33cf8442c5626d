"""What data the report's runs played (their ``fingerprint.json``, :mod:`agentrl.rundir.fingerprint`).

Numbers from runs that played different tasks (official against generated games, another data
release, another catalog) must not be averaged or compared silently, so the report lists each
run's fingerprint and says in a warning line when they differ, and repeats every
"not comparable" sentence an env attached to its data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentrl.reporting.runs import Run
from agentrl.rundir.fingerprint import describe

SPLITS = ("train", "eval")


def data_rows(runs: Sequence[Run], name: Callable[[Run], str]) -> list[list[str]]:
    """One row per run: name, what training played, what evaluation played."""
    rows = []
    for run in runs:
        prints = run.fingerprints or {}
        rows.append([name(run), *[describe(prints.get(split)) if prints else "not recorded"
                                  for split in SPLITS]])
    return rows


def data_warnings(runs: Sequence[Run], name: Callable[[Run], str]) -> list[str]:
    """Warning lines: runs whose train or eval fingerprints differ, runs without one."""
    warnings = []
    unrecorded = [name(r) for r in runs if not r.fingerprints]
    if unrecorded:
        warnings.append(
            f"No data fingerprint for {', '.join(unrecorded)} (made before agentrl recorded "
            "fingerprint.json): what data they played is unknown."
        )
    for split in SPLITS:
        digests: dict[str, list[str]] = {}
        for run in runs:
            fingerprint = (run.fingerprints or {}).get(split)
            if fingerprint is not None:
                digests.setdefault(str(fingerprint.get("digest", "?")), []).append(name(run))
        if len(digests) > 1:
            listing = "; ".join(f"{d}: {', '.join(names)}" for d, names in digests.items())
            warnings.append(
                f"Not like-for-like: the runs' {split} data fingerprints differ ({listing}); "
                "they played different tasks, so their numbers are not comparable."
            )
    return warnings


def comparability(runs: Sequence[Run]) -> list[str]:
    """The distinct "not comparable to published numbers" sentences of the runs' data."""
    found: list[str] = []
    for run in runs:
        for fingerprint in (run.fingerprints or {}).values():
            note = fingerprint.get("comparability") if isinstance(fingerprint, dict) else None
            if note and note not in found:
                found.append(str(note))
    return found
