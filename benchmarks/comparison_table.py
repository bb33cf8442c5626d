"""The learning comparison's per-run table: one row per run of a bench folder.

``agentrl report`` aggregates over seeds; this table is its companion in docs/benchmarks.md and
shows every run on its own, because with three seeds and 36 held-out games the spread between
seeds is most of what there is to see. Each row: the CPU variant that trained it, the held-out
wins at every evaluation, the final wins per task type, the wins in training, env steps, the
median time per iteration, the peak resident memory (blank when the run shared its process with
an earlier run, as the report does), and how far the policy moved from the reference.
Everything is read from the run folders through the reporting package; nothing is re-run.

    python benchmarks/comparison_table.py docs/results/alfworld-small-conversation/bench
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from agentrl.reporting.runs import Run, discover_runs
from agentrl_envs.alfworld.catalog import SHORT_NAMES as SHORT

ORDER = {"sapo": 0, "ppo": 1, "grpo": 2}




def cpu_variant(run: Run) -> str:
    """The CPU's maker and whether it had AMX, for every session that trained the run (a run
    resumed on another machine shows both): the same weights break greedy near-ties differently
    on each (docs/benchmarks.md), so a row says where it was computed."""
    names = []
    for session in run.sessions or ([run.bench] if run.bench else []):
        cpu, isa = str(session.machine.get("cpu", "")), session.machine.get("cpu_isa")
        maker = "AMD" if "AMD" in cpu else "Intel" if "Intel" in cpu else "?"
        name = f"{maker}, " + ("?" if isa is None else
                               "AMX" if "amx_bf16" in isa.split() else "no AMX")
        if name not in names:
            names.append(name)
    return " then ".join(names) or "?"


def wins(record: dict, rate_key: str, episodes_key: str) -> int | None:
    rate, episodes = record.get(rate_key), record.get(episodes_key)
    if not isinstance(rate, (int, float)) or not isinstance(episodes, (int, float)):
        return None
    return round(rate * episodes)


def row(run: Run) -> str:
    evals = [(r["iteration"], wins(r, "eval/success_rate", "eval/episodes")) for r, _ in
             run.values("eval/success_rate")]
    held_out = ", ".join(str(w) for _, w in evals[:-1]) + (f", **{evals[-1][1]}**" if evals else "")
    final = run.last_eval() or {}
    per_type = ", ".join(
        str(wins(final, f"eval/success/{t}", f"eval/episodes/{t}")) for t in SHORT
    )
    trained = [r for r in run.records if r.get("iteration", 0) > 0]
    train_wins = sum(wins(r, "rollout/success_rate", "rollout/episodes") or 0 for r in trained)
    episodes = sum(int(r.get("rollout/episodes", 0)) for r in trained)
    steps = trained[-1].get("env_steps") if trained else None
    times = [v for r, v in run.values("time/iteration") if r.get("iteration", 0) > 0]
    rss = [v for _, v in run.values("memory/peak_rss_gb")]
    kl = run.values("policy/kl_ref")
    lr = (run.config.get("algorithm") or {}).get("lr")
    return (
        f"| {run.algo.upper()} ({lr}) seed {run.seed} | {cpu_variant(run)} | {held_out} | "
        f"{per_type} | {train_wins} of {episodes} | {steps:,} | "
        f"{statistics.median(times):.0f} | "
        f"{'-' if run.memory_inherited or not rss else f'{max(rss):.1f}'} | "
        f"{kl[-1][1]:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="the comparison's bench folder")
    args = parser.parse_args()
    runs, _ = discover_runs([args.folder])
    print("| run | CPU | held-out wins at each evaluation | final per task type "
          f"({', '.join(SHORT.values())}) | training wins | env steps | median s/iteration "
          "| peak RSS (GiB) | `policy/kl_ref` at the end |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in sorted(runs, key=lambda r: (ORDER.get(r.algo, 9), r.seed or 0)):
        if run.finished:
            print(row(run))


if __name__ == "__main__":
    main()
