"""Does the trained critic know what the press was worth? Counterfactual values on the chain probes.

    python benchmarks/chain_counterfactual.py RUN_DIR [RUN_DIR ...]

``chain_button_gap.py`` can judge a critic only where its policy pressed both buttons at one
lamp, and a policy that has settled presses one. This asks every critic the question directly
(agentrl/bench/counterfactual.py): each task of the run's final eval is replayed pressing left
and then right, and the critic from the run's last checkpoint reads V after the press, beside the
return that follows each press. ``agentrl suite`` does the same as each chain run finishes and
keeps it in the run's ``credit.json``; this script prints the answer for any run folder that
still has its checkpoint (checkpoints are not committed: the machine that trained the run).
"""

from __future__ import annotations

import sys
from pathlib import Path


def describe(run_dir: Path) -> str:
    from agentrl.bench.counterfactual import judge_press

    credit = judge_press(run_dir)
    if credit is None:
        return f"{run_dir}: no checkpoint here, or a critic-free algorithm"
    check = credit["trace_check"]
    checked = (f"max |V - the eval trace's V| {check['max_abs']:.3f} over {check['count']}"
               if check["count"] else "no trace V to check")
    lines = [f"{run_dir} ({credit['algo']}, checkpoint {credit['checkpoint']}, {credit['tasks']} tasks; {checked})"]
    for lamp, cell in credit["lamps"].items():
        lines.append(f"  {lamp:4s} lamp ({cell['tasks']} tasks): V after right {cell['v_right']:+.2f} "
                     f"(return {cell['return_right']:.2f}, expected {credit['expected_right']:.2f}), "
                     f"after wrong {cell['v_wrong']:+.2f} (return {cell['return_wrong']:.2f}, expected "
                     f"{credit['expected_wrong']:.2f}); V gap {cell['v_right'] - cell['v_wrong']:+.2f} "
                     f"= {cell['share']:.2f} of the expected return gap")
    return "\n".join(lines)


def main(paths: list[str]) -> int:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if not paths:
        print(__doc__)
        return 2
    for path in paths:
        print(describe(Path(path)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
