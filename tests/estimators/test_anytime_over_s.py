"""Recall's ends over s = r/θ found lazily (sequences._lazy_over_s) are the ends of evaluating
the capital at every point of every grid (sequences._dense_over_s), bit for bit; the cheaper
betting capitals and popularity strata are the plain ones, exactly."""

from __future__ import annotations

import numpy as np
import pytest

from tests.estimators.test_anytime_f1 import _direct_setup


def _recorded_calls(task):
    """The (θ, ν, α, side) arguments of every recall search ``score --intervals anytime`` makes
    on ``task``, and the leaderboard it scored."""
    import receval
    from receval.estimators.anytime import sequences

    calls, plain = [], sequences._recall_over_s

    def record(theta, nu, alpha, side):
        calls.append((theta, nu, alpha, side))
        return plain(theta, nu, alpha, side)

    sequences._recall_over_s = record
    try:
        board = receval.score(task, intervals="anytime", rank_by="precision").leaderboard
    finally:
        sequences._recall_over_s = plain
    return calls, board


def _same_as_dense(theta, nu, alpha, side) -> None:
    from receval.estimators.anytime import sequences

    dense = sequences._dense_over_s(theta, nu, alpha, side)
    lazy, doubt = sequences._lazy_over_s(theta, nu, alpha, side)
    assert np.array_equal(lazy, dense), (side, lazy, dense)
    assert not doubt.any()
    assert np.array_equal(sequences._recall_over_s(theta, nu, alpha, side), dense)


@pytest.mark.parametrize("seed, sizes", [(5, [20.0, 30.0, 40.0]), (8, [40.0, 80.0, 120.0]),
                                         (13, [10.0, 60.0, 90.0])])  # fmt: skip
def test_lazy_recall_over_s_is_the_dense_search_bit_for_bit(seed, sizes):
    """Three seeded synthetic worlds, both sides: the same ends, no system left in doubt, and
    on the upper side (C provably monotone in s) fewer capital evaluations."""
    from receval.estimators.anytime import betting, sequences

    direct, theta = _direct_setup("recall", seed=seed, sizes=sizes)
    nu = direct.over_s()
    for side in (+1, -1):
        _same_as_dense(theta, nu, 0.05, side)
    counted, plain = [0], betting.log_capital

    def count(streams, bets, mu, *rest, **kw):
        counted[0] += int(np.size(mu))
        return plain(streams, bets, mu, *rest, **kw)

    betting.log_capital = count
    try:
        sequences._lazy_over_s(theta, nu, 0.05, -1)
        lazy = counted[0]
        counted[0] = 0
        sequences._dense_over_s(theta, nu, 0.05, -1)
    finally:
        betting.log_capital = plain
    assert sequences._monotone_in_s(*nu, -1) and sequences._monotone_in_s(*nu, +1)
    assert lazy < counted[0]


def test_fixed_bet_streams_give_the_plain_capitals_bit_for_bit():
    """The s-stream's upper bettor with its bet computed once (FixedBetStreams) has the plain
    streams' capital exactly, running and final, at any s."""
    from receval.estimators.anytime.betting import FixedBetStreams, log_capital

    direct, _ = _direct_setup("recall", seed=8)
    streams, bets = direct.over_s()
    fixed, lam = FixedBetStreams.of(streams, bets, -1)
    s = np.random.default_rng(3).random((7, 3))
    for running in (True, False):
        plain = log_capital(streams, bets, s, -1, running)
        assert np.array_equal(log_capital(fixed, lam, s, -1, running), plain)
    assert FixedBetStreams.of(streams, bets, +1) is None  # k's bound moves the lower room


def test_lazy_recall_over_s_on_scored_worlds_with_a_census_and_without_units(tmp_path):
    """End to end: the searches ``score --intervals anytime`` makes on a simulated task with a
    census system (every output labelled) give the dense ends; without exhaustive units
    recall has no θ, its interval is NaN and no search is made."""
    from receval.estimators.sample_data import build_sample_data
    from receval.simulation import SimulationConfig, simulate_task
    from receval.task import load_task

    config = SimulationConfig(systems=6, queries=12, per_system=80, exhaustive_facts=40)
    task = load_task(simulate_task(tmp_path / "census", config, seed=2))
    assert build_sample_data(task).census.any()
    calls, board = _recorded_calls(task)
    assert len(calls) == 2 and board["recall_hi"].notna().any()
    for call in calls:
        _same_as_dense(*call)

    none = SimulationConfig(systems=5, queries=20, per_system=40, exhaustive_units=0)
    calls, board = _recorded_calls(load_task(simulate_task(tmp_path / "none", none, seed=3)))
    assert not calls
    assert board["recall_lo"].isna().all() and board["recall_hi"].isna().all()


@pytest.mark.parametrize("rows", [0, 1, 500])
def test_popularity_strata_are_those_of_unique_pairs_and_add_at(rows):
    """popularity_strata from a sorted integer key and bincount sums: the arrays of np.unique
    over the (fact, system) rows and np.add.at, exactly (duplicated rows, unused fact ids)."""
    from receval.estimators.anytime.control import STRATA, popularity_strata

    rng = np.random.default_rng(rows)
    m = 6
    facts = rng.integers(0, 40, rows) * 2  # odd ids unused
    sys_codes = rng.integers(0, m, rows)
    t_all = rng.random(rows)
    got = popularity_strata(facts, sys_codes, t_all, m)
    n_facts = int(facts.max()) + 1 if rows else 0
    pairs = np.unique(np.stack([facts, sys_codes]), axis=1) if rows else np.zeros((2, 0), int)
    popularity = np.bincount(pairs[0], minlength=n_facts)
    of_fact = np.where(popularity > 0, np.minimum(popularity, STRATA) - 1, -1)
    mass, count = np.zeros((m, STRATA)), np.zeros((m, STRATA))
    if rows:
        np.add.at(mass, (sys_codes, of_fact[facts]), t_all)
        np.add.at(count, (pairs[1], of_fact[pairs[0]]), 1.0)
    assert np.array_equal(got.of_fact, of_fact)
    assert np.array_equal(got.mass, mass) and np.array_equal(got.count, count)


@pytest.mark.parametrize("seed, alias_rate", [(2, 0.0), (4, 0.0), (6, 0.25)])
def test_recall_lower_capital_falls_with_s_where_it_is_not_proven(tmp_path, seed, alias_rate):
    """The lower end's cells are bounded by C at the cell's upper s, which assumes recall's
    lower capital (running maximum) falls with s; the bet's truncation can break that at steps
    with a negative term, so it is measured, not proven (docs/methods/anytime.md). Simulated
    tasks, one with aliases: on 2,001 values of s it never rises."""
    from receval.estimators.anytime import sequences
    from receval.estimators.anytime.betting import _capitals
    from receval.simulation import SimulationConfig, simulate_task
    from receval.task import load_task

    config = SimulationConfig(systems=8, queries=30, per_system=60, exhaustive_facts=40,
                              alias_rate=alias_rate)  # fmt: skip
    calls, _ = _recorded_calls(load_task(simulate_task(tmp_path / "w", config, seed=seed)))
    lower = [nu for _, nu, _, side in calls if side > 0]
    assert lower
    for streams, bets in lower:
        grid = np.repeat(np.linspace(0.0, 1.0, 2001)[:, None], streams.shape[0], axis=1)
        rises = np.diff(_capitals(streams, bets, grid, 1, True), axis=0)
        assert rises.max() <= 1e-9, rises.max()
    # the case that needs the measurement: the truncated bet grows with s at some steps
    assert not all(sequences._monotone_in_s(*nu, +1) for nu in lower)
