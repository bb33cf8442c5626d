"""Run settings as data: a config tree as dotted keys, and the one list of the settings that
change nothing a run learns, which resume, the bench and the report all read from here."""

from __future__ import annotations

from typing import Any

#: Settings that change nothing the policy learns: how long to train, where the folder is, and
#: bookkeeping (evaluation draws from its own per-iteration random stream, so it does not shift
#: training's numbers; the loggers are views of metrics.jsonl). ``--resume`` accepts any of
#: them with a value other than the run's own (:mod:`agentrl.training.resume`).
NOT_LEARNED = frozenset({
    "train.iterations",
    "train.run_dir",
    "train.save_every",
    "train.samples_per_iteration",
    "train.eval_every",
    "train.eval_at_start",
    "train.eval_episodes",
    "train.eval_greedy",
    "train.loggers",  # where metrics are streamed to (agentrl/training/loggers.py)
})

#: Among :data:`NOT_LEARNED`, the ones that change what an evaluation measures: runs compared
#: side by side must agree on them.
CHANGES_MEASUREMENT = frozenset({"train.eval_episodes", "train.eval_greedy"})

#: What may differ between a run on disk and the comparison that reuses it: what changes nothing
#: learned and nothing measured (``agentrl bench``).
NOT_COMPARED = NOT_LEARNED - CHANGES_MEASUREMENT

#: What never splits a report's groups: the above, and the seed (a group's runs differ in it).
NOT_GROUPED = NOT_COMPARED | {"train.seed"}

#: Whole config sections an RL run carries but never reads (``agentrl sft``'s settings).
UNREAD_SECTIONS = ("sft.",)


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``: a config tree as dotted keys, the way ``--set`` names
    them; ``env.kwargs`` stays one value (it is one setting)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name != "env.kwargs":
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out
