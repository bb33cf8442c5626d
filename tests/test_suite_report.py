"""The behaviour suite report's value statistics, worked out by hand: Monte-Carlo returns,
V's pooled explained variance, the leave-one-out state ceiling and the 'V learned' rule."""

from __future__ import annotations

import pytest

from agentrl.reporting.suite import (
    EV_SHARE,
    ValueFit,
    _value_row,
    ceiling_ev,
    mc_returns,
    median_of_last,
    pooled_ev,
    sessions_table,
    t_interval,
    value_fit,
)


def _episode(observations: list[str], rewards: list[float], values: list[float]) -> dict:
    return {"turns": [{"observation": o, "reward": r, "V": v}
                      for o, r, v in zip(observations, rewards, values, strict=True)]}


def test_mc_returns_by_hand():
    # G_2 = 1, G_1 = 0 + 0.5 * 1, G_0 = 2 + 0.5 * 0.5
    assert mc_returns([2.0, 0.0, 1.0], 0.5) == pytest.approx([2.25, 0.5, 1.0])


def test_pooled_ev_and_leave_one_out_ceiling_by_hand():
    # a two-turn chain, gamma 1: lamp A, then B (pays 1) or C (pays 0), twice each
    eps = [_episode(["A", "B"], [0, 1], [0.5, 1.0]), _episode(["A", "C"], [0, 0], [0.5, 0.0]),
           _episode(["A", "B"], [0, 1], [0.5, 1.0]), _episode(["A", "C"], [0, 0], [0.5, 0.5])]
    # returns 1,1 / 0,0 / 1,1 / 0,0: variance 1/4. V's residuals 0.5, 0, -0.5, 0, 0.5, 0, -0.5,
    # -0.5: mean -1/16, mean square 1.25/8, variance 0.15625 - 0.00390625 = 0.15234375
    assert pooled_ev(eps, 1.0) == pytest.approx(1 - 0.15234375 / 0.25)
    # leave one out: an A turn is predicted by the other three A turns (1/3 after a win, 2/3
    # after a loss), B and C by their twin (exact): residuals +-2/3 on the four A turns, mean 0,
    # variance (4 * 4/9) / 8 = 2/9 -> ceiling 1 - (2/9) / (1/4) = 1/9
    assert ceiling_ev(eps, 1.0) == pytest.approx(1 / 9)


def test_q_keys_on_state_and_action_by_hand():
    # gamma 1: at lamp A, action "l" leads to B (pays 1), "r" to C (pays 0), twice each; Q reads
    # 1 after "l", 0 after "r", and 0.5 on the last C turn
    def ep(action, second, reward, qs):
        return {"turns": [{"observation": "A", "action": action, "reward": 0, "V": 0.5, "Q": qs[0]},
                          {"observation": second, "action": "wait", "reward": reward, "V": 0.5, "Q": qs[1]}]}

    eps = [ep("l", "B", 1, (1, 1)), ep("r", "C", 0, (0, 0)), ep("l", "B", 1, (1, 1)), ep("r", "C", 0, (0, 0.5))]
    # returns 1,1 / 0,0 / 1,1 / 0,0 (variance 1/4); Q's residuals all 0 but -0.5 on the last:
    # mean -1/16, mean square 1/32, variance 1/32 - 1/256 = 7/256 -> EV 1 - (7/256) / (1/4) = 57/64
    assert pooled_ev(eps, 1.0, "Q") == pytest.approx(57 / 64)
    # keyed on (state, action), every pair is seen twice with the same return: ceiling 1; keyed on
    # the state alone, the four A turns are a coin flip (1/9, as in the test above)
    assert ceiling_ev(eps, 1.0, value="Q") == pytest.approx(1.0)
    assert ceiling_ev(eps, 1.0) == pytest.approx(1 / 9)
    # a run without Q (PPO's traces) has none
    assert pooled_ev([_episode(["A", "B"], [0, 1], [0, 1]), _episode(["A", "C"], [0, 0], [0, 0])], 1.0, "Q") is None
    # one pass gives both numbers, judged by the same rule as V
    q = value_fit(eps, 1.0, False, "Q", 0.3)
    assert q.eval_ev == pytest.approx(57 / 64) and q.ceiling == pytest.approx(1.0) and q.train_ev == 0.3
    assert q.judged and q.learned
    assert not ValueFit(0.9, None).judged and not ValueFit().learned


def test_ceiling_keys_on_the_whole_conversation_in_conversation_mode():
    # the code is only in the first observation; the second observation is the same question
    eps = [_episode(["code 1", "which code?"], [0, 1], [0, 0]), _episode(["code 2", "which code?"], [0, 0], [0, 0]),
           _episode(["code 1", "which code?"], [0, 1], [0, 0]), _episode(["code 2", "which code?"], [0, 0], [0, 0])]
    # window mode: the four question turns are one state (returns 1,0,1,0): leave one out gives
    # 1/3 or 2/3, as do the first turns ("code 1" twice: exact; "code 2": exact) -> residuals
    # +-2/3 on four turns of eight, variance 2/9, ceiling 1/9
    assert ceiling_ev(eps, 1.0) == pytest.approx(1 / 9)
    # conversation mode: ("code 1", "which code?") is its own state: every turn exact
    assert ceiling_ev(eps, 1.0, conversation=True) == pytest.approx(1.0)


def test_no_return_variance_gives_no_ev():
    eps = [_episode(["A"], [1.0], [0.2]), _episode(["A"], [1.0], [0.9])]
    assert pooled_ev(eps, 0.9) is None and ceiling_ev(eps, 0.9) is None


def test_learned_is_a_share_of_the_ceiling():
    def run(ev, ceiling):
        return ValueFit(ev, ceiling)

    assert EV_SHARE == 0.5
    assert run(0.27, 0.53).learned and not run(0.26, 0.53).learned
    assert not run(None, 0.53).learned and not run(0.3, None).learned and not run(0.1, -0.2).learned
    # a ceiling <= 0 (failures no state foretells) or no return variance: not judged either way
    assert run(0.27, 0.53).judged and run(0.0, 0.53).judged
    assert not run(0.1, -0.2).judged and not run(0.1, 0.0).judged and not run(None, 0.53).judged


def test_train_ev_is_the_median_of_the_last_five_finite_values():
    key = "value/explained_variance_v"
    records = [{key: 1.0}, {key: float("nan")}, {key: 3.0}, {key: 0.5}, {"other": 1.0}, {key: 10.0}]
    # the last five: nan (left out), 3, 0.5, missing, 10 -> median of 0.5, 3, 10 = 3
    assert median_of_last(records, key) == 3.0
    assert median_of_last(records, key, last=2) == 10.0
    assert median_of_last([{key: float("nan")}], key) is None and median_of_last([], key) is None


def test_t_interval_by_hand():
    # mean 2, sample sd 1, sem 1/sqrt(3), t(2) = 4.303
    mean, half = t_interval([1.0, 2.0, 3.0])
    assert mean == pytest.approx(2.0) and half == pytest.approx(4.303 / 3 ** 0.5)


def test_value_row_counts_and_intervals_by_hand():
    fits = [ValueFit(0.6, 1.0, 0.5), ValueFit(0.2, 1.0), ValueFit(None, None, 0.7)]
    # eval EV over the two measured runs: mean 0.4, sample SD 0.2828, SEM 0.2, t(1) 12.706 -> 2.54;
    # ceiling 1.0 twice: SEM 0 -> "1.00 ± 0.00"; learned: 0.6 >= 0.5 x 1, 0.2 is not -> 1 of 2
    # judged, and the third run (no eval EV) is not judged; train EV 0.5 and 0.7 -> 0.60 ± 1.27
    assert _value_row("chain-d1", "sapo", fits) == [
        "chain-d1", "sapo", "0.40 ± 2.54", "1.00 ± 0.00", "1 of 2", "1", "0.60 ± 1.27"]


def test_sessions_table_adds_a_note_column_only_when_a_session_has_one():
    plain = {"started": "t0", "machine": "m", "runs_done": 2, "runs_left": 0, "seconds": 10.5, "command": "c"}
    header, rows = sessions_table([plain])
    assert header[-1] == "command" and rows == [["t0", "m", "2", "0", "10.5", "c"]]
    # a session stopped by hand and one whose runs were brought in: both words are kept, in that order
    by_hand = {"started": "t1", "command": "d", "stopped": "by hand", "note": "runs moved here"}
    header, rows = sessions_table([plain, by_hand])
    assert header[-1] == "note"
    assert rows[0][-1] == "-"
    assert rows[1] == ["t1", "", "-", "-", "-", "d", "by hand runs moved here"]
