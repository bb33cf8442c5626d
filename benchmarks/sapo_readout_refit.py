"""Is SAPO's short credit on the chain probes the readout's shape or its features? Refit and ask again.

    python benchmarks/sapo_readout_refit.py RUN_DIR [RUN_DIR ...]

On chain-d1 SAPO's ridge-fitted V gives the decisive press about 0.86 of the return gap where
PPO's critic, fitted on nearly the same presses, gives 1.00 (docs/suite.md, sixth result). Two
things differ between the readouts besides the features they read: SAPO's value is
``tanh(h . u)`` (the suite's ``value_squash: tanh``), which reaches 1 only in its tail, where a
ridge penalty resists the weight it needs, and one readout ``u`` serves V and Q, fitted on both
(PPO's head is linear and fits V alone). This takes a finished SAPO run with
``value_head_fit: ridge`` whose checkpoint is still here, replays its final eval's tasks pressing
each button once (:func:`agentrl.bench.counterfactual.replay_presses`), and refits the value rows
on the last fit's own window (the checkpointed batches and targets, re-read under the final
weights, as the run's last fit read them) four ways: as the run did, with ``clip`` (the paper's
squash: linear inside the range, so the fit is plain least squares), and each of the two with V's
rows alone (``q_coef`` 0). Each refit's credit share is asked of the same replayed episodes. The
first line must reproduce the run's ``credit.json``; the model and the policy are not touched.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

#: (name, the SAPO config fields the refit changes)
VARIANTS: tuple[tuple[str, dict[str, object]], ...] = (
    ("as the run", {}),
    ("clip", {"value_squash": "clip"}),
    ("as the run, V rows only", {"q_coef": 0.0}),
    ("clip, V rows only", {"value_squash": "clip", "q_coef": 0.0}),
)


def refit_credits(run_dir: Path) -> list[str]:
    """One line per variant: its credit share per lamp, and the fit's penalty and held-out EV."""
    from agentrl.bench.counterfactual import replay_presses

    replay = replay_presses(run_dir)
    if replay is None or replay.algo != "sapo" or not replay.head_window:
        return [f"{run_dir}: needs a SAPO run with value_head_fit ridge and its checkpoint here"]
    algorithm = replay.algorithm
    window = algorithm.head_window
    window.load_state_dict(replay.head_window)
    run_config = algorithm.config
    lines = [f"{run_dir} (checkpoint {replay.checkpoint.name}, {replay.tasks} tasks, window of {len(window.entries)} batches)"]
    for name, change in VARIANTS:
        algorithm.config = replace(run_config, **change)
        # refit_rows adds its batch to the window before fitting: hand it the window's last, taken out
        last = window.entries.pop()
        fit = algorithm.refit_rows(last.batch, last.targets["v"], last.targets["q"])
        credit = replay.credit()
        lamps = ", ".join(f"{lamp} {cell['share']:.2f} (V {cell['v_right']:.2f} / {cell['v_wrong']:.2f})"
                          for lamp, cell in credit["lamps"].items())
        lines.append(f"  {name:24s} share {credit['share']:.3f}: {lamps}; penalty {fit['value/head_alpha']:g}, "
                     f"held-out EV {fit['value/head_cv_ev']:.3f}, window EV {fit['value/head_ev_window']:.3f}")
    algorithm.config = run_config
    return lines


def main(paths: list[str]) -> int:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if not paths:
        print(__doc__)
        return 2
    for path in paths:
        print("\n".join(refit_credits(Path(path))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
