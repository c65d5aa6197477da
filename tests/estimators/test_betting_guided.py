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
