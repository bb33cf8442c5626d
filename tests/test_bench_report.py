"""``agentrl bench`` and ``agentrl report``: planning, resuming, the numbers, the files, the errors.

Most tests use run directories written by hand (:func:`write_synthetic_runs`: three algorithms
x two seeds on ALFWorld-like task types), so every number in the report can be checked against
a value worked out here from the metrics files. One test runs the real thing: ``bench`` with the
tiny model on KeyDoor (2 algorithms x 2 seeds x 2 iterations, eval on) and then ``report``.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import statistics
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from agentrl.errors import UserError
from agentrl.training.config import build_config, save_yaml

ROOT = Path(__file__).resolve().parent.parent
TYPES = ("pick_and_place", "look_at_obj_in_light")

# Per algorithm: eval success per seed, time/iteration per seed, peak RSS per seed per iteration,
# the last explained variances, GRPO's collapse shares. Chosen so the means are easy by hand.
SYNTHETIC = {
    "sapo": {
        "eval": (0.5, 0.75),
        "time": (4.0, 6.0),
        "rss": ((1.0, 1.2, 1.1), (1.3, 1.3, 1.3)),
        "ev_v": (0.4, 0.6),
        "ev_q": (0.2, None),
        "types": {"pick_and_place": (1.0, 0.5), "look_at_obj_in_light": (0.0, 1.0)},
    },
    "ppo": {
        "eval": (0.25, 0.25),
        "time": (8.0, 10.0),
        "rss": ((2.0, 2.0, 2.0), (2.2, 2.1, 2.0)),
        "ev_v": (0.1, 0.3),
        "types": {"pick_and_place": (0.5, 0.5), "look_at_obj_in_light": (0.0, 0.0)},
    },
    "grpo": {
        "eval": (0.5, 0.25),
        "time": (5.0, 5.0),
        "rss": ((1.0, 1.0, 1.0), (1.0, 1.0, 1.0)),
        "collapse": ((0.5, 0.25, 0.0), (1.0, 0.5, 0.5)),
        "types": {"pick_and_place": (1.0, 0.0), "look_at_obj_in_light": (0.0, 0.5)},
    },
}
PHASE_SHARE = {
    "time/rollout": 0.5,
    "time/old_logprob": 0.1,
    "time/ref_logprob": 0.05,
    "time/actor_update": 0.2,
}
PPO_ONLY_SHARE = {"time/value_inference": 0.05, "time/critic_update": 0.05}


def _episode(won: bool, algo: str, seed: int) -> dict:
    """An eval episode as the trainer writes it (values only for SAPO and PPO)."""
    turns = []
    for t in range(3):
        last = t == 2
        turn = {
            "observation": f"You are in room {t}. <b>bold</b> | pipe",
            "reply": "<action>go</action>",
            "action": "go north" if t else "look",
            "valid": t != 1,
            "reward": 10.0 if (won and last) else 0.0,
            "terminated": won and last,
            "truncated": (not won) and last,
        }
        if algo in ("sapo", "ppo"):
            turn["V"] = (2.0 + 3.0 * t) if won else (1.0 - 0.5 * t)
            if algo == "sapo":
                turn["Q"] = turn["V"] + 0.5
        turns.append(turn)
    return {
        "task_seed": seed * 10 + int(won),
        "task": "put a clean mug in shelf.",
        "task_type": TYPES[0],
        "won": won,
        "score": float(won),
        "return": 10.0 if won else 0.0,
        "turns": turns,
    }


def write_synthetic_runs(root: Path) -> Path:
    """Three algorithms x two seeds x three iterations under ``root/<algo>/seed<k>``."""
    for algo, spec in SYNTHETIC.items():
        for seed in (0, 1):
            run = root / algo / f"seed{seed}"
            (run / "eval").mkdir(parents=True)
            cfg = build_config(
                algo=algo,
                env="agentrl/ALFWorld-v0",
                model="tiny",
                overrides=[
                    f"train.seed={seed}",
                    f"train.run_dir={run}",
                    "train.iterations=3",
                    "train.eval_episodes=4",
                    f"rollout.tasks_per_iteration={1 if algo == 'grpo' else 8}",
                ],
            )
            save_yaml(cfg, run / "config.yaml")
            records = []
            for it in (1, 2, 3):
                total = spec["time"][seed]
                record = {
                    "iteration": it,
                    "env_steps": 40 * it + 5 * seed,
                    "trajectories": 8 * it,
                    "wall_time": total * it,
                    "rollout/success_rate": 0.1 * it + 0.1 * seed,
                    "rollout/score": 0.1 * it,
                    "time/iteration": total,
                    "time/weight_sync": 0.01,
                    "memory/peak_rss_gb": spec["rss"][seed][it - 1],
                    "memory/peak_cuda_gb": 2 * spec["rss"][seed][it - 1],
                }
                shares = {**PHASE_SHARE, **(PPO_ONLY_SHARE if algo == "ppo" else {})}
                for key in (
                    "time/rollout",
                    "time/old_logprob",
                    "time/value_inference",
                    "time/ref_logprob",
                    "time/actor_update",
                    "time/critic_update",
                ):
                    record[key] = total * shares.get(key, 0.0)
                if "ev_v" in spec:
                    record["value/explained_variance_v"] = spec["ev_v"][seed] if it == 3 else 0.0
                if algo == "sapo":
                    record["value/explained_variance_q"] = spec["ev_q"][seed] if it == 3 else None
                if algo == "grpo":
                    record["grpo/collapse_share"] = spec["collapse"][seed][it - 1]
                if it == 3:
                    record.update(
                        {
                            "eval/success_rate": spec["eval"][seed],
                            "eval/score": spec["eval"][seed],
                            "eval/return": 10 * spec["eval"][seed],
                            "eval/episode_length": 3.0,
                            "eval/invalid_action_rate": 1 / 3,
                            "eval/episodes": 4.0,
                        }
                    )
                    for task_type in TYPES:
                        record[f"eval/success/{task_type}"] = spec["types"][task_type][seed]
                        record[f"eval/episodes/{task_type}"] = 2.0
                records.append(record)
            (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            episodes = [_episode(False, algo, seed), _episode(True, algo, seed)]
            (run / "eval" / "iter_00003.jsonl").write_text(
                "".join(json.dumps(e) + "\n" for e in episodes)
            )
            (run / "summary.json").write_text(json.dumps({"iterations": 3}) + "\n")
    return root


def _pm(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
    """Mean ± sample std, formatted as the report does (worked out here with statistics)."""
    mean, std = statistics.mean(values) * scale, statistics.stdev(values) * scale
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def _row(markdown: str, first_cell: str, after: str) -> list[str]:
    """The cells of the first table row starting with ``first_cell`` after the text ``after``."""
    tail = markdown[markdown.index(after) :]
    for line in tail.splitlines():
        if line.startswith(f"| {first_cell} |"):
            return [c.strip() for c in line.strip("|").split(" | ")]
    raise AssertionError(f"no row '{first_cell}' after '{after}'")


def _metrics(run: Path) -> list[dict]:
    return [
        json.loads(line)
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    ]


# --- the statistics ------------------------------------------------------------------------------


def test_mean_std_and_band_by_hand():
    from agentrl.reporting.aggregate import band, mean_std

    value = mean_std([0.5, 0.75])
    assert value.mean == pytest.approx(0.625)
    assert value.std == pytest.approx(0.25 / math.sqrt(2))  # sample std of two values: |a-b|/sqrt 2
    assert value.format(100, 1) == "62.5 ± 17.7"
    assert value.sem == pytest.approx(0.125)  # std / sqrt 2 = |a-b| / 2
    assert value.format(100, 1, spread="sem") == "62.5 ± 12.5"
    with pytest.raises(ValueError):
        value.format(spread="var")
    single = mean_std([0.3, float("nan")])
    assert single.n == 1 and single.std is None and single.format() == "0.300"
    assert single.sem is None and single.format(spread="sem") == "0.300"
    assert mean_std([]) is None

    # Seed A at x = 10, 20 (y 0 -> 1), seed B at x = 12, 16, 24 (y 1, 1, 0.5): the common range is
    # [12, 20]; the grid is every recorded x inside it: 12, 16, 20.
    result = band([([10, 20], [0.0, 1.0]), ([12, 16, 24], [1.0, 1.0, 0.5])])
    assert result.x.tolist() == [12.0, 16.0, 20.0]
    a = [0.2, 0.6, 1.0]  # A interpolated at 12, 16, 20
    b = [1.0, 1.0, 1.0 - 0.5 * (20 - 16) / (24 - 16)]  # B at 20: between (16, 1) and (24, 0.5)
    assert result.mean.tolist() == pytest.approx([(p + q) / 2 for p, q in zip(a, b, strict=True)])
    assert result.std.tolist() == pytest.approx(
        [abs(p - q) / math.sqrt(2) for p, q in zip(a, b, strict=True)]
    )
    assert result.seeds == 2 and not result.measured  # interpolated points: drawn without markers
    same_x = band([([1, 2], [0.0, 1.0]), ([1, 2], [1.0, 1.0])])
    assert same_x.measured and same_x.x.tolist() == [1, 2] and same_x.mean.tolist() == [0.5, 1.0]


# --- the report from hand-written runs ------------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic_report(tmp_path_factory):
    from agentrl.reporting.report import build_report

    root = tmp_path_factory.mktemp("synthetic")
    runs = write_synthetic_runs(root / "runs")
    files = build_report([runs], root / "report", traces_per_group=2)
    return runs, files


def test_report_numbers_match_the_metrics_files(synthetic_report):
    runs, files = synthetic_report
    md = files.markdown.read_text()
    assert files.groups == ["sapo", "ppo", "grpo"]

    # Final eval: success in %, mean ± std over the two seeds' last eval records.
    for algo in SYNTHETIC:
        finals = [_metrics(runs / algo / f"seed{s}")[-1] for s in (0, 1)]
        row = _row(md, algo, "## Final evaluation")
        assert row[1] == "2"
        assert row[2] == _pm([f["eval/success_rate"] for f in finals], 100, 1)
        assert row[3] == _pm([f["eval/score"] for f in finals])
        assert row[-2:] == ["4", "3"]  # episodes per seed, at iteration
    assert (
        _row(md, "sapo", "## Final evaluation")[2] == "62.5 ± 17.7"
    )  # (50 + 75) / 2; |75 - 50| / sqrt 2

    # Per task type, as percentages with n and episodes.
    row = _row(md, "pick and place", "## Success per task type")
    assert row[1] == "75.0 ± 35.4 (n=2, 2 episodes)"  # sapo: 100 and 50
    assert row[2] == "50.0 ± 0.0 (n=2, 2 episodes)"  # ppo: 50 and 50
    assert (
        _row(md, "look at obj in light", "## Success per task type")[1]
        == "50.0 ± 70.7 (n=2, 2 episodes)"
    )

    # Time per iteration: each seed's mean over iterations, then over seeds; ratio of means to PPO.
    sapo_t = [
        statistics.mean(r["time/iteration"] for r in _metrics(runs / "sapo" / f"seed{s}"))
        for s in (0, 1)
    ]
    ppo_t = [
        statistics.mean(r["time/iteration"] for r in _metrics(runs / "ppo" / f"seed{s}"))
        for s in (0, 1)
    ]
    row = _row(md, "sapo", "## Cost per iteration")
    assert row[-2] == _pm(sapo_t, digits=2) == "5.00 ± 1.41"
    assert row[-1] == f"{statistics.mean(sapo_t) / statistics.mean(ppo_t):.2f}x" == "0.56x"
    assert row[1] == "2.50 ± 0.71"  # rollout: half of 4 and of 6
    assert row[3] == "0.00 ± 0.00"  # SAPO has no value-inference pass
    assert _row(md, "ppo", "## Cost per iteration")[-1] == "1.00x"
    # The per-phase ratio table: SAPO's rollout 2.5 s against PPO's 4.5 s.
    ratio_row = _row(md, "sapo", "| group | rollout | old log-probs")
    assert ratio_row[1] == f"{2.5 / 4.5:.2f}x"
    assert ratio_row[6] == "0.00x"  # critic update: SAPO 0 s against PPO's 0.45 s

    # Peak memory: each seed's max over iterations (1.2 and 1.3 for SAPO), then mean ± std.
    row = _row(md, "sapo", "| group | peak RSS (GiB)")
    assert row[1] == _pm([1.2, 1.3], digits=2) == "1.25 ± 0.07"
    assert row[2] == f"{1.25 / statistics.mean([2.0, 2.2]):.2f}x" == "0.60x"
    assert row[3:] == ["2.50 ± 0.14", "0.60x"]  # CUDA peaks written as twice the RSS ones
    assert "No CUDA memory was recorded" not in md

    # GRPO collapse: mean over training per seed (0.25 and 2/3), and the last iteration (0 and 0.5).
    row = _row(md, "grpo", "## GRPO advantage collapse")
    assert row[2] == _pm([0.25, 2 / 3], 100, 1) == "45.8 ± 29.5"
    assert row[3] == _pm([0.0, 0.5], 100, 1) == "25.0 ± 35.4"

    # Explained variance at the last iteration; Q was null for one seed, so n=1.
    row = _row(md, "sapo", "## Explained variance")
    assert row[1:] == [_pm([0.4, 0.6]), "0.200 (n=1)"]
    assert _row(md, "ppo", "## Explained variance")[1:] == [_pm([0.1, 0.3]), "missing"]
    assert "No value function, nothing to show: grpo." in md


def test_time_per_iteration_is_each_seeds_median_so_a_slowed_iteration_does_not_move_it():
    from agentrl.reporting.aggregate import phase_cost
    from agentrl.reporting.runs import Run, RunGroup

    def run(totals, rollouts):
        records = [{"iteration": i + 1, "time/iteration": t, "time/rollout": r,
                    "time/actor_update": 1.0}
                   for i, (t, r) in enumerate(zip(totals, rollouts, strict=True))]
        return Run(Path("."), {"algo": "sapo"}, records)

    # seed 0: iteration 3 slowed by other work (40 s): median 4, where the mean would be 16
    # seed 1: 6, 6, 7 -> median 6. Rollout medians 2 and 3; untimed per iteration
    # t - rollout - 1 = 1, 1, 29 (median 1) and 2, 2, 3 (median 2).
    group = RunGroup("sapo", "sapo", [run([4, 4, 40], [2, 2, 10]), run([6, 6, 7], [3, 3, 3])])
    cost = phase_cost(group)
    assert (cost.total.mean, cost.total.n) == (5.0, 2)  # (4 + 6) / 2
    assert cost.phases["rollout"].mean == 2.5 and cost.phases["actor update"].mean == 1.0
    assert cost.other.mean == 1.5
    assert cost.phases["critic update"] is None  # never recorded


def test_paired_bootstrap_interval_by_hand():
    import numpy as np

    from agentrl.reporting.paired import bootstrap_interval

    # One seed each; the first wins game 0 of 4, the second nothing: every draw is the share of
    # game 0 among 4 games drawn with replacement, Binomial(4, 1/4) / 4. P(0) = 0.316 > 2.5 %,
    # P(<= 2) = 0.949 < 97.5 % <= P(<= 3) = 0.996: the interval is [0, 0.75].
    assert bootstrap_interval(np.array([[1.0, 0, 0, 0]]), np.zeros((1, 4))) == (0.0, 0.75)
    # Won everything vs nothing, whatever is drawn: [1, 1].
    assert bootstrap_interval(np.ones((3, 5)), np.zeros((2, 5))) == (1.0, 1.0)


def test_paired_differences_read_the_same_games_of_every_seed(tmp_path):
    from agentrl.reporting.paired import paired_differences
    from agentrl.reporting.report import build_report
    from agentrl.reporting.runs import discover_runs, group_runs

    runs = write_synthetic_runs(tmp_path / "runs")
    wins = {("sapo", 0): [1, 1, 0, 0], ("sapo", 1): [1, 0, 0, 0],
            ("ppo", 0): [1, 0, 0, 0], ("ppo", 1): [0, 0, 0, 0]}
    for (algo, seed), row in wins.items():
        episodes = [dict(_episode(bool(w), algo, seed), task_seed=game) for game, w in enumerate(row)]
        if (algo, seed) == ("sapo", 0):  # a game only this run played: not paired
            episodes.append(dict(_episode(True, algo, seed), task_seed=7))
        (runs / algo / f"seed{seed}" / "eval" / "iter_00003.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in episodes))
    for seed in (0, 1):
        (runs / "grpo" / f"seed{seed}" / "eval" / "iter_00003.jsonl").unlink()

    groups = group_runs(discover_runs([runs])[0])
    (pair,) = paired_differences(groups)  # grpo has no episodes: no pair with it
    # win rates per game: sapo 1, .5, 0, 0; ppo .5, 0, 0, 0 -> differences .5, .5, 0, 0
    assert (pair.first, pair.second, pair.games, pair.seeds) == ("sapo", "ppo", 4, (2, 2))
    assert pair.difference == 0.25 and (pair.better, pair.worse) == (2, 0)
    # seeds and games both vary here, so the interval is a real one around the difference
    assert -1.0 <= pair.low < 0.25 < pair.high <= 1.0
    md = build_report([runs], tmp_path / "report").markdown.read_text()
    row = _row(md, "sapo - ppo", "## Paired")
    assert row[1:4] == ["2, 2", "4", "+25.0"] and row[5:] == ["2 / 0 / 2", "3; 3"]
    assert "missing: grpo has no eval/ episodes to pair." in md


def test_headline_table_is_start_final_best_with_standard_errors(tmp_path):
    """The headline: success before training, at the end and at its best, cost and budget, with
    ± the standard error over seeds (std / sqrt n), every number worked out here."""
    from agentrl.reporting.report import build_report

    runs = write_synthetic_runs(tmp_path / "runs")
    # SAPO: an eval before training (iteration 0) and one after iteration 1, besides the final one
    # at iteration 3 (0.5 and 0.75 from SYNTHETIC); seed 1's last env-step count set to 130.
    for seed, start, mid in ((0, 0.25, 0.75), (1, 0.25, 1.0)):
        run = runs / "sapo" / f"seed{seed}"
        records = _metrics(run)
        records[0].update({"eval/success_rate": mid, "eval/episodes": 4.0})
        if seed == 1:
            records[-1]["env_steps"] = 130
        start_record = {"iteration": 0, "env_steps": 0, "trajectories": 0, "wall_time": 0.0}
        start_record["eval/success_rate"] = start
        records.insert(0, start_record)
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (runs / "grpo" / "seed1" / "summary.json").unlink()  # one GRPO run not finished yet
    md = build_report([runs], tmp_path / "report").markdown.read_text()

    assert _row(md, "grpo", "## Headline")[2] == "1 / 2"
    row = _row(md, "sapo", "## Headline")
    assert row[1:3] == ["2", "2 / 2"]  # seeds, finished
    assert row[3] == "25.0 ± 0.0"  # both seeds started at 25 %
    assert row[4] == "62.5 ± 12.5"  # finals 50 and 75: std 17.68, / sqrt 2
    assert row[5] == "87.5 ± 12.5"  # best of each seed: 75 (iteration 1) and 100 (iteration 1)
    assert row[6] == "5.0 ± 1.0"  # time/iteration 4 and 6 s
    assert row[7] == "1.25 ± 0.05"  # peak RSS 1.2 and 1.3 GiB
    assert row[8] == "2.50 ± 0.10"  # peak CUDA, twice those
    assert row[9:] == ["3", "24", "125 ± 5"]  # env steps 120 and 130
    ppo = _row(md, "ppo", "## Headline")
    assert ppo[3] == "missing"  # no evaluation before training
    assert ppo[4] == ppo[5] == "25.0 ± 0.0"  # one evaluation: final and best are the same
    # Per task type (final eval): SAPO's pick and place 100 and 50 -> 75 ± 25.
    assert _row(md, "pick and place", "## Headline")[1:] == [
        "75.0 ± 25.0",
        "50.0 ± 0.0",
        "50.0 ± 50.0",
    ]
    # The sections after the headline keep the std: the same finals read 62.5 ± 17.7 there.
    assert _row(md, "sapo", "## Final evaluation")[2] == "62.5 ± 17.7"

    # The held-out curve under the table: SAPO's evals by iteration, mean ± standard error.
    from agentrl.reporting.aggregate import eval_curve
    from agentrl.reporting.runs import discover_runs, group_runs

    assert "![held-out success by training iteration](figures/held_out_success.png)" in md
    sapo = next(g for g in group_runs(discover_runs([runs])[0]) if g.algo == "sapo")
    curve = {it: (round(m.mean, 4), round(m.sem, 4)) for it, m in eval_curve(sapo).items()}
    assert curve == {0: (0.25, 0.0), 1: (0.875, 0.125), 3: (0.625, 0.125)}
    # seed 1 stopped before its iteration-3 eval: the mean stops where every seed has one
    records = _metrics(runs / "sapo" / "seed1")[:-1]
    (runs / "sapo" / "seed1" / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    sapo = next(g for g in group_runs(discover_runs([runs])[0]) if g.algo == "sapo")
    assert sorted(eval_curve(sapo)) == [0, 1]


def test_report_sections_figures_and_twin(synthetic_report):
    from agentrl.reporting.document import SECTION_IDS

    runs, files = synthetic_report
    html = files.html.read_text()
    md = files.markdown.read_text()
    assert re.findall(r'<section id="([^"]+)">', html) == list(SECTION_IDS)
    for section_id in SECTION_IDS:
        assert f'<a id="{section_id}"></a>' in md
    names = sorted(p.name for p in files.figures)
    assert names == sorted(
        [
            "learning_curves.png",
            "task_types.png",  # no held_out_success.png: one evaluation per run
            "time_per_iteration.png",
            "peak_memory.png",
            "grpo_collapse.png",
            "explained_variance.png",
            "trace_sapo_1.png",
            "trace_sapo_2.png",
            "trace_ppo_1.png",
            "trace_ppo_2.png",
        ]
    )
    # Every figure is a real PNG on disk, embedded in the HTML and referenced by the Markdown.
    for path in files.figures:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f'data-file="figures/{path.name}"' in html
        assert f"](figures/{path.name})" in md
    assert html.count('src="data:image/png;base64,') == len(files.figures)
    # Run text is escaped in HTML, pipes escaped in Markdown.
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "\\| pipe" in md
    # Value trace: the won episode comes first, with each turn's V and Q.
    assert "sapo, seed 0, eval at iteration 3, task seed 1: won, return 10.00" in md
    trace_row = _row(md, "3", "task seed 1: won")
    assert trace_row[2:] == ["go north", "10.000", "8.000", "8.500"]  # V = 2 + 3*2, Q = V + 0.5
    assert _row(md, "2", "task seed 1: won")[2] == "go north (invalid)"
    assert "No value function, nothing to trace: grpo." in md
    # Honest labels: no bench manifest, so the machine is said to be unrecorded; commands listed.
    assert "The machine is not recorded" in md
    assert f"agentrl run sapo --config {runs / 'sapo' / 'seed0' / 'config.yaml'}" in md
    assert "No PPO run" not in md


def test_report_says_what_is_missing(tmp_path):
    """Without PPO, GRPO, eval episodes or types, every section stays and says why it is empty."""
    from agentrl.reporting.document import SECTION_IDS
    from agentrl.reporting.report import build_report

    runs = write_synthetic_runs(tmp_path / "runs")
    run = runs / "sapo" / "seed0"
    records = [{k: v for k, v in r.items() if not k.startswith("eval/")} for r in _metrics(run)]
    lines = "".join(json.dumps(r) + "\n" for r in records)
    (run / "metrics.jsonl").write_text(lines + '{"iteration": 4, "env_st')  # killed mid-write
    (run / "eval" / "iter_00003.jsonl").unlink()
    (run / "summary.json").unlink()
    files = build_report([run], tmp_path / "report")
    md = files.markdown.read_text()
    html = files.html.read_text()
    assert re.findall(r'<section id="([^"]+)">', html) == list(SECTION_IDS)
    assert "missing: sapo recorded no evaluation (train.eval_episodes was 0)." in md
    assert "No PPO run among these runs, so no ratio to PPO is shown." in md
    assert "No GRPO run among these runs" in md
    assert "The env reports no task types" in md
    assert "missing: sapo has no eval/ episodes" in md
    assert "sapo seed 0 is unfinished (3 of 3 iterations)" in md
    assert "its last metrics line was cut short and is ignored" in md
    assert _row(md, "sapo", "## Final evaluation")[1:3] == ["0", "missing"]
    assert all(p.exists() for p in files.figures)


def test_the_machine_names_the_cpu_features_that_choose_its_numeric_path(tmp_path):
    """Two Intel Xeons with one model name, with and without AMX, break greedy near-ties
    differently on the same weights: the recorded machine (and the report's line) says which."""
    from agentrl.rundir.machine import cpu_isa, machine_line

    with_amx, without = tmp_path / "amx", tmp_path / "plain"
    with_amx.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n")
    without.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_fp16 avx512_bf16\n")
    assert cpu_isa(str(with_amx)) == "avx2 avx512f avx512_bf16 amx_bf16 amx_tile"
    assert cpu_isa(str(without)) == "avx2 avx512f avx512_bf16"
    (tmp_path / "old").write_text("flags\t\t: fpu sse2\n")
    assert cpu_isa(str(tmp_path / "old")) == "none of them"
    assert cpu_isa(str(tmp_path / "missing")) is None
    line = machine_line({"cpu": "Intel Xeon", "cpu_isa": "avx2 avx512f avx512_bf16",
                         "logical_cores": "2"})
    assert line == "Intel Xeon; CPU features: avx2 avx512f avx512_bf16; 2 logical cores"


def test_a_suite_session_names_its_cpu_model_and_features(tmp_path, monkeypatch):
    """The embedded suite's policies part ways between CPU kinds on one seed, so a suite
    session records the model and the ISA flags, not just 'x86_64'."""
    import os

    from agentrl.rundir.machine import suite_machine

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor @ 2.80GHz\n"
                    "flags\t\t: fpu avx2 avx512f avx512cd\n")
    assert suite_machine(str(info)) == ("Intel(R) Xeon(R) Processor @ 2.80GHz; CPU features: "
                                        "avx2 avx512f; 2 logical cores")
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    import platform

    assert suite_machine(str(tmp_path / "missing")) == platform.machine()


def test_a_run_is_reported_with_the_session_that_trained_it_not_one_that_skipped_it(tmp_path):
    """A comparison run in pieces: session 1 (AMD) trained sapo and started ppo; session 2 (Intel)
    skipped the finished sapo and resumed ppo. sapo ran on AMD, ppo last ran on Intel."""
    from agentrl.reporting.runs import load_run

    runs = write_synthetic_runs(tmp_path / "bench")
    sapo, ppo = runs / "sapo" / "seed0", runs / "ppo" / "seed0"

    def session(started, cpu, actions):
        return {"command": f"agentrl bench ({cpu})", "started": started, "finished": started + "+1h",
                "machine": {"cpu": cpu},
                "runs": [{"algo": a, "seed": 0, "run_dir": str(d), "action": act, "state": "done"}
                         for a, d, act in actions]}

    manifest = {"sessions": [
        session("2026-12-01 08:40", "AMD EPYC", [("sapo", sapo, "fresh"), ("ppo", ppo, "fresh")]),
        session("2026-12-01 18:26", "Intel Xeon", [("sapo", sapo, "skip"), ("ppo", ppo, "resume")]),
        session("2026-12-02 09:00", "Intel Xeon", [("sapo", sapo, "skip"), ("ppo", ppo, "skip")]),
    ]}
    (runs / "bench.json").write_text(json.dumps(manifest))
    first, second = load_run(sapo).bench, load_run(ppo).bench
    assert (first.machine["cpu"], first.started, first.action) == ("AMD EPYC", "2026-12-01 08:40", "fresh")
    assert (second.machine["cpu"], second.started, second.action) == ("Intel Xeon", "2026-12-01 18:26", "resume")
    # A run only ever skipped (made before bench knew it) keeps the latest session that saw it.
    manifest["sessions"] = [manifest["sessions"][2]]
    (runs / "bench.json").write_text(json.dumps(manifest))
    assert load_run(sapo).bench.started == "2026-12-02 09:00"


def test_run_dates_and_machines_span_every_session_that_trained_the_run(tmp_path):
    """The comparison's own history: session 1 (Intel, killed, never 'finished') trained sapo to
    the end, was killed inside ppo and never reached grpo; session 2 (AMD, killed too) skipped
    sapo, resumed ppo to the end and was killed inside grpo. Only session 2 wrote run times."""
    from agentrl.reporting.report import build_report
    from agentrl.reporting.runs import load_run
    from agentrl.reporting.setup import _run_dates

    runs = write_synthetic_runs(tmp_path / "bench")
    sapo, ppo, grpo = (runs / algo / "seed0" for algo in ("sapo", "ppo", "grpo"))
    (grpo / "summary.json").unlink()

    def entry(run_dir, action, state, **times):
        return {"algo": run_dir.parent.name, "seed": 0, "run_dir": str(run_dir),
                "action": action, "state": state, **times}

    manifest = {"sessions": [
        {"command": "bench", "started": "2026-12-01 20:56", "finished": None,
         "machine": {"cpu": "Intel Xeon"},
         "runs": [entry(sapo, "fresh", "done"), entry(ppo, "fresh", "running"),
                  entry(grpo, "fresh", "queued")]},
        {"command": "bench", "started": "2026-12-02 00:00", "finished": None,
         "machine": {"cpu": "AMD EPYC"},
         "runs": [entry(sapo, "skip", "skipped"),
                  entry(ppo, "resume", "done", started="2026-12-02 00:01",
                        finished="2026-12-02 01:10"),
                  entry(grpo, "fresh", "running", started="2026-12-02 01:11")]},
    ]}
    (runs / "bench.json").write_text(json.dumps(manifest))

    s, p, g = load_run(sapo), load_run(ppo), load_run(grpo)
    assert [x.machine["cpu"] for x in s.sessions] == ["Intel Xeon"]
    assert [x.machine["cpu"] for x in p.sessions] == ["Intel Xeon", "AMD EPYC"]
    assert [x.machine["cpu"] for x in g.sessions] == ["AMD EPYC"]  # session 1 never reached it
    assert (p.bench.action, g.bench.action) == ("resume", "fresh")
    # finished in a session that was killed later: not "unfinished", and no invented end time
    assert _run_dates(s) == "2026-12-01 20:56 to finished, end time not recorded"
    # started in session 1 (its start), finished at the time session 2 recorded
    assert _run_dates(p) == "2026-12-01 20:56 to 2026-12-02 01:10 (in 2 bench sessions)"
    assert _run_dates(g) == "2026-12-02 01:11 to unfinished"

    md = build_report([runs], tmp_path / "report").markdown.read_text()
    intel = next(line for line in md.splitlines() if line.startswith("Machine (sapo seed 0"))
    amd = next(line for line in md.splitlines() if "AMD EPYC" in line)
    assert "ppo seed 0" in intel and "ppo seed 0" in amd and "grpo seed 0" in amd
    assert "grpo seed 0" not in intel
    assert "ppo seed 0 trained on more than one machine" in md

    # Memory: in these manifests (older than bench giving each run its own process) ppo seed 0
    # started in session 1's process after sapo trained there, grpo in session 2's after ppo:
    # their peaks may hold the earlier run's memory. sapo ran first in its process. A starting
    # RSS recorded in such a session (one version did, 8.4 GB after PPO) does not clear it.
    manifest["sessions"][1]["runs"][2]["rss_at_start_gb"] = 8.4
    (runs / "bench.json").write_text(json.dumps(manifest))
    s, p, g = load_run(sapo), load_run(ppo), load_run(grpo)
    assert (s.memory_inherited, p.memory_inherited, g.memory_inherited) == (False, True, True)
    # A session that runs each run in its own process: nothing is inherited.
    manifest["sessions"][1]["run_isolation"] = "process"
    (runs / "bench.json").write_text(json.dumps(manifest))
    assert not load_run(grpo).memory_inherited and load_run(grpo).bench.rss_at_start_gb == 8.4
    manifest["sessions"][1].pop("run_isolation")
    (runs / "bench.json").write_text(json.dumps(manifest))
    # A third session restarts ppo (its partial records were cleared): sessions 1 and 2 made
    # nothing the folder holds, so neither their memory nor their machine nor dates count.
    manifest["sessions"].append(
        {"command": "bench", "started": "2026-12-02 09:00", "finished": None,
         "machine": {"cpu": "Intel Xeon"},
         "runs": [entry(sapo, "skip", "skipped"),
                  entry(ppo, "restart", "done", started="2026-12-02 09:01",
                        finished="2026-12-02 10:00", rss_at_start_gb=0.4)]})
    (runs / "bench.json").write_text(json.dumps(manifest))
    restarted = load_run(ppo)
    assert [x.started for x in restarted.sessions] == ["2026-12-02 09:00"]
    assert not restarted.memory_inherited
    assert _run_dates(restarted) == "2026-12-02 09:01 to 2026-12-02 10:00"
    manifest["sessions"].pop()
    (runs / "bench.json").write_text(json.dumps(manifest))
    md = build_report([runs], tmp_path / "report").markdown.read_text()
    # sapo seeds: highest peaks 1.2 and 1.3 -> 1.25 ± 0.05; ppo: seed 1's 2.2 only (grpo's
    # seed 0 left out too)
    assert _row(md, "sapo", "## Headline")[7] == "1.25 ± 0.05"
    assert _row(md, "ppo", "## Headline")[7] == "2.20 (n=1)"
    assert "Peak RSS left out for ppo seed 0, grpo seed 0:" in md


def test_the_starting_model_is_described_from_its_sft_record_and_sft_settings_are_not_shown(
    tmp_path, monkeypatch
):
    from agentrl.reporting import starting_model
    from agentrl.reporting.report import build_report
    from agentrl.reporting.runs import discover_runs, group_runs

    warm = tmp_path / "runs" / "warm" / "sft"
    warm.mkdir(parents=True)
    (warm / "model.safetensors").write_bytes(b"abc")
    (warm / "sft_metrics.json").write_text(json.dumps({
        "demos": ["runs/warm/demos.jsonl"], "examples": 381, "sequences": 64, "steps": 61,
        "first_loss": 0.8917, "final_loss": 0.1236, "seconds": 2079.1, "base_model": "embedded",
        "sft": {"epochs": 3, "lr": 5e-05, "batch_turns": 16, "seed": 0}}))
    monkeypatch.chdir(tmp_path)
    text, found = starting_model.describe("runs/warm/sft")
    # sha256("abc"), the FIPS 180-2 example
    assert found and text == (
        "Starting model runs/warm/sft: `agentrl sft` of embedded on 381 turns of 64 demonstration "
        "episodes (runs/warm/demos.jsonl), 3 epochs = 61 steps of 16 turns at lr 5e-05, seed 0; "
        "loss 0.892 -> 0.124, 34.7 min. Weights sha256 "
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad.")
    text, found = starting_model.describe("runs/gone/sft")
    assert not found and "is not on the machine that built this report" in text
    assert starting_model.describe("Qwen/Qwen2.5-7B") is None  # a hub id
    assert starting_model.describe("embedded") is None

    runs = write_synthetic_runs(tmp_path / "bench")
    # seed 1 of sapo carries other sft.* defaults (an older agentrl): RL never reads them
    config_path = runs / "sapo" / "seed1" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["sft"]["epochs"] = 7
    config["model"]["name"] = "runs/warm/sft"
    config_path.write_text(yaml.safe_dump(config))
    config_path = runs / "sapo" / "seed0" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["model"]["name"] = "runs/warm/sft"
    config_path.write_text(yaml.safe_dump(config))
    found_runs, _ = discover_runs([runs])
    sapo = [g for g in group_runs(found_runs) if g.algo == "sapo"]
    assert len(sapo) == 1 and len(sapo[0].runs) == 2
    md = build_report([runs], tmp_path / "report").markdown.read_text()
    assert "| sft." not in md and "Starting model runs/warm/sft: `agentrl sft` of embedded" in md


def test_bench_manifest_records_each_runs_own_start_and_end(tmp_path):
    from types import SimpleNamespace

    from agentrl.bench.supervise import Manifest

    planned = [SimpleNamespace(algo=a, seed=0, run_dir=tmp_path / a / "seed0", action="fresh")
               for a in ("sapo", "ppo")]
    manifest = Manifest(SimpleNamespace(out=tmp_path, trajectories=8, command="bench", runs=planned))
    manifest.update(0, "running")
    manifest.update(0, "done")
    manifest.update(1, "running")  # then the session is killed
    saved = json.loads((tmp_path / "bench.json").read_text())["sessions"][0]
    first, second = saved["runs"]
    stamp = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
    assert re.match(stamp, first["started"]) and re.match(stamp, first["finished"])
    assert first["started"] <= first["finished"] and first["state"] == "done"
    assert re.match(stamp, second["started"]) and "finished" not in second
    assert saved["finished"] is None


def test_groups_split_by_setting_and_label_the_difference(tmp_path):
    from agentrl.reporting.runs import discover_runs, group_runs

    runs = write_synthetic_runs(tmp_path / "runs")
    variant = tmp_path / "runs" / "sapo-tanh" / "seed0"
    variant.mkdir(parents=True)
    for name in ("metrics.jsonl", "summary.json"):
        (variant / name).write_text((runs / "sapo" / "seed0" / name).read_text())
    config = yaml.safe_load((runs / "sapo" / "seed0" / "config.yaml").read_text())
    config["algorithm"]["value_squash"] = "tanh"
    (variant / "config.yaml").write_text(yaml.safe_dump(config))
    found, notes = discover_runs([tmp_path / "runs"])
    assert len(found) == 7 and notes == []
    labels = [g.label for g in group_runs(found)]
    assert labels == ["sapo (value_squash=clip)", "sapo (value_squash=tanh)", "ppo", "grpo"]

    # The same seed twice in a group (two outputs of one bench, say) is counted, and said.
    from agentrl.reporting.report import build_report

    copy = tmp_path / "copy" / "ppo" / "seed0"
    copy.mkdir(parents=True)
    for name in ("metrics.jsonl", "summary.json", "config.yaml"):
        (copy / name).write_text((runs / "ppo" / "seed0" / name).read_text())
    files = build_report([runs / "ppo", tmp_path / "copy"], tmp_path / "report")
    md = files.markdown.read_text()
    assert "ppo has several runs with seed 0: they are counted as separate samples" in md
    assert _row(md, "ppo", "## Final evaluation")[1] == "3"


# --- user errors ---------------------------------------------------------------------------------


def _invoke(args: list[str]):
    from agentrl.cli import app

    return CliRunner().invoke(app, args)


def _one_sentence_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert text.startswith("error:") and "Traceback" not in text
    for fragment in fragments:
        assert fragment in text, text


def test_report_user_errors(tmp_path):
    _one_sentence_error(_invoke(["report", str(tmp_path / "nowhere")]), "does not exist")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not a run")
    _one_sentence_error(_invoke(["report", str(tmp_path / "empty")]), "is not a run directory")
    _one_sentence_error(_invoke(["report", str(tmp_path / "empty" / "notes.txt")]), "is a file")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.yaml").write_text("just: text\n")
    (broken / "metrics.jsonl").write_text("")
    _one_sentence_error(_invoke(["report", str(broken)]), "is not an agentrl run config")
    (broken / "config.yaml").write_text("algo: sapo\n")
    _one_sentence_error(_invoke(["report", str(broken)]), "is not an agentrl run config (its sections")
    (broken / "config.yaml").write_text(
        "algo: sapo\nenv: {}\nmodel: {}\nrollout: {}\ntrain: {}\nalgorithm: {}\n"
    )
    _one_sentence_error(
        _invoke(["report", str(broken)]), "None of the runs has a recorded iteration"
    )
    (broken / "metrics.jsonl").write_text('{"iteration": 1}\nnot json\n{"iteration": 2}\n')
    _one_sentence_error(_invoke(["report", str(broken)]), "line 2 is not JSON")


def test_bench_user_errors(tmp_path):
    out = str(tmp_path / "out")
    _one_sentence_error(
        _invoke(["bench", "--algos", "sapo,dqn", "--env", "keydoor", "-o", out]),
        "Unknown algorithm 'dqn'",
        "sapo",
    )
    _one_sentence_error(_invoke(["bench", "--algos", " , ", "-o", out]), "names no algorithm")
    _one_sentence_error(
        _invoke(["bench", "--algos", "sapo,grpo", "--trajectories", "12", "-o", out]),
        "not a multiple of grpo's 8 rollouts per task",
    )
    _one_sentence_error(
        _invoke(["bench", "--algos", "sapo,ppo", "--set", "algorithm.group_size=4", "-o", out]),
        "None of sapo, ppo has the setting 'algorithm.group_size'",
    )
    _one_sentence_error(
        _invoke(["bench", "--algos", "sapo", "--seeds", "0", "-o", out]), "--seeds must be"
    )
    _one_sentence_error(
        _invoke(["bench", "--algos", "sapo", "--env", "keydoor", "--logger", "mlflow", "-o", out]),
        "mlflow",
    )
    assert not (tmp_path / "out").exists()  # nothing started


def test_bench_per_algorithm_setting_errors(tmp_path):
    out = str(tmp_path / "out")
    _one_sentence_error(
        _invoke(["bench", "--algos", "sapo,ppo", "--env", "keydoor", "--set", "grpo:algorithm.lr=1e-5",
                 "-o", out]),
        "--set grpo:algorithm.lr=1e-5 is for 'grpo', which is not among the compared algorithms",
    )
    _one_sentence_error(
        _invoke(["bench", "--algos", "sapo,ppo", "--env", "keydoor", "--set", "ppo:algorithm.value_coef=0.3",
                 "-o", out]),
        "ppo has no setting 'algorithm.value_coef'",
    )
    assert not (tmp_path / "out").exists()


def test_per_algorithm_settings_reach_only_their_runs(tmp_path):
    """Each algorithm's own rate, one shared setting: SAPO 3e-5, PPO 1e-5, GRPO the shared 2e-6."""
    from agentrl.bench.plan import plan_bench

    plan = plan_bench(
        ["sapo", "ppo", "grpo"], tmp_path / "out", env="keydoor", model="tiny",
        overrides=["algorithm.lr=2e-6", "sapo:algorithm.lr=3e-5", "PPO:algorithm.lr=1e-5",
                   "algorithm.group_size=4", "ppo:train.eval_episodes=3"],
        seeds=1, iterations=2, trajectories=8,
    )
    by_algo = {r.algo: r.config for r in plan.runs}
    assert {a: c.algorithm.lr for a, c in by_algo.items()} == {"sapo": 3e-5, "ppo": 1e-5, "grpo": 2e-6}
    assert {a: c.train.eval_episodes for a, c in by_algo.items()} == {
        "sapo": by_algo["grpo"].train.eval_episodes, "ppo": 3, "grpo": by_algo["sapo"].train.eval_episodes}
    assert by_algo["grpo"].algorithm.group_size == 4 and by_algo["grpo"].rollout.tasks_per_iteration == 2
    assert by_algo["ppo"].rollout.tasks_per_iteration == 8


# --- planning and resuming -----------------------------------------------------------------------


def test_plan_is_like_for_like(tmp_path):
    from agentrl.bench.plan import plan_bench

    plan = plan_bench(
        ["sapo", "ppo", "grpo"],
        tmp_path / "out",
        env="keydoor",
        model="tiny",
        overrides=["algorithm.group_size=4", "algorithm.value_coef=0.3", "algorithm.lr=2e-6"],
        seeds=2,
        first_seed=5,
        iterations=3,
        trajectories=8,
        eval_episodes=2,
    )
    assert [(r.algo, r.seed) for r in plan.runs] == [  # seed-major: whole seeds first
        (a, s) for s in (5, 6) for a in ("sapo", "ppo", "grpo")
    ]
    for run in plan.runs:
        cfg = run.config
        assert run.run_dir == tmp_path / "out" / run.algo / f"seed{run.seed}"
        assert cfg.train.run_dir == str(run.run_dir) and cfg.train.seed == run.seed
        assert cfg.train.iterations == 3 and cfg.train.eval_episodes == 2
        assert cfg.algorithm.lr == 2e-6 and cfg.model.name == "tiny" and cfg.env.id == "keydoor"
        # 8 trajectories per iteration for everyone: GRPO plays 8 / 4 = 2 tasks, 4 times each.
        assert cfg.rollout.tasks_per_iteration * run.rollouts_per_task == 8
        assert run.action == "fresh"
    grpo = [r for r in plan.runs if r.algo == "grpo"][0].config
    sapo = [r for r in plan.runs if r.algo == "sapo"][0].config
    assert grpo.algorithm.group_size == 4 and grpo.rollout.tasks_per_iteration == 2
    assert sapo.algorithm.value_coef == 0.3 and not hasattr(sapo.algorithm, "group_size")

    # Without --trajectories: what the config gives its own algorithm (a GRPO config: tasks x k).
    config = tmp_path / "grpo.yaml"
    config.write_text("algo: grpo\nrollout: {tasks_per_iteration: 3}\nalgorithm: {group_size: 2}\n")
    plan = plan_bench(["sapo", "grpo"], tmp_path / "out2", config_path=config, seeds=1)
    assert plan.trajectories == 6
    assert [r.config.rollout.tasks_per_iteration for r in plan.runs] == [6, 3]


def test_existing_runs_are_skipped_resumed_extended_or_refused(tmp_path):
    from agentrl.bench.plan import plan_bench

    out = tmp_path / "out"

    def plan(iterations: int = 2, extra: tuple[str, ...] = ()):
        return plan_bench(
            ["sapo"],
            out,
            env="keydoor",
            model="tiny",
            seeds=1,
            iterations=iterations,
            trajectories=4,
            overrides=list(extra),
        )

    run_dir = out / "sapo" / "seed0"
    run_dir.mkdir(parents=True)
    save_yaml(plan().runs[0].config, run_dir / "config.yaml")
    assert plan().runs[0].action == "fresh"  # a config but no record yet
    (run_dir / "metrics.jsonl").write_text('{"iteration": 1}\n')
    assert plan().runs[0].action == "restart"  # records but no checkpoint: cannot be resumed
    checkpoint = run_dir / "checkpoints" / "iter_00001"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.pt").write_bytes(b"")
    (run_dir / "checkpoints" / "latest").write_text("iter_00001\n")
    assert plan().runs[0].action == "resume"
    (run_dir / "summary.json").write_text("{}\n")
    assert plan().runs[0].action == "skip"
    assert plan(iterations=5).runs[0].action == "extend"
    assert plan(extra=("train.save_every=7",)).runs[0].action == "skip"  # bookkeeping may change
    with pytest.raises(
        UserError, match="holds a run made with other settings.*rollout.temperature"
    ):
        plan(extra=("rollout.temperature=0.5",))
    # Loggers are views of metrics.jsonl: a resumed bench may start streaming to TensorBoard.
    assert plan(extra=("train.loggers=[tensorboard]",)).runs[0].action == "skip"

    # A run written by an older agentrl that lacked a setting: reused while the bench plans that
    # setting at its default (1.0 for top_p: the behaviour the old run trained under), refused
    # when the bench asks for another value.
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["rollout"].pop("top_p") == 1.0
    (run_dir / "config.yaml").write_text(yaml.safe_dump(saved))
    assert plan().runs[0].action == "skip"
    with pytest.raises(UserError, match="other settings.*rollout.top_p: None there, 0.9 now"):
        plan(extra=("rollout.top_p=0.9",))


# --- the real thing: bench with the tiny model, then report --------------------------------------


@pytest.fixture
def one_torch_thread():
    """One intra-op thread: on a shared 2-core machine, two threads fighting other jobs made
    the tiny model's forward passes 4-5x slower than one (measured); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_bench_then_report_end_to_end(tmp_path, one_torch_thread):
    out = tmp_path / "bench"
    args = [
        "bench",
        "--algos",
        "sapo,ppo",
        "--env",
        "keydoor",
        "--model",
        "tiny",
        "--seeds",
        "2",
        "--iterations",
        "2",
        "--trajectories",
        "2",
        "--eval-episodes",
        "2",
        "--set",
        "rollout.action_mode=constrained",
        "--set",
        "algorithm.kl_coef=0",
        "--set",
        "env.kwargs={n_rooms: 2, max_steps: 8}",
        "--set",
        "train.save_every=2",
        "-o",
        str(out),
    ]
    result = _invoke(args)
    assert result.exit_code == 0, result.output
    assert (
        "agentrl bench" in result.output and "done" in result.output
    )  # the live table, then the end
    runs = {(algo, seed): out / algo / f"seed{seed}" for algo in ("sapo", "ppo") for seed in (0, 1)}
    for run in runs.values():
        records = _metrics(run)
        assert [r["iteration"] for r in records] == [1, 2]
        assert [r["trajectories"] for r in records] == [2, 4]
        assert (run / "summary.json").is_file() and (run / "eval" / "iter_00002.jsonl").is_file()
    # Like-for-like: seed k of SAPO and of PPO played the same tasks in every iteration.
    for seed in (0, 1):
        for it in (1, 2):
            tasks = [
                [
                    json.loads(line)["task_seed"]
                    for line in (runs[(algo, seed)] / "samples" / f"iter_{it:05d}.jsonl")
                    .read_text()
                    .splitlines()
                ]
                for algo in ("sapo", "ppo")
            ]
            assert tasks[0] == tasks[1] and len(tasks[0]) == 2
    manifest = json.loads((out / "bench.json").read_text())
    assert manifest["trajectories_per_iteration"] == 2
    session = manifest["sessions"][0]
    assert session["command"].startswith(
        "agentrl bench --algos sapo,ppo --env keydoor --model tiny"
    )
    assert [r["state"] for r in session["runs"]] == ["done"] * 4 and session["finished"]
    assert session["ended"] == "completed"
    # each run: its own start and end, and what the process held before it loaded anything
    for entry in session["runs"]:
        assert entry["started"] <= entry["finished"] and 0 < entry["rss_at_start_gb"] < 8

    # Resumable: the same command again trains nothing, also when it now asks for TensorBoard
    # (loggers are views of metrics.jsonl, not a setting that makes runs different).
    stamps = {k: (v / "metrics.jsonl").stat().st_mtime_ns for k, v in runs.items()}
    again = _invoke([*args, "--logger", "tensorboard"])
    assert again.exit_code == 0, again.output
    assert "4 runs (0 to do, 4 already finished)" in " ".join(again.output.split())
    assert stamps == {k: (v / "metrics.jsonl").stat().st_mtime_ns for k, v in runs.items()}
    sessions = json.loads((out / "bench.json").read_text())["sessions"]
    assert [r["action"] for r in sessions[1]["runs"]] == ["skip"] * 4

    report_dir = tmp_path / "report"
    result = _invoke(["report", str(out), "-o", str(report_dir)])
    assert result.exit_code == 0, result.output
    html = (report_dir / "report.html").read_text()
    md = (report_dir / "report.md").read_text()
    from agentrl.reporting.document import SECTION_IDS

    assert re.findall(r'<section id="([^"]+)">', html) == list(SECTION_IDS)
    referenced = set(re.findall(r'data-file="(figures/[^"]+)"', html))
    assert referenced == set(re.findall(r"\]\((figures/[^)]+)\)", md))
    assert all((report_dir / name).is_file() for name in referenced)
    for name in (
        "learning_curves",
        "time_per_iteration",
        "peak_memory",
        "explained_variance",
        "trace_sapo_1",
        "trace_ppo_1",
    ):
        assert f"figures/{name}.png" in referenced
    # The final eval row, worked out from the four metrics files.
    for algo in ("sapo", "ppo"):
        finals = [_metrics(runs[(algo, s)])[-1] for s in (0, 1)]
        row = _row(md, algo, "## Final evaluation")
        assert row[1] == "2"
        assert row[2] == _pm([f["eval/success_rate"] for f in finals], 100, 1)
        times = [
            statistics.mean(r["time/iteration"] for r in _metrics(runs[(algo, s)])) for s in (0, 1)
        ]
        assert _row(md, algo, "## Cost per iteration")[-2] == _pm(times, digits=2)
    # The machine and the exact command come from bench.json.
    assert session["command"] in md and "Machine (" in md and "logical cores" in md
    assert "The machine is not recorded" not in md


# --- the shipped benchmark configs ---------------------------------------------------------------


CONFIGS = sorted((ROOT / "benchmarks" / "configs").glob("paper_*.yaml")) + sorted(
    (ROOT / "benchmarks" / "configs").glob("cpu_*.yaml")
)


def _plan_from_command(command: str, out: Path):
    """Plan (not run) the bench a header command asks for, with its own options."""
    from agentrl.bench.plan import parse_algos, plan_bench

    argv = shlex.split(command)
    assert argv[:2] == ["agentrl", "bench"]
    options: dict[str, list[str]] = {}
    for flag, value in zip(argv[2::2], argv[3::2], strict=True):
        options.setdefault(flag, []).append(value)
    return plan_bench(
        parse_algos(options["--algos"][0]),
        out,
        config_path=ROOT / options["--config"][0],
        overrides=options.get("--set", []),
        seeds=int(options["--seeds"][0]),
        trajectories=int(options["--trajectories"][0]),
    )


def test_benchmark_configs_parse_and_state_their_command(tmp_path):
    assert len([c for c in CONFIGS if c.name.startswith("paper_")]) == 4
    assert [c for c in CONFIGS if c.name.startswith("cpu_")]
    for path in CONFIGS:
        cfg = build_config(config_path=path)
        header = path.read_text().split("\n\n", 1)[0]
        commands = [
            line.lstrip("# ").strip() for line in header.splitlines() if "agentrl bench" in line
        ]
        assert commands, f"{path.name}: no 'agentrl bench' command in the header comment"
        assert f"--config benchmarks/configs/{path.name}" in commands[0]
        plan = _plan_from_command(commands[0], tmp_path / path.stem)
        assert {r.algo for r in plan.runs} == {"sapo", "ppo", "grpo"} and len(plan.runs) == 9
        assert {r.config.rollout.tasks_per_iteration * r.rollouts_per_task for r in plan.runs} == {
            plan.trajectories
        }
        if path.name.startswith("paper_"):
            assert cfg.rollout.tasks_per_iteration == 128 and "--trajectories 128" in commands[0]
            assert cfg.algorithm.lr == 1e-6 and cfg.algorithm.kl_coef == 0.01
            assert cfg.rollout.max_new_tokens == 512 and cfg.rollout.think is True
            assert cfg.env.kwargs["max_steps"] == (50 if "alfworld" in path.name else 15)
            assert (cfg.model.lora_rank > 0) == ("7b" in path.name)
            assert cfg.model.name == ("Qwen2.5-7B" if "7b" in path.name else "Qwen2.5-1.5B")
        else:
            assert cfg.model.name == "embedded" and cfg.rollout.action_mode == "constrained"


def test_bench_stops_at_its_time_limit_with_a_checkpoint_and_resumes_there(tmp_path, one_torch_thread):
    """--stop-after-minutes 0: the first run stops after its first iteration (with
    train.save_every=0 it would otherwise have no checkpoint before its end), the second never
    starts; the same command without the limit resumes at iteration 2, and the resumed run's
    records equal those of a run never stopped."""
    def args(out, *extra):
        return ["bench", "--algos", "sapo", "--env", "keydoor", "--model", "tiny", "--seeds", "2",
                "--iterations", "3", "--trajectories", "2", "--eval-episodes", "2",
                "--set", "rollout.action_mode=constrained", "--set", "train.save_every=0",
                "--set", "env.kwargs={n_rooms: 2, max_steps: 8}", "-o", str(out), *extra]

    out = tmp_path / "pieces"
    first = _invoke(args(out, "--stop-after-minutes", "0"))
    assert first.exit_code == 0, first.output
    text = " ".join(first.output.split())
    assert "stopped at the time limit (0 min): 2 of 2 runs not finished" in text
    assert "sapo seed 0 at iteration 1 checkpointed" in text
    seed0 = out / "sapo" / "seed0"
    assert [r["iteration"] for r in _metrics(seed0)] == [1]
    assert (seed0 / "checkpoints" / "iter_00001").is_dir() and not (seed0 / "summary.json").exists()
    assert not (out / "sapo" / "seed1").exists()
    session = json.loads((out / "bench.json").read_text())["sessions"][0]
    assert [r["state"] for r in session["runs"]] == ["paused", "queued"]
    assert session["time_limit_minutes"] == 0 and session["finished"]
    assert session["ended"] == "time limit"

    second = _invoke(args(out))
    assert second.exit_code == 0, second.output
    assert "2 runs (2 to do, 0 already finished)" in " ".join(second.output.split())
    assert [r["action"] for r in json.loads((out / "bench.json").read_text())["sessions"][1]["runs"]] == ["resume", "fresh"]
    assert [r["iteration"] for r in _metrics(seed0)] == [1, 2, 3] and (seed0 / "summary.json").is_file()

    whole = tmp_path / "whole"
    assert _invoke([*args(whole)[:8], "1", *args(whole)[9:]]).exit_code == 0  # --seeds 1
    keys = ("iteration", "env_steps", "trajectories", "rollout/return", "policy/kl_ref")
    assert [{k: r.get(k) for k in keys} for r in _metrics(seed0)] == [
        {k: r.get(k) for k in keys} for r in _metrics(whole / "sapo" / "seed0")
    ]


def test_a_run_in_its_own_process_brings_a_user_error_back_as_one_sentence(tmp_path):
    from agentrl.bench.process import run_isolated

    cfg = build_config(algo="sapo", env="keydoor", model="./no-such-model",
                       overrides=[f"train.run_dir={tmp_path / 'run'}", "train.iterations=1"])
    started = []
    with pytest.raises(UserError, match="Model path './no-such-model' does not exist"):
        run_isolated(cfg, False, "sapo seed 0", lambda *a: started.append(a), lambda r: None)
    assert started == []  # it never got as far as training


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_killing_the_bench_stops_the_run_it_was_training(tmp_path, signal_name):
    """`kill PID` (SIGTERM) or Ctrl-C (SIGINT) of a bench must not leave its run's process
    training on alone, and bench.json says how the session ended rather than "running"."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "bench"
    cmd = [sys.executable, "-m", "agentrl", "bench", "--algos", "sapo", "--env", "keydoor",
           "--model", "tiny", "--seeds", "1", "--iterations", "200", "--trajectories", "2",
           "--eval-episodes", "0", "--set", "rollout.action_mode=constrained",
           "--set", "env.kwargs={n_rooms: 2, max_steps: 8}", "-o", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def as_a_terminal_would() -> None:
        # a shell starts background jobs with SIGINT ignored, and Python then never turns it
        # into KeyboardInterrupt: give the bench the default disposition a terminal gives it
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    bench = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                             preexec_fn=as_a_terminal_would)
    metrics = out / "sapo" / "seed0" / "metrics.jsonl"

    def lines() -> int:
        return len(metrics.read_text().splitlines()) if metrics.exists() else 0

    try:
        deadline = time.monotonic() + 240
        while lines() < 2 and time.monotonic() < deadline and bench.poll() is None:
            time.sleep(0.5)
        assert lines() >= 2, "the run never got going"
        bench.send_signal(getattr(signal, signal_name))
        assert bench.wait(60) != 0
    finally:
        if bench.poll() is None:  # never leave a bench training on after a failed test
            bench.kill()
            bench.wait()
    seen = lines()
    time.sleep(8)  # an orphaned run would log several more iterations meanwhile
    assert lines() == seen and seen < 200
    (session,) = json.loads((out / "bench.json").read_text())["sessions"]
    expected = {"SIGTERM": "stopped by SIGTERM", "SIGINT": "interrupted by SIGINT"}[signal_name]
    assert session["ended"] == expected and session["finished"] is not None
    (run,) = session["runs"]
    assert run["state"] == "interrupted" and run["finished"] is not None


def test_comparison_table_rows_by_hand(tmp_path):
    """benchmarks/comparison_table.py: one SAPO run, 4 iterations of 8 trajectories, evaluated on
    36 games at iterations 0, 2 and 4, its first two iterations on an AMX machine and the last two
    on one without AMX. Every cell is worked out here from the records written below."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "comparison_table", root / "benchmarks" / "comparison_table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    from agentrl.reporting.runs import load_run
    from agentrl_envs.alfworld.catalog import TASK_TYPES

    run = tmp_path / "bench" / "sapo" / "seed0"
    run.mkdir(parents=True)
    cfg = build_config(algo="sapo", env="agentrl/ALFWorld-v0", model="tiny",
                       overrides=["train.seed=0", f"train.run_dir={run}", "train.iterations=4",
                                  "algorithm.lr=3e-05"])
    save_yaml(cfg, run / "config.yaml")

    def evaluation(wins: int, last: bool) -> dict:
        # 6 games per task type; the final evaluation wins 3, 2, 1, 0, 0, 0 of them by type.
        record = {"eval/success_rate": wins / 36, "eval/episodes": 36.0}
        for i, task_type in enumerate(sorted(TASK_TYPES)):
            record[f"eval/success/{task_type}"] = (max(3 - i, 0) if last else 1) / 6
            record[f"eval/episodes/{task_type}"] = 6.0
        return record

    records = [{"iteration": 0, **evaluation(7, False)}]
    train_wins = [1, 3, 0, 2]  # of 8 each: 6 in all
    seconds = [100.0, 90.0, 300.0, 80.0]  # median of the four: (90 + 100) / 2 = 95
    rss = [10.0, 11.5, 9.0, 9.5]  # peak: 11.5
    for it in range(1, 5):
        record = {"iteration": it, "env_steps": 100 * it + 3, "rollout/episodes": 8.0,
                  "rollout/success_rate": train_wins[it - 1] / 8, "time/iteration": seconds[it - 1],
                  "memory/peak_rss_gb": rss[it - 1], "policy/kl_ref": 0.01 * it}
        if it in (2, 4):
            record.update(evaluation({2: 9, 4: 6}[it], it == 4))
        records.append(record)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (run / "summary.json").write_text(json.dumps({"iterations": 4}) + "\n")

    def session(started: str, isa: str, action: str) -> dict:
        return {"command": "agentrl bench", "started": started, "finished": None,
                "run_isolation": "process",
                "machine": {"cpu": "Intel(R) Xeon(R) Processor", "cpu_isa": isa},
                "runs": [{"algo": "sapo", "seed": 0, "run_dir": str(run), "action": action,
                          "state": "done"}]}

    manifest = {"sessions": [session("2026-12-01 08:00", "avx2 avx512f avx512_bf16 amx_bf16 amx_tile",
                                     "fresh"),
                             session("2026-12-02 08:00", "avx2 avx512f avx512_bf16", "resume")]}
    (tmp_path / "bench" / "bench.json").write_text(json.dumps(manifest))

    # every task type has its column name, and the columns follow the task types' alphabetical order
    assert list(table.SHORT) == sorted(TASK_TYPES)
    cells = [c.strip() for c in table.row(load_run(run)).strip("|").split("|")]
    by_type = {t: w for t, w in zip(sorted(TASK_TYPES), (3, 2, 1, 0, 0, 0), strict=True)}
    assert cells == [
        "SAPO (3e-05) seed 0",
        "Intel, AMX then Intel, no AMX",
        "7, 9, **6**",
        ", ".join(str(by_type[t]) for t in table.SHORT),
        "6 of 32",
        "403",
        "95",
        "11.5",
        "0.040",
    ]
    # A run that shared its process with an earlier run (before each run had a process of its
    # own) has no trustworthy peak: blank.
    del manifest["sessions"][1]["run_isolation"]
    manifest["sessions"][1]["runs"].insert(0, {"algo": "ppo", "seed": 0, "action": "fresh",
                                               "state": "done", "run_dir": str(run.parent)})
    (tmp_path / "bench" / "bench.json").write_text(json.dumps(manifest))
    assert table.row(load_run(run)).split("|")[8].strip() == "-"
    # An AMD EPYC with AVX-512 BF16 (no AMX on any AMD part) names its maker.
    manifest["sessions"] = [manifest["sessions"][0]]
    manifest["sessions"][0]["machine"] = {"cpu": "AMD EPYC", "cpu_isa": "avx2 avx512f avx512_bf16"}
    (tmp_path / "bench" / "bench.json").write_text(json.dumps(manifest))
    assert table.row(load_run(run)).split("|")[2].strip() == "AMD, no AMX"


def test_chain_button_gap_by_hand(tmp_path, capsys, monkeypatch):
    """benchmarks/chain_button_gap.py: a final eval where the red lamp saw both buttons pressed
    and the blue one only the wrong button. V after the press reads 0.9 and 0.7 after the two right
    presses and 0.5 after the wrong one, so the V gap is (0.9 + 0.7) / 2 - 0.5 = 0.3 against a
    return gap of 1 - 0 = 1: under half, so V does not tell the buttons apart. The blue lamp,
    a one-turn episode and an earlier eval are left out; so is a GRPO run, which has no V."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("chain_button_gap", root / "benchmarks" / "chain_button_gap.py")
    gap = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, gap)  # its dataclass looks its module up there
    spec.loader.exec_module(gap)

    def episode(lamp: str, button: str, v_after: float | None, ret: float, turns: int = 2) -> str:
        after = {"observation": f"The lamp was {lamp}; you pressed {button}.", "action": "wait"}
        if v_after is not None:
            after["V"] = v_after
        first = {"observation": f"The lamp is {lamp}.", "action": f"press {button}"}
        return json.dumps({"return": ret, "turns": [first, after][:turns]})

    sapo = tmp_path / "chain-d1" / "sapo" / "seed0" / "eval"
    sapo.mkdir(parents=True)
    (sapo / "iter_00004.jsonl").write_text(episode("red", "right", 5.0, 0.0) + "\n")  # not the last eval
    (sapo / "iter_00012.jsonl").write_text("\n".join([
        episode("red", "left", 0.9, 1.0), episode("red", "left", 0.7, 1.0), episode("red", "right", 0.5, 0.0),
        episode("blue", "left", 0.2, 0.0), episode("red", "right", 3.0, 0.0, turns=1)]) + "\n")
    grpo = tmp_path / "chain-d1" / "grpo" / "seed0" / "eval"
    grpo.mkdir(parents=True)
    (grpo / "iter_00012.jsonl").write_text(episode("red", "left", None, 1.0) + "\n" + episode("red", "right", None, 0.0))

    run = tmp_path / "chain-d1" / "sapo" / "seed0"
    (cell,) = gap.lamp_gaps(run, gap.final_eval(run))
    assert (cell.lamp, cell.n_right, cell.n_wrong) == ("red", 2, 1)
    assert cell.v_gap == pytest.approx(0.3) and cell.return_gap == pytest.approx(1.0)
    assert gap.lamp_gaps(tmp_path / "chain-d1" / "grpo" / "seed0", gap.final_eval(tmp_path / "chain-d1" / "grpo" / "seed0")) == []
    assert gap.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| red | 2 / 1 | 0.80 / 0.50 | +0.30 | +1.00 |" in out
    assert "chain-d1/sapo: 0 of 1 lamps" in out
