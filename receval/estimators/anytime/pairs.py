"""Anytime-valid pairwise comparisons: one test-by-betting sequence per ordered pair, Holm over
all of them, valid over all pairs *and* all looks (tiers, rank sets, ``--until-decided``).

**Hypotheses.**  For the S systems with an estimate of the ranked metric μ and every ordered pair
(a, b), H_ab: μ_a ≤ μ_b.  Rejecting H_ab is the statement "a is better than b" (``better[a, b]``);
for every unordered pair at least one of H_ab, H_ba is true.  N = S(S − 1) hypotheses.

**Paired terms.**  The sequences run on the stream of :func:`receval.estimators.anytime.stream
.build_stream` (rounds in order; a shuffled round one step per draw, a legacy round one step per
batch — the l-th draw of every source).  Each step s gives every system i whose design covers
it a term Y_is with E[Y_is | past] = μ_i; a pair's term is D_s = Y_as − Y_bs, *both from the same
step* (the same draw in a shuffled round, so facts shared by a and b cancel), counted when both
systems are covered (a predictable decision), with conditional mean μ_a − μ_b.

* precision: Y_is = t_i (f − c_is)/q + c_is (the importance-weighted term of
  :mod:`receval.estimators.anytime` with a control variate: E[t_i/q] = Σ_{X_i} t_i = 1 when q covers
  X_i, so any predictable c_is keeps the mean π_i; c_is is the running self-normalised estimate
  of π_i from the earlier steps, prior 1/2), range [c − c·H, c + (1 − c)·H] with H = 1/own the
  step's predictable bound of t_i/q.  Facts labelled at earlier steps enter exactly
  (:mod:`receval.estimators.anytime.control`, "Labels already known"): with L_s those facts,
  Y_is = Σ_{X_i ∩ L_s} t_i f + c_is (1 − Σ_{X_i ∩ L_s} t_i) + [x ∉ L_s] t_i (f − c_is)/q, the
  range as above about the new base, and c_is then estimated from the draws of new facts.
  A system whose every fact has been labelled has the exact term π_i with range 0 from the
  step after the last of them was drawn (**census**).  Where the stream's own draws labelled
  them all, that is all: its exact value is not put in the earlier steps too, which would
  replace the sequence read at earlier looks by another one at a look the data chose (two
  sequences, each at level x, err together at up to 2x).  A system judged in full by labels
  from outside the stream (exhaustive units, bulk assessments) has its exact value as a
  constant term at every step: valid when those labels were in place before the stream's first
  draw, as with every label receval reads outside ``samples.tsv``.  Two census systems are
  ordered exactly, without error.
* pooled recall ν and recall θ·ν (θ is common, so recall orders the systems as ν): with micro
  precision ν_i = n_i π_i / Σ_pool f, so D_s = n_a·Y_as − n_b·Y_bs (the precision terms above)
  has conditional mean n_a π_a − n_b π_b, whose sign is that of ν_a − ν_b
  (:func:`correct_output_terms`); with ``--target macro`` the pool-step sums
  D_s = Σ (g_a − g_b) f/σ, conditional mean (ν_a − ν_b)·Σ_pool f, range [−R_s, R_s], R_s the
  step's predictable bound of Σ f/σ.
* f1: F1_a > F1_b exactly when a weighted difference of the precision terms, whose weights
  depend on the number of true facts T shared by all systems, has a positive mean; tested at
  every T of T's own confidence sequence (:mod:`receval.estimators.anytime.f1`, micro
  precision; ``--target macro`` keeps every system's simultaneous sequence at α/S).

**Tests by betting.**  For H_ab the capital K_t = Π_{s ≤ t} (1 + λ_s D_s) with a predictable
λ_s ∈ [0, c/(−lo_s)] (c = 1/2, lo_s the step's lowest possible D_s): under H_ab, E[D_s | past] ≤ 0
so K is a nonnegative supermartingale with K_0 = 1, and by Ville's inequality
P(sup_t K_t ≥ 1/x) ≤ x.  The bet is the approximate growth-rate-optimal (aGRAPA) choice of
Waudby-Smith & Ramdas (JRSSB 2024, §B.3): λ_s = μ̂⁺/(v̂_s + μ̂²) from the earlier steps (μ̂ the
running mean shrunk toward 0 by one pseudo-step, v̂_s the running second moment per unit of
range times the step's range), so bets grow with the evidence and a pair that differs by Δ is
decided after about 2·E[D²]·log(N/α)/Δ² steps.  H_ba bets on −D the same way.  The anytime
p-value p_ab,t = 1/max_{s ≤ t} K_s is non-increasing in t and P(∃t: p_ab,t ≤ x) ≤ x under H_ab.

**Holm over all pairs and looks.**  At every look, sort the N p-values and reject the k-th
smallest while p_(j) ≤ α/(N − j + 1) for all j ≤ k (Holm 1979).  *Claim:* P(at some look some
true H is rejected) ≤ α.  *Proof:* let I₀ be the true hypotheses (|I₀| = N₀ ≥ 1; a fixed set,
the truth does not change).  At any look, the first true hypothesis that Holm rejects is preceded
in the order only by false ones, at most N − N₀ of them, so its p-value is ≤ α/(N − (N − N₀)) =
α/N₀.  Hence the event is contained in {∃ i ∈ I₀, ∃ t: p_i,t ≤ α/N₀}, whose probability is
≤ Σ_{i ∈ I₀} α/N₀ = α by Ville's inequality and the union bound.  Every look reads a prefix of
the same stream and the p-values only fall, so a decided pair stays decided.  The same holds for
any rule choosing the next draws, as long as each round's design is fixed before it is drawn
(the stream's premise).  ``better`` is then closed transitively (a > b and b > c give a > c): on
the same event every added statement is true as well, so the bound holds for the closure.  The tiers and the rank sets read ``better``: a null world splits into
more than one tier, or a rank set misses a true rank, only on that event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from receval.estimators.anytime.control import known_labels
from receval.estimators.anytime.stream import build_stream

#: truncation of the bets: the capital loses at most this share in one step; 0.75 decided 6 %
#: more pairs at the final look of fixed loops (gradient20, 24 repetitions: 54.9 -> 58.4) but,
#: with the loop choosing its draws by them, fewer in the gradient world (80 repetitions: 35.0
#: -> 33.1 pairs, loop / equal labels 0.509 -> 0.534)
CAP = 0.5
#: prior second moment of a term per unit of its range (a precision term in [0, H] with mean
#: near 1/2 has E[Y²] ≲ H/4)
PRIOR_UNIT_MOMENT = 0.25
#: pairs whose (pairs × steps) arrays one pass works on: small enough that the ~100 passes of
#: a chunk stay in the processor's cache (data/kbp-sim's 2,415 F1 pairs × 10,500 steps, CPU
#: seconds: 2,000,000 entries 5.9, 250,000 4.2, 60,000 3.5; the same values)
CHUNK = 65_536
#: two exact (census) values closer than this are a tie, not an order (sums in another order
#: differ in the last bits)
EXACT_TOLERANCE = 1e-9
#: metrics with paired terms
TERMS = ("precision", "pooled_recall", "recall")
#: metrics with paired tests (f1: :mod:`receval.estimators.anytime.f1`, on the precision terms)
PAIRED = (*TERMS, "f1")


@dataclass(frozen=True)
class SystemTerms:
    """Per system (m, S) the step terms Y with conditional mean μ_i (or a positive multiple of
    it, the same for all systems), their predictable ranges [lo, hi] and whether the step counts."""

    y: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    active: np.ndarray
    #: (m,) exact values (NaN: estimated): a census's precision
    exact: np.ndarray | None = None


@dataclass(frozen=True)
class PairTests:
    """The pairs (i < j) of the systems with an estimate and, per pair, the running-max log
    capitals of the bettors for "i better" (``up``) and "j better" (``down``), the running mean
    of D = Y_i − Y_j and its second moment per step, the steps counted; then Holm's decisions.

    What reads them: Holm's rejections and the closure (``better``), and
    :meth:`steps_to_decide` (``sample --until-decided``'s planning: max(up, down) against
    log(2P/α), and ``mean``/``moment``, of the undecided pairs only).  ``pvalues`` (Holm-adjusted)
    is carried into the comparisons but nothing in receval reads it.  So a direction whose log
    capital has reached log(2P/α) (p ≤ α/N: rejected at every Holm step) could be capped there
    and its pair's later steps skipped where the other bettor does not stake, without changing
    a rejection; on data/kbp-sim that would skip at most 4.5 % of F1's (pair, step) cells and
    9.2 % of precision's (no pair is decided before 30 % of the stream;
    ``bench/pair_tests_speed.py``), less than the bookkeeping would cost, so it is not done."""

    pairs: np.ndarray  # (P, 2)
    up: np.ndarray  # (P,)
    down: np.ndarray
    mean: np.ndarray
    moment: np.ndarray
    steps: np.ndarray
    better: np.ndarray  # (m, m)
    pvalues: np.ndarray  # (m, m) Holm-adjusted p of the pair (the smaller of its two directions)
    alpha: float

    @property
    def hypotheses(self) -> int:
        return 2 * int(self.pairs.shape[0])

    def decided(self) -> np.ndarray:
        """(P,) whether the pair is decided (either direction)."""
        i, j = self.pairs.T
        return self.better[i, j] | self.better[j, i]

    def steps_to_decide(self) -> np.ndarray:
        """(P,) a rough count of further steps the undecided pairs need at the present rate:
        (log threshold − log capital)·2·E[D²]/mean²; inf for a mean of 0, 0 when decided."""
        if not self.hypotheses:  # no pairs: nothing to decide
            return np.zeros(0)
        log_need = np.log(self.hypotheses / self.alpha)
        gap = np.maximum(log_need - np.maximum(self.up, self.down), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(self.mean != 0, 2.0 * gap * self.moment / self.mean**2, np.inf)
        return np.where(self.decided(), 0.0, need)


def precision_terms(task, data, stream) -> SystemTerms:
    """The control-variate precision terms of every system per stream step (module docstring)."""
    st = stream
    m, P = data.m, st.P
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = data.target[st.fact] * np.where(st.q > 0, 1.0 / st.q, 0.0)[:, None]  # t/q (K, m)
        high = np.where(st.own > 0, 1.0 / st.own, 0.0)
    act = st.own > 0
    target = data.target[st.fact]
    correct, mass, kn = _known_by_step(st, target, P)
    fresh = ~kn.known
    act_fresh = act & fresh[:, None]
    z_s = np.zeros((m, P))
    r_s = np.zeros((m, P))
    h_s = np.zeros((m, P))
    a_s = np.zeros((m, P), bool)
    label = st.label
    for i in range(m):  # m bincounts over the steps
        w = np.where(act_fresh[:, i], ratio[:, i], 0.0)
        z_s[i] = np.bincount(st.pool_step, weights=w * label, minlength=P)
        r_s[i] = np.bincount(st.pool_step, weights=w, minlength=P)
        h_s[i] = np.bincount(
            st.pool_step, weights=np.where(act[:, i], high[:, i], 0.0), minlength=P
        )
        a_s[i] = np.bincount(st.pool_step, weights=act[:, i], minlength=P) > 0
    # c_is: the self-normalised estimate of π_i from the steps before s (prior 1/2)
    c = (0.5 + np.cumsum(z_s, axis=1) - z_s) / (1.0 + np.cumsum(r_s, axis=1) - r_s)
    c = np.clip(c, 0.0, 1.0)
    base = correct + c * (1.0 - mass)  # the labelled facts exactly, c for the others
    h_s = np.where(mass >= 1.0 - EXACT_TOLERANCE, 0.0, h_s)  # all known: no fresh fact left
    y = np.where(a_s, z_s - c * r_s + base, 0.0)
    lo = np.where(a_s, base - c * h_s, 0.0)
    hi = np.where(a_s, base + (1.0 - c) * h_s, 0.0)
    census = np.asarray(data.census, bool)
    exact = np.where(census, np.asarray(data.census_precision, float), np.nan)
    # a census by the stream's own draws keeps its own terms, exact (range 0) from the step
    # after its last fact was drawn (module docstring: its exact value in the earlier steps
    # too would switch the pair sequences at a look chosen by the data)
    outside = census & (kn.total(target) < 1.0 - EXACT_TOLERANCE)
    if outside.any():  # judged in full outside the stream: a constant term, every step
        value = exact[outside][:, None]
        y[outside], lo[outside], hi[outside] = value, value, value
        a_s[outside] = True
    return SystemTerms(y, lo, hi, a_s, exact)


def _known_by_step(st, target: np.ndarray, P: int):
    """Per system and step (m, P) Σ t_i f and Σ t_i over the facts labelled at earlier steps,
    and the stream's :class:`~receval.estimators.anytime.control.KnownLabels`."""

    kn = known_labels(st.fact, st.label, st.pool_step)
    f = np.nan_to_num(np.asarray(st.label, float))
    return kn.by_step(target * f[:, None], P).T, kn.by_step(target, P).T, kn


def pooled_recall_terms(task, data, stream) -> SystemTerms:
    """Pool-step sums of g_i f/σ per system with the step's range [0, R_s] (module docstring)."""
    st = stream
    m, P = data.m, st.P
    with np.errstate(divide="ignore", invalid="ignore"):
        weight = np.where(st.pool_sigma > 0, st.label / st.pool_sigma, 0.0)
        high = np.where(st.pool_cover > 0, st.pool_size / st.pool_cover, 0.0)
    y = np.zeros((m, P))
    for i in range(m):
        y[i] = np.bincount(st.pool_step, weights=data.member[st.fact, i] * weight, minlength=P)
    active = np.broadcast_to(st.pool_cover > 0, (m, P))
    y = np.where(active, y, 0.0)
    return SystemTerms(y, np.zeros((m, P)), np.broadcast_to(high, (m, P)), active)


def system_terms(task, data, metric: str) -> SystemTerms:
    """The terms of ``metric`` (precision, pooled_recall or recall) on the task's stream."""

    if metric not in TERMS:
        raise ValueError(f"no paired anytime terms for {metric!r}")
    stream = build_stream(task, data)
    if metric == "precision":
        return precision_terms(task, data, stream)
    return pooled_recall_terms(task, data, stream)


def pair_bets(d, lo, hi, active) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The predictable aGRAPA bets on D (``up``) and on −D (``down``) per step, from the running
    mean and second moment of ``d`` before each step, truncated to the step's range [lo, hi]
    (module docstring); with the steps that count (``active`` and a range of positive width)."""
    act = active & (hi > lo)
    d = np.where(act, d, 0.0)
    width = np.where(act, hi - lo, 1.0)
    n_prev = np.cumsum(act, axis=1) - act
    mean_prev = (np.cumsum(d, axis=1) - d) / (n_prev + 1.0)  # shrunk toward 0
    unit = np.where(act, d**2 / width, 0.0)
    unit_prev = (PRIOR_UNIT_MOMENT + np.cumsum(unit, axis=1) - unit) / (n_prev + 1.0)
    second = unit_prev * width + mean_prev**2
    with np.errstate(divide="ignore", invalid="ignore"):
        base = mean_prev / second
        cap_up = np.where(lo < 0, CAP / -lo, np.inf)
        cap_down = np.where(hi > 0, CAP / hi, np.inf)
    lam_up = np.where(act, np.clip(base, 0.0, cap_up), 0.0)
    lam_down = np.where(act, np.clip(-base, 0.0, cap_down), 0.0)
    return lam_up, lam_down, act


class Work:
    """Reusable (rows, steps) buffers for the paired tests' passes: a chunk's arrays are written
    into the same memory chunk after chunk.  In a process whose allocator already reuses freed
    blocks of this size (any real run, after the earlier stages) this saves little: on
    data/kbp-sim F1's pairs 0.98× main's CPU, precision's 0.85× (the latter mostly from one
    logarithm per step instead of one per bettor; ``bench/pair_tests_speed.py``)."""

    def __init__(self, steps: int):
        self.steps = steps
        self._arrays: dict[tuple[str, str], np.ndarray] = {}

    def get(self, name: str, rows: int, dtype=float) -> np.ndarray:
        """The buffer ``name`` as a (rows, steps) C-contiguous array (contents undefined)."""
        key = (name, np.dtype(dtype).str)
        have = self._arrays.get(key)
        if have is None or have.shape[0] < rows:
            have = self._arrays[key] = np.empty((rows, self.steps), dtype)
        return have[:rows]


def signed_bets(d, lo, hi, active) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pair_bets` as one array: the bet on D where positive (``up``'s), minus the bet
    on −D where that is positive (``down``'s) — the two are never both positive (they stake on
    the sign of one running mean) — and the steps that count.  The same values as
    :func:`pair_bets` (``up`` = max(L, 0), ``down`` = max(−L, 0)) with half the passes."""
    d, lo, hi = (np.asarray(x, float) for x in (d, lo, hi))
    act = np.asarray(active, bool) & (hi > lo)
    d = np.array(d, float, copy=True)
    work = Work(d.shape[1])
    return bets_into(d, lo, hi, act, work).copy(), act


def bets_into(d: np.ndarray, lo: np.ndarray, hi: np.ndarray, act: np.ndarray, work: Work):
    """:func:`signed_bets` in ``work``'s buffers: ``act`` the steps that count (``active`` and
    hi > lo); ``d`` is set to 0 where they do not (in place).  Returns the bets (a buffer of
    ``work``, valid until its next use), the same values bit for bit: the same operations in
    the same order, written into reused arrays."""
    rows = d.shape[0]
    skip = np.logical_not(act, out=work.get("skip", rows, bool))
    np.copyto(d, 0.0, where=skip)
    width = np.subtract(hi, lo, out=work.get("width", rows))
    np.copyto(width, 1.0, where=skip)
    count = work.get("count", rows)  # earlier steps that count, plus the prior's (whole numbers)
    count[:, :1] = 1.0
    if d.shape[1] > 1:
        np.cumsum(act[:, :-1], axis=1, out=count[:, 1:])
        count[:, 1:] += 1.0
    mean_prev = np.cumsum(d, axis=1, out=work.get("mean", rows))
    mean_prev -= d
    mean_prev /= count  # shrunk toward 0
    unit = np.multiply(d, d, out=work.get("unit", rows))
    unit /= width  # 0 where the step does not count (d = 0, width 1)
    unit_prev = np.cumsum(unit, axis=1, out=work.get("unit_prev", rows))
    unit_prev += PRIOR_UNIT_MOMENT
    unit_prev -= unit
    unit_prev /= count
    unit_prev *= width
    second = np.multiply(mean_prev, mean_prev, out=unit)
    second += unit_prev  # the running second moment: unit_prev·width + mean_prev²
    with np.errstate(divide="ignore", invalid="ignore"):
        base = np.divide(mean_prev, second, out=mean_prev)
        cap_up = np.divide(-CAP, lo, out=count)  # CAP/−lo where lo < 0, else no cap
        np.copyto(cap_up, np.inf, where=_outside(lo, np.less, work))
        low = np.divide(-CAP, hi, out=unit_prev)  # −(−D's cap) where hi > 0, else none
        np.copyto(low, -np.inf, where=_outside(hi, np.greater, work))
    np.maximum(base, low, out=base)
    np.minimum(base, cap_up, out=base)
    np.copyto(base, 0.0, where=skip)
    return base


def _outside(x: np.ndarray, compare, work: Work) -> np.ndarray:
    """Where ``compare(x, 0)`` does not hold (a buffer of ``work``)."""
    mask = compare(x, 0.0, out=work.get("sign", x.shape[0], bool))
    return np.logical_not(mask, out=mask)


def directed_tops(bets: np.ndarray, *ds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The running-max log capitals (:func:`running_top`) of the bettor on D and of the one on
    −D from :func:`signed_bets`' ``bets``, each the least over the terms ``ds`` (every D of the
    pair, masked to the steps that count): the logarithms are taken once per term for both
    bettors (at a step only one of them stakes; the other's factor is 1 and adds 0), with the
    same sums as :func:`capital_path` of each."""
    work = Work(bets.shape[1])
    paths, sides = None, stake_sides(bets, work)
    for d in ds:
        paths = tops_into(bets, d, work, paths, sides)
    return running_top(paths[0]), running_top(paths[1])


def tops_into(bets: np.ndarray, d: np.ndarray, work: Work, paths=None, sides=None):
    """The log-capital paths (up, down) of ``bets`` on ``d`` (:func:`directed_tops`, one term)
    in ``work``'s buffers, or their least with ``paths`` (the paths of the pair's other terms,
    updated in place); ``sides``: :func:`stake_sides` of ``bets``, when already known."""
    rows = d.shape[0]
    up_side, no_down = stake_sides(bets, work) if sides is None else sides
    logs = np.multiply(bets, d, out=work.get("logs", rows))
    np.maximum(logs, -1.0 + 1e-15, out=logs)
    np.log1p(logs, out=logs)
    staked = work.get("staked", rows)  # the up bettor's logs (0 where it does not stake)
    np.copyto(staked, 0.0)
    np.copyto(staked, logs, where=up_side)
    np.copyto(logs, 0.0, where=no_down)  # the down bettor's
    if paths is None:
        up = np.cumsum(staked, axis=1, out=work.get("path_up", rows))
        return up, np.cumsum(logs, axis=1, out=work.get("path_down", rows))
    up, down = paths
    np.minimum(up, np.cumsum(staked, axis=1, out=work.get("path", rows)), out=up)
    np.minimum(down, np.cumsum(logs, axis=1, out=work.get("path", rows)), out=down)
    return up, down


def stake_sides(bets: np.ndarray, work: Work) -> tuple[np.ndarray, np.ndarray]:
    """Where the bettor on D stakes (bets > 0) and where the one on −D does not (not bets < 0),
    in ``work``'s buffers."""
    rows = bets.shape[0]
    up_side = np.greater(bets, 0.0, out=work.get("up_side", rows, bool))
    no_down = np.less(bets, 0.0, out=work.get("no_down", rows, bool))
    return up_side, np.logical_not(no_down, out=no_down)


def capital_path(lam: np.ndarray, d: np.ndarray) -> np.ndarray:
    """log Π_{s ≤ t} (1 + λ_s d_s) for every step t (rows: pairs)."""
    return np.cumsum(np.log1p(np.maximum(lam * d, -1.0 + 1e-15)), axis=1)


def running_top(path: np.ndarray) -> np.ndarray:
    """max(0, max_t path_t) per row (the log of the running maximum of a capital that starts
    at 1)."""
    if not path.shape[1]:
        return np.zeros(path.shape[0])
    return np.maximum(path.max(axis=1), 0.0)


def step_moments(d: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per row the mean of D and of D² over the steps that count, and their number."""
    d = np.where(act, d, 0.0)
    steps = act.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(steps > 0, d.sum(axis=1) / steps, 0.0)
        moment = np.where(steps > 0, (d**2).sum(axis=1) / steps, np.inf)
    return mean, moment, steps


def log_capitals(d, lo, hi, active, work: Work | None = None) -> tuple[np.ndarray, ...]:
    """Running-max log capitals of the bettors on D (``up``) and on −D (``down``) per row (P,),
    with the final running mean, second moment and step count (module docstring).  With
    ``work`` (:func:`pair_tests`' buffers) ``d`` is one of its buffers, overwritten."""
    d, lo, hi = (np.asarray(x, float) for x in (d, lo, hi))
    act = np.asarray(active, bool) & (hi > lo)
    if work is None:
        work = Work(d.shape[1])
        d = np.array(d, float, copy=True)
    bets = bets_into(d, lo, hi, act, work)  # d now 0 where the step does not count
    up, down = tops_into(bets, d, work)
    return (running_top(up), running_top(down), *step_moments(d, act))


def holm(pvalues: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down over a flat array of p-values: (rejected, adjusted p-values)."""
    N = pvalues.size
    order = np.argsort(pvalues, kind="stable")
    adjusted_sorted = np.maximum.accumulate(np.minimum(1.0, (N - np.arange(N)) * pvalues[order]))
    adjusted = np.empty(N)
    adjusted[order] = adjusted_sorted
    return adjusted <= alpha, adjusted


def transitive_closure(better: np.ndarray) -> np.ndarray:
    """``better`` closed under a > b, b > c ⇒ a > c (boolean Warshall; m matrix products at most).

    Valid for the family: on the event that every Holm rejection is true, so is every
    statement the closure adds (the order of the true values is transitive)."""
    closed = np.asarray(better, bool).copy()
    for _ in range(closed.shape[0]):
        grown = closed | ((closed.astype(np.int64) @ closed.astype(np.int64)) > 0)
        if (grown == closed).all():
            break
        closed = grown
    return closed


def pair_tests(terms: SystemTerms, ok: np.ndarray, alpha: float) -> PairTests:
    """Every pair of the systems ``ok`` (bool (m,)) tested both ways, Holm at ``alpha`` over the
    2·P one-sided hypotheses (module docstring)."""
    idx, pairs = ok_pairs(ok)
    work = Work(terms.y.shape[1])

    def part(a, b):
        return log_capitals(*_pair_terms(terms, a, b, work), work)

    out = chunked(pairs, terms.y.shape[1], part)
    return decide(pairs, out, terms.y.shape[0], idx, alpha, terms.exact)


def _pair_terms(terms: SystemTerms, a, b, work: Work) -> tuple[np.ndarray, ...]:
    """D = Y_a − Y_b of the pairs (a, b), its range [lo_a − hi_b, hi_a − lo_b] and whether both
    systems count, in ``work``'s buffers."""
    rows = a.size

    def difference(x, y, name):
        xa = np.take(x, a, axis=0, out=work.get("end_a", rows))
        return np.subtract(xa, np.take(y, b, axis=0, out=work.get("end_b", rows)),
                           out=work.get(name, rows))  # fmt: skip

    active = np.take(terms.active, a, axis=0, out=work.get("act", rows, bool))
    active &= np.take(terms.active, b, axis=0, out=work.get("act_b", rows, bool))
    return (difference(terms.y, terms.y, "d_pair"), difference(terms.lo, terms.hi, "lo"),
            difference(terms.hi, terms.lo, "hi"), active)  # fmt: skip


def ok_pairs(ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The systems ``ok`` (indices) and their pairs i < j (P, 2)."""
    idx = np.flatnonzero(ok)
    ii, jj = np.triu_indices(idx.size, 1)
    return idx, np.column_stack([idx[ii], idx[jj]]).astype(np.int64)


def chunked(pairs: np.ndarray, steps: int, part) -> list[np.ndarray]:
    """``part(a, b)`` (up, down, mean, moment, steps per pair of a chunk) over chunks of the
    pairs small enough that (pairs × steps) arrays stay under :data:`CHUNK` entries."""
    P = pairs.shape[0]
    out = [np.zeros(P) for _ in range(4)] + [np.zeros(P, np.int64)]
    from receval.progress import stage_detail

    step = max(1, CHUNK // max(steps, 1))
    for start in range(0, P, step):
        stage_detail(f"pairs {start}/{P}")
        a, b = pairs[start : start + step].T
        for k, value in enumerate(part(a, b)):
            out[k][start : start + step] = value
    return out


def decide(pairs, capitals, m: int, idx, alpha: float, exact=None, ordered=None) -> PairTests:
    """Holm at ``alpha`` over the 2·P one-sided hypotheses of ``pairs`` from their running-max
    log capitals (``capitals``: up, down, mean, moment, steps per pair), then the closure.
    ``exact`` (m,): two exact values are ordered without error; ``ordered``: (mask (P,),
    a better (P,), b better (P,)) pairs decided outside the tests (a census pair of f1)."""
    up, down, mean, moment, steps = capitals
    P = pairs.shape[0]
    better = np.zeros((m, m), bool)
    pvalues = np.full((m, m), np.nan)
    if P:
        p = np.exp(-np.concatenate([up, down]))
        rejected, adjusted = holm(p, alpha)
        a, b = pairs.T
        better[a, b], better[b, a] = rejected[:P], rejected[P:]
        if exact is not None:  # two exact values: ordered without error
            both = np.isfinite(exact[a]) & np.isfinite(exact[b])
            gap = exact[a[both]] - exact[b[both]]  # equal up to rounding: a tie
            better[a[both], b[both]] = gap > EXACT_TOLERANCE
            better[b[both], a[both]] = gap < -EXACT_TOLERANCE
        if ordered is not None:
            mask, ab, ba = ordered
            better[a[mask], b[mask]], better[b[mask], a[mask]] = ab[mask], ba[mask]
        better = transitive_closure(better)
        two_sided = np.minimum(adjusted[:P], adjusted[P:])
        pvalues[a, b], pvalues[b, a] = two_sided, two_sided
    pvalues[idx, idx] = 1.0
    return PairTests(pairs, up, down, mean, moment, steps, better, pvalues, alpha)


def correct_output_terms(task, data) -> SystemTerms:
    """n_i times the precision terms: conditional mean G_i = n_i·π_i, the system's correct
    outputs (micro precision).  ν_i = G_i/K and recall θ·ν_i with K and θ shared, so G orders
    the systems as pooled recall and recall do; the paired term n_a·Y_a − n_b·Y_b from the
    same step has mean G_a − G_b.  On gradient20's loops (8 repetitions, final look) these
    decided 109 of 190 pairs where the pool-step terms (g_a − g_b)·f/σ decided 44: the
    precision terms' control cancels most of the noise the pool terms carry."""

    terms = precision_terms(task, data, build_stream(task, data))
    n = np.asarray(data.sizes, float)
    exact = None if terms.exact is None else terms.exact * n
    return SystemTerms(terms.y * n[:, None], terms.lo * n[:, None], terms.hi * n[:, None],
                       terms.active, exact)  # fmt: skip
