"""Does V, after the press, tell the button pressed? Read from a suite's committed eval traces.

    python benchmarks/chain_button_gap.py docs/results/suite-embedded docs/results/suite-embedded-pilots/*

On the chain probes (chain-d*, noisy-d*) the observation after the decisive turn says which lamp
was lit and which button was pressed ("The lamp was red; you pressed left."), and the return
depends on the pair: the lamp's own button pays, the other does not. A value that assigns credit
to the press must read higher after the right button than after the wrong one at the same lamp.
A value that only learned what the lamp is worth under the current policy reads the same after
both. This script groups each final-eval episode's second turn by (lamp, button) and prints,
for every lamp where both buttons were pressed, the mean V after the right button minus the
mean V after the wrong one, beside the same gap in the return. A deterministic policy presses
one button per lamp, so its runs cannot show the gap either way and are left out.

The rule (red: left, blue: right) is ``agentrl_envs.probes.chain.RULE``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from agentrl_envs.probes.chain import RULE

CHAIN_PROBES = ("chain-", "noisy-")


@dataclass
class LampGap:
    run: str
    lamp: str
    n_right: int
    n_wrong: int
    v_right: float
    v_wrong: float
    return_right: float
    return_wrong: float

    @property
    def v_gap(self) -> float:
        return self.v_right - self.v_wrong

    @property
    def return_gap(self) -> float:
        return self.return_right - self.return_wrong


def final_eval(run: Path) -> Path | None:
    """The last eval trace of one run folder (``.../probe/algo/seedN``)."""
    traces = sorted((run / "eval").glob("iter_*.jsonl"))
    return traces[-1] if traces else None


def lamp_gaps(run: Path, trace: Path) -> list[LampGap]:
    cells: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for line in trace.read_text().splitlines():
        episode = json.loads(line)
        turns = episode["turns"]
        if len(turns) < 2 or "V" not in turns[1]:
            continue  # won/lost on the first turn (no post-press state) or an algorithm without V
        lamp = "red" if "red" in turns[0]["observation"] else "blue"
        button = turns[0]["action"]
        cells[(lamp, button)].append((turns[1]["V"], episode["return"]))
    out = []
    for lamp, right in RULE.items():
        wrong = next(action for action in RULE.values() if action != right)
        a, b = cells.get((lamp, right)), cells.get((lamp, wrong))
        if a and b:
            out.append(LampGap(str(run), lamp, len(a), len(b),
                               statistics.mean(v for v, _ in a), statistics.mean(v for v, _ in b),
                               statistics.mean(r for _, r in a), statistics.mean(r for _, r in b)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("suites", nargs="+", type=Path, help="suite output folders (probe/algo/seedN inside)")
    args = parser.parse_args(argv)
    gaps: list[LampGap] = []
    for suite in args.suites:
        for run in sorted(suite.glob("*/*/seed*")):
            probe = run.parent.parent.name
            trace = final_eval(run) if probe.startswith(CHAIN_PROBES) else None
            if trace is not None:
                gaps.extend(lamp_gaps(run, trace))
    if not gaps:
        print("no final eval with both buttons pressed at one lamp")
        return 0
    print("| run | lamp | episodes right / wrong | V after right / wrong | V gap | return gap |")
    print("|---|---|---|---|---|---|")
    for g in gaps:
        print(f"| {g.run} | {g.lamp} | {g.n_right} / {g.n_wrong} | {g.v_right:.2f} / {g.v_wrong:.2f} | "
              f"{g.v_gap:+.2f} | {g.return_gap:+.2f} |")
    print("\nV tells the buttons apart (V gap at least half the return gap, which is at least 0.5):")
    by_algo: dict[str, list[LampGap]] = defaultdict(list)
    for g in gaps:
        by_algo[str(Path(g.run).parent)].append(g)
    for name, cells in by_algo.items():
        judged = [g for g in cells if g.return_gap >= 0.5]
        told = [g for g in judged if g.v_gap >= 0.5 * g.return_gap]
        runs = sorted({Path(g.run).name for g in told})
        print(f"  {name}: {len(told)} of {len(judged)} lamps" + (f" ({', '.join(runs)})" if runs else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
