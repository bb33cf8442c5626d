"""The counterfactual credit judge (agentrl/bench/counterfactual.py): the chain's return after each
press by hand, V's gap as a share of it by hand on built episodes, the check against an eval
trace, and one tiny suite run end to end, where the judge's replay must reproduce the V the run's
own eval recorded and the report must show the answer."""

import json

import pytest

from agentrl.bench.counterfactual import (
    CREDIT_FILE,
    press_counts,
    press_credit,
    trace_check,
    window_presses,
)
from agentrl.rollout.trajectory import Trajectory, Turn
from agentrl_envs.probes.chain import RULE, ChainEnv


def _turn(action, observation, reward, v=None):
    return Turn(prompt_ids=[1], action_ids=[2], rollout_logprobs=[0.0], prompt_text="", reply_text=action,
                action=action, observation=observation, reward=reward, env_reward=reward, terminated=False,
                truncated=False, valid=True, stats={} if v is None else {"V": v})


def _episode(seed, lamp, press, v_after, reward):
    """A chain-d2 episode: the press, then two waits, the reward on the last."""
    return Trajectory(seed, 0, "t", [_turn(press, f"The lamp is {lamp}.", 0.0),
                                     _turn("wait", "2 turns to go.", 0.0, v_after),
                                     _turn("wait", "1 turn to go.", reward)])


def test_return_after_press_by_hand():
    env = ChainEnv(delay=4, reward_noise=0.2)
    # the reward comes 3 turns after the first wait: 0.95^3 = 0.857375, paid with p 0.8 / 0.2
    assert env.return_after_press(True, 0.95) == pytest.approx(0.8 * 0.857375)
    assert env.return_after_press(False, 0.95) == pytest.approx(0.2 * 0.857375)
    assert ChainEnv(delay=1).return_after_press(True, 0.5) == 1.0
    with pytest.raises(ValueError, match="no state after"):
        ChainEnv(delay=0).return_after_press(True, 0.9)


def test_share_of_the_return_gap_by_hand():
    played = [
        _episode(1, "red", "press left", 0.8, 1.0), _episode(1, "red", "press right", 0.2, 0.0),
        _episode(2, "red", "press left", 0.6, 1.0), _episode(2, "red", "press right", 0.0, 0.0),
        _episode(3, "blue", "press right", 0.5, 1.0), _episode(3, "blue", "press left", 0.5, 0.0),
    ]
    credit = press_credit(played, RULE, {True: 0.9, False: 0.0}, gamma=0.9, r_max=1.0)
    red, blue = credit["lamps"]["red"], credit["lamps"]["blue"]
    # red: V 0.7 after the right press, 0.1 after the wrong one: 0.6 of a 0.9 gap
    assert (red["tasks"], red["v_right"], red["v_wrong"]) == (2, pytest.approx(0.7), pytest.approx(0.1))
    assert red["share"] == pytest.approx(0.6 / 0.9)
    # sampled return from the first wait: 0 + 0.9 * 1
    assert (red["return_right"], red["return_wrong"]) == (pytest.approx(0.9), 0.0)
    assert blue["share"] == 0.0  # the lamp read, not the button
    assert credit["share"] == pytest.approx((0.6 / 0.9 + 0.0) / 2)
    # in R_max units: the same episodes at R_max 2 read half the V (the returns halve too)
    assert press_credit(played, RULE, {True: 0.45, False: 0.0}, 0.9, 2.0)["share"] == pytest.approx(credit["share"])
    # a lamp that saw one press only is left out of the mean
    one_sided = press_credit(played[:4] + played[4:5], RULE, {True: 0.9, False: 0.0}, 0.9, 1.0)
    assert list(one_sided["lamps"]) == ["red"] and one_sided["share"] == pytest.approx(0.6 / 0.9)


def test_trace_check_matches_the_eval_trace_by_task_and_press():
    played = [_episode(1, "red", "press left", 0.8, 1.0), _episode(1, "red", "press right", 0.2, 0.0)]
    records = [{"task_seed": 1, "turns": [{"action": "press right"}, {"V": 0.25}]},
               {"task_seed": 7, "turns": [{"action": "press left"}, {"V": 0.9}]}]  # not replayed
    assert trace_check(played, records) == {"max_abs": pytest.approx(0.05), "count": 1}
    assert trace_check(played, [])["count"] == 0


def test_press_counts_by_lamp_and_side():
    openings = [("Red lamp: press left. Blue lamp: press right. The lamp is red.", "<action>press left</action>"),
                ("... The lamp is red.", "<action>press right</action>"),
                ("... The lamp is blue.", "<action>press right</action>"),
                ("... The lamp is blue.", "<action>press right</action>"),
                ("... The lamp is blue.", "<action>wait</action>"),
                ("... The lamp is red.", "press left or press right")]
    assert press_counts(openings, RULE) == {"red": {"right": 1, "wrong": 1, "other": 1},
                                            "blue": {"right": 2, "wrong": 0, "other": 1}}


def test_window_presses_read_the_checkpointed_window():
    """The ridge window's batches, restored from their checkpoint form (token ids only), decoded:
    the last two batches: 2 red lamps pressed left (right), 2 blue pressed left (wrong); the first
    batch (one wrong press at red) has left the window."""
    import torch

    from agentrl.algorithms.batch import TurnBatch
    from agentrl.algorithms.ridge_readout import ReadoutWindow

    words = {1: "The lamp is red.", 2: "The lamp is blue.", 3: "<action>press left</action>",
             4: "<action>press right</action>", 5: "<action>wait</action>", 6: "1 turn to go."}

    class Tokenizer:
        def decode(self, ids):
            return " ".join(words[i] for i in ids)

    def episode(seed, lamp, press):
        turns = [Turn(prompt_ids=[lamp], action_ids=[press], rollout_logprobs=[0.0], prompt_text="", reply_text="",
                      action="", observation="", reward=0.0, env_reward=0.0, terminated=False, truncated=False,
                      valid=True),
                 Turn(prompt_ids=[lamp, press, 6], action_ids=[5], rollout_logprobs=[0.0], prompt_text="",
                      reply_text="", action="", observation="", reward=1.0, env_reward=1.0, terminated=True,
                      truncated=False, valid=True)]
        return Trajectory(seed, 0, "t", turns)

    window = ReadoutWindow(2)
    for batch in ([episode(0, 1, 3), episode(1, 1, 4)], [episode(2, 1, 3), episode(3, 2, 3)],
                  [episode(4, 1, 3), episode(5, 2, 3)]):  # the first batch falls out of a window of 2
        window.add(TurnBatch.from_trajectories(batch), v=torch.zeros(4))
    assert window_presses(window.state_dict(), Tokenizer(), RULE) == {"red": {"right": 2, "wrong": 0, "other": 0},
                                                                       "blue": {"right": 0, "wrong": 2, "other": 0}}
    assert window_presses(None, Tokenizer(), RULE) is None  # the Adam head steps keep no window


def test_a_tiny_suite_run_is_judged_and_reported(tmp_path):
    """SAPO and GRPO on chain-d1, one iteration of the tiny model: SAPO's run gets a credit.json
    whose replay reads exactly the V its final eval recorded; GRPO's, which has no critic, none."""
    from agentrl.bench.suite import (
        plan_suite,
        probe_by_name,
        probe_records,
        run_suite,
        write_manifest,
    )
    from agentrl.reporting.suite import build_suite_report

    out = tmp_path / "suite"
    probes = probe_by_name("chain-d1")
    plans = plan_suite(["sapo", "grpo"], out, probes, seeds=1, iterations=1, trajectories=8, eval_episodes=6)
    settings = {"model": "tiny", "seeds": 1, "first_seed": 0, "iterations": 1, "trajectories": 8,
                "eval_episodes": 6, "overrides": []}
    write_manifest(out, probe_records(probes), ["sapo", "grpo"], settings, {"id": "t"})
    said = []
    assert run_suite(plans, lambda probe, run, state: said.append((run.algo, state))) == (2, 0)
    credit = json.loads((out / "chain-d1" / "sapo" / "seed0" / CREDIT_FILE).read_text())
    assert not (out / "chain-d1" / "grpo" / "seed0" / CREDIT_FILE).exists()
    assert credit["tasks"] == 6 and credit["trace_check"]["count"] == 6
    assert credit["trace_check"]["max_abs"] < 1e-4
    assert (credit["expected_right"], credit["expected_wrong"]) == (1.0, 0.0)
    assert set(credit["lamps"]) <= {"red", "blue"} and credit["lamps"]
    assert credit["window_presses"] is None  # the suite's default head fit keeps no window
    assert any(algo == "sapo" and state.startswith("credit to the press: V gap") for algo, state in said)
    # a second invocation keeps the answer: the file is not asked again
    before = (out / "chain-d1" / "sapo" / "seed0" / CREDIT_FILE).stat().st_mtime_ns
    plans = plan_suite(["sapo", "grpo"], out, probes, seeds=1, iterations=1, trajectories=8, eval_episodes=6)
    assert run_suite(plans) == (2, 0)
    assert (out / "chain-d1" / "sapo" / "seed0" / CREDIT_FILE).stat().st_mtime_ns == before
    _, md, _ = build_suite_report(out, out / "report")
    # the credit table is the last with a "probe | algorithm | runs" row (the scores table's is the first)
    row = [line for line in md.read_text().splitlines() if line.startswith("| chain-d1 | sapo | 1 |")][-1]
    assert f"{credit['share']:.2f}" in row
    assert ", ".join(f"{lamp} {cell['share']:.2f}" for lamp, cell in sorted(credit["lamps"].items())) in row


def test_credit_row_by_hand():
    """Three runs: shares 0.5, 0.1 and 0.3 (red 0.9 / 0.0 / 0.3, blue 0.1 / 0.2 / 0.3). The first
    run's last fit held 5 wrong presses at red (enough) and none at blue; the second held 2 wrong
    at red (a coin, not counted) and 5 right at blue; the third (an Adam head) kept no window."""
    from agentrl.reporting.suite import PRESSES_NEEDED, _credit_row

    assert PRESSES_NEEDED == 5

    def lamp(share):
        return {"v_right": share, "v_wrong": 0.0, "share": share}

    credits = [{"share": 0.5, "lamps": {"red": lamp(0.9), "blue": lamp(0.1)},
                "window_presses": {"red": {"right": 30, "wrong": 5, "other": 0},
                                   "blue": {"right": 0, "wrong": 30, "other": 0}}},
               {"share": 0.1, "lamps": {"red": lamp(0.0), "blue": lamp(0.2)},
                "window_presses": {"red": {"right": 30, "wrong": 2, "other": 0},
                                   "blue": {"right": 5, "wrong": 25, "other": 0}}},
               {"share": 0.3, "lamps": {"red": lamp(0.3), "blue": lamp(0.3)}, "window_presses": None}]
    row = _credit_row("chain-d1", "sapo", credits)
    assert row[:3] == ["chain-d1", "sapo", "3"]
    # red (0.9 + 0.0 + 0.3) / 3 = 0.40, blue (0.1 + 0.2 + 0.3) / 3 = 0.20; of the two windows
    # kept, one counts at each lamp
    assert row[6] == ("blue 0.20 (both presses, 5+ each, in the last fit: 1 of 2), "
                      "red 0.40 (both presses, 5+ each, in the last fit: 1 of 2)")
    assert row[7] == "1 of 3"  # 0.5 meets the 0.5 share, 0.1 and 0.3 do not
    assert _credit_row("chain-d1", "sapo", []) is None


def test_paired_credit_row_by_hand():
    """SAPO and PPO at seeds 0, 1, 2 and 4 (PPO's seed 3 missing: SAPO's is not compared). A lamp
    is compared where both runs' last fits held 5+ presses of each button there:
    seed 0 both lamps (SAPO 0.86 / 0.85, PPO 1.00 / 1.00); seed 1 none (both narrowed to one
    button); seed 2 both lamps (SAPO 0.0 / 0.0, PPO 0.51 / 0.54); seed 4 red only (PPO's blue
    window held 3 wrong presses): SAPO 0.7, PPO 0.9."""
    from agentrl.reporting.suite import _paired_credit_row

    def run(red, blue, red_presses=(15, 15), blue_presses=(15, 15)):
        return {"lamps": {"red": {"share": red}, "blue": {"share": blue}},
                "window_presses": {"red": {"right": red_presses[0], "wrong": red_presses[1], "other": 0},
                                   "blue": {"right": blue_presses[0], "wrong": blue_presses[1], "other": 0}}}

    sapo = {0: run(0.86, 0.85), 1: run(-0.03, 0.08, (31, 2), (2, 29)), 2: run(0.0, 0.0),
            3: run(0.9, 0.9), 4: run(0.7, 0.9)}
    ppo = {0: run(1.0, 1.0), 1: run(-0.03, 0.02, (31, 2), (2, 29)), 2: run(0.51, 0.54),
           4: run(0.9, 0.2, blue_presses=(10, 3))}
    row = _paired_credit_row("chain-d1", "sapo", "ppo", sapo, ppo)
    # per seed (SAPO, PPO): (0.855, 1.0), (0.0, 0.525), (0.7, 0.9); 2 + 2 + 1 = 5 lamps.
    # SAPO: mean 0.51833, sample variance (0.33667^2 + 0.51833^2 + 0.18167^2) / 2 = 0.20751,
    #   SEM 0.26300, t(2) 4.303 -> 1.13
    # PPO: mean 0.80833, variance (0.19167^2 + 0.28333^2 + 0.09167^2) / 2 = 0.06271, SEM 0.14458 -> 0.62
    # difference: -0.145, -0.525, -0.2: mean -0.29, variance (0.145^2 + 0.235^2 + 0.09^2) / 2
    #   = 0.042175, SEM 0.11857 -> 0.51
    # only SAPO >= 0.5: none; only PPO: seed 2
    assert row == ["chain-d1", "sapo - ppo", "3 of 4", "5", "0.52 ± 1.13", "0.81 ± 0.62", "-0.29 ± 0.51", "0 / 1"]
    # an Adam-fitted critic keeps no window and counts at every lamp: seed 4's blue now compared
    ppo[4]["window_presses"] = None
    assert _paired_credit_row("chain-d1", "sapo", "ppo", sapo, ppo)[3] == "6"
    assert _paired_credit_row("chain-d1", "sapo", "ppo", {3: sapo[3]}, ppo) is None
