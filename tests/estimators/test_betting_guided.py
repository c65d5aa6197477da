"""The guided search of the betting bisections (receval.estimators.anytime.betting._guided_chunk,
bracketed_ends with a guess) finds the plain bisection's ends bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from receval.estimators.anytime import betting


def _streams(rng, kind: str, S: int = 12, K: int = 400):
    high = rng.uniform(1.0, 3.0, (S, K))
    x = rng.random((S, K)) * rng.random((S, 1)) * high
    active = rng.random((S, K)) < 0.9
    if kind == "means":
        return betting.BettingStreams.of_means(x / high.max(), 1.0, active)
    return betting.BettingStreams.of_ratios(0.5 * x, x, high, active)


@pytest.mark.parametrize("kind", ["means", "ratios"])
@pytest.mark.parametrize("side", [+1, -1])
@pytest.mark.parametrize("running", [True, False])
@pytest.mark.parametrize("iterations", [12, 24])
def test_guided_ends_are_the_bisections(kind, side, running, iterations):
    rng = np.random.default_rng(iterations + 3 * side + 7 * running + len(kind))
    streams = _streams(rng, kind)
    S = streams.shape[0]
    bets = betting.plugin_bets(streams, 0.05, 0.5)
    level = np.log(2.0 / np.array([0.05, 0.01]))[:, None] * np.ones((2, S))
    level[:, 0], level[:, 1], level[:, 2] = -1.0, 30.0, 0.0  # all or nothing rejected
    search = (np.zeros(S), np.ones(S))
    args = (streams, bets, level, side, search, iterations, running)
    plain = betting._bisected_chunk(*args)
    guided = betting._guided_chunk(*args)
    assert np.array_equal(plain, guided)
    assert np.array_equal(np.signbit(plain), np.signbit(guided))


@pytest.mark.parametrize("side", [+1, -1])
@pytest.mark.parametrize("noise", [0.0, 1e-3, 0.02, 0.3])
def test_bracketed_guess_changes_no_end(side, noise):
    rng = np.random.default_rng(int(noise * 1000) + side + 2)
    streams = _streams(rng, "ratios")
    S = streams.shape[0]
    bets = betting.plugin_bets(streams, 0.05, 0.5)
    level = np.full((1, S), np.log(2.0 / 0.05))
    level[0, 0], level[0, 1], level[0, 2] = -1.0, 30.0, 0.0  # all or nothing rejected
    ends = betting.one_sided_ends(streams, bets, level, side, (0.0, 1.0), 12)[0]
    near = np.clip(ends + rng.normal(0.0, 0.01, S), 0.0, 1.0)
    guess = np.clip(ends + rng.normal(0.0, noise, S), -0.5, 1.5)
    plain = betting.bracketed_ends(streams, bets, level, side, near, 1 / 64, 12)
    guided = betting.bracketed_ends(streams, bets, level, side, near, 1 / 64, 12, guess)
    assert np.array_equal(plain, guided)


@pytest.mark.parametrize("side", [+1, -1])
@pytest.mark.parametrize("noise", [0.0, 1e-3, 0.3])
def test_one_sided_guess_changes_no_end(side, noise):
    """one_sided_ends from a guess (the joint cells' first cell) ends where it ends without."""
    rng = np.random.default_rng(int(noise * 1000) + side + 11)
    streams = _streams(rng, "ratios", S=30)
    S = streams.shape[0]
    bets = betting.plugin_bets(streams, 0.05, 0.5)
    level = np.log(2.0 / np.array([0.05, 0.01, 0.001]))[:, None] * np.ones((3, S))
    level[:, 0], level[:, 1] = -1.0, 30.0  # all or nothing rejected
    plain = betting.one_sided_ends(streams, bets, level, side, (0.0, 1.0), 12)
    guess = np.clip(plain + rng.normal(0.0, noise, plain.shape), -0.5, 1.5)
    guided = betting.one_sided_ends(streams, bets, level, side, (0.0, 1.0), 12, guess=guess)
    assert np.array_equal(plain, guided)


@pytest.mark.parametrize("kind", ["means", "ratios"])
def test_capitals_of_scattered_rows_are_each_rows_own(kind, monkeypatch):
    """_capitals cuts runs of rows as views (evaluating the few rows between them) and levels
    asking for one value share its evaluation: every row's capital is its own, bit for bit."""
    monkeypatch.setattr(betting, "CHUNK", 4 * 400)  # chunks of a few rows
    rng = np.random.default_rng(5)
    streams = _streams(rng, kind, S=40)
    bets = betting.plugin_bets(streams, 0.05, 0.5)
    rows = np.sort(rng.choice(40, 17, replace=False))
    mu = rng.random((2, rows.size))
    mu[1, ::3] = mu[0, ::3]  # some streams asked at one value by both levels
    for side in (+1, -1):
        got = betting._level_capitals(streams, bets, mu, side, True, rows)
        for r, row in enumerate(rows):
            one = streams.take(slice(row, row + 1))
            own = betting.log_capital(one, bets[row : row + 1], mu[:, r : r + 1], side, True)
            assert np.array_equal(got[:, r], own[:, 0])


@pytest.mark.parametrize("side", [+1, -1])
def test_bracketed_crossing_lies_within_the_resolution_of_the_end(side):
    """bracketed_ends(crossing=True): the same ends, and where each capital crosses its level
    (regula falsi between the two values the search ended between) at most one resolution step
    from the end, on the side of the values not rejected."""
    rng = np.random.default_rng(17 + side)
    streams = _streams(rng, "ratios", S=20)
    S = streams.shape[0]
    bets = betting.plugin_bets(streams, 0.05, 0.5)
    level = np.full((1, S), np.log(2.0 / 0.05))
    ends = betting.one_sided_ends(streams, bets, level, side, (0.0, 1.0), 12)[0]
    near = np.clip(ends + rng.normal(0.0, 0.003, S), 0.0, 1.0)
    plain = betting.bracketed_ends(streams, bets, level, side, near, 1 / 64, 12, ends)
    out, cross = betting.bracketed_ends(streams, bets, level, side, near, 1 / 64, 12, ends,
                                        crossing=True)  # fmt: skip
    assert np.array_equal(plain, out)
    inside = (out > 0.0) & (out < 1.0)
    step = (cross - out) * side  # the values not rejected lie beyond the end on its side
    assert np.all(step[inside] >= -1e-12) and np.all(step[inside] <= 2.0**-12 + 1e-12)


@pytest.mark.parametrize("kind", ["means", "ratios"])
def test_confidence_bounds_from_the_normal_guess_are_the_bisections(kind):
    """confidence_bounds starts each end's guided search from a normal-width guess
    (betting._normal_guess): the ends are a plain bisection's bit for bit, at two levels,
    with a stream that counts no step (its guess is the range's middle) and a constant one."""
    rng = np.random.default_rng(11 + len(kind))
    streams = _streams(rng, kind)
    active = np.array(streams.active)
    active[0] = False  # no step: NaN point
    u = np.array(streams.u)
    u[1] = 0.0  # a constant term: SE 0
    streams = betting.BettingStreams(u, streams.v, streams.lo0, streams.lo1, streams.hi0,
                                     streams.hi1, active)  # fmt: skip
    S = streams.shape[0]
    alphas = np.array([0.05, 0.01])
    lower, upper = betting.confidence_bounds(streams, alphas, iterations=24)
    bets = betting.plugin_bets(streams, 0.05, 0.5)
    level = np.log(2.0 / alphas)[:, None] * np.ones((2, S))
    search = (np.zeros(S), np.ones(S))
    plain = [betting._bisected_chunk(streams, bets, level, side, search, 24, True)
             for side in (+1, -1)]  # fmt: skip
    assert np.array_equal(lower, plain[0])
    assert np.array_equal(upper, np.maximum(plain[1], plain[0]))
    guess = betting._normal_guess(streams, alphas, search, +1)
    assert guess[:, 0].tolist() == [0.5, 0.5] and np.isfinite(guess).all()
