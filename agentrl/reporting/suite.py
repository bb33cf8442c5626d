"""The behaviour suite's report: per probe and algorithm, a normalised score with a 95% interval
over seeds, the value functions' explained variance, GRPO's collapse rate and the cost.

Reads only files: ``OUT/suite.json`` (the probes with their exact optimal and uniform-random
returns, written by ``agentrl suite``) and each run's ``metrics.jsonl``, ``summary.json``,
``config.yaml`` and last ``eval/iter_*.jsonl``. Definitions, stated again in the report:

* **score**: the final evaluation's mean return (32 held-out tasks by default, sampled), and
  **normalised score** ``(score - random) / (optimal - random)``: 0 is a uniform-random policy,
  1 the optimum. The interval is Student's t 95% interval of the mean over seeds.
* **eval EV**: explained variance of V on the final evaluation's turns against the discounted
  Monte-Carlo return from that turn (``gamma`` of the run), pooled over every turn of the run's
  episodes; a run whose returns do not vary (no win, or all wins) has none and is counted apart.
* **EV ceiling**: what the best state-value function could explain on the same episodes: each
  turn's return predicted by the mean return of the *other* turns that showed the same state
  (leave-one-out; the state is the observation the prompt showed, every observation so far in
  conversation mode; a state seen once is predicted by the overall mean). A probe whose first
  move is a coin flip for the policy has a ceiling well below 1 (chain-d1 about 0.53: the
  return of the first turn is unknowable before the press), so V counts as **learned** in a run
  when its eval EV reaches ``EV_SHARE`` of that run's ceiling. A run whose ceiling is 0 or less
  (its failures are coin flips no state foretells) cannot tell and is counted apart.
* **credit to the press** (chain probes): ``credit.json``, written by ``agentrl suite`` as each
  run finished (agentrl/bench/counterfactual.py): V after the right press minus V after the
  wrong one, replayed on the final eval's tasks, as a share of the expected return gap (1: the
  critic gives the press all its credit; 0: it reads the lamp and not the button).
* **train EV**: the update's own ``value/explained_variance_v`` (V before the update against
  its lambda-return targets), median over the last 5 iterations; batches whose targets do not
  vary give none and are not averaged in.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from agentrl.reporting.aggregate import mean_std
from agentrl.reporting.blocks import Document, Image, Note, Paragraph, Section, Table
from agentrl.reporting.figures import ALGO_COLORS
from agentrl.reporting.html import render_html
from agentrl.reporting.markdown import render_markdown
from agentrl.rundir.layout import CONFIG_FILE, METRICS_FILE, SUMMARY_FILE
from agentrl.rundir.metrics import read_records

SUITE_FILE = "suite.json"  # agentrl.bench.suite writes it (same name; the report does not import the suite)
CREDIT_FILE = "credit.json"  # agentrl.bench.counterfactual writes it, likewise
#: two-sided 97.5% quantiles of Student's t, by degrees of freedom (1..30)
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
#: what counts as a value function that learned: eval EV at least this share of the run's own
#: ceiling (:func:`ceiling_ev`; docs/suite.md says why)
EV_SHARE = 0.5
#: The fewest presses of each button at a lamp, in a ridge critic's last fit, for the credit
#: table to count that lamp as one where the batches held both presses. With one or two of a
#: button the fit's answer is a coin (shares -0.03 .. 1.35 at six such lamps of the embedded
#: suite, 2026-12-07); every lamp with 6 or more of each gave 0.71-1.00 of the gap.
PRESSES_NEEDED = 5


def is_suite(path: Path) -> bool:
    return (path / SUITE_FILE).is_file()


def t_interval(values: Sequence[float | None]) -> tuple[float, float] | None:
    """(mean, half-width of the 95% t interval) of the finite values; half-width nan for one
    value; None for none."""
    summary = mean_std(values)
    if summary is None:
        return None
    if summary.sem is None:
        return summary.mean, float("nan")
    return summary.mean, T975[min(summary.n - 1, len(T975)) - 1] * summary.sem


def mc_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """Discounted return from each turn: ``G_t = r_t + gamma * G_{t+1}``."""
    out, g = [], 0.0
    for r in reversed(rewards):
        g = r + gamma * g
        out.append(g)
    return out[::-1]


def _turn_targets(episodes: Sequence[dict[str, Any]], gamma: float, conversation: bool,
                  value: str = "V") -> tuple[list[tuple[str, ...]], list[float], list[float]]:
    """Per turn of the episodes that recorded ``value`` (``V``, or SAPO's ``Q``): (key,
    Monte-Carlo return, value). The key is the state (the observation the prompt showed; every
    observation so far in conversation mode), with the turn's action added for Q, which is a
    function of both: its target is the return that followed that action in that state."""
    keys: list[tuple[str, ...]] = []
    returns: list[float] = []
    values: list[float] = []
    for ep in episodes:
        turns = ep.get("turns", [])
        if not turns or any(value not in t for t in turns):
            continue
        seen = [str(t.get("observation", "")) for t in turns]
        states = [tuple(seen[:i + 1]) if conversation else (seen[i],) for i in range(len(turns))]
        keys += [(*key, str(t.get("action", ""))) if value == "Q" else key for key, t in zip(states, turns, strict=True)]
        returns += mc_returns([float(t["reward"]) for t in turns], gamma)
        values += [float(t[value]) for t in turns]
    return keys, returns, values


def _explained(returns: Sequence[float], predicted: Sequence[float]) -> float | None:
    g, v = np.asarray(returns, dtype=float), np.asarray(predicted, dtype=float)
    if len(g) < 2 or float(g.var()) < 1e-12:
        return None
    return float(1.0 - (g - v).var() / g.var())


def pooled_ev(episodes: Sequence[dict[str, Any]], gamma: float, value: str = "V") -> float | None:
    """Explained variance of the turns' recorded ``value`` (``V`` or ``Q``) against their
    Monte-Carlo returns, pooled over every turn of ``episodes``; None when the returns do not vary
    or no turn has that value."""
    _, returns, values = _turn_targets(episodes, gamma, conversation=False, value=value)
    return _explained(returns, values)


def ceiling_ev(episodes: Sequence[dict[str, Any]], gamma: float, conversation: bool = False,
               value: str = "V") -> float | None:
    """The EV a state-value function could reach on these turns: each return predicted by the
    mean return of the other turns with the same state key (leave-one-out, so one sample per
    state does not fit itself; a state seen once gets the mean of all other turns). With
    ``value="Q"`` the key is the state and the action, the ceiling of an action-value function.
    None when the returns do not vary."""
    keys, returns, _ = _turn_targets(episodes, gamma, conversation, value)
    return _leave_one_out_ev(keys, returns)


def _leave_one_out_ev(keys: Sequence[tuple[str, ...]], returns: Sequence[float]) -> float | None:
    if len(returns) < 2:
        return None
    sums: dict[tuple[str, ...], list[float]] = {}
    for key, g in zip(keys, returns, strict=True):
        total = sums.setdefault(key, [0.0, 0.0])
        total[0] += g
        total[1] += 1
    overall = sum(returns)
    predicted = []
    for key, g in zip(keys, returns, strict=True):
        total, count = sums[key]
        if count > 1:
            predicted.append((total - g) / (count - 1))
        else:
            predicted.append((overall - g) / (len(returns) - 1))
    return _explained(returns, predicted)


@dataclass(frozen=True)
class ValueFit:
    """How well one value function of a run (V, or SAPO's Q) fit: its eval EV against the
    Monte-Carlo returns of the final evaluation, the ceiling of those same turns
    (:func:`ceiling_ev`) and its train EV (:func:`median_of_last`). V and Q are judged by the same
    rule, so they share this record."""

    eval_ev: float | None = None
    ceiling: float | None = None
    train_ev: float | None = None

    @property
    def judged(self) -> bool:
        """Whether these eval episodes can tell a value that learned: their returns vary and a
        value function could explain some of it (ceiling > 0). Where the policy's remaining
        failures are coin flips no state foretells, the ceiling is <= 0 and every value, even 0,
        "reaches" half of it; such a run is counted apart, like one without return variance."""
        return self.eval_ev is not None and self.ceiling is not None and self.ceiling > 0

    @property
    def learned(self) -> bool:
        """Whether the value reached ``EV_SHARE`` of what these episodes allow."""
        return self.judged and self.eval_ev is not None and self.eval_ev >= EV_SHARE * (self.ceiling or 0.0)


def value_fit(episodes: Sequence[dict[str, Any]], gamma: float, conversation: bool, value: str,
              train_ev: float | None) -> ValueFit:
    """:class:`ValueFit` of ``value`` (``V`` or ``Q``) on ``episodes``, reading their turns once
    for both the EV and the ceiling."""
    keys, returns, values = _turn_targets(episodes, gamma, conversation, value)
    return ValueFit(_explained(returns, values), _leave_one_out_ev(keys, returns), train_ev)


@dataclass
class SuiteRun:
    probe: str
    algo: str
    seed: int
    records: list[dict[str, Any]]
    final_return: float | None
    v: ValueFit = field(default_factory=ValueFit)
    #: SAPO's Q on the same turns; empty (every field None) for algorithms that read none
    q: ValueFit = field(default_factory=ValueFit)
    #: the counterfactual credit judge's answer (``credit.json``), where the suite asked it
    credit: dict[str, Any] | None = None


def median_of_last(records: Sequence[dict[str, Any]], key: str, last: int = 5) -> float | None:
    """The median of ``key`` over the last ``last`` iterations' records (finite values only; a
    batch without target variance logs nan and is left out); None when there is none."""
    values = [r.get(key) for r in records[-last:]]
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return statistics.median(values) if values else None


def _read_run(folder: Path, probe: str, algo: str) -> SuiteRun | None:
    if not (folder / SUMMARY_FILE).is_file():
        return None
    summary = json.loads((folder / SUMMARY_FILE).read_text())
    config = yaml.safe_load((folder / CONFIG_FILE).read_text()) or {}
    gamma = float((config.get("algorithm") or {}).get("gamma", 0.95))
    records = [r for r in read_records(folder / METRICS_FILE) if "rollout/return" in r]
    final = (summary.get("final_eval") or {}).get("eval/return")
    evals = sorted((folder / "eval").glob("iter_*.jsonl"))
    v_train = None if algo == "grpo" else median_of_last(records, "value/explained_variance_v")
    v, q = ValueFit(train_ev=v_train), ValueFit()
    if evals and algo != "grpo":
        episodes = [json.loads(line) for line in evals[-1].read_text().splitlines() if line.strip()]
        conversation = (config.get("rollout") or {}).get("history") == "conversation"
        v = value_fit(episodes, gamma, conversation, "V", v_train)
        q = value_fit(episodes, gamma, conversation, "Q", median_of_last(records, "value/explained_variance_q"))
    credit = json.loads((folder / CREDIT_FILE).read_text()) if (folder / CREDIT_FILE).is_file() else None
    return SuiteRun(probe, algo, int(folder.name.removeprefix("seed")), records,
                    None if final is None else float(final), v, q, credit)


def read_suite(out: Path) -> tuple[dict[str, Any], list[SuiteRun]]:
    manifest = json.loads((out / SUITE_FILE).read_text())
    runs = []
    for probe in manifest["probes"]:
        for algo in manifest["algos"]:
            for folder in sorted((out / probe["name"] / algo).glob("seed*")):
                run = _read_run(folder, probe["name"], algo)
                if run is not None:
                    runs.append(run)
    return manifest, runs


def _interval_text(interval: tuple[float, float] | None, digits: int = 2) -> str:
    if interval is None:
        return "-"
    mean, half = interval
    return f"{mean:.{digits}f}" + ("" if math.isnan(half) else f" ± {half:.{digits}f}")


def _normalised(value: float, probe: dict[str, Any]) -> float:
    span = probe["optimal_return"] - probe["random_return"]
    return (value - probe["random_return"]) / span if span > 0 else float("nan")


def _curves_figure(manifest: dict[str, Any], runs: Sequence[SuiteRun], key: str, path: Path,
                   ylabel: str, normalise: bool, algos: Sequence[str]) -> Path | None:
    probes = manifest["probes"]
    fig = Figure(figsize=(3.2 * len(probes), 2.8))
    FigureCanvasAgg(fig)
    drew = False
    for i, probe in enumerate(probes):
        ax = fig.add_subplot(1, len(probes), i + 1)
        for algo in algos:
            curves = []
            for run in runs:
                if run.probe != probe["name"] or run.algo != algo:
                    continue
                ys = [r.get(key) for r in run.records]
                ys = [float(y) if isinstance(y, (int, float)) and math.isfinite(y) else np.nan for y in ys]
                if normalise:
                    ys = [_normalised(y, probe) for y in ys]
                curves.append(ys)
            if not curves:
                continue
            width = min(len(c) for c in curves)
            data = np.array([c[:width] for c in curves])
            if key.startswith("value/"):
                data = np.clip(data, -1.0, 1.0)
                centre = np.nanmedian(data, axis=0)
            else:
                centre = np.nanmean(data, axis=0)
            ax.plot(np.arange(1, width + 1), centre, color=ALGO_COLORS.get(algo), label=algo)
            drew = True
        ax.set_title(probe["name"], fontsize=9)
        ax.set_xlabel("iteration", fontsize=8)
        ax.tick_params(labelsize=7)
        if i == 0:
            ax.set_ylabel(ylabel, fontsize=8)
            ax.legend(fontsize=7)
    if not drew:
        return None
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def _value_row(probe: str, algo: str, fits: Sequence[ValueFit]) -> list[str]:
    """One row of the V or Q table: eval EV and ceiling over the runs that measured one, how many
    runs learned of those judged, how many were not judged, and the train EV."""
    measured = [f for f in fits if f.eval_ev is not None]
    judged = sum(f.judged for f in fits)
    return [probe, algo, _interval_text(t_interval([f.eval_ev for f in measured])),
            _interval_text(t_interval([f.ceiling for f in measured])),
            f"{sum(f.learned for f in fits)} of {judged}", str(len(fits) - judged),
            _interval_text(t_interval([f.train_ev for f in fits if f.train_ev is not None]))]


def _credit_row(probe: str, algo: str, credits: Sequence[dict[str, Any]]) -> list[str] | None:
    """One row of the credit table over the runs judged; None when no run of the pair was."""
    shares = [c["share"] for c in credits if isinstance(c.get("share"), (int, float))]
    if not credits:
        return None

    def over_lamps(key: str) -> list[float]:
        return [statistics.fmean(cell[key] for cell in c["lamps"].values()) for c in credits if c.get("lamps")]

    # per lamp too: a policy that mostly presses one button leaves the other untried at a lamp
    # where it is wrong, and no on-policy critic can value a press its batches did not hold
    # there; a ridge-fitted critic's credit.json says which presses its last fit held
    per_lamp: dict[str, list[float]] = {}
    for c in credits:
        for lamp, cell in (c.get("lamps") or {}).items():
            per_lamp.setdefault(lamp, []).append(cell["share"])

    def lamp_text(lamp: str, values: list[float]) -> str:
        seen = [c["window_presses"][lamp] for c in credits if (c.get("window_presses") or {}).get(lamp)]
        counted = sum(_enough_presses(n) for n in seen)
        both = f" (both presses, {PRESSES_NEEDED}+ each, in the last fit: {counted} of {len(seen)})"
        return f"{lamp} {statistics.fmean(values):.2f}" + (both if seen else "")

    return [probe, algo, str(len(credits)), _interval_text(t_interval(over_lamps("v_right"))),
            _interval_text(t_interval(over_lamps("v_wrong"))), _interval_text(t_interval(shares)),
            ", ".join(lamp_text(lamp, v) for lamp, v in sorted(per_lamp.items())),
            f"{sum(s >= EV_SHARE for s in shares)} of {len(shares)}"]


def _enough_presses(presses: dict[str, int]) -> bool:
    """Whether a lamp's count in ``window_presses`` holds ``PRESSES_NEEDED`` or more of each button."""
    return min(presses["right"], presses["wrong"]) >= PRESSES_NEEDED


def _held_both(credit: dict[str, Any], lamp: str) -> bool:
    """Whether a run's last fit held both presses at ``lamp`` (:func:`_enough_presses`); a critic
    that keeps no window (head steps by Adam) cannot say, and counts."""
    if credit.get("window_presses") is None:
        return True
    presses = credit["window_presses"].get(lamp)
    return presses is not None and _enough_presses(presses)


def _paired_credit_row(probe: str, first: str, second: str, a: dict[int, dict[str, Any]],
                       b: dict[int, dict[str, Any]]) -> list[str] | None:
    """One row of the paired credit table: ``first``'s and ``second``'s runs of ``probe`` at the
    same seeds (``a``, ``b``: credit.json by seed), each seed's shares averaged over the lamps where
    *both* runs' last fits held both presses, then mean ± 95% t interval over those seeds of each
    share and of their difference. Why paired: at one seed the two algorithms draw from the same
    sampling seeds, and where their policies move alike they sample nearly the same presses, so
    the difference removes what the seed's batches decide for both (docs/suite.md, sixth result).
    None when no seed has both runs judged."""
    common = sorted(a.keys() & b.keys())
    if not common:
        return None
    pairs: list[tuple[float, float]] = []
    lamps = 0
    for seed in common:
        first_lamps, second_lamps = a[seed].get("lamps") or {}, b[seed].get("lamps") or {}
        shared = [lamp for lamp in sorted(first_lamps.keys() & second_lamps.keys())
                  if _held_both(a[seed], lamp) and _held_both(b[seed], lamp)]
        if shared:
            lamps += len(shared)
            pairs.append((statistics.fmean(first_lamps[lamp]["share"] for lamp in shared),
                          statistics.fmean(second_lamps[lamp]["share"] for lamp in shared)))
    only_first = sum(x >= EV_SHARE > y for x, y in pairs)
    only_second = sum(y >= EV_SHARE > x for x, y in pairs)
    return [probe, f"{first} - {second}", f"{len(pairs)} of {len(common)}", str(lamps),
            _interval_text(t_interval([x for x, _ in pairs])), _interval_text(t_interval([y for _, y in pairs])),
            _interval_text(t_interval([x - y for x, y in pairs])), f"{only_first} / {only_second}"]


def build_suite_document(out: Path, report_dir: Path, manifest: dict[str, Any],
                         runs: Sequence[SuiteRun]) -> Document:
    """The report's document from what :func:`read_suite` read."""
    algos = manifest["algos"]
    settings = manifest.get("settings", {})
    rows, value_rows, q_rows, credit_rows, paired_rows = [], [], [], [], []
    for probe in manifest["probes"]:
        judged: dict[str, dict[int, dict[str, Any]]] = {}  # credit.json by seed, per algorithm
        for algo in algos:
            mine = [r for r in runs if r.probe == probe["name"] and r.algo == algo]
            judged[algo] = {r.seed: r.credit for r in mine if r.credit is not None}
            if not mine:
                continue
            scores = [_normalised(r.final_return, probe) for r in mine if r.final_return is not None]
            collapse = [r2.get("grpo/collapse_share") for r in mine for r2 in r.records]
            collapse = [c for c in collapse if isinstance(c, (int, float))]
            seconds = [r2.get("time/iteration") for r in mine for r2 in r.records]
            seconds = [s for s in seconds if isinstance(s, (int, float))]
            raw = t_interval([r.final_return for r in mine if r.final_return is not None])
            rows.append([probe["name"], algo, str(len(mine)), _interval_text(raw), _interval_text(t_interval(scores)),
                         f"{100 * sum(collapse) / len(collapse):.0f}%" if collapse else "-",
                         f"{statistics.median(seconds):.2f}" if seconds else "-"])
            if algo != "grpo":
                value_rows.append(_value_row(probe["name"], algo, [r.v for r in mine]))
            if any(r.q.eval_ev is not None for r in mine):
                q_rows.append(_value_row(probe["name"], algo, [r.q for r in mine]))
            credit = _credit_row(probe["name"], algo, list(judged[algo].values()))
            if credit is not None:
                credit_rows.append(credit)
        for i, first in enumerate(algos):
            for second in algos[i + 1:]:
                paired = _paired_credit_row(probe["name"], first, second, judged[first], judged[second])
                if paired is not None:
                    paired_rows.append(paired)
    figures = report_dir / "figures"
    blocks: list[Any] = [
        Paragraph(f"{len(runs)} finished runs: {len(manifest['probes'])} probes x {', '.join(algos)}, "
                  f"model `{settings.get('model')}`, {settings.get('iterations')} iterations of "
                  f"{settings.get('trajectories')} trajectories, seeds from {settings.get('first_seed', 0)}, "
                  f"{settings.get('eval_episodes')} sampled eval episodes at the end of each run."),
        Table(["probe", "algorithm", "seeds", "final eval return", "normalised score", "GRPO collapse",
               "s / iteration (median)"], rows,
              caption="Normalised score: 0 = uniform-random policy, 1 = optimal; mean ± 95% t interval "
                      "over seeds. GRPO collapse: share of its groups whose returns were all equal."),
    ]
    probes_table = Table(["probe", "env", "options", "measures", "optimal return", "random return"],
                         [[p["name"], p["env"], ", ".join(f"{k}={v}" for k, v in p["kwargs"].items()),
                           p.get("measures", ""), f"{p['optimal_return']:.3f}", f"{p['random_return']:.4f}"]
                          for p in manifest["probes"]])
    value_blocks: list[Any] = [
        Table(["probe", "algorithm", "eval EV vs MC return", "EV ceiling",
               f"runs where V learned (eval EV >= {EV_SHARE:g} x ceiling)",
               "runs not judged (no return variance, or ceiling <= 0)", "train EV (last 5, median)"], value_rows,
              caption="Eval EV: V on the final evaluation's turns against the discounted Monte-Carlo "
                      "return, pooled per run; mean ± 95% t interval over runs. EV ceiling: what a "
                      "state-value function could explain on the same turns (each return predicted by "
                      "the mean return of the other turns that showed the same state). Train EV: the "
                      "update's V against its lambda-return targets."),
    ]
    if q_rows:
        value_blocks.append(Table(
            ["probe", "algorithm", "Q eval EV vs MC return", "Q EV ceiling", f"runs where Q learned (>= {EV_SHARE:g} x ceiling)",
             "runs not judged", "Q train EV (last 5, median)"], q_rows,
            caption="SAPO's Q(s, a) on the same turns against the return that followed the action; its ceiling "
                    "predicts each return by the other turns with the same state and action. Q is trained "
                    "toward its SARSA target and is not used in the advantages (docs/algorithms.md)."))
    if credit_rows:
        value_blocks.append(Table(
            ["probe", "algorithm", "runs judged", "V after the right press", "V after the wrong press",
             "V gap / return gap", "per lamp (mean)", f"runs giving the press credit (>= {EV_SHARE:g} of the gap)"], credit_rows,
            caption="Each run's critic, from its last checkpoint, reads V after each button on every task of "
                    "its final eval, replayed (docs/suite.md, agentrl/bench/counterfactual.py); means over "
                    "the lamps, then mean ± 95% t interval over runs, in R_max units. The return after the "
                    "press is known whatever the policy, so a critic that reads only the lamp scores 0 "
                    "even where its eval EV is high. For critics fitted in closed form, the runs whose last "
                    "fit's batches held both presses at the lamp: an on-policy critic cannot value a press "
                    "its batches never made."))
    if paired_rows:
        value_blocks.append(Table(
            ["probe", "algorithms (first - second)", "seeds compared (of seeds both judged)",
             "lamps compared", "first's share", "second's share", "difference",
             f"seeds where only the first / only the second gave >= {EV_SHARE:g} of the gap"], paired_rows,
            caption="The credit table paired by seed: at each seed both algorithms ran, each run's share "
                    f"averaged over the lamps where both runs' last fits held {PRESSES_NEEDED}+ presses of "
                    "each button (a critic that keeps no window counts at every lamp), then mean ± 95% t "
                    "interval over those seeds. At one seed both algorithms draw from the same sampling "
                    "seeds, so where their policies move alike their critics are fitted on nearly the "
                    "same presses and judged on the same replayed tasks."))
    images = []
    for key, name, label, norm in (("rollout/return", "suite_learning.png", "normalised return", True),
                                   ("value/explained_variance_v", "suite_value_ev.png", "V explained variance (median)", False)):
        shown = algos if norm else [a for a in algos if a != "grpo"]
        path = _curves_figure(manifest, runs, key, figures / name, label, norm, shown)
        if path is not None:
            images.append(Image(path, label, f"{label} per training iteration, per probe"))
    if not runs:
        blocks.append(Note("No run of this suite has finished yet."))
    session_header, session_rows = sessions_table(manifest.get("sessions", []))
    sections = [
        Section("results", "Scores", blocks),
        Section("values", "Value functions", value_blocks + images[1:]),
        Section("curves", "Learning curves", images[:1]),
        Section("probes", "Probes", [probes_table]),
        Section("sessions", "Sessions", [Table(session_header, session_rows,
                                               long_columns=frozenset({5}))]),
    ]
    return Document("Behaviour suite", f"{out}", sections, list(algos))


def sessions_table(sessions: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The Sessions table: one row per invocation recorded in ``suite.json``.

    A suite is run in pieces, and some pieces are completed by hand: a session stopped by hand
    (``stopped``) or runs brought in from another folder (``note``). Those words are the only
    record of how such runs came to be there, so a ``note`` column is added when any session
    carries one."""
    header = ["started", "machine", "runs done", "runs left", "seconds", "command"]
    rows = [[s.get("started", ""), s.get("machine", ""), str(s.get("runs_done", "-")),
             str(s.get("runs_left", "-")), str(s.get("seconds", "-")), s.get("command", "")]
            for s in sessions]
    notes = [" ".join(str(s[k]) for k in ("stopped", "note") if s.get(k)) for s in sessions]
    if any(notes):
        header.append("note")
        for row, note in zip(rows, notes, strict=True):
            row.append(note or "-")
    return header, rows


def build_suite_report(out: Path, report_dir: Path) -> tuple[Path, Path, int]:
    report_dir.mkdir(parents=True, exist_ok=True)
    manifest, runs = read_suite(out)
    document = build_suite_document(out, report_dir, manifest, runs)
    html_path, md_path = report_dir / "report.html", report_dir / "report.md"
    html_path.write_text(render_html(document), encoding="utf-8")
    md_path.write_text(render_markdown(document), encoding="utf-8")
    return html_path, md_path, len(runs)
