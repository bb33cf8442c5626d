"""The pre-study's table: one row per finished run under a pre-study folder.

The CPU learning comparison chooses each algorithm's learning rate (and value warm-up) from short
runs on one seed (docs/benchmarks.md, "The CPU learning comparison"). Each setting is one bench
folder (``prestudy/lr3e-5``, ``prestudy/lr1e-4``, ...); this script reads every finished run in
them through the reporting package (nothing is re-run) and prints a Markdown table: held-out
successes at the end out of the episodes played, per task type, the wins in training, how far the
policy moved from the reference, the value readout's explained variance, the median time per
iteration and the CPU the run ran on.

    python benchmarks/prestudy_table.py docs/results/alfworld-small-conversation/prestudy
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from agentrl.reporting.runs import Run, discover_runs
from agentrl_envs.alfworld.catalog import SHORT_NAMES as SHORT

# The table's columns, in the order docs/benchmarks.md lists them.


def _count(record: dict, key: str, episodes_key: str) -> str:
    rate, episodes = record.get(key), record.get(episodes_key)
    if not isinstance(rate, (int, float)) or not isinstance(episodes, (int, float)):
        return "-"
    return f"{round(rate * episodes)}/{int(episodes)}"


def _explained_variance(run: Run) -> str:
    keys = [k for k in ("value/explained_variance_v", "value/explained_variance_q") if run.has(k)]
    if not keys:
        return "-"
    return " / ".join(f"{run.values(k)[-1][1]:.2f}" for k in keys)


def row(run: Run, setting: str) -> str:
    final = run.last_eval() or {}
    wins = sum(round(r.get("rollout/success_rate", 0.0) * r.get("rollout/episodes", 0.0))
               for r in run.records if r.get("iteration", 0) > 0)
    episodes = sum(int(r.get("rollout/episodes", 0)) for r in run.records if r.get("iteration", 0) > 0)
    times = [v for r, v in run.values("time/iteration") if r.get("iteration", 0) > 1]
    kl = run.values("policy/kl_ref")
    cpu = run.bench.machine.get("cpu", "?") if run.bench else "?"
    per_type = " ".join(
        f"{short} {_count(final, f'eval/success/{t}', f'eval/episodes/{t}')}"
        for t, short in SHORT.items()
    )
    kl_end = f"{kl[-1][1]:.3f}" if kl else "-"
    seconds = f"{statistics.median(times):.0f}" if times else "-"
    return (f"| {setting} | {run.algo} | {_count(final, 'eval/success_rate', 'eval/episodes')} | "
            f"{per_type} | {wins}/{episodes} | {kl_end} | {_explained_variance(run)} | "
            f"{seconds} | {cpu} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="the pre-study folder (one bench per setting)")
    args = parser.parse_args()
    runs, _ = discover_runs([args.folder])
    print("| setting | algorithm | held-out success at the end | per task type | training wins "
          "| policy/kl_ref at the end | explained variance V / Q at the end "
          "| median s/iteration (2nd on) | CPU |")
    print("|---|---|---|---|---|---|---|---|---|")
    order = {"sapo": 0, "ppo": 1, "grpo": 2}
    settings = {id(run): run.path.relative_to(args.folder).parts[0] for run in runs}
    for run in sorted(runs, key=lambda r: (settings[id(r)], order.get(r.algo, 9))):
        if run.finished:
            print(row(run, settings[id(run)]))


if __name__ == "__main__":
    main()
