"""Anytime-valid intervals (``--intervals anytime``): confidence sequences on per-draw terms.

Every interval holds simultaneously at every *look* — every ``score`` of the task as its samples
grow, whatever rule chose the next labels (``receval sample --until-decided`` included) — because
each is a betting confidence sequence (:mod:`receval.estimators.anytime.betting`) over one fixed stream
of observations that every look extends.

**The stream.**  Rounds in the order their ``sample`` name first appears in samples.tsv.  A round
consists of *sources* whose counts are fixed before it is drawn (they may depend on every earlier
label): each system's sampler (n_j i.i.d. draws from p_j) and, for rounds drawn by
``--until-decided``, a *floor* source (rows with a ``mixture_prob``): i.i.d. draws from
q₀ = (1/m) Σ_j p_j (a system chosen uniformly, then a fact from its p_j), ``mixture_prob`` =
q₀(x).  Two kinds of rounds:

* *shuffled*: every round ``receval sample`` writes (``--per-system``, ``--adaptive``,
  ``--by-judge``, ``--until-decided``) is in a uniformly random order, a permutation drawn from
  the round's generator after its draws, and says so with ``order`` = ``random`` on each of its
  rows (:data:`receval.design.ORDER_COLUMN`; a round with floor rows, from bundles written
  before the marker, is one too).  Read in file order, the k-th draw, given every draw before it
  (facts and sources), comes from the mixture of the sources still to come,
  q_k(x) = Σ_s (r_s/r) p_s(x), r_s the draws of source s not yet seen in the round, r = Σ_s r_s.
  *Proof.*  The counts n_s are fixed before the round; the draws are independent, those of
  source s from p_s; the permutation π is uniform and independent of them.  Then the sequence of
  sources in file order is a uniformly random arrangement of the multiset {s: n_s}, independent
  of the facts, so given the first k − 1 sources and facts the k-th source is s with probability
  r_s/r (every arrangement of the rest is equally likely), and given its source the k-th fact is
  a fresh draw from p_s (the facts already seen are other draws).  So x_k | past ~ q_k, and q_k is
  a function of the past: predictable.  Hence for any term h(x)/q_k(x), E[h(x_k)/q_k(x_k) | past]
  = Σ_{q_k > 0} h — every term below keeps its conditional mean whatever chose the counts, and a
  draw informs every system it could have hit.  (Exact enumeration and a 2,000-campaign check of
  rounds of per-system draws only in ``tests/estimators/test_anytime.py``.)  Every term below is
  one draw.
* *legacy* (a round without the marker: bundles written before it, samples drawn elsewhere, whose
  rows are grouped by system): a fixed order carries no randomness, so each draw comes from its
  own source, q_k = p_{s_k} (precision: its own system's term only); the pool terms go by
  *batches*, the l-th draw of every source, weighted by 1/σ_l with σ_l = Σ_{s ∈ batch} p_s
  (E Σ_batch h/σ_l = Σ_x h(x)).  Valid, but a batch's range is far above its spread, so legacy
  rounds add little to pooled recall.  (A fixed, name-seeded interleaving of a legacy round is
  *not* a random one: it biased the terms by up to 10 Monte Carlo SE in bench worlds; reading
  the grouped order as if shuffled is biased too, as the enumeration test shows.)  A legacy
  round cannot be made shuffled by permuting its rows afterwards and marking them: the
  guarantee needs the order drawn once, with the round, not chosen among several.

With t_i(x) the target (1/|X_i| on X_i) and f the label:

* precision π_i: Z_k = t_i f/q_k has conditional mean π_i whenever q_k covers X_i (its own
  sampler or the floor still has draws; otherwise the draw is skipped for system i, a
  predictable decision).  Range [0, 1/Σ_s (r_s/r) κ_is] with κ_is = min_{X_i} p_s/t_i.
  The sequences use Z_k with a predictable control variate subtracted (the share of correct
  labels among earlier draws of the fact's popularity stratum, or with ``--estimator ppi`` the
  judge's score calibrated on the labels of the stream's earlier steps,
  :mod:`receval.estimators.judge_stream`, each with its exact mean over X_i): same conditional
  mean, about half the
  variance where popularity predicts correctness (:mod:`receval.estimators.anytime.control`);
  and a fact labelled at an earlier step enters with its label instead of its weight (the
  control's prediction for it is the label: exact), so the spread falls as labels accumulate
  and labels drawn for one system serve every system that output the fact.
* the pool's correct facts K = Σ_pool f: per pool step L_s + Σ [x ∉ L_s] f/σ, L_s the correct
  facts labelled at earlier steps (exact) and the others importance-weighted (conditional
  mean K whenever the step covers the pool), range [0, L_s + the step's bound of Σ f/σ].
* pooled recall ν_i = Σ_pool g_i f / Σ_pool f, micro precision and every round in a random
  order: ν_i = n_i π_i / K (K = Σ_pool f), so ν_i ≤ r exactly when n_i π_i − r K ≤ 0, and the
  step term n_i·y − r·k (y the controlled precision term, k the step's Σ f/σ with mean K, both
  from the same draw) is tested in one stream per system
  (:func:`receval.estimators.anytime.f1.direct_pooled_recall`): the control variate then
  narrows ν as it narrows π (data/kbp-sim median 0.068 → 0.037, gradient20 1.48 → 1.25 × the
  bootstrap against the mixture below).  Otherwise (legacy rounds, ``--target macro``):
  the terms (g_i − ν) f/q (per pool step) have
  conditional mean 0 at the true ν whenever the step covers the pool (every system's sampler
  or the floor is still in it): a ratio, by inverting the tests of A − ν·B, the bets staking
  up to :data:`~receval.estimators.anytime.control.RECALL_CAP` of what the range allows.  The
  sequence bets on the average of this test's capital and that of the same test with a
  popularity control in A
  (:func:`receval.estimators.anytime.control.controlled_recall_streams`), an average of test
  martingales (:class:`~receval.estimators.anytime.betting.MixedStreams`, :data:`POOLED_RECALL_CONTROL`):
  the control narrows ν where popularity predicts correctness, the plain test where it does
  not, and the mixture is never far from the better one.
* pool coverage θ: the exhaustive units in file order, terms w_u (a_u − θ b_u) (the same
  inversion); the range uses the largest w_u b_u recorded (see :data:`UNIT_ASSUMPTION`), taken
  as known before the first unit, and so do the bets (their prior scale is half of it, not the
  units' mean, which the first bets would otherwise see ahead of time).
* recall θ·ν_i and F1 (increasing in precision and recall): one joint test per side
  (:func:`joint_bounds`): θ's final capital over the units (independent of the draws: an
  e-value) times the running maximum of the draws' capital: for micro precision and rounds in
  a random order one stream per system whose mean is G − r·K/θ (recall) or 2G − f·(n + K/θ)
  (F1) (:class:`receval.estimators.anytime.f1.DirectF1`); otherwise ν's capital (F1: the
  larger of ν's and π's, weighted 1/1.1 and 1/11), so the α is not split between θ and the
  draws' factors.  Before, recall took θ and ν at α/2
  each and F1 π, ν and θ at α/3 each (a union bound; 2.2 and 2.3 × the bootstrap's width in
  the bench's gradient world, now 1.37 and 1.47 with pooled recall's plain test).
* comparisons (tiers, rank sets): a paired test-by-betting sequence per ordered pair, Holm over
  all of them (:mod:`receval.estimators.anytime.pairs`; recall and pooled recall on ν, whose
  order is recall's; f1 on the weighted precision difference whose sign is F1's, at both ends
  of the true facts' sequence, :mod:`receval.estimators.anytime.f1`).  The family-wise error
  over all pairs *and* all looks is ≤ α.  With ``--target macro``, f1 takes every system's
  sequence at α/m instead: i is better than j when i's lower end exceeds j's upper end.

**Equivalence classes learned while labelling.**  A draw picks an answer *string* x (a fact
of the outputs as spelled), from the design in force at its step: ``prob`` = p_s(x) and, for a
floor draw, ``mixture_prob`` = q₀(x) = (1/m) Σ_j p_j(x), both fixed when it was drawn (the
designs depend on the outputs only) and checked per drawn string, never per class: a class a
later label creates cannot make a recorded probability wrong
(:func:`receval.estimators.anytime.stream.drawn_floor_probabilities`).  Classes still count once:
let Π be the partition of the strings into classes (a correct fact's class; every other string
alone).  Every quantity above is a sum over classes, Σ_{C ∈ Π} h(C) (precision h = t_i f, the
pool h = f, pooled recall h = g_i f, g_i(C) = 1 when X_i holds some name of C).  At step k the
draw's class C(x_k) has probability q_k(C) = Σ_{x ∈ C} q_k(x), the mixture's string
probabilities summed over the class's names in the outputs.  So the term h(C(x_k))/q_k(C(x_k))
has conditional mean Σ_{x} q_k(x) h(C(x))/q_k(C(x)) = Σ_{C: q_k(C) > 0} h(C) — the same
martingale argument as above, with the class as the observation — *provided* the label of x_k
reveals C(x_k) whole (every name of the class among the outputs, with the same
``equivalence_class``: what the README asks of assessors), so the term is known once x_k is
labelled and does not change at later looks.  Equivalently, it is the string-level term
h(C(x)) w(x)/q_k(x) with the class's share w(x) = q_k(x)/q_k(C(x)) (Σ_{x ∈ C} w = 1), the
Rao-Blackwellised choice among the splits of h(C) over its names (any split w ≥ 0 summing to
1 is unbiased; splitting in proportion to q_k makes the weight constant over the class, the
least variable).  The range stays predictable: q_k(C) ≥ q_k(x) for every name, so the
string-level κ bounds the class terms too (the class view's κ is computed over the same
outputs).  What a class left undiscovered still changes is |X_i| in classes (precision's t_i)
— every estimator's caveat, flagged as unresolved outputs; pooled recall and the pool terms
do not depend on it (n_i t_i = 1).

The bets are tuned for the steps of the rounds started so far (a number fixed before each
round), so the sequences are tightest at the end of the latest round.  Points are the
estimator's (joint by default); the intervals do not use the bootstrap.

References: Waudby-Smith & Ramdas, JRSSB 2024 (betting CS); Waudby-Smith, Wu, Ramdas, Kallus &
Luedtke 2022 (anytime-valid off-policy inference: predictable importance weights); Chaganty et
al. 2017 (the importance-weighted terms).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from receval.errors import OptionError
from receval.estimators.anytime.betting import BettingStreams, MixedStreams
from receval.estimators.anytime.control import (
    RECALL_CAP,
    controlled_precision_streams,
    controlled_recall_streams,
)
from receval.estimators.anytime.f1 import (
    T_SHARE,
    direct_f1,
    direct_pooled_recall,
    f1_pair_tests,
    true_facts,
)
from receval.estimators.anytime.pairs import (
    PAIRED,
    PairTests,
    SystemTerms,
    correct_output_terms,
    pair_tests,
    precision_terms,
    system_terms,
)
from receval.estimators.anytime.sequences import (
    _bounds,
    _unit_streams,
    f1_of,
    joint_bounds,
    pool_correct_bounds,
    pool_totals,
    precision_streams,
    sequence_bets,
    unit_bounds,
)
from receval.estimators.anytime.stream import (
    UNIT_ASSUMPTION,
    Stream,
    build_stream,
    floor_probabilities,
    output_arrays,
)
from receval.estimators.intervals import Estimates, IntervalMethod
from receval.estimators.registry import estimator_class
from receval.estimators.sample_data import design_probabilities
from receval.leaderboard import Comparisons
from receval.options import names_of
from receval.progress import stage

if TYPE_CHECKING:
    from receval.estimators.base import ScoringContext
    from receval.estimators.sample_data import SampleData
    from receval.run_record import IntervalRecord
    from receval.task import Task


@dataclass(frozen=True)
class AnytimeBounds:
    """Confidence-sequence ends per quantity and level: ``ends[name][level] = (lower, upper)``."""

    ends: dict[str, dict[float, tuple[np.ndarray, np.ndarray]]]
    rounds: tuple[int, int] = (0, 0)  # (shuffled, legacy)
    #: pooled recall, recall and F1 from one stream per system (f1.DirectF1)
    direct: bool = False
    #: ``more(name, level)``: the ends of a sequence at a level not computed yet (None: every
    #: level is in ``ends``); :meth:`at` keeps what it returns
    more: Any = dataclasses.field(default=None, compare=False, repr=False)

    def at(self, name: str, level: float) -> tuple[np.ndarray, np.ndarray]:
        """``ends[name][level]``, computed on first use where ``more`` can (the levels below
        α serve only the comparisons that are not paired: most runs never read them)."""
        known = self.ends.setdefault(name, {})
        if level not in known and self.more is not None:
            known[level] = self.more(name, level)
        return known[level]


def _levels(alpha: float, m: int) -> list[float]:
    return sorted({alpha, alpha / 2, alpha / 3, alpha / m, alpha / (3 * m)})


def anytime_bounds(
    task: Task, data: SampleData, confidence: float, judge: bool = False
) -> AnytimeBounds:
    """Every confidence sequence the leaderboard needs (module docstring), at the levels α,
    α/2, α/3, α/m and α/(3m).  ``judge``: the precision terms take the task's judge scores
    as their control (prediction-powered, :mod:`receval.estimators.anytime.control`) instead
    of the popularity shares."""

    alpha = 1.0 - confidence
    m = data.m
    levels = [alpha]  # the others on first use (AnytimeBounds.at)
    stage(f"anytime: the stream of {data.K} draws")
    st = build_stream(task, data)
    K, P = st.fact.size, st.P
    ends: dict[str, dict[float, tuple[np.ndarray, np.ndarray]]] = {}
    pool = pool_totals(task, data, st)
    weight, pool_high, pool_facts = pool.weight, pool.raw_high, pool.facts
    if st.own_b is None:  # nothing drawn
        precision = precision_streams(data.target[st.fact], st.label, st.q, st.own)
    else:
        control = _judge_terms(task, data, st) if judge else None
        precision = controlled_precision_streams(
            data.target[st.fact], st.label, st.q, st.own, st.own_b, st.stratum, st.mass, control,
            fact=st.fact,
        )  # fmt: skip
    horizon = st.horizon.T if K else None
    stage(f"anytime: precision sequences ({m} systems)")
    later = {"precision": (precision, (0.0, 1.0), alpha, horizon)}
    ends["precision"] = _bounds(precision, levels, (0.0, 1.0), alpha, horizon)
    member = np.zeros((m, P))
    for i in range(m):  # pool-step sums of each system's g_i f/σ: m bincounts
        member[i] = np.bincount(st.pool_step, weights=data.member[st.fact, i] * weight, minlength=P)
    pool_active = np.broadcast_to(pool.active, (m, P))
    pool_horizon = st.pool_horizon[None, :] if P else None
    # E v = Σ_pool f: guessed as half the pool for the prior variance of the bets
    plain = BettingStreams.of_ratios(member, pool.raw_total[None, :], pool_high[None, :],
                                     pool_active)  # fmt: skip
    plain = dataclasses.replace(plain, cap=RECALL_CAP)

    # F1 = 2G/(n + T) and ν = G/K need micro precision (G = n·π); macro keeps π's and ν's tests
    micro = data.target_kind == "micro"
    stage(f"anytime: pooled recall sequences ({m} systems)")
    direct = direct_f1(precision, pool, st, data.sizes, horizon) if K and micro else None
    if direct is not None:  # ν ≤ r exactly when n·π − r·K ≤ 0: one stream per system
        nu, prior = direct_pooled_recall(precision, pool, data.sizes)
        later["pooled_recall"] = (nu, (0.0, 1.0), alpha, horizon, prior, prior * pool_facts / 2)
        ends["pooled_recall"] = _bounds(nu, levels, *later["pooled_recall"][1:])
    else:
        ratio = _pooled_recall_test(plain, data, st, pool_high)
        later["pooled_recall"] = (ratio, (0.0, 1.0), alpha, pool_horizon, 0.5, pool_facts / 2)
        ends["pooled_recall"] = _bounds(ratio, levels, *later["pooled_recall"][1:])
    ends["pool_correct"] = pool_correct_bounds(pool, [alpha], alpha)
    ends["pool_coverage"] = unit_bounds(data, levels, alpha)
    draws = {
        "precision": (precision, sequence_bets(precision, alpha, horizon)),
        # the plain ν test: with the mixture, recall / F1 were 3-5 % narrower in the gradient
        # worlds (gradient 1.37 -> 1.33 / 1.46 -> 1.40 x the bootstrap, gradient20 1.52 -> 1.49 /
        # 1.59 -> 1.56) but 6 / 5 % wider on kbp-sim (0.091 -> 0.097 / 0.117 -> 0.123), 35 % slower
        "pooled_recall": (plain, sequence_bets(plain, alpha, pool_horizon, 0.5, pool_facts / 2)),
    }
    stage(f"anytime: recall and F1 over the θ grid ({m} systems)")
    joint = joint_bounds(_unit_streams(data), draws, alpha, direct)
    stage("")
    ends.update({k: {alpha: v} for k, v in joint.items()})
    rounds = (st.shuffled_rounds, st.legacy_rounds)
    return AnytimeBounds(ends, rounds, direct is not None, _later_levels(later, data, alpha))


def _later_levels(later: dict, data: SampleData, alpha: float):
    """``AnytimeBounds.more``: a sequence's ends at another level, from the streams and
    settings its α ends came from (the same search: ends bit for bit those of computing every
    level at once)."""

    def more(name: str, level: float) -> tuple[np.ndarray, np.ndarray]:
        if name == "pool_coverage":
            return unit_bounds(data, [level], alpha)[level]
        if name not in later:
            raise KeyError(name)
        streams, *settings = later[name]
        return _bounds(streams, [level], *settings)[level]

    return more


def _pooled_recall_test(plain: BettingStreams, data: SampleData, st: Stream, pool_high):
    """Pooled recall's sequence (:data:`POOLED_RECALL_CONTROL`): the average of the plain
    ratio test's capital and the popularity-controlled one's, or either alone."""
    if st.own_b is None or POOLED_RECALL_CONTROL == "plain":
        return plain
    controlled = controlled_recall_streams(
        data.member[st.fact], st.label, st.pool_sigma, st.pool_step, st.stratum, st.count,
        pool_high, st.pool_cover > 0,
    )  # fmt: skip
    return (
        controlled if POOLED_RECALL_CONTROL == "controlled" else MixedStreams((plain, controlled))
    )


def anytime_pair_tests(task, data, metric: str, ok: np.ndarray, alpha: float) -> PairTests:
    """The pairwise tests of ``metric`` among the systems ``ok`` at family-wise level ``alpha``
    over all pairs and all looks (module docstring; f1: :mod:`receval.estimators.anytime.f1`)."""

    n_ok = int(np.sum(ok))
    stage(f"anytime: paired tests of {metric} ({n_ok * (n_ok - 1) // 2} pairs)")
    if metric == "f1":
        stream = build_stream(task, data)
        terms = precision_terms(task, data, stream)
        facts = true_facts(task, data, stream, alpha * T_SHARE)
        return f1_pair_tests(terms, data.sizes, facts, ok, alpha)
    if metric in ("pooled_recall", "recall") and data.target_kind == "micro":
        return pair_tests(correct_output_terms(task, data), ok, alpha)
    return pair_tests(system_terms(task, data, metric), ok, alpha)


def _judge_terms(task: Task, data: SampleData, st: Stream):
    """(the judge's score at each step's fact, :class:`JudgeControl`) of ``task``: the judge
    calibrated on the labels of the stream's earlier rows (:mod:`receval.estimators.judge_stream`),
    so every row's control has its own segment's exact mean, range and known-label sum."""
    from receval.estimators.anytime.control import STRATA, JudgeControl, known_labels
    from receval.estimators.judge_stream import (
        known_predictions,
        segment_controls,
        stream_judge,
    )

    if hasattr(task, "judge_stream_controls"):  # the engine path: from the runs' aggregates
        sj, mean, high, low = task.judge_stream_controls(data, st, STRATA)
    else:
        view = design_probabilities(task, True)[0]
        t_all, sys_codes, facts, strata = output_arrays(view, data)
        sj = stream_judge(task, data, st)  # calibrated on the earlier rows' labels
        stratum = strata.of_fact[facts]
        mean, high, low = segment_controls(sj, t_all, sys_codes, facts, stratum, data.m, STRATA)
    seg = sj.row_segment
    task_facts = np.asarray(data.facts)[st.fact]
    kn = known_labels(st.fact, st.label, np.arange(st.fact.size))
    predicted = known_predictions(sj, kn, data.target[st.fact], task_facts, seg)
    return sj.at_rows(task_facts), JudgeControl(mean[seg], high[seg], low[seg], predicted)


def judged_precision_terms(task: Task, data: SampleData, st: Stream):
    """The paired precision terms of :func:`receval.estimators.anytime.pairs.precision_terms`
    with the judge's score, calibrated on the labels of the stream's earlier steps, as the
    prediction of each fresh fact instead of the running share
    (:func:`receval.estimators.judge_stream.judged_terms`)."""
    from receval.estimators.judge_stream import judged_terms

    return judged_terms(task, data, st, output_arrays)[0]


def judged_pair_tests(task: Task, data: SampleData, metric: str, ok, alpha: float):
    """:func:`receval.estimators.anytime.pairs.anytime_pair_tests` on the judge-predicted
    precision terms (:func:`judged_precision_terms`): precision, pooled recall and recall
    (micro: n_i times the precision terms) and f1 (micro, with the true facts' sequence); the
    others as without a judge."""

    micro = data.target_kind == "micro"
    if metric not in ("precision", "pooled_recall", "recall", "f1") or (
        metric != "precision" and not micro
    ):
        return anytime_pair_tests(task, data, metric, ok, alpha)
    from receval.estimators.judge_stream import judged_terms, paired_judge_tests

    stream = build_stream(task, data)
    terms, reach = judged_terms(task, data, stream, output_arrays)
    if metric == "precision":
        return paired_judge_tests(terms, reach, ok, alpha)
    if metric == "f1":
        facts = true_facts(task, data, stream, alpha * T_SHARE)
        return f1_pair_tests(terms, data.sizes, facts, ok, alpha)
    n = np.asarray(data.sizes, float)[:, None]
    exact = None if terms.exact is None else terms.exact * n[:, 0]
    scaled = SystemTerms(terms.y * n, terms.lo * n, terms.hi * n, terms.active, exact)
    return paired_judge_tests(scaled, reach.scaled(n), ok, alpha)


#: pooled recall's sequence: ``"mixed"`` bets on the average of two capitals, the plain ratio
#: test's and the one with a popularity control in its numerator
#: (:func:`receval.estimators.anytime.control.controlled_recall_streams`); ``"plain"`` and
#: ``"controlled"`` (for benches) use one.  The average of two test martingales is one and each
#: is monotone in ν, so the bisection stays exact; it costs at most log 2 of capital against the
#: better of the two.  Neither alone wins everywhere: the control's range, constant in ν, is
#: about twice the plain test's, which halves the largest bet.  Median width on data/kbp-sim
#: (one per-system round of 150 in a random order), all staking up to 0.9: plain 0.079,
#: controlled 0.144, mixed 0.086; bench/anytime.py's gradient world (12 systems, 8 repetitions,
#: × the bootstrap's width at the final look): 1.64 / 1.36 / 1.44; gradient20: 1.61 / 1.52 /
#: 1.51 (mixed, staking up to RECALL_CAP 0.97: 0.082, 1.42, 1.49).  Recall and F1 (joint
#: test) take the plain ν capital (:func:`anytime_bounds`: the mixture gained 3-5 % there in the
#: gradient worlds and lost 5-6 % on kbp-sim).
POOLED_RECALL_CONTROL = "mixed"


def metric_bounds(b: AnytimeBounds, metric: str, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The two ends of ``metric``'s sequence at overall level α (its factors' levels split)."""
    e = b.ends
    if metric in ("precision", "pooled_recall", "pool_coverage", "pool_correct"):
        return b.at(metric, alpha)
    if metric in ("recall", "f1") and alpha in e.get(metric, {}):
        return e[metric][alpha]
    if metric == "recall":
        t_lo, t_hi = b.at("pool_coverage", alpha / 2)
        n_lo, n_hi = b.at("pooled_recall", alpha / 2)
        return t_lo * n_lo, t_hi * n_hi
    if metric == "f1":
        t_lo, t_hi = b.at("pool_coverage", alpha / 3)
        n_lo, n_hi = b.at("pooled_recall", alpha / 3)
        p_lo, p_hi = b.at("precision", alpha / 3)
        return f1_of(p_lo, t_lo * n_lo), f1_of(p_hi, t_hi * n_hi)
    raise ValueError(f"no anytime interval for {metric!r}")


def simultaneous_bounds(
    b: AnytimeBounds, metric: str, alpha: float, m: int
) -> tuple[np.ndarray, np.ndarray]:
    """Ends of ``metric`` for every system that hold all at once (levels split over systems);
    for recall and pooled recall ν's (recall = θ·ν orders the systems as ν does)."""
    if metric in ("pooled_recall", "recall"):
        return b.at("pooled_recall", alpha / m)
    if metric == "precision":
        return b.at("precision", alpha / m)
    if metric == "f1":
        t_lo, t_hi = b.at("pool_coverage", alpha / 3)
        n_lo, n_hi = b.at("pooled_recall", alpha / (3 * m))
        p_lo, p_hi = b.at("precision", alpha / (3 * m))
        return f1_of(p_lo, t_lo * n_lo), f1_of(p_hi, t_hi * n_hi)
    raise ValueError(f"no anytime comparisons for {metric!r}")


def draw_stream_floor(ctx: ScoringContext) -> int:
    """How many judged draws are floor draws (``mixture_prob`` recorded)."""
    samples = ctx.task.samples if ctx.task is not None else None
    if samples is None or not len(samples) or not ctx.data.K:
        return 0
    return int(floor_probabilities(samples)[ctx.data.draw_row].sum())


KNOWN = (
    "a fact labelled at an earlier draw of the stream enters every system's term, and the "
    "pool's correct-fact term, with its label instead of its importance weight (exact)"
)
CONTROL_POPULAR = (
    "precision terms with a predictable control variate: the share of correct labels among "
    "earlier draws of the fact's popularity stratum (1, 2, >=3 systems), exact mean over the "
    "system's outputs, coefficient regressed on earlier steps (anytime_control); " + KNOWN
)
CONTROL_JUDGE = (
    "prediction-powered precision terms: the judge's score as a control variate with its "
    "exact mean over the system's outputs, coefficient regressed on earlier steps only "
    "(predictable; anytime_control); " + KNOWN
)


LEGACY_WARNING = (
    "anytime: {n} sample round{s} in samples.tsv without the order marker (a legacy round: rows "
    "grouped by system, as samples drawn outside receval are): pooled recall, recall and f1's "
    "sequences take its draws in batches of one per system and learn little from them (often "
    "several times the bootstrap's width); rounds drawn by receval sample are in a random "
    "order, marked order = random, and read draw by draw"
)


POOLED_RECALL_TESTS = {
    "direct": "one stream per system, n*precision term - nu*pool correct term (the precision "
    "term with its control variate, both from the same draw; micro precision, rounds in a "
    "random order)",
    "mixed": "bets on the average of two capitals (itself a test martingale): the ratio test of "
    "A - nu B and the same test with a popularity control in A (the share of correct labels "
    "among earlier pool steps' draws per popularity stratum, exact known sum); recall and f1 "
    "take the plain ratio test's capital",
    "plain": "the ratio test of A - nu B",
    "controlled": "the ratio test of A - nu B with a popularity control in A",
}


def sample_based_names() -> str:
    """The registered sample-based estimators, for messages ("joint, simple or ppi")."""

    return names_of(lambda cls: cls.sample_based)


def _judged(options: Any) -> bool:
    """Whether the estimator asks for the judge's scores as the precision control (PPI)."""

    return estimator_class(options.estimator).uses_judge


class AnytimeIntervals(IntervalMethod):
    """Confidence sequences valid at every look (module docstring); no bootstrap replicates."""

    name: ClassVar[str] = "anytime"
    summary: ClassVar[str] = (
        "confidence sequences valid at every look, whatever rule chose the labels (e.g. "
        "sample --until-decided); no bootstrap"
    )
    needs_bootstrap: ClassVar[bool] = False

    def __init__(self) -> None:
        self._cached: tuple[Any, AnytimeBounds] | None = None

    def check(self, options: Any) -> None:

        if not estimator_class(options.estimator).sample_based:
            raise OptionError(
                f"{{intervals='anytime'}} needs a sample-based estimator ({sample_based_names()})"
            )
        if options.target_recall is not None or options.rank_by == "precision_at_target":
            raise ValueError(
                "precision at a target recall has no anytime interval; drop target_recall"
            )
        if options.cluster_queries:
            raise ValueError("cluster_queries applies to the bootstrap, not to intervals='anytime'")

    def run_warnings(self, ctx: ScoringContext) -> list[str]:
        """A warning when samples.tsv has legacy rounds (rows grouped by system, no marker)."""
        legacy = self.bounds(ctx).rounds[1]
        if not legacy:
            return []
        return [LEGACY_WARNING.format(n=legacy, s="" if legacy == 1 else "s")]

    def label(self, options: Any, B: int | None) -> str:
        judged = ", prediction-powered precision" if _judged(options) else ""
        return (
            f"anytime betting confidence sequence {options.confidence:.0%} "
            f"(Waudby-Smith & Ramdas 2024){judged}, valid at every look"
        )

    def record(self, ctx: ScoringContext) -> IntervalRecord:
        """run.json's ``intervals`` block (the method, its stream and assumptions) and the
        ranking's procedure."""
        from receval.run_record import IntervalRecord, IntervalsBlock

        data = ctx.data
        floor = int(draw_stream_floor(ctx))
        stream_counts = self.bounds(ctx).rounds
        record = {
            "intervals": {
                "method": "anytime",
                "what": "betting confidence sequences (Waudby-Smith & Ramdas 2024, hedged "
                "one-sided bettors at alpha/2, predictable plug-in bets tuned to the draws of the "
                "rounds started so far), valid simultaneously at every look",
                "stream": "rounds in order; shuffled rounds (samples.tsv order = random, as "
                "receval sample writes every round, or with floor rows) one draw per step "
                "weighted by the mixture of the sources still to come; legacy rounds (no "
                "marker: rows grouped by system) each draw by its own source for precision, "
                "and batches of one draw per source for the pool terms",
                "shuffled_rounds": stream_counts[0],
                "legacy_rounds": stream_counts[1],
                "splits": "pooled recall (micro precision, rounds in a random order): one "
                "stream per system, n*precision term - r*pool correct term, mean 0 at the true "
                "value; recall and f1: one joint test per side, theta's final capital over "
                "the units (independent of the draws) times the running maximum of the draws' "
                "capital (micro, random order: one stream per system, n*precision term - "
                "r*pool correct term/theta for recall, 2n*precision term - f*(n + pool correct "
                "term/theta) for f1; otherwise nu's, for f1 the larger of nu's and precision's, "
                "weighted 1/1.1 and 1/11), extremes over "
                "the cells of a theta grid refined around each system's extreme (recall, one "
                "stream per system: over a grid of nu = r/theta, theta's end read from its "
                "final capital); "
                "comparisons: paired difference tests, Holm over all ordered pairs (precision, "
                "pooled recall, recall; f1: the weighted precision difference whose sign is "
                f"F1's, at both ends of the true facts' sequence, Holm at {1 - T_SHARE:g} alpha, "
                f"the true facts at {T_SHARE:g} alpha; f1 with target macro: each system at "
                "alpha/m)",
                "assumptions": [
                    UNIT_ASSUMPTION,
                    "each sampler's rows are in samples.tsv in the order they were drawn, and a "
                    "round marked order = random is in the random order drawn with it (receval "
                    "writes them so; a file sorted by value would break the stream)",
                    "draws still unlabelled are left out (a round scored before it is fully "
                    "labelled is not the stream later looks see)",
                ],
                "draws": data.K,
                "floor_draws": floor,
                "points": f"{ctx.options.estimator} estimator (the sequences do not use it)",
                "precision_control": CONTROL_JUDGE if _judged(ctx.options) else CONTROL_POPULAR,
                "pooled_recall_test": POOLED_RECALL_TESTS[
                    "direct" if self.bounds(ctx).direct else POOLED_RECALL_CONTROL
                ],
            },
            "ranking": {
                "procedure": "anytime",
                "why": "comparisons valid over all pairs and all looks, whatever rule chose the "
                "labels (sample --until-decided included)",
                "rank_sets": "simultaneous rank sets from the same comparisons: rank_lo = 1 + "
                "#systems decided better, rank_hi = S - #systems decided worse",
            },
            "bootstrap": {"B": 0, "seed": ctx.options.seed, "method": None,
                          "level": ctx.options.confidence, "clusters": None},
        }  # fmt: skip
        return IntervalRecord(
            intervals=IntervalsBlock.from_json(record["intervals"]),
            ranking=record["ranking"],
            bootstrap=record["bootstrap"],
        )

    def bounds(self, ctx: ScoringContext) -> AnytimeBounds:
        """The sequences of ``ctx`` (computed once per context)."""
        if self._cached is None or self._cached[0] is not ctx:
            bounds = anytime_bounds(
                ctx.task, ctx.data, ctx.options.confidence, judge=_judged(ctx.options)
            )
            self._cached = (ctx, bounds)
        return self._cached[1]

    def estimate(self, ctx, run, metric, bounds=(0.0, 1.0)) -> Estimates:
        """The estimator's point and the metric's sequence; a point outside the sequence is
        reported as the nearer end, with a note (:func:`point_inside`)."""
        point = run.point[metric] if run is not None else np.full(ctx.data.m, np.nan)
        lower, upper = metric_bounds(self.bounds(ctx), metric, 1.0 - ctx.options.confidence)
        lower = np.broadcast_to(lower, point.shape).astype(float)
        upper = np.broadcast_to(upper, point.shape).astype(float)
        nan = np.isnan(point)
        lower, upper = np.where(nan, np.nan, lower), np.where(nan, np.nan, upper)
        point, notes = point_inside(point, lower, upper, metric, ctx.options.estimator)
        return Estimates(point, lower, upper, notes)

    def interval(self, options, point, replicates, jackknife=None, bounds=(0.0, 1.0), draws=None):
        """No anytime interval for derived quantities (NaN ends; ``draws`` unused)."""
        nan = np.full(np.shape(point), np.nan)
        return nan, nan

    def comparisons(self, ctx, point, replicates, metric) -> Comparisons:
        """Paired test-by-betting sequences with Holm over all ordered pairs
        (:mod:`receval.estimators.anytime.pairs`; f1 with T's sequence,
        :mod:`receval.estimators.anytime.f1`); f1 with ``target="macro"`` from every system's
        sequence at α/m."""
        alpha = 1.0 - ctx.options.confidence
        m_alive = max(int((ctx.data.sizes > 0).sum()), 1)
        if self.paired(ctx, metric):
            ok = ~np.isnan(np.asarray(point, float))
            tests = self.pair_tests(ctx, metric, ok)
            procedure = "anytime-pairs-f1" if metric == "f1" else "anytime-pairs"
            if _judged(ctx.options):
                procedure += "+judge"
            return AnytimeComparisons(tests.better, tests.pvalues, procedure, alpha, 0)
        lower, upper = simultaneous_bounds(self.bounds(ctx), metric, alpha, m_alive)
        ok = ~np.isnan(point) & ~np.isnan(lower) & ~np.isnan(upper)
        better = (lower[:, None] > upper[None, :]) & ok[:, None] & ok[None, :]
        # no p-values: α where the sequences separate the pair (p ≤ α), 1 elsewhere
        pvalues = np.where(better | better.T, alpha, 1.0)
        pvalues[~(ok[:, None] & ok[None, :])] = np.nan
        return AnytimeComparisons(better, pvalues, "anytime", alpha, 0)

    def paired(self, ctx: ScoringContext, metric: str) -> bool:
        """Whether ``metric``'s comparisons are the paired sequences (:meth:`pair_tests`)."""

        micro = metric != "f1" or ctx.data.target_kind == "micro"  # f1's identity G = n·π
        return metric in PAIRED and bool(ctx.data.K) and micro

    def pair_tests(self, ctx: ScoringContext, metric: str, ok: np.ndarray):
        """The paired anytime tests of ``metric`` among the systems ``ok`` (what the tiers and
        ``sample --until-decided`` decide by), family-wise error <= 1 - confidence over all
        pairs and looks.

        With an estimator that uses the judge (``uses_judge``) the paired precision terms take
        the judge's score as their prediction (:func:`judged_precision_terms`), so a judge that
        predicts the labels decides pairs the labels alone leave open."""

        alpha = 1.0 - ctx.options.confidence
        if not _judged(ctx.options):
            return anytime_pair_tests(ctx.task, ctx.data, metric, ok, alpha)
        return judged_pair_tests(ctx.task, ctx.data, metric, ok, alpha)


def point_inside(point, lower, upper, metric: str, estimator: str):
    """``point`` moved into [``lower``, ``upper``] where both ends are known, and a note per
    moved system (index -> text).

    Why a point can fall outside its own sequence: the point is the estimator's (joint:
    self-normalised importance weights over all draws at once, :mod:`receval.estimators.joint`)
    while the sequence bets on other terms with the same mean — the draws in the order they
    came, each weighted by the mixture in force at its step, facts labelled at an earlier step
    entering exactly, a predictable control variate subtracted — and keeps, at each end, every
    value some earlier step rejected (the running intersection).  Near an end the two
    disagree by a little (pooled recall 0.2182 against [0.1701, 0.2174] after five
    ``--until-decided`` rounds; precision 0.3987 against [0.4017, 0.4943] in the test's world).
    A value outside the sequence is one it rejects at the stated level, so the nearer end is
    reported instead — still an estimate consistent with every look — and ``note`` says so."""
    point = np.asarray(point, float)
    known = np.isfinite(point) & np.isfinite(lower) & np.isfinite(upper)
    moved = np.where(known, np.clip(point, lower, np.maximum(upper, lower)), point)
    notes = {}
    for i in np.flatnonzero(known & (moved != point)):
        notes[int(i)] = (
            f"{metric}: the {estimator} estimate {point[i]:.4f} lies outside its anytime "
            f"interval (which weighs the draws as they came and keeps every value an earlier "
            f"look rejected): reported as its nearer end {moved[i]:.4f}"
        )
    return moved, notes


class AnytimeComparisons(Comparisons):
    """Comparisons from confidence sequences (no replicates: ``B`` = 0)."""

    def describe(self) -> str:
        judge = "+judge"
        if self.procedure.endswith(judge):
            plain = dataclasses.replace(self, procedure=self.procedure[: -len(judge)])
            return (
                plain.describe()
                + "; each system's precision terms predict every fresh fact by the judge's score "
                "(prediction-powered, with the judge's exact total over the system's outputs)"
            )
        if self.procedure == "anytime-pairs-f1":
            return (
                "anytime: per ordered pair a test-by-betting sequence of the weighted precision "
                "difference whose sign is F1's (both systems' terms from the same draws), "
                "rejected only where it rejects at both ends of the true facts' confidence "
                f"sequence (at {T_SHARE:g} alpha), Holm over all S(S-1) one-sided hypotheses at "
                f"{1 - T_SHARE:g} alpha; family-wise error <= {self.alpha:g} over all pairs and "
                "all looks"
            )
        if self.procedure == "anytime-pairs":
            return (
                "anytime: a test-by-betting sequence of the paired difference per ordered pair "
                "(both systems' terms from the same draws), Holm over all S(S-1) one-sided "
                f"hypotheses; family-wise error <= {self.alpha:g} over all pairs and all looks"
            )
        return (
            "anytime: every system's confidence sequence of the ranked metric at alpha/m "
            "(Bonferroni over systems), i better than j when its lower end exceeds j's upper "
            f"end; family-wise error <= {self.alpha:g} over all pairs and all looks"
        )
