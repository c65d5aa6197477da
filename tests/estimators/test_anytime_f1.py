"""Anytime F1 comparisons (:mod:`receval.estimators.anytime.f1`): the weighted precision
difference has F1's sign at the true number of true facts; its log capital is concave in w, so
the ends of T's interval bound every T inside; Holm keeps the family-wise error over all pairs
and looks in a world where every system has the same F1 but precisions from 0.22 to 0.55."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import simulated_world
from test_anytime_pairs import _Data, _stream

from receval.estimators.anytime.f1 import TrueFacts, _w, f1_pair_tests
from receval.estimators.anytime.pairs import capital_path, pair_bets, precision_terms

#: (size, correct outputs) per system with G/(n + T) = 0.05 at T = 400: every F1 is 0.1
EQUAL_F1 = [(40, 22), (60, 23), (80, 24), (100, 25), (120, 26)]
T_TRUE = 400.0


def _world(systems):
    """Disjoint outputs per system (size, correct) with the uniform design p_i = t_i."""
    sizes = np.array([n for n, _ in systems])
    D = int(sizes.sum())
    member = np.zeros((D, len(systems)), bool)
    label = np.zeros(D)
    start = 0
    for i, (n, g) in enumerate(systems):
        member[start : start + n, i] = True
        label[start : start + g] = 1.0
        start += n
    return sizes, member / member.sum(axis=0), label


def _terms(systems, n, seed, shares=None):
    rng = np.random.default_rng(seed)
    sizes, target, label = _world(systems)
    m = sizes.size
    share = np.full(m, 1 / m) if shares is None else np.asarray(shares)
    data = _Data(target, np.zeros(m, bool), np.full(m, np.nan))
    return sizes, precision_terms(None, data, _stream(target, label, share, n, rng))


def _facts(lower, upper, steps, reference=T_TRUE / 2):
    return TrueFacts(lower, upper, np.full(steps, reference))


def test_the_weighted_difference_has_f1s_sign():
    """Mean of D(w_true) · c·(c + T) = d(T) = n_a n_b (π_a − π_b) + T (G_a − G_b), whose sign is
    F1_a − F1_b's, for sizes and precisions far apart."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = rng.integers(5, 500, size=2).astype(float)
        pi = rng.random(2)
        T = float(rng.uniform((n * pi).sum(), 5_000))
        f1 = 2 * pi * n / (n + T)
        c, r = math.sqrt(n[0] * n[1]), math.sqrt(n[0] / n[1])
        w = T / (c + T)
        mean = (1 - w) * (pi[0] - pi[1]) + w * (r * pi[0] - pi[1] / r)
        d = n[0] * n[1] * (pi[0] - pi[1]) + T * (n[0] * pi[0] - n[1] * pi[1])
        assert mean * c * (c + T) == pytest.approx(d, rel=1e-9, abs=1e-9)
        assert np.sign(mean) == np.sign(f1[0] - f1[1])


def test_log_capital_is_concave_in_w():
    """With bets that do not depend on w, the least capital over a grid of w inside [w_lo, w_hi]
    is never below the lesser of the two ends' (the rejection rule's premise)."""
    sizes, terms = _terms(EQUAL_F1, 2_000, 5)
    a, b = np.array([0, 1, 4]), np.array([3, 4, 2])
    c = np.sqrt(sizes[a] * sizes[b])[:, None].astype(float)
    r = np.sqrt(sizes[a] / sizes[b])[:, None]
    A = terms.y[a] - terms.y[b]
    B = r * terms.y[a] - terms.y[b] / r
    lo = np.minimum(terms.lo[a] - terms.hi[b], r * terms.lo[a] - terms.hi[b] / r)
    hi = np.maximum(terms.hi[a] - terms.lo[b], r * terms.hi[a] - terms.lo[b] / r)
    lam, _down, act = pair_bets(A + 0.5 * (B - A), lo, hi, terms.active[a] & terms.active[b])
    w_lo, w_hi = _w(100.0, c), _w(3_000.0, c)
    ends = np.minimum(
        capital_path(lam, np.where(act, A + w_lo * (B - A), 0)),
        capital_path(lam, np.where(act, A + w_hi * (B - A), 0)),
    )
    for t in np.linspace(0, 1, 21):
        w = w_lo + t * (w_hi - w_lo)
        inside = capital_path(lam, np.where(act, A + w * (B - A), 0))
        assert np.all(inside >= ends - 1e-9)


@pytest.mark.parametrize("interval", ["exact", "wide"])
def test_null_fwer_with_equal_f1_and_different_precisions(interval):
    """Five systems with F1 0.1 each and precisions 0.22-0.55 (a precision test orders them all):
    no look of 1,500 draws rejects any of the 20 hypotheses in more than 5 % (+2 SE) of 150
    repetitions, with T's interval the truth itself or [T/2, 2T]."""
    reps, steps = 150, 1_500
    lower, upper = (T_TRUE, T_TRUE) if interval == "exact" else (T_TRUE / 2, 2 * T_TRUE)
    errors = 0
    for rep in range(reps):
        sizes, terms = _terms(EQUAL_F1, steps, 200 + rep)
        tests = f1_pair_tests(terms, sizes, _facts(lower, upper, steps), np.ones(5, bool), 0.05)
        errors += bool(tests.better.any())
    assert errors / reps <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)


def test_a_gradient_in_f1_is_ordered_and_a_wide_T_decides_less():
    """Precision and size pull opposite ways (the largest system has the lowest precision and the
    highest F1): the decided pairs follow F1, not precision, and a wider interval of T decides a
    subset of what the exact T decides."""
    systems = [(40, 30), (80, 40), (160, 64), (320, 112)]  # π .75 .5 .4 .35
    f1 = np.array([2 * g / (n + T_TRUE) for n, g in systems])
    sizes, terms = _terms(systems, 4_000, 11)
    exact = f1_pair_tests(terms, sizes, _facts(T_TRUE, T_TRUE, 4_000), np.ones(4, bool), 0.05)
    wide = f1_pair_tests(terms, sizes, _facts(200.0, 800.0, 4_000), np.ones(4, bool), 0.05)
    a, b = np.nonzero(exact.better)
    assert a.size >= 3
    assert np.all(f1[a] > f1[b])
    assert not (wide.better & ~exact.better).any()


def test_two_census_systems_are_ordered_by_d_over_T():
    """Exact precisions: a is better where d(T) > 0 at both ends of T's interval, a tie where
    the sign changes inside it."""
    from receval.estimators.anytime.pairs import SystemTerms

    sizes = np.array([40, 120, 120])
    exact = np.array([0.55, 26 / 120, 0.5])  # F1 at T = 400: 0.1, 0.1, 0.23
    S = 30
    y = np.broadcast_to(exact[:, None], (3, S)).copy()
    terms = SystemTerms(y, y.copy(), y.copy(), np.ones((3, S), bool), exact)
    tests = f1_pair_tests(terms, sizes, _facts(300.0, 600.0, S), np.ones(3, bool), 0.05)
    assert tests.better[2, 0] and tests.better[2, 1]
    assert not tests.better[0, 1] and not tests.better[1, 0]  # d changes sign at T = 400
    narrow = f1_pair_tests(terms, sizes, _facts(500.0, 600.0, S), np.ones(3, bool), 0.05)
    assert narrow.better[1, 0]  # above T = 400 the larger system's F1 is the higher


@pytest.fixture(scope="module")
def multi_doc_world(tmp_path_factory):
    """Facts supported by 2.5 documents on average, teams sharing facts, random-order rounds."""
    from receval.simulation import SimulationConfig

    cfg = SimulationConfig(systems=8, queries=40, per_system=30, documents_per_fact=2.5)
    return simulated_world(cfg, 8, tmp_path_factory.mktemp("f1world"))


def test_truth_satisfies_f1_identity_with_one_T(multi_doc_world):
    """The premise: the truth's F1_i = 2 π_i n_i / (n_i + T) with one T for every system
    (micro precision over distinct facts, recall over the true facts)."""
    from receval.estimators.sample_data import build_sample_data
    from receval.task import with_annotation

    world, base = multi_doc_world
    ann = world.annotate(np.random.default_rng(0))
    task = with_annotation(base, **ann.tables())
    data = build_sample_data(task)
    truth = world.truth_metrics().set_index("system").reindex(data.systems)
    n = data.sizes
    T = truth["precision"].to_numpy() * n / truth["recall"].to_numpy()
    assert np.ptp(T) <= 1e-9 * T.mean()
    f1 = 2 * truth["precision"].to_numpy() * n / (n + T.mean())
    assert np.allclose(f1, truth["f1"].to_numpy(), atol=1e-12)


def test_true_facts_interval_covers(multi_doc_world):
    """T's interval (K's and θ's sequences at α_T/2 each) covers the true T in at least
    1 − α_T − 2 SE of 40 campaigns, at α_T = 0.1 (so that misses would show)."""
    from receval.estimators.anytime.f1 import true_facts
    from receval.estimators.anytime.stream import build_stream
    from receval.estimators.sample_data import build_sample_data
    from receval.task import with_annotation

    world, base = multi_doc_world
    truth = world.truth_metrics().set_index("system")
    reps, covered = 40, 0
    for rep in range(reps):
        ann = world.annotate(np.random.default_rng(100 + rep))
        task = with_annotation(base, **ann.tables())
        data = build_sample_data(task)
        t = truth.reindex(data.systems)
        T = float((t["precision"] * data.sizes / t["recall"]).mean())
        facts = true_facts(task, data, build_stream(task, data), 0.1)
        covered += facts.lower <= T <= facts.upper
        assert np.all(np.isfinite(facts.reference)) and np.all(facts.reference > 0)
    assert covered / reps >= 0.9 - 2 * math.sqrt(0.1 * 0.9 / reps)


@pytest.mark.parametrize(("target", "says"), [("micro", "true facts"), ("macro", "alpha/m")])
def test_run_json_names_f1s_procedure(tmp_path, target, says):
    """Micro precision: F1's tiers from the paired tests with T's sequence; macro (the identity
    F1 = 2G/(n + T) needs micro precision): every system's sequence at α/m."""
    import json

    from click.testing import CliRunner

    from receval.cli import cli
    from receval.simulation import SimulationConfig, simulate_task

    root = simulate_task(tmp_path / "t", SimulationConfig(systems=5, queries=20), seed=4)
    out = CliRunner().invoke(cli, ["score", str(root), "--out", str(tmp_path / "o"),
                                   "--intervals", "anytime", "--target", target])  # fmt: skip
    assert out.exit_code == 0, out.output
    ranking = json.loads((tmp_path / "o" / "run.json").read_text())["ranking"]
    assert ranking["by"] == "f1" and says in ranking["tiers"]


@pytest.mark.slow
def test_f1_pairs_on_parabank_order_no_pair_wrongly_in_more_than_alpha():
    """Real third-party data (../shared/data/parabank-eval: 36 systems, every pooled output
    judged, so the pool is everything, θ = 1 and T = Σ f is known) as the fixed population:
    100 adaptive campaigns of about 15,000 draws (rounds chasing the systems that look best),
    F1's paired tests at the true T: about 160 of the 630 pairs decided per campaign, and the
    share of campaigns deciding some pair against the true F1 at most α + 2 MC SE."""
    from conftest import load_bench
    from test_anytime_pairs import _Stream

    bench = load_bench("anytime")
    pop = bench.parabank_population()
    if pop is None:
        pytest.skip("../shared/data/parabank-eval is not present")
    m = pop.p.shape[1]
    sizes = pop.member.sum(axis=0)
    T = float(pop.label[pop.member.any(axis=1)].sum())
    f1 = 2 * pop.precision * sizes / (sizes + T)
    data = _Data(pop.target, np.zeros(m, bool), np.full(m, np.nan))
    rng = np.random.default_rng(41)
    runs, wrong, decided = 100, 0, 0
    for _ in range(runs):
        st = bench.population_stream(pop, rng, rounds=6, first=4, batch=3000)
        K = st["fact"].size
        stream = _Stream(st["fact"], pop.label[st["fact"]], st["q"], st["own"], np.arange(K))
        terms = precision_terms(None, data, stream)
        tests = f1_pair_tests(terms, sizes, _facts(T, T, K), np.ones(m, bool), 0.05)
        a, b = np.nonzero(tests.better)
        wrong += bool((f1[a] < f1[b]).any())
        decided += a.size
    assert decided / runs > 100
    assert wrong / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)


def test_a_pair_ordered_differently_at_the_ends_of_T_needs_no_more_draws():
    """Equal F1 at T = 400: with T's interval [100, 3200] each pair of different sizes is
    ordered one way at T = 100 and the other at 3200, so no number of draws decides it (the
    loop must not spend labels there); every pair whose sizes differ twofold, where the ends'
    means are far from 0, is seen so.  At T known exactly the steps needed stay finite."""
    steps = 20_000
    sizes, terms = _terms(EQUAL_F1, steps, 9)
    wide = f1_pair_tests(terms, sizes, _facts(100.0, 3200.0, steps), np.ones(5, bool), 0.05)
    a, b = wide.pairs.T
    far = sizes[b] >= 2 * sizes[a]
    assert far.sum() == 4 and np.isinf(wide.steps_to_decide()[far]).all()
    exact = f1_pair_tests(terms, sizes, _facts(T_TRUE, T_TRUE, steps), np.ones(5, bool), 0.05)
    assert np.isfinite(exact.steps_to_decide()).all()


def _direct_setup(name: str, seed: int = 5, m: int = 3, K: int = 400, U: int = 25, sizes=None):
    """``name``'s DirectF1 (f1 or recall) on synthetic draws (precision terms in [0, 1], pool totals in [0, 60]) and
    θ's streams over U units."""
    from types import SimpleNamespace

    from receval.estimators.anytime.betting import BettingStreams, plugin_bets
    from receval.estimators.anytime.f1 import direct_f1
    from receval.estimators.anytime.sequences import PoolTotals

    rng = np.random.default_rng(seed)
    b = rng.integers(1, 6, U).astype(float)
    a = rng.binomial(b.astype(int), 0.6).astype(float)
    t_streams = BettingStreams.of_ratios(
        a[None], b[None], np.full((1, U), 5.0), np.ones((1, U), bool)
    )
    t_bets = plugin_bets(t_streams, 0.05, 0.5, np.full((1, U), float(U)), 2.5)
    y = (rng.random((m, K)) < np.array([0.3, 0.5, 0.7])[:m, None]).astype(float)
    precision = BettingStreams.of_means(y, 1.0)
    total = rng.uniform(0, 60, K)
    pool = PoolTotals(np.zeros(K), total, np.full(K, 60.0), np.ones(K, bool), np.full(K, K), 60.0,
                      total, np.full(K, 60.0))  # fmt: skip
    stream = SimpleNamespace(P=K, fact=np.arange(K), pool_step=np.arange(K))
    n = np.array([40.0, 80.0, 120.0] if sizes is None else sizes)[:m]
    make = direct_f1(precision, pool, stream, n, np.full((m, K), K))
    return make((t_streams, t_bets), 0.05)[name], (t_streams, t_bets)


@pytest.mark.parametrize("name", ["f1", "recall"])
def test_direct_capitals_are_monotone_in_theta(name):
    """The premise of the cells: with bets and truncation fixed, the lower bettor's running
    capital grows with θ and the upper one's falls, at every f."""
    from receval.estimators.anytime.betting import log_capital

    direct, _ = _direct_setup(name)
    thetas = np.linspace(max(direct.theta_min, 0.05), 1.0, 12)
    f = np.full((1, 3), 0.2)
    for side in (+1, -1):
        caps = np.array([log_capital(direct.streams(np.full(3, t)), direct.bets, f, side, True)[0]
                         for t in thetas])  # fmt: skip
        steps = np.diff(caps, axis=0)
        assert np.all(steps >= -1e-9) if side > 0 else np.all(steps <= 1e-9)


@pytest.mark.parametrize("name", ["f1", "recall"])
def test_direct_ends_are_never_inside_a_dense_theta_sweep(name):
    """The joint ends from the refined cells (every cell, and the lazy search joint_bounds
    uses) bound, from outside, the ends of a dense θ sweep (each θ's F1 end at its own budget
    log(2/α) − log X(θ))."""
    from receval.estimators.anytime.betting import one_sided_ends
    from receval.estimators.anytime.sequences import _joint_end, _theta_log_capital

    direct, theta = _direct_setup(name)
    level = np.log(2.0 / 0.05)
    sweep = np.linspace(0.0, 1.0, 401)
    for side in (+1, -1):
        end = _joint_end(theta, direct.cell_values, 0.0, 3, 0.05, side)
        lazy = direct.joint_end(theta, 0.05, side)  # what joint_bounds uses
        budget = level - _theta_log_capital(*theta, sweep, side)
        ok = (budget > 0) & (sweep >= direct.theta_min) & (sweep > 0)
        exact = np.array([
            one_sided_ends(direct.streams(np.full(3, t)), direct.bets, np.full((1, 3), bud),
                           side, (0.0, 1.0), 30)[0]
            for t, bud in zip(sweep[ok], budget[ok], strict=True)
        ])  # fmt: skip
        for found in (end, lazy):
            if side < 0:
                assert np.all(found >= exact.max(axis=0) - 1e-6), (found, exact.max(axis=0))
            else:
                assert np.all(found <= exact.min(axis=0) + 1e-6), (found, exact.min(axis=0))


@pytest.mark.parametrize("metric", ["f1", "recall", "pooled_recall"])
def test_scored_intervals_cover_in_a_multi_document_world(multi_doc_world, metric):
    """End to end (score --intervals anytime; F1, recall and pooled recall from one-stream
    tests): over 30 campaigns in a world whose facts have 2.5 documents each, the share of
    (campaign, system) whose interval misses the truth is at most α + 2 MC SE."""
    import receval
    from receval.task import with_annotation

    world, base = multi_doc_world
    truth = world.truth_metrics().set_index("system")[metric]
    miss = []
    for rep in range(30):
        ann = world.annotate(np.random.default_rng(300 + rep))
        board = receval.score(with_annotation(base, **ann.tables()), intervals="anytime",
                              rank_by="precision").leaderboard.set_index("system")  # fmt: skip
        t = truth.reindex(board.index)
        lo, hi = board[f"{metric}_lo"], board[f"{metric}_hi"]
        miss.append(((t < lo - 1e-9) | (t > hi + 1e-9)).mean())
    assert np.mean(miss) <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / (30 * 8))


def test_macro_target_keeps_f1_from_precision_and_recall(multi_doc_world):
    """F1 = 2G/(n + T) holds for micro precision only: with target macro the F1 interval is the
    union of π's and ν's tests (the one-stream test would aim at 2nπ_macro/(n + T)) and still
    covers the truth's macro F1 end to end; with micro it is the narrower one-stream interval."""
    import receval
    from receval.task import with_annotation

    world, base = multi_doc_world
    task = with_annotation(base, **world.annotate(np.random.default_rng(7)).tables())
    widths = {}
    for target in ("micro", "macro"):
        board = receval.score(task, intervals="anytime", target=target, rank_by="precision")
        lb = board.leaderboard
        widths[target] = float((lb["f1_hi"] - lb["f1_lo"]).median())
        check = board.truth_check
        assert check[check["metric"] == "f1"]["covered"].all()
    assert widths["micro"] < widths["macro"]


def test_pooled_recall_pairs_null_fwer_with_equal_correct_outputs():
    """Pooled recall's (and recall's) paired terms n·Y: four systems with 24 correct outputs
    each (equal ν) from 40 to 120 outputs (precision 0.6 to 0.2, which a precision test orders):
    no pair decided in more than 5 % (+2 SE) of 150 repetitions of 1,500 draws."""
    from receval.estimators.anytime.pairs import SystemTerms, pair_tests

    systems = [(40, 24), (60, 24), (80, 24), (120, 24)]
    reps, errors = 150, 0
    for rep in range(reps):
        sizes, terms = _terms(systems, 1_500, 500 + rep)
        n = sizes[:, None].astype(float)
        scaled = SystemTerms(terms.y * n, terms.lo * n, terms.hi * n, terms.active)
        errors += bool(pair_tests(scaled, np.ones(4, bool), 0.05).better.any())
    assert errors / reps <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / reps)


def test_correct_outputs_order_the_systems_as_pooled_recall(multi_doc_world):
    """The premise of the pooled-recall pairs: the truth's ν orders the systems as n·π does,
    and the scored anytime tiers by pooled recall never put a truly lower system above."""
    import receval
    from receval.estimators.sample_data import build_sample_data
    from receval.task import with_annotation

    world, base = multi_doc_world
    task = with_annotation(
        base, **world.annotate(np.random.default_rng(11), per_system=120).tables()
    )
    data = build_sample_data(task)
    truth = world.truth_metrics().set_index("system").reindex(data.systems)
    g = data.sizes * truth["precision"].to_numpy()
    nu = truth["pooled_recall"].to_numpy()
    assert np.array_equal(np.argsort(g, kind="stable"), np.argsort(nu, kind="stable"))
    board = receval.score(task, intervals="anytime", rank_by="pooled_recall").leaderboard
    board = board.set_index("system")
    tier = board["tier"].reindex(data.systems).to_numpy()
    above = tier[:, None] < tier[None, :]
    assert not (above & (nu[:, None] < nu[None, :])).any()
    assert board["tier"].nunique() >= 2


@pytest.mark.parametrize("name", ["f1", "recall"])
def test_guided_refinement_changes_no_joint_end(name):
    """The refined grids' cells guessed from the coarser grid's curve end where they end
    without the guess (only the number of capital evaluations changes)."""
    from receval.estimators.anytime.sequences import _joint_end

    direct, theta = _direct_setup(name)
    for side in (+1, -1):
        plain = _joint_end(theta, direct.cell_values, 0.0, 3, 0.05, side)
        guided = _joint_end(theta, direct.cell_values, 0.0, 3, 0.05, side, guided=True)
        assert np.array_equal(plain, guided)


def test_recall_over_s_is_never_inside_a_dense_sweep():
    """Recall's ends searched over s = r/θ (one capital per s, θ read from its table) bound,
    from outside, the joint test's exact ends: a dense θ sweep, each θ's s end at its own
    budget log(2/α) − log X(θ) bisected to 2⁻³⁰, gives sup θ·s no larger than the upper end and
    inf no smaller than the lower; and they stay within 0.01 of that sweep (the cells refine).
    Pooled recalls 0.2–0.9 (s ≤ 1, as ν ≤ 1 always)."""
    from receval.estimators.anytime.betting import log_capital, one_sided_ends
    from receval.estimators.anytime.sequences import _recall_over_s, _theta_log_capital

    direct, theta = _direct_setup("recall", sizes=[20.0, 30.0, 40.0])
    streams, bets = direct.over_s()
    level = np.log(2.0 / 0.05)
    sweep = np.linspace(0.0, 1.0, 321)
    for side in (+1, -1):
        end = _recall_over_s(theta, (streams, bets), 0.05, side)
        budget = level - _theta_log_capital(*theta, sweep, side)
        levels = np.repeat(budget[:, None], 3, axis=1)
        s_end = one_sided_ends(streams, bets, levels, side, (0.0, 1.0), 30)
        exact = sweep[:, None] * s_end
        if side < 0:
            assert np.all(end >= exact.max(axis=0) - 1e-6), (end, exact.max(axis=0))
            assert np.all(end <= exact.max(axis=0) + 0.01)
        else:  # a θ where even s = 1 is rejected holds no value
            at_one = log_capital(streams, bets, np.ones((1, 3)), side, True)[0]
            alive = at_one[None, :] < levels
            low = np.where(alive, exact, np.inf).min(axis=0)
            assert np.all(end <= low + 1e-6), (end, low)
            assert np.all(end >= low - 0.01)


def test_recall_over_s_capital_depends_on_s_alone():
    """The premise of the search over s: recall's term n·y − r·k/θ at (r, θ) is the s-stream's
    n·y − s·k at s = r/θ, and the s-stream's capital is monotone in s (up for the upper bettor,
    down for the lower)."""
    from receval.estimators.anytime.betting import log_capital

    direct, _ = _direct_setup("recall")
    streams, bets = direct.over_s()
    for theta in (0.3, 0.6, 0.9):
        at = direct.streams(np.full(3, theta))
        r = 0.12
        assert np.allclose(at.u - r * at.v, streams.u - (r / theta) * streams.v)
    s = np.linspace(0.0, 1.0, 41)[:, None] * np.ones((1, 3))
    for side in (+1, -1):
        caps = log_capital(streams, bets, s, side, True)
        steps = np.diff(caps, axis=0)
        assert np.all(steps <= 1e-9) if side > 0 else np.all(steps >= -1e-9)


def _every_cell(direct):
    """``values_of`` for _joint_end: every cell's end by bisection over the whole range (the
    lattice k·2⁻¹² of JOINT_ITERATIONS steps), the definition the lazy search keeps."""
    from receval.estimators.anytime.betting import one_sided_ends
    from receval.estimators.anytime.sequences import JOINT_ITERATIONS

    def values_of(grid, budget, side):
        theta = grid[1:] if side < 0 else grid[:-1]
        budget = np.maximum(budget[:-1], budget[1:])
        out = np.zeros(theta.shape)
        for j in range(theta.shape[0]):
            zero = theta[j] <= 0
            at = direct.streams(np.where(zero, 1.0, theta[j]))
            ends = one_sided_ends(at, direct.bets, budget[j][None, :], side, (0.0, 1.0),
                                  JOINT_ITERATIONS)[0]  # fmt: skip
            out[j] = np.where(zero, 0.0, ends)
        return out

    return values_of


@pytest.mark.parametrize("name", ["f1", "recall"])
@pytest.mark.parametrize("seed", [5, 6, 7])
def test_lazy_joint_end_is_every_cells_extreme_bit_for_bit(name, seed):
    """The lazy extreme over the θ cells (one cell bisected per grid, the others evaluated
    once against the best: cells.lazy_joint_end) gives the ends of computing every cell's end
    (_joint_end over every cell bisected), bit for bit: the same extremes, refined spans and
    ends.  Against the guided cells it replaced (each cell searched first near its
    neighbour's end, whose bracket clipped at 0 or 1 changed the lattice of the cells after
    it) the ends move by less than one lattice step 2⁻¹²."""
    from receval.estimators.anytime.cells import LATTICE
    from receval.estimators.anytime.sequences import _joint_end

    sizes = [[40.0, 80.0, 120.0], [15.0, 200.0, 60.0], [5.0, 30.0, 400.0]][seed - 5]
    direct, theta = _direct_setup(name, seed=seed, sizes=sizes)
    for side in (+1, -1):
        lazy = direct.joint_end(theta, 0.05, side)
        assert np.array_equal(lazy, _joint_end(theta, _every_cell(direct), 0.0, 3, 0.05, side))
        guided = _joint_end(theta, direct.cell_values, 0.0, 3, 0.05, side, guided=True)
        assert np.all(np.abs(lazy - guided) < LATTICE)


@pytest.mark.parametrize("start", ["point", "farthest", "second_order_off"])
def test_lazy_joint_end_is_the_same_from_any_start(monkeypatch, start):
    """Which cell is bisected first (cells._finer_start, the θ point's cell at the first grid)
    and the guess of its end (cells._second_order_ends) change the work only: the ends are
    main's start's (the finer cell at the coarser extreme's θ, no guess) bit for bit."""
    from receval.estimators.anytime import cells

    direct, theta = _direct_setup("f1", seed=6, sizes=[15.0, 200.0, 60.0])
    ours = {side: direct.joint_end(theta, 0.05, side) for side in (+1, -1)}
    if start == "point":  # main's: the finer cell nearest the coarser extreme's θ
        monkeypatch.setattr(cells, "_finer_start",
                            lambda grid, budget, side, t, held: cells._nearest(
                                cells._cell_edges(grid, budget, side)[0], t))  # fmt: skip
    elif start == "farthest":  # the finer grid's last cell, whatever the coarser one found
        monkeypatch.setattr(cells, "_finer_start",
                            lambda grid, budget, side, t, held: np.full(grid.shape[1],
                                                                        grid.shape[0] - 2))  # fmt: skip
    monkeypatch.setattr(cells, "_second_order_ends", lambda d, t, b, side: None)
    for side in (+1, -1):
        assert np.array_equal(direct.joint_end(theta, 0.05, side), ours[side])


@pytest.mark.parametrize("side", [+1, -1])
def test_cells_passed_over_have_their_own_capitals_sign(side):
    """_Cells.margins passes over a cell that a cell of its system at the same end shows
    (the capital is monotone in θ): its margin is then a lower bound ≥ the margin 1e-9, of
    the sign of its own capital's margin; every evaluated cell's margin is its own."""
    from receval.estimators.anytime.cells import COUNTS, MARGIN, _Cells

    direct, _ = _direct_setup("f1", K=2_000)
    cells = _Cells(direct, side)
    rng = np.random.default_rng(3)
    C, m = 12, 3
    thetas = np.sort(rng.uniform(max(direct.theta_min, 0.05), 1.0, (C, m)), axis=0)
    budgets = rng.uniform(0.5, 4.0, (C, m))
    at = -side * np.round(rng.uniform(0.05, 0.5, (C, m)) * 4096) / 4096  # lattice keys
    at[: C // 2] = at[0]  # half the cells of each system at one end: some are passed over
    COUNTS.clear()
    margin = cells.margins(thetas, budgets, np.ones((C, m), bool), at)
    assert COUNTS[side, 0, "shown"] > 0
    for c in range(C):
        for i in range(m):
            end = -side * at[c, i]
            p, q = cells.factors(np.array([i]), np.array([end]))
            own = cells.fast(p[0], q[0], end, thetas[c : c + 1, i])[0] - budgets[c, i]
            assert (margin[c, i] >= 0) == (own >= 0)
            assert margin[c, i] == own or MARGIN <= margin[c, i] <= own


def test_cells_streams_of_as_many_rows_as_systems_are_those_rows():
    """_Cells.streams of m rows that are not the m systems in order (one system's cells at
    m values of θ, as the checks rounding could decide ask for) are those rows' streams."""
    from receval.estimators.anytime.betting import log_capital
    from receval.estimators.anytime.cells import _Cells

    direct, _ = _direct_setup("f1")
    cells = _Cells(direct, +1)
    thetas = np.array([0.3, 0.5, 0.7])
    streams, bets = cells.streams(np.array([2, 2, 2]), thetas)
    one = [cells.streams(np.array([2]), thetas[k : k + 1]) for k in range(3)]
    mu = np.full((1, 3), 0.2)
    got = log_capital(streams, bets, mu, +1, True)[0]
    want = [log_capital(s, b, mu[:, :1], +1, True)[0, 0] for s, b in one]
    assert np.array_equal(got, want)


@pytest.mark.parametrize("side", [+1, -1])
def test_cells_fast_capitals_match_the_streams_within_the_margin(side):
    """cells._Cells.fast (the factors p − q·c, θ-free per end) is the streams' running-max log
    capital up to rounding: within 1e-11, far inside the 1e-9 margin below which a check is
    evaluated again from the streams (so that rounding never decides a cell)."""
    from receval.estimators.anytime.betting import log_capital
    from receval.estimators.anytime.cells import MARGIN, _Cells

    direct, _ = _direct_setup("f1", K=2_000)
    cells = _Cells(direct, side)
    thetas = np.linspace(max(direct.theta_min, 0.05), 1.0, 7)
    for end in (0.05, 0.2, 0.37, 0.8):
        p, q = cells.factors(np.arange(3), np.full(3, end))
        for i in range(3):
            fast = cells.fast(p[i], q[i], end, thetas)
            streams, bets = cells.streams(np.full(thetas.size, i), thetas)
            ref = log_capital(streams, bets, np.full((1, thetas.size), end), side, True)[0]
            assert np.max(np.abs(fast - ref)) < min(1e-11, MARGIN / 100)
