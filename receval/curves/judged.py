"""TailBand stratified by an automatic judge: exact bounds on the judge's *surprises*.

A ranked list whose every item has an automatic judge score s_i ∈ [0, 1] (free, known before
any label) splits into two judge classes, g_i = 1 when s_i ≥ τ (the judge says correct) and
g_i = 0 otherwise.  The classes are fixed before any draw; they never need to be right.

Design
------
The head t_1 … t_h is labelled exhaustively (TailBand's head).  The tail R = {h+1, …, N} splits
into R_0 and R_1 (T_g = |R_g|); from each class M_g distinct ranks are drawn uniformly without
replacement, M_0 + M_1 = M_u (TailBand's uniform part), independently.  When TailBand's pool
design applies (k* = N/10 > h), each class also gets a pool: M_r,g more ranks of R_g ∩ (h, k*]
drawn among those its uniform draws missed, M_r,0 + M_r,1 ≤ M_r — by TailBand's lemma the
union is, given how many uniform class-g draws fell in (h, k*], a uniform subset of
R_g ∩ (h, k*], and the bounds below hold for it with population |R_g ∩ (h, k*]| at the grid
ranks up to k* (δ split as in TailBand: (1 − split)·δ for the uniform part, split·δ for the
pooled one).  The allocation of each part is Neyman's
for the *surprise* rates a_0 (positives among class-0 items) and a_1 (negatives among class-1
items): M_g ∝ T_g·√(a_g(1 − a_g)), at least one label per non-empty class.

The rates come from a **pilot**: after the head, m_p = ⌈M/25⌉ tail ranks drawn uniformly
without replacement from a random stream of their own (the head, the top of the list, says
little about the tail: on PPDB its precision is 1.0).  From the pilot's labels the allocation
is set and the judge design is kept only when its predicted half-width at k = N is below 0.9 ×
the plain TailBand's (:func:`judge_design`); otherwise the plain TailBand runs.  Either design
then draws M − m_p labels, independently of the pilot, so *given the choice* its draws are
still the uniform samples the bounds below need: P(miss) = Σ_c P(choice c)·P(miss | c) ≤ δ —
the choice costs no δ, only the m_p labels (which still count exactly as labelled ranks).  Design weights: each
class-g draw stands for T_g/M_g tail items (recorded in the guarantee and in ``weights``).

Bounds
------
Write S_g(k) for the surprises of class g in (h, k] (S_0: positives, S_1: negatives) and
n_g(k) = |R_g ∩ (h, k]| (known from the judge).  Then the tail yield is exactly

    C(k) − C(h) = S_0(k) + n_1(k) − S_1(k).

The number of surprises among the class-g draws in (h, k] is hypergeometric, H(T_g, S_g(k),
M_g), because those draws are a uniform M_g-subset of R_g (for the pooled part, given the
number of uniform draws in (h, k*], with R_g ∩ (h, k*] in place of R_g).  The exact one-sided bounds of
:func:`~receval.curves.tailband.hypergeometric_bounds` (⌈·⌉ of the label for the upper, ⌊·⌋
for the lower side, so merged ties v = ½ stay covered) at α = δ_part/(4G) for each class and side
at the G grid ranks of each part hold together with probability ≥ 1 − δ (union bound over the
4G statements of each part; the parts' δ add up to δ), and give

    L_0(k) + n_1(k) − U_1(k) ≤ C(k) − C(h) ≤ U_0(k) + n_1(k) − L_1(k).

A judge that agrees with the labels makes S_0 and S_1 rare, and the exact bound of a rare count
is narrow (width ∝ √(a_g) instead of √(p(1 − p))); a useless judge leaves them common and the
bound wider than the plain one — then :func:`judge_design` keeps the plain TailBand.  From the
knots on, everything is TailBand's: the knot bounds are tightened across knots, every labelled
rank counts exactly, and the yield's growth (0 or 1 per rank) carries the bounds to every rank,
so with probability ≥ 1 − δ the band holds at every rank at once, for any list and any judge
(kind ``band``), about the labels given.  The judge's scores are O(N) memory (they are given).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from receval.curves.base import CurveEstimate, Labels, exact_head

__all__ = ["JudgeDesign", "JudgeScores", "judge_design"]

_STREAM = 0x4A42  # "JB"


class JudgeScores:
    """An automatic judge's score per rank (1 … N, in [0, 1]) and the class threshold τ.

    Compared by identity (a method holding it stays hashable); ``scores[k − 1]`` belongs to
    rank k.  ``always``: stratify by the judge even when the head says the plain design is
    narrower (for studies; the guarantee holds either way).  Raises ``ValueError`` for scores
    outside [0, 1] or missing."""

    def __init__(self, scores, threshold: float = 0.5, always: bool = False) -> None:
        values = np.asarray(scores, dtype=np.float64).ravel()
        if values.size and not np.all((values >= 0) & (values <= 1)):
            raise ValueError("judge scores must lie in [0, 1] (no missing score)")
        if not 0 < threshold <= 1:
            raise ValueError("judge threshold must lie in (0, 1]")
        self.scores = values
        self.threshold = float(threshold)
        self.always = bool(always)

    def classes(self) -> np.ndarray:
        """g_i: True where the judge says correct (s_i ≥ τ)."""
        return self.scores >= self.threshold

    def plan(self, method, size: int, known: Labels) -> np.ndarray:
        """The ranks ``method`` (a TailBand holding this judge) labels after its head:
        :func:`judge_plan`."""
        return judge_plan(method, size, known)

    def estimate(self, method, size: int, known: Labels) -> CurveEstimate:
        """The band of ``method`` (a TailBand holding this judge): :func:`judge_estimate`."""
        return judge_estimate(method, size, known)


@dataclass(frozen=True)
class JudgeDesign:
    """The judge-stratified draws of one list.  Per class g (0: judged wrong, 1: judged right):
    the tail ranks R_g count ``population[g]`` and get ``draws[g]`` uniform labels, bounded at
    the ``grid`` ranks with ``delta``; when ``reach`` k* > h, R_g ∩ (h, k*] counts
    ``near[g]`` and gets ``pool[g]`` more labels, bounded (pooled with the uniform draws
    there) at the ``pool_grid`` ranks with ``delta_pool``."""

    head: int
    population: tuple[int, int]
    draws: tuple[int, int]
    grid: np.ndarray
    delta: float
    reach: int = 0
    near: tuple[int, int] = (0, 0)
    pool: tuple[int, int] = (0, 0)
    pool_grid: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    delta_pool: float = 0.0

    @property
    def weights(self) -> tuple[float, float]:
        """T_g/M_g: the tail items a uniform class-g draw stands for."""
        return tuple(t / m if m else 0.0 for t, m in zip(self.population, self.draws, strict=True))


def _split(total: int, pops: tuple[int, int], rates: tuple[float, float]) -> tuple[int, int]:
    """Neyman's allocation of ``total`` labels to the two classes (at least one per non-empty
    class when there are labels enough, never more than a class holds)."""
    spread = [t * math.sqrt(a * (1.0 - a)) for t, a in zip(pops, rates, strict=True)]
    share = spread[0] / sum(spread) if sum(spread) > 0 else pops[0] / max(sum(pops), 1)
    floor = (1 if pops[0] and total > 1 else 0, 1 if pops[1] and total > 1 else 0)
    m0 = min(pops[0], max(round(total * share), floor[0]), total - floor[1])
    m1 = min(pops[1], total - m0)
    return min(pops[0], total - m1), m1


def judge_design(method, size: int, pilot: np.ndarray, values: np.ndarray) -> JudgeDesign | None:
    """The judge design for ``method`` (a TailBand with ``judge`` and its tail labels less the
    pilot's), or None when the plain TailBand is expected to be narrower at k = N: normal
    approximations of both exact bounds, with the surprise rates and the precision of the
    ``pilot`` ranks' labels ``values`` (the pilot is drawn apart from the design's draws, so
    this choice does not touch the guarantee; see the module docstring).

    The labels are split as in TailBand's pool design (a uniform part sized to match the
    baseline at k = N, the rest pooled over (h, k*]), each part by Neyman's allocation."""
    from scipy.stats import norm

    from receval.curves.tailband import tail_design

    judge: JudgeScores = method.judge
    if judge.scores.size != size:
        raise ValueError(f"judge scores for {judge.scores.size} ranks, the list has {size}")
    base = tail_design(method, int(size), 0.5, True)
    head, tail = base.head, base.tail
    if base.uniform + base.pool == 0 or tail == 0:
        return None
    cls = judge.classes()
    pops = (int(tail - cls[head:].sum()), int(cls[head:].sum()))
    seen = cls[np.asarray(pilot, np.int64) - 1]
    v = np.asarray(values, np.float64)
    rates = (
        (float(v[~seen].sum()) + 0.5) / (float((~seen).sum()) + 1.0),
        (float((1.0 - v[seen]).sum()) + 0.5) / (float(seen.sum()) + 1.0),
    )
    draws = _split(base.uniform, pops, rates)
    d = JudgeDesign(head, pops, draws, base.grid, base.delta_uniform)
    if base.pool:
        near1 = int(cls[head : base.reach].sum())
        near = (base.reach - head - near1, near1)
        inside = tuple(m * n / t if t else 0.0 for m, n, t in zip(draws, near, pops, strict=True))
        room = tuple(max(n - math.ceil(i) - 1, 0) for n, i in zip(near, inside, strict=True))
        pool = _split(base.pool, near, rates)
        pool = (min(pool[0], room[0]), min(pool[1], room[1]))
        d = JudgeDesign(
            head, pops, draws, base.grid, base.delta_uniform,
            base.reach, near, pool, base.pool_grid, base.delta_pool,
        )  # fmt: skip
    z_judge = float(norm.isf(d.delta / (4.0 * d.grid.size)))
    z_plain = float(norm.isf(d.delta / (2.0 * d.grid.size)))

    def width(population: int, m: int, rate: float, z: float) -> float:
        if m == 0 or m >= population:
            return 0.0
        fpc = 1.0 - m / population
        return z * math.sqrt(m * rate * (1.0 - rate) * fpc) * population / m

    p = min(max(float(v.mean()) if v.size else 0.5, 0.01), 0.99)
    judged = sum(width(t, m, a, z_judge) for t, m, a in zip(pops, draws, rates, strict=True))
    plain = width(tail, base.uniform, p, z_plain)
    return d if judge.always or judged < 0.9 * plain else None


def pilot_size(method, size: int) -> int:
    """m_p = ⌈M/25⌉ uniform tail labels (at least 20, at most M/2) spent choosing the design."""
    total = method.tail_labels(size)
    return min(max(math.ceil(total / 25), 20), total // 2)


def pilot_draws(method, size: int) -> np.ndarray:
    """The pilot: m_p ranks of the tail drawn uniformly without replacement (sorted), from a
    random stream of their own."""
    head = method.head(size)
    m = pilot_size(method, size)
    if m == 0:
        return np.empty(0, np.int64)
    rng = np.random.default_rng(np.random.SeedSequence([int(method.seed), _STREAM, 3]))
    return np.sort(rng.choice(size - head, size=m, replace=False).astype(np.int64)) + head + 1


def _reduced(method, size: int):
    """The method with the pilot's labels taken off its tail labels (same seed and judge)."""
    return replace(method, labels=max(method.tail_labels(size) - pilot_size(method, size), 1))


def _head_share(known: Labels, head_ranks: np.ndarray) -> float:
    if head_ranks.size == 0 or known.missing(head_ranks).size:
        return 0.5
    return float(known.lookup(head_ranks).mean())


def _plain_draws(plain, size: int, known: Labels) -> np.ndarray:
    """The plain TailBand's tail draws (its split chosen from the exact head)."""
    head_ranks = np.arange(1, plain.head(size) + 1, dtype=np.int64)
    return plain._sampled(size, _head_share(known, head_ranks))


def judge_plan(method, size: int, known: Labels) -> np.ndarray:
    """After the head: the pilot; then the judge design's draws, or the plain TailBand's (of
    the reduced label count) when the pilot says the judge does not narrow the band."""
    pilot = pilot_draws(method, size)
    if known.missing(pilot).size:
        return pilot
    reduced = _reduced(method, size)
    d = judge_design(reduced, size, pilot, known.lookup(pilot))
    if d is not None:
        return np.unique(np.concatenate([pilot, *judge_draws(reduced, d)]))
    plain = replace(reduced, judge=None)
    return np.unique(np.concatenate([pilot, _plain_draws(plain, size, known)]))


def judge_estimate(method, size: int, known: Labels) -> CurveEstimate:
    """The band: the judge design's (:func:`judged_estimate`) or the plain TailBand's of the
    reduced label count, whose guarantee then says that the judge was not used and why."""
    pilot = pilot_draws(method, size)
    missing = known.missing(pilot).size
    if missing:
        raise ValueError(f"{missing} planned labels are missing; call plan() and label them")
    reduced = _reduced(method, size)
    d = judge_design(reduced, size, pilot, known.lookup(pilot))
    if d is None:
        plain = replace(reduced, judge=None)
        est = plain.estimate(size, known)
        head_ranks = np.arange(1, plain.head(size) + 1, dtype=np.int64)
        used = np.unique(np.concatenate([head_ranks, pilot, _plain_draws(plain, size, known)]))
        note = (
            f"; the judge's scores were not used (a pilot of {pilot.size} uniform tail labels "
            "says they would not narrow the band)"
        )
        return replace(est, guarantee=est.guarantee + note, annotations=int(used.size))
    missing = known.missing(np.concatenate(judge_draws(reduced, d))).size
    if missing:
        raise ValueError(f"{missing} planned labels are missing; call plan() and label them")
    return judged_estimate(reduced, size, d, known, pilot)


def judge_draws(method, d: JudgeDesign) -> list[np.ndarray]:
    """[class-0 uniform, class-1 uniform, class-0 pool, class-1 pool] draws: sorted ranks,
    uniform without replacement in R_g, the pools in R_g ∩ (h, k*] among the ranks the class's
    uniform draws missed (first ones of a uniformly ordered sample; TailBand's lemma)."""
    cls = method.judge.classes()
    uniform, pools = [], []
    for g in (0, 1):
        members = np.flatnonzero(cls[d.head :] == bool(g)).astype(np.int64) + d.head + 1
        m = d.draws[g]
        if m >= members.size:
            uniform.append(members)
        else:
            rng = np.random.default_rng(np.random.SeedSequence([int(method.seed), _STREAM, g]))
            uniform.append(np.sort(members[rng.choice(members.size, size=m, replace=False)]))
        if d.pool[g] == 0:
            pools.append(np.empty(0, np.int64))
            continue
        near = members[members <= d.reach]
        inside = uniform[g][uniform[g] <= d.reach]
        rng = np.random.default_rng(np.random.SeedSequence([int(method.seed), _STREAM, 2, g]))
        take = min(near.size, d.pool[g] + inside.size)
        picked = near[rng.choice(near.size, size=take, replace=False)]
        pools.append(np.sort(picked[~np.isin(picked, inside)][: d.pool[g]]))
    return uniform + pools


def _part(points, samples, populations, n1, head, alpha, known):
    """Bounds (L, U) on the tail yield C(k) − C(h) at ``points`` from one uniform sample per
    class (``samples``, of ``populations``), and per class (ranks, cumulated labels)."""
    from receval.curves.tailband import hypergeometric_bounds

    caps = ((points - head) - n1, n1)
    lo_s, hi_s, found = [], [], []
    for g in (0, 1):
        ranks = samples[g]
        values = known.lookup(ranks) if ranks.size else np.empty(0)
        surprise = values if g == 0 else 1.0 - values
        where = np.searchsorted(ranks, points, side="right")
        up = np.concatenate([[0], np.cumsum(np.ceil(surprise))])[where].astype(np.int64)
        low = np.concatenate([[0], np.cumsum(np.floor(surprise))])[where].astype(np.int64)
        if ranks.size >= populations[g]:  # the whole class is labelled (or empty): exact
            lo, hi = low, up
        else:
            cap = caps[g].astype(np.int64)
            lo, hi = hypergeometric_bounds(up, low, populations[g], ranks.size, cap, alpha)
        lo_s.append(np.asarray(lo, np.float64))
        hi_s.append(np.asarray(hi, np.float64))
        found.append((ranks, np.concatenate([[0.0], np.cumsum(values)])))
    n1 = n1.astype(np.float64)
    return lo_s[0] + n1 - hi_s[1], hi_s[0] + n1 - lo_s[1], found


def judged_estimate(
    method, size: int, d: JudgeDesign, known: Labels, pilot: np.ndarray
) -> CurveEstimate:
    """The band of the module docstring (TailBand's knots, tightening and interpolation)."""
    from receval.curves.stratband import tighten_counts, yield_between

    head = d.head
    head_ranks = np.arange(1, head + 1, dtype=np.int64)
    head_cum = np.cumsum(known.lookup(head_ranks))
    head_p = head_cum / head_ranks
    c_head = float(head_cum[-1])
    in_class1 = np.concatenate([[0], np.cumsum(method.judge.classes()[head:])])
    draws = judge_draws(method, d)
    knots = np.unique(np.concatenate([[head], d.grid, d.pool_grid])).astype(np.int64)
    lo_k = np.full(knots.size, -np.inf)
    hi_k = np.full(knots.size, np.inf)
    lo_k[0] = hi_k[0] = c_head
    parts = [(d.grid, draws[:2], d.population, d.delta)]
    if d.reach:
        inside = [
            np.sort(np.concatenate([u[u <= d.reach], p]))
            for u, p in zip(draws[:2], draws[2:], strict=True)
        ]
        parts.append((d.pool_grid, inside, d.near, d.delta_pool))
    estimates = []
    for points, samples, pops, delta in parts:
        n1 = in_class1[points - head]
        lo, hi, found = _part(points, samples, pops, n1, head, delta / (4.0 * points.size), known)
        at = np.searchsorted(knots, points)
        lo_k[at] = np.maximum(lo_k[at], c_head + lo)
        hi_k[at] = np.minimum(hi_k[at], c_head + hi)
        estimates.append((found, pops))
    lo_k, hi_k = tighten_counts(lo_k, hi_k, knots, head, known)
    x = method._steps(head, knots)
    nxt = np.append(x[1:] - 1, x[-1])
    c_lo, _ = yield_between(x, knots, lo_k, hi_k, known)
    _, c_hi = yield_between(nxt, knots, lo_k, hi_k, known)
    lower = np.clip(c_lo / nxt, 0.0, 1.0)
    upper = np.clip(c_hi / x, 0.0, 1.0)

    def point(found, pops) -> np.ndarray:
        total = np.full(x.shape, c_head)
        for (ranks, cum), population in zip(found, pops, strict=True):
            if ranks.size:
                total += population / ranks.size * cum[np.searchsorted(ranks, x, side="right")]
        return total

    estimate = point(*estimates[0])
    if d.reach:
        estimate = np.where(x <= d.reach, point(*estimates[1]), estimate)
    precision = np.clip(estimate / x, lower, upper)
    planned = np.unique(np.concatenate([head_ranks, pilot, *draws]))
    (t0, t1), (m0, m1) = d.population, d.draws
    pooled = (
        f"; {d.pool[0]} + {d.pool[1]} more drawn in the same way up to rank {d.reach} and pooled "
        f"with the uniform draws there (bounds at {d.pool_grid.size} ranks, delta "
        f"{d.delta_pool:g})"
        if d.reach
        else ""
    )
    return CurveEstimate(
        method=method.name,
        size=size,
        **exact_head(head_p, x, precision, lower, upper),
        kind="band",
        guarantee=(
            f"with probability >= {1 - method.delta:g}: lower <= precision@k <= upper at every "
            f"rank k at once, for any list and any judge, about the labels given; the tail "
            f"stratified by the judge score (threshold {method.judge.threshold:g}): {m0} of "
            f"{t0} judged-wrong and {m1} of {t1} judged-right ranks drawn uniformly without "
            f"replacement (design weights {d.weights[0]:.4g}, {d.weights[1]:.4g}; exact "
            f"hypergeometric bounds on the judge's surprises at {d.grid.size} grid ranks, delta "
            f"{d.delta:g}){pooled}; deterministic interpolation of the yield between them; "
            f"exact for ranks <= {head}"
        ),
        queried=knots[1:].copy(),
        annotations=int(planned.size),
        exact_prefix=int(head),
    )
