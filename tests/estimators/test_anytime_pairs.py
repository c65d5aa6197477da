"""Paired anytime comparisons (:mod:`receval.estimators.anytime.pairs`): Holm over all ordered
pairs of test-by-betting sequences keeps the family-wise error over all pairs and all looks; the
control-variate terms are unbiased; the closure and Holm are what they say."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from receval.estimators.anytime.pairs import (
    SystemTerms,
    holm,
    pair_tests,
    precision_terms,
    transitive_closure,
)


@dataclass
class _Stream:
    fact: np.ndarray
    label: np.ndarray
    q: np.ndarray
    own: np.ndarray
    pool_step: np.ndarray

    @property
    def P(self) -> int:
        return int(self.pool_step.size)


@dataclass
class _Data:
    target: np.ndarray
    census: np.ndarray
    census_precision: np.ndarray

    @property
    def m(self) -> int:
        return self.target.shape[1]


def _world(m: int, precisions, rng, size: int = 40, shared: int = 10):
    """m systems of ``size`` facts each, the first ``shared`` facts common to all; labels give
    each system exactly its precision; the uniform design p_i = t_i."""
    D = shared + m * (size - shared)
    member = np.zeros((D, m), bool)
    member[:shared] = True
    for i in range(m):
        member[shared + i * (size - shared) : shared + (i + 1) * (size - shared), i] = True
    label = np.zeros(D)
    label[: shared // 2] = 1.0  # half the shared facts correct
    for i, p in enumerate(precisions):
        own = np.flatnonzero(member[:, i] & (np.arange(D) >= shared))
        label[own[: round(p * size) - shared // 2]] = 1.0
    target = member / member.sum(axis=0)
    return member, target, label


def _stream(target, label, shares, n, rng):
    """n draws, each from a system chosen with probability ``shares`` (the mixture is fixed, as
    in a shuffled round of infinite size), then a fact from its p_i = t_i."""
    m = target.shape[1]
    q_fact = target @ shares
    source = rng.choice(m, size=n, p=shares)
    fact = np.array([rng.choice(target.shape[0], p=target[:, s]) for s in source])
    own = np.broadcast_to(shares, (n, m)).copy()  # κ_ii = 1: coverage Σ_s share_s κ_is
    return _Stream(fact, label[fact], q_fact[fact], own, np.arange(n))


def _terms(m, precisions, shares, n, seed):
    rng = np.random.default_rng(seed)
    _member, target, label = _world(m, precisions, rng)
    data = _Data(target, np.zeros(m, bool), np.full(m, np.nan))
    return precision_terms(None, data, _stream(target, label, shares, n, rng))


def test_control_variate_terms_are_unbiased():
    m, prec = 5, [0.3, 0.45, 0.5, 0.6, 0.8]
    shares = np.array([0.4, 0.1, 0.2, 0.2, 0.1])
    terms = _terms(m, prec, shares, 40_000, 1)
    got = terms.y.mean(axis=1)
    se = terms.y.std(axis=1) / math.sqrt(terms.y.shape[1])
    assert np.all(np.abs(got - prec) < 4 * se)
    assert np.all(terms.y >= terms.lo - 1e-12) and np.all(terms.y <= terms.hi + 1e-12)


def test_terms_with_known_labels_are_unbiased_at_every_step():
    """Facts labelled at earlier steps enter the terms exactly: across 400 independent streams
    of 150 draws (most facts labelled by the end), each step's terms average to the true
    precisions, and a term lies in its range."""
    m, prec = 4, [0.3, 0.5, 0.6, 0.8]
    shares = np.array([0.4, 0.1, 0.3, 0.2])
    y = np.stack([_terms(m, prec, shares, 150, 1000 + r).y for r in range(400)])
    for k in (3, 20, 60, 149):
        at = y[:, :, k]
        se = at.std(axis=0) / math.sqrt(at.shape[0]) + 1e-12
        assert np.all(np.abs(at.mean(axis=0) - prec) <= 4.5 * se), k
    terms = _terms(m, prec, shares, 150, 7)
    assert np.all(terms.y >= terms.lo - 1e-12) and np.all(terms.y <= terms.hi + 1e-12)


def test_known_labels_follow_steps_not_rows():
    """A legacy round's pool steps interleave its systems' rows (rows grouped by system, the
    step the draw's rank within its source): a fact is known at a step only when a row of an
    *earlier step* labelled it, wherever that row sits in the file."""
    from receval.estimators.anytime.control import known_labels

    # system A's rows, then B's: steps 0, 1 | 0, 1; fact 5 drawn by both at step 1 and by A
    # at step 0 too; fact 7 by B at step 0
    fact, step = np.array([5, 5, 7, 5]), np.array([0, 1, 0, 1])
    kn = known_labels(fact, np.array([1.0, 1.0, 0.0, 1.0]), step)
    assert kn.known.tolist() == [False, True, False, True]
    assert kn.before(np.array([1.0, 1.0, 1.0, 1.0])).tolist() == [0.0, 2.0, 0.0, 2.0]


def test_legacy_round_terms_with_known_labels_are_unbiased_at_every_step():
    """Per-system rounds (rows grouped by system, one pool step per l-th draw of every source):
    across 400 independent rounds each step's precision terms average to the true precisions."""
    m, prec, n = 4, [0.3, 0.5, 0.6, 0.8], 60
    rng = np.random.default_rng(3)
    _member, target, label = _world(m, prec, rng)
    y = []
    for _ in range(400):
        fact = np.concatenate(
            [rng.choice(target.shape[0], size=n, p=target[:, i]) for i in range(m)]
        )
        src = np.repeat(np.arange(m), n)
        own = np.zeros((m * n, m))
        own[np.arange(m * n), src] = 1.0  # each draw covers its own system only
        stream = _Stream(fact, label[fact], target[fact, src], own, np.tile(np.arange(n), m))
        data = _Data(target, np.zeros(m, bool), np.full(m, np.nan))
        y.append(precision_terms(None, data, stream).y)
    y = np.stack(y)
    for k in (2, 15, 40, n - 1):
        at = y[:, :, k]
        se = at.std(axis=0) / math.sqrt(at.shape[0]) + 1e-12
        assert np.all(np.abs(at.mean(axis=0) - prec) <= 4.5 * se), k


@pytest.mark.parametrize("shares", [None, "uneven"])
def test_null_fwer_over_all_pairs_and_looks(shares):
    """8 systems of equal precision, 1,500 draws: Holm's rejections only grow with the looks
    (p-values are running minima), so a rejection at any look shows at the last one."""
    m, reps = 8, 150
    share = (
        np.full(m, 1 / m) if shares is None else np.linspace(1, 3, m) / np.linspace(1, 3, m).sum()
    )
    errors = 0
    for rep in range(reps):
        terms = _terms(m, [0.5] * m, share, 1500, 100 + rep)
        errors += bool(pair_tests(terms, np.ones(m, bool), 0.05).better.any())
    assert errors / reps <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)


def test_gradient_decides_pairs_in_the_right_order():
    m = 6
    prec = np.array([0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    terms = _terms(m, prec, np.full(m, 1 / m), 3000, 7)
    tests = pair_tests(terms, np.ones(m, bool), 0.05)
    a, b = np.nonzero(tests.better)
    assert a.size >= 5  # the far pairs
    assert np.all(prec[a] > prec[b])
    # looks: the decisions on a prefix are a subset of the decisions on the whole stream
    short = SystemTerms(*(x[:, :1500] for x in (terms.y, terms.lo, terms.hi, terms.active)))
    early = pair_tests(short, np.ones(m, bool), 0.05).better
    assert not (early & ~tests.better).any()


def test_holm_and_closure():
    rejected, adjusted = holm(np.array([0.01, 0.04, 0.03, 0.5]), 0.05)
    assert np.allclose(adjusted, [0.04, 0.09, 0.09, 0.5])
    assert rejected.tolist() == [True, False, False, False]
    better = np.zeros((4, 4), bool)
    better[0, 1] = better[1, 2] = better[2, 3] = True
    closed = transitive_closure(better)
    assert closed[0, 3] and closed[1, 3] and closed[0, 2] and not closed[3, 0]


def test_two_census_systems_equal_up_to_rounding_are_a_tie():
    m, S = 3, 50
    exact = np.array([0.5, 0.5 - 1e-16, 0.7])
    y = np.broadcast_to(exact[:, None], (m, S)).copy()
    terms = SystemTerms(y, y.copy(), y.copy(), np.ones((m, S), bool), exact)
    better = pair_tests(terms, np.ones(m, bool), 0.05).better
    assert not better[0, 1] and not better[1, 0]
    assert better[2, 0] and better[2, 1]


def test_a_census_by_the_streams_own_draws_keeps_its_terms_and_is_exact_after():
    """A system whose facts the stream's own draws labelled in full keeps the terms earlier
    looks read (every look reads a prefix of one sequence): the same terms with or without the
    census flag, equal to the exact precision with range 0 after its last fact was drawn.  A
    system judged in full outside the stream is a constant term at every step."""
    m, prec = 3, [0.4, 0.6, 0.8]
    rng = np.random.default_rng(11)
    _member, target, label = _world(m, prec, rng)
    stream = _stream(target, label, np.array([0.6, 0.2, 0.2]), 600, rng)
    drawn = np.zeros(target.shape[0], bool)
    drawn[stream.fact] = True
    full = np.array([bool(drawn[target[:, i] > 0].all()) for i in range(m)])
    assert full[0] and not full[2]
    plain = precision_terms(None, _Data(target, np.zeros(m, bool), np.full(m, np.nan)), stream)
    census = np.array([True, False, True])  # 0 by the stream's draws, 2 from outside
    flagged = precision_terms(None, _Data(target, census, np.where(census, prec, np.nan)), stream)
    np.testing.assert_array_equal(flagged.y[0], plain.y[0])
    last = max(int(np.flatnonzero(stream.fact == x)[0]) for x in np.flatnonzero(target[:, 0]))
    after = slice(last + 1, None)
    np.testing.assert_allclose(flagged.y[0, after], prec[0], atol=1e-12)
    np.testing.assert_allclose(flagged.hi[0, after] - flagged.lo[0, after], 0.0, atol=1e-12)
    assert np.ptp(flagged.y[0, : last + 1]) > 0  # estimated before
    assert np.all(flagged.y[2] == prec[2]) and np.all(flagged.lo[2] == flagged.hi[2])


def test_null_fwer_with_systems_judged_in_full_by_the_stream():
    """8 systems of equal precision, uneven shares and 1,200 draws, so the stream's draws label
    some systems in full and not others; those are flagged census as the sample data would
    flag them: no pair is split beyond the family-wise level."""
    m, reps = 8, 150
    share = np.linspace(1, 3, m) / np.linspace(1, 3, m).sum()
    errors = censuses = 0
    for rep in range(reps):
        rng = np.random.default_rng(500 + rep)
        _member, target, label = _world(m, [0.5] * m, rng)
        stream = _stream(target, label, share, 1200, rng)
        drawn = np.zeros(target.shape[0], bool)
        drawn[stream.fact] = True
        census = np.array([bool(drawn[target[:, i] > 0].all()) for i in range(m)])
        censuses += int(census.sum())
        data = _Data(target, census, np.where(census, 0.5, np.nan))
        terms = precision_terms(None, data, stream)
        errors += bool(pair_tests(terms, np.ones(m, bool), 0.05).better.any())
    assert 0 < censuses < m * reps  # both kinds of systems occur
    assert errors / reps <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)


def test_signed_bets_and_directed_tops_are_the_two_bettors_exactly():
    """pairs.signed_bets is pair_bets' two bets as one signed array (never both positive), and
    directed_tops the running-max log capitals running_top(min over the terms of
    capital_path) of the bettors on D and on −D, bit for bit."""
    from receval.estimators.anytime.pairs import (
        capital_path,
        directed_tops,
        pair_bets,
        running_top,
        signed_bets,
    )

    rng = np.random.default_rng(3)
    P, K = 7, 500
    d = rng.normal(rng.normal(0, 0.2, (P, 1)), 1.0, (P, K))
    lo, hi = -3.0 - rng.random((P, K)), 3.0 + rng.random((P, K))
    lo[0, :50] = hi[0, :50]  # steps of no width do not count
    active = rng.random((P, K)) < 0.9
    up, down, act = pair_bets(d, lo, hi, active)
    bets, act2 = signed_bets(d, lo, hi, active)
    assert np.array_equal(act, act2)
    assert not ((up > 0) & (down > 0)).any()
    assert np.array_equal(np.maximum(bets, 0.0), up)
    assert np.array_equal(np.maximum(-bets, 0.0), down)
    d_lo = np.where(act, d, 0.0)
    d_hi = np.where(act, d + rng.normal(0, 0.1, (P, K)), 0.0)
    tops = directed_tops(bets, d_lo, d_hi)
    want_up = running_top(np.minimum(capital_path(up, d_lo), capital_path(up, d_hi)))
    want_down = running_top(np.minimum(capital_path(down, -d_lo), capital_path(down, -d_hi)))
    assert np.array_equal(tops[0], want_up) and np.array_equal(tops[1], want_down)
