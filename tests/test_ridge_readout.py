"""The closed-form value readout (``value_head_fit`` / ``critic_head_fit`` = ``ridge``), checked
against ridge solutions worked out by hand."""

import io
import math

import pytest
import torch

from agentrl.algorithms.ridge_readout import ReadoutWindow, batch_from_state, fit_ridge_readout


def test_no_intercept_one_feature_by_hand():
    # x = 1, 2, 3 (population variance 2/3), y = 1, 2, 2, penalty 1 on the standardised feature:
    # w_z = sum(z y) / (sum(z^2) + 1) with z = x / sd, so in raw units
    # w = sum(x y) / (sum(x^2) + 1 * var(x)) = 11 / (14 + 2/3) = 0.75
    fit = fit_ridge_readout(torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([1.0, 2.0, 2.0]),
                            torch.tensor([0, 1, 2]), squash="linear", intercept=False, alphas=(1.0,))
    assert float(fit.weight[0]) == pytest.approx(0.75, rel=1e-9)
    assert fit.bias == 0.0 and fit.alpha == 1.0


def test_intercept_one_feature_by_hand():
    # x = 0..3, y = 0.5 + 0.25 x; centred: sum(xc^2) = 5, sum(xc yc) = 1.25, var(x) = 1.25;
    # penalty 1: w = 1.25 / (5 + 1.25) = 0.2, b = mean(y) - w mean(x) = 0.875 - 0.3 = 0.575
    x = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
    fit = fit_ridge_readout(x, 0.5 + 0.25 * x[:, 0], torch.arange(4), squash="linear", intercept=True, alphas=(1.0,))
    assert float(fit.weight[0]) == pytest.approx(0.2, rel=1e-9)
    assert fit.bias == pytest.approx(0.575, rel=1e-9)


def test_sample_weights_count_as_repeated_rows():
    # weight 2 on the last row = the row twice: x = 1, 2, 3, 3; y = 1, 2, 2, 2; no penalty to speak of:
    # w = sum(x y) / sum(x^2) = (1 + 4 + 6 + 6) / (1 + 4 + 9 + 9) = 17 / 23
    fit = fit_ridge_readout(torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([1.0, 2.0, 2.0]),
                            torch.arange(3), squash="linear", intercept=False, alphas=(1e-12,),
                            sample_weight=torch.tensor([1.0, 1.0, 2.0]))
    assert float(fit.weight[0]) == pytest.approx(17 / 23, rel=1e-9)
    # weights are rescaled to mean 1: (1, 1, 2) and (1e-6, 1e-6, 2e-6) make the same fit at any penalty
    x, y = torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([1.0, 2.0, 2.0])
    a, b = (fit_ridge_readout(x, y, torch.arange(3), squash="linear", intercept=False, alphas=(1.0,),
                              sample_weight=torch.tensor(w)) for w in ([1.0, 1.0, 2.0], [1e-6, 1e-6, 2e-6]))
    assert float(a.weight[0]) == pytest.approx(float(b.weight[0]), rel=1e-9)


def test_cross_validation_picks_a_small_penalty_for_signal_and_a_large_one_for_noise():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(60, 8, generator=gen)
    groups = torch.arange(60) // 3  # 20 episodes of 3 states
    signal = fit_ridge_readout(x, x @ torch.linspace(-1, 1, 8), groups, squash="linear")
    noise = fit_ridge_readout(x, torch.randn(60, generator=gen), groups, squash="linear")
    assert signal.alpha == 1e-2  # the smallest on the grid: nothing to shrink
    assert noise.alpha >= 100.0  # shrunk towards the mean: nothing to read
    assert signal.held_out_ev > 0.99 and noise.held_out_ev < 0.05


def test_held_out_ev_by_hand():
    """Leave-one-out (4 episodes, 4 folds), one feature, no intercept, no penalty: each held-out
    point is predicted by w = sum(xy) / sum(x^2) of the other three, and the constant by their
    mean of y.
    hold x=1: w 30/29, pred 1.0345, err 0.0012 | constant 3,   err 4
    hold x=2: w 27/26, pred 2.0769, err 0.0059 | constant 8/3, err 0.4444
    hold x=3: w 25/21, pred 3.5714, err 2.4694 | constant 8/3, err 0.4444
    hold x=4: w 11/14, pred 3.1429, err 3.4490 | constant 5/3, err 11.1111
    -> 1 - 5.9255 / 16 = 0.6297."""
    x, y = torch.tensor([[1.0], [2.0], [3.0], [4.0]]), torch.tensor([1.0, 2.0, 2.0, 5.0])
    fit = fit_ridge_readout(x, y, torch.arange(4), squash="linear", intercept=False, alphas=(0.0,), folds=4)
    assert fit.held_out_ev == pytest.approx(1 - 5.925474 / 16, abs=1e-6)
    # with an intercept and a penalty that zeroes the slope, the fit is each fold's mean: 0
    flat = fit_ridge_readout(x, y, torch.arange(4), squash="linear", intercept=True, alphas=(1e12,), folds=4)
    assert flat.held_out_ev == pytest.approx(0.0, abs=1e-9)
    # one episode: nothing to hold out
    assert math.isnan(fit_ridge_readout(x, y, torch.zeros(4, dtype=torch.long), squash="linear").held_out_ev)


def test_a_small_direction_is_read_as_well_as_a_large_one():
    """Why the features are standardised: a value that depends on a feature 1,000 times smaller
    than another is fitted as well (the chain probes' button against the lamp), where the same
    penalty on the raw features shrinks the small one away."""
    gen = torch.Generator().manual_seed(1)
    lamp = torch.randint(0, 2, (64,), generator=gen).float()
    button = torch.randint(0, 2, (64,), generator=gen).float()
    # win when the button matches the lamp: 1 - lamp - button + 2 lamp button
    y = (lamp == button).float()
    x = torch.stack([10.0 * lamp, 0.01 * button, 0.1 * lamp * button], 1)
    fit = fit_ridge_readout(x, y, torch.arange(64), squash="linear", intercept=True, alphas=(1.0,))
    assert float((x.double() @ fit.weight + fit.bias - y).abs().max()) < 0.1
    xc, yc = (x - x.mean(0)).double(), (y - y.mean()).double()
    raw = torch.linalg.solve(xc.T @ xc + torch.eye(3, dtype=torch.float64), xc.T @ yc)
    assert float((xc @ raw - yc).abs().max()) > 0.4  # raw penalty 1: the button is lost


def test_tanh_refinement_recovers_a_squashed_line():
    # y = tanh(0.3 + 0.8 x): the linear fit cannot match it; Gauss-Newton on the tanh loss does
    x = torch.tensor([[-1.0], [0.0], [1.0], [2.0]])
    y = torch.tanh(0.3 + 0.8 * x[:, 0])
    linear = fit_ridge_readout(x, y, torch.arange(4), squash="linear", alphas=(1e-9,))
    fit = fit_ridge_readout(x, y, torch.arange(4), squash="tanh", alphas=(1e-9,), tanh_iterations=30)
    assert float(linear.weight[0]) < 0.5  # the line through tanh's points is flatter
    assert float(fit.weight[0]) == pytest.approx(0.8, abs=1e-4)
    assert fit.bias == pytest.approx(0.3, abs=1e-4)
    assert math.isfinite(fit.bias)


def _batch(episode_turns: list[int], first_token: int):
    """A TurnBatch of episodes with these turn counts, token ids counting up from ``first_token``."""
    state, token = [], first_token
    for turns in episode_turns:
        record = []
        for _ in range(turns):
            record.append({"prompt": torch.tensor([token, token + 1]), "action": torch.tensor([token + 2]),
                           "reward": 0.0, "terminated": False, "truncated": False, "valid": True})
            token += 3
        state.append({"task_seed": token, "conversation": False, "bootstrap": None, "turns": record})
    return batch_from_state(state)


def test_window_keeps_the_last_batches_numbers_their_episodes_apart_and_round_trips():
    window = ReadoutWindow(2)
    for k, shape in enumerate(([2, 1], [1, 2], [1, 1, 1])):
        window.add(_batch(shape, 100 * k), v=torch.full((3,), float(k)))
    assert window.stacked("v").tolist() == [1, 1, 1, 2, 2, 2]  # batch 0 dropped
    assert window.episode_ids().tolist() == [0, 1, 1, 2, 3, 4]
    again = ReadoutWindow(2)
    saved = io.BytesIO()
    torch.save(window.state_dict(), saved)  # a checkpoint's trainer state is read with weights_only=True
    saved.seek(0)
    again.load_state_dict(torch.load(saved, weights_only=True))
    for ours, theirs in zip(window.entries, again.entries, strict=True):
        assert [i.prompt_ids for i in theirs.batch.items] == [i.prompt_ids for i in ours.batch.items]
        assert [i.action_ids for i in theirs.batch.items] == [i.action_ids for i in ours.batch.items]
        assert theirs.batch.spans == ours.batch.spans
        assert torch.equal(theirs.targets["v"], ours.targets["v"])
    assert window.entries[0].batch.items[0].prompt_ids == [100, 101]


def test_episode_of_turns_follows_the_spans():
    from agentrl.algorithms.batch import TurnBatch

    batch = TurnBatch([], [object()] * 5, [], [(0, 2), (2, 3), (3, 5)])  # type: ignore[list-item]
    assert batch.episode_of_turns().tolist() == [0, 0, 1, 2, 2]
