"""The paired tests written into reused buffers (:class:`receval.estimators.anytime.pairs.Work`)
give the same bits as the plain passes they replace (:func:`pair_bets`, :func:`capital_path`,
``f1._binding_moments`` on fresh arrays): every field of :class:`PairTests` and
``steps_to_decide`` on three seeded worlds — a null world, a gradient with a census system
judged outside the stream, one with steps a system does not count and an unbounded T — for the
ranked metrics precision and F1, over chunks of several sizes (the last one smaller, so buffers
are reused at fewer rows)."""

from __future__ import annotations

import numpy as np
import pytest
from test_anytime_pairs import _Data, _stream, _world

from receval.estimators.anytime import f1 as f1_module
from receval.estimators.anytime import pairs as pairs_module
from receval.estimators.anytime.f1 import (
    T_SHARE,
    TrueFacts,
    _binding_moments,
    _census_order,
    _w,
)
from receval.estimators.anytime.pairs import (
    capital_path,
    chunked,
    decide,
    ok_pairs,
    pair_bets,
    pair_tests,
    precision_terms,
    running_top,
    step_moments,
)

FIELDS = ("pairs", "up", "down", "mean", "moment", "steps", "better", "pvalues")


def _plain_pair_tests(terms, ok, alpha):
    """:func:`pair_tests` as it was written before the buffers (fresh arrays per pass)."""
    idx, pairs = ok_pairs(ok)

    def part(a, b):
        d = terms.y[a] - terms.y[b]
        lam_up, lam_down, act = pair_bets(
            d, terms.lo[a] - terms.hi[b], terms.hi[a] - terms.lo[b],
            terms.active[a] & terms.active[b],
        )  # fmt: skip
        d = np.where(act, d, 0.0)
        up, down = running_top(capital_path(lam_up, d)), running_top(capital_path(lam_down, -d))
        return (up, down, *step_moments(d, act))

    out = chunked(pairs, terms.y.shape[1], part)
    return decide(pairs, out, terms.y.shape[0], idx, alpha, terms.exact)


def _plain_f1_pair_tests(terms, sizes, facts, ok, alpha):
    """:func:`f1_pair_tests` as it was written before the buffers."""
    idx, pairs = ok_pairs(ok & (sizes > 0))
    n = np.asarray(sizes, float)
    census = np.isfinite(terms.exact) if terms.exact is not None else np.zeros(n.size, bool)

    def part(a, b):
        c = np.sqrt(n[a] * n[b])[:, None]
        r = np.sqrt(n[a] / n[b])[:, None]
        ya, yb = terms.y[a], terms.y[b]
        A = ya - yb
        slope = r * ya - yb / r - A
        lo = np.minimum(terms.lo[a] - terms.hi[b], r * terms.lo[a] - terms.hi[b] / r)
        hi = np.maximum(terms.hi[a] - terms.lo[b], r * terms.hi[a] - terms.lo[b] / r)
        w_ref = _w(facts.reference[None, :], c)
        lam_up, lam_down, act = pair_bets(
            A + w_ref * slope, lo, hi, terms.active[a] & terms.active[b]
        )
        ds = [np.where(act, A + _w(T, c) * slope, 0.0) for T in (facts.lower, facts.upper)]
        up = np.minimum(*(capital_path(lam_up, d) for d in ds))
        down = np.minimum(*(capital_path(lam_down, -d) for d in ds))
        return (running_top(up), running_top(down), *_binding_moments(*ds, act))

    out = chunked(pairs, terms.y.shape[1], part)
    ordered = _census_order(pairs, census, terms, n, facts)
    return decide(pairs, out, n.size, idx, alpha * (1.0 - T_SHARE), ordered=ordered)


def _world_terms(kind: str, seed: int):
    """(terms, sizes, facts) of the world ``kind``: ``null`` (six systems of precision 0.5),
    ``census`` (a gradient, systems 4 and 5 judged in full outside the stream), ``gaps``
    (system 2 not counted at the first 300 steps, T's interval unbounded above, T's reference moving)."""
    rng = np.random.default_rng(seed)
    m, n = 6, 1_500 if kind == "null" else 500
    precisions = [0.5] * m if kind == "null" else list(np.linspace(0.3, 0.8, m))
    _member, target, label = _world(m, precisions, rng)
    shares = np.linspace(1.0, 2.0, m) / np.linspace(1.0, 2.0, m).sum()
    stream = _stream(target, label, shares, n, rng)
    census = np.zeros(m, bool)
    if kind == "census":
        census[4:] = True
    if kind == "gaps":
        stream.own[:300, 2] = 0.0
    data = _Data(target, census, np.where(census, precisions, np.nan))
    terms = precision_terms(None, data, stream)
    sizes = np.full(m, 40.0)  # the world's: equal precision, equal F1
    if kind != "null":
        sizes += np.arange(m) * 7  # F1's sizes (any positive numbers)
    if kind == "gaps":
        facts = TrueFacts(150.0, np.inf, np.linspace(400.0, 120.0, n))
    else:
        facts = TrueFacts(120.0, 260.0, np.full(n, 180.0))
    return terms, sizes, facts


def _assert_same(got, want):
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field), err_msg=field)
    np.testing.assert_array_equal(got.steps_to_decide(), want.steps_to_decide())


@pytest.mark.parametrize("kind", ["null", "census", "gaps"])
@pytest.mark.parametrize("chunk", [1, 4, 1_000_000])
def test_buffered_pair_tests_are_the_plain_ones_bit_for_bit(kind, chunk, monkeypatch):
    terms, sizes, facts = _world_terms(kind, {"null": 3, "census": 5, "gaps": 8}[kind])
    steps = terms.y.shape[1]
    monkeypatch.setattr(pairs_module, "CHUNK", chunk * steps)  # pairs per chunk
    ok = np.ones(sizes.size, bool)
    got = pair_tests(terms, ok, 0.05)
    _assert_same(got, _plain_pair_tests(terms, ok, 0.05))
    got_f1 = f1_module.f1_pair_tests(terms, sizes, facts, ok, 0.05)
    _assert_same(got_f1, _plain_f1_pair_tests(terms, sizes, facts, ok, 0.05))
    for tests in (got, got_f1):  # decided and open pairs both
        assert tests.decided().any() != (kind == "null")
        assert not tests.decided().all()
