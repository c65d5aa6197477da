"""Betting confidence sequences for means of bounded terms with predictable ranges.

For every candidate value μ of a mean, a bettor starts with capital 1 and at step k stakes a
predictable fraction λ_k on the term Y_k(μ) = u_k − μ·v_k, whose conditional mean is 0 when μ is
the truth.  The capital K_t(μ) = Π_{k ≤ t} (1 + λ_k Y_k(μ)) is then a nonnegative martingale, and
by Ville's inequality P(sup_t K_t(μ_true) ≥ 1/α) ≤ α: the set of μ whose capital never reached
1/α is a confidence *sequence* — it covers μ_true at every step simultaneously, so it stays
valid under optional stopping, optional continuation and any data-dependent choice of the next
draws (Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting",
JRSSB 2024, §4–5; Howard, Ramdas, McAuliffe & Sekhon, Ann. Stat. 2021).

Two one-sided bettors at α/2 each give the interval: one bets λ ≥ 0 on Y (its capital grows when
the mean exceeds μ, so rejecting rules out μ below the truth: the lower end), one bets on −Y (the
upper end).  Bets are the predictable plug-in of WSR (2024, eq. 26 with their variance
estimate, eq. 27): λ_t = sqrt(2 log(2/α) / (σ̂²_{t−1} t log(1 + t))), independent of μ, then
truncated so the capital stays positive for every value the term can take: λ ≤ c / (−min Y_k(μ))
for the lower bettor, λ ≤ c / max Y_k(μ) for the upper one (c = 3/4).  The ranges may differ
from step to step as long as they are known before the draw (importance weights of an adaptive
design).  With λ independent of μ each capital is monotone in μ (each factor is), so each end is
found by bisection, and the running intersection over steps is the rejection of μ by the
running maximum of the capital — taken at the ends of blocks of :data:`BLOCK` steps and at the
last step, which rejects no more than the maximum over every step (Ville's bound holds for any
set of times), so the sequence stays valid at every step.  The bisection is replayed with
guessed decisions (secant steps on the capitals evaluated so far) and only the values it ends
between are evaluated (:func:`_guided_chunk`): where they confirm the guess, monotonicity makes
every guessed decision the capitals' own, so the ends are the bisection's bit for bit with a
few evaluations instead of one per step.  Several bettors' capitals can be
averaged (:class:`MixedStreams`): the average of test martingales is one.

Terms of the form u − μ v cover means (v = 1) and ratios of means (u = g·f/q, v = f/q: the test
of A − r·B in the ratio's inversion).  The bounds are exact (non-asymptotic) for any stopping rule.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from dataclasses import dataclass

import numpy as np

#: truncation of the bets (WSR 2024 use 1/2 or 3/4): the capital loses at most this share per
#: step; 3/4 lets the bettor against a too-high mean stake more when the range of importance
#: weights is far above their spread (kbp-sim precision: 1.62 -> 1.41 x the normal width)
CAP = 0.75
#: the running maximum of a capital is taken at the ends of blocks of this many steps (and at
#: the last step): valid, at most a block's drift wider, and far cheaper (:func:`_block_path`)
BLOCK = 4
#: threads the bisections' chunks of streams run on (numpy releases the GIL in array operations)
WORKERS = max(1, min(4, os.cpu_count() or 1))
#: entries of work (levels × streams × steps) from which the streams are split over the workers;
#: the one-stream F1 / recall ends bisect one θ cell at a time (70 streams × 10,500 steps on
#: data/kbp-sim): at 1,000,000 they ran on one thread (score --intervals anytime 25.5 s there),
#: at 200,000 on both (16.4 s), the same numbers
PARALLEL_WORK = 200_000
#: entries of the (levels × streams × steps) arrays one bisection step works on at once: small
#: enough that its ~10 passes over the work arrays stay in the processor's cache (data/kbp-sim,
#: 70 streams × 10,500 steps: 12.7 ms per capital evaluation at once, 9.5 ms in chunks of 12
#: streams; 4,000,000 before)
CHUNK = 131_072


@dataclass(frozen=True)
class BettingStreams:
    """S streams of K steps (arrays (S, K)): the term Y_k(μ) = u_k − μ v_k with its predictable
    range [lo0 − lo1·μ, hi0 − hi1·μ], and whether step k counts for the stream (``active``; an
    inactive step bets nothing, which is a predictable decision and keeps the martingale)."""

    u: np.ndarray
    v: np.ndarray
    lo0: np.ndarray
    lo1: np.ndarray
    hi0: np.ndarray
    hi1: np.ndarray
    active: np.ndarray
    #: the truncation of the bets (:data:`CAP`); any value below 1 keeps the capital positive
    cap: float = CAP
    #: whether every step counts (None: not known yet; :attr:`dense` finds out once)
    all_active: bool | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def dense(self) -> bool:
        """Whether every step of every stream counts, found once per streams (each capital
        evaluation asks; the streams' rows cut by :meth:`take` inherit it)."""
        if self.all_active is None:
            object.__setattr__(self, "all_active", bool(np.asarray(self.active, bool).all()))
        return bool(self.all_active)

    @classmethod
    def of_means(cls, x: np.ndarray, high: np.ndarray | float, active=None) -> BettingStreams:
        """Streams of terms x_k ∈ [0, high_k] with a constant mean (v = 1)."""
        x = np.atleast_2d(np.asarray(x, float))
        high = np.broadcast_to(np.asarray(high, float), x.shape)
        zero, one = np.zeros_like(x), np.ones_like(x)
        act = np.ones(x.shape, bool) if active is None else np.broadcast_to(active, x.shape)
        return cls(x, one, zero, one, high, one, act)

    @classmethod
    def of_ratios(cls, u: np.ndarray, v: np.ndarray, high: np.ndarray, active) -> BettingStreams:
        """Streams for a ratio Σu/Σv of means with 0 ≤ u ≤ v ≤ high_k: Y = u − r v ranges over
        [−r·high, (1 − r)·high]."""
        u = np.atleast_2d(np.asarray(u, float))
        high = np.broadcast_to(np.asarray(high, float), u.shape)
        zero = np.zeros_like(u)
        return cls(u, np.broadcast_to(v, u.shape), zero, high, high, high, active)

    @property
    def shape(self) -> tuple[int, int]:
        return self.u.shape

    def take(self, rows: slice | np.ndarray) -> BettingStreams:
        """The streams ``rows`` (a slice: views; indices: copies, except of arrays whose rows
        are all the same — a broadcast constant stays a broadcast, :func:`_rows`)."""
        shape = self.u.shape
        arrays = (self.u, self.v, self.lo0, self.lo1, self.hi0, self.hi1, self.active)
        # the rows of dense streams are dense; those of others are treated as not (a few
        # inactive steps are masked where none are: the same capitals)
        return type(self)(*(_rows(a, shape, rows) for a in arrays), cap=self.cap,
                          all_active=self.dense)  # fmt: skip

    def log_path(self, bets, mu, side: int, running: bool) -> np.ndarray:
        """The log-capital path :func:`log_capital` reads (:func:`_log_path`); a subclass
        with another capital (monotone in μ) overrides it, and every search of this module
        (plain, guided, chunked) then finds that capital's ends."""
        return _log_path(self, bets, mu, side, running)


class FixedBetStreams(BettingStreams):
    """Streams whose range on one side does not move with μ (hi1 = 0 for the upper bettor,
    lo1 = 0 for the lower), so the truncated bet min(b, cap/room) does not either: it is
    computed once (:meth:`of`) and passed as the ``bets`` (recall's s-stream, whose k ≥ 0 has
    its bound in lo1, bets its upper side so: :func:`receval.estimators.anytime.sequences._lazy_over_s`).
    The capital is :func:`_log_path`'s bit for bit (the room is hi0 − μ·0 = hi0 exactly), five
    passes over the steps fewer.  Only for the side it was made for."""

    @classmethod
    def of(cls, streams: BettingStreams, bets: np.ndarray, side: int):
        """(streams, λ) for ``side``, or None where that side's range moves with μ (or the
        streams have a capital of their own: a subclass)."""
        if type(streams) is not BettingStreams:
            return None
        slope, room = (streams.hi1, streams.hi0) if side < 0 else (streams.lo1, streams.lo0)
        if np.any(np.asarray(slope) != 0):
            return None
        room = np.asarray(room, float) if side < 0 else -np.asarray(room, float)
        lam = np.minimum(streams.cap / np.maximum(room, 1e-300), bets)
        fields = {f.name: getattr(streams, f.name) for f in dataclasses.fields(BettingStreams)}
        return cls(**fields), lam

    def log_path(self, bets, mu, side: int, running: bool) -> np.ndarray:
        """:func:`_log_path` with ``bets`` the truncated bets λ of :meth:`of`."""
        mu = np.asarray(mu, float)[..., None]
        y, work = _buffers(np.broadcast_shapes(mu.shape, self.u.shape))
        np.multiply(mu, self.v, out=y)
        if side > 0:
            np.subtract(self.u, y, out=y)  # Y = u − μv
        else:
            np.subtract(y, self.u, out=y)  # −Y
        np.multiply(bets, y, out=y)
        return _factor_path(self, y, work, running)


def _rows(a, shape: tuple[int, int], rows) -> np.ndarray:
    """``a`` broadcast to ``shape``, rows ``rows``; an array whose rows are one row repeated
    (stride 0: e.g. ``np.broadcast_to`` of a step vector) is cut without copying it."""
    a = np.asarray(a) if np.shape(a) == shape else np.broadcast_to(a, shape)
    if isinstance(rows, slice) or a.strides[0] != 0:
        return a[rows]
    return np.broadcast_to(a[0], (len(rows), shape[1]))


@dataclass(frozen=True)
class MixedStreams:
    """Several bettors on the same parameter whose capitals are averaged: the average of test
    martingales (same draws, same filtration) is one, so Ville's inequality holds for it, and
    when every part's capital is monotone in μ in the same direction so is the average — the
    ends are found by the same bisection.  Against the best part it costs at most log(parts)
    in log-capital, and it can do better than each where they win on different draws.  The
    bets of a mixture are (S, parts, K): every part's own, :func:`plugin_bets`."""

    parts: tuple[BettingStreams, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return self.parts[0].shape

    @property
    def active(self) -> np.ndarray:
        return self.parts[0].active

    def take(self, rows: slice) -> MixedStreams:
        """The streams ``rows`` of every part."""
        return MixedStreams(tuple(p.take(rows) for p in self.parts))


def plugin_bets(
    streams: BettingStreams | MixedStreams,
    alpha: float,
    prior_mean: np.ndarray | float = 0.5,
    horizon: np.ndarray | None = None,
    prior_scale: np.ndarray | float | None = None,
) -> np.ndarray:
    """Predictable plug-in bet sizes λ̃ (S, K) before truncation (WSR 2024, eqs. 26–27).

    σ̂²_{t} = (σ₀² + Σ_{k ≤ t} (Y_k(μ̂_{k−1}))²)/(t + 1) with μ̂_k = (μ₀ + Σu)/(1 + Σv) the
    running estimate (prior μ₀ = ``prior_mean``) and σ₀² = (first range)²/4, the largest variance
    the range allows, or, with ``prior_scale`` s (a guess of E|v|·mean, e.g. 1/2 for a precision),
    σ₀² = (first range)·s/4 — the variance bound of a term in [0, range] with mean s/… —, much
    smaller for importance-weighted terms whose range is far above their spread, and the running
    variance is then kept per unit of the step's range (a term in [0, c] with mean μ has
    variance ≤ cμ, so the variance of such terms scales with their range); t counts the active
    steps.  Every entry uses only earlier steps, so the bets are predictable.

    With ``horizon`` (K,) or (S, K) — a number known before step k, e.g. the draws of every sample
    round started so far — the bet is tuned for that many steps instead,
    λ_k = sqrt(2 log(2/α) / (σ̂²_{k−1} H_k)) (WSR 2024, eq. 24, the fixed-horizon choice): the
    sequence is then tightest at the end of the rounds drawn so far and stays valid at every step.
    A :class:`MixedStreams` gets every part's bets, stacked (S, parts, K).
    """
    if isinstance(streams, MixedStreams):
        args = (alpha, prior_mean, horizon, prior_scale)
        return np.stack([plugin_bets(p, *args) for p in streams.parts], axis=1)
    u = np.where(streams.active, streams.u, 0.0)
    v = np.where(streams.active, streams.v, 0.0)
    S, K = u.shape
    mu0 = np.broadcast_to(np.asarray(prior_mean, float), (S,))[:, None]
    t = np.cumsum(streams.active, axis=1)  # active steps up to and including k
    # the passes below work in place (the same operations as the formulas in the comments,
    # operands of + and · swapped only: the same floats, fewer fresh (S, K) arrays)
    dev = _running_deviation(u, v, mu0, np.asarray(streams.active, bool))
    width = (streams.hi0 - streams.hi1 * mu0) - (streams.lo0 - streams.lo1 * mu0)
    first = np.argmax(streams.active, axis=1)
    width0 = np.take_along_axis(np.asarray(width, float), first[:, None], axis=1)
    if prior_scale is None:
        sigma0 = (width0 / 2.0) ** 2
    else:
        scale = np.broadcast_to(np.asarray(prior_scale, float), (S,))[:, None]
        sigma0 = np.minimum((width0 / 2.0) ** 2, width0 * scale / 4.0)
    sigma0 = np.maximum(sigma0, 1e-12)
    unit = np.square(dev, out=dev)
    if prior_scale is None:  # (σ₀² + Σ_{j≤k} dev² − dev²) / max(t, 1)
        var_prev = _before(unit, sigma0)
        var_prev /= np.maximum(t, 1)
    else:
        # importance-weighted terms: their variance grows with their (predictable) range, so
        # the running variance is kept per unit of range and scaled by the step's range:
        # (σ₀²/w₀ + Σ_{j≤k} unit − unit) / max(t, 1) · w, unit = dev²/w
        w = np.where(streams.active & (width > 0), width, 1.0)
        np.divide(unit, w, out=unit)
        var_prev = _before(unit, sigma0 / width0)
        var_prev /= np.maximum(t, 1)
        var_prev *= w
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = t * np.log1p(t) if horizon is None else np.broadcast_to(horizon, (S, K))
        var_prev *= scale  # λ = sqrt(2 log(2/α) / (var_prev · scale))
        lam = np.sqrt(np.divide(2.0 * np.log(2.0 / alpha), var_prev, out=var_prev), out=var_prev)
    return np.where(streams.active & (t > 0), lam, 0.0)


def _running_deviation(u, v, mu0, active) -> np.ndarray:
    """u − μ̂_{k−1}·v (0 where the step does not count), μ̂_{k−1} = (μ₀ + Σ_{j<k} u)/(1 + Σ_{j<k} v)
    (:func:`plugin_bets`), in one fresh (S, K) array and one buffer."""
    cum_u = np.cumsum(u, axis=1)
    cum_u -= u  # before k
    cum_v = np.cumsum(v, axis=1)
    cum_v -= v
    np.add(cum_u, mu0, out=cum_u)
    np.add(cum_v, 1.0, out=cum_v)
    mu_prev = np.divide(cum_u, cum_v, out=cum_u)
    np.multiply(mu_prev, v, out=mu_prev)
    dev = np.subtract(u, mu_prev, out=mu_prev)
    np.copyto(dev, 0.0, where=~active)
    return dev


def _before(x: np.ndarray, start) -> np.ndarray:
    """start + Σ_{j≤k} x − x_k (a new array), as (start + cumsum) − x."""
    out = np.cumsum(x, axis=1)
    np.add(out, start, out=out)
    out -= x
    return out


def sup_log_capital(
    streams: BettingStreams, bets: np.ndarray, mu: np.ndarray, side: int
) -> np.ndarray:
    """max over steps of log K_t(μ) for each stream (S,) at candidate values ``mu`` (S,) or
    (A, S) (then (A, S)): ``side`` +1 bets on Y (rejects μ below the mean), −1 on −Y."""
    return log_capital(streams, bets, mu, side, running=True)


def log_capital(
    streams: BettingStreams, bets: np.ndarray, mu: np.ndarray, side: int, running: bool
) -> np.ndarray:
    """log K_t(μ) after the last step (``running`` False) or its maximum over steps, the
    starting capital 1 included (``running`` True); arguments as :func:`sup_log_capital`.
    A :class:`MixedStreams`' capital is the average of its parts' (log-sum-exp of their paths,
    then the maximum).  The maximum is over the ends of blocks of :data:`BLOCK` steps and the
    last step (:func:`_block_path`)."""
    if isinstance(streams, MixedStreams):
        n = len(streams.parts)
        path = streams.parts[0].log_path(bets[:, 0], mu, side, running)
        for j, part in enumerate(streams.parts[1:], start=1):
            np.logaddexp(path, part.log_path(bets[:, j], mu, side, running), out=path)
        path -= np.log(n)
    else:
        path = streams.log_path(bets, mu, side, running)
    if not running:
        return path
    return np.maximum(path.max(axis=-1), 0.0)


def _log_path(streams: BettingStreams, bets, mu, side: int, running: bool) -> np.ndarray:
    """log K_t(μ) at the ends of blocks (``running``; (..., S, ⌈K/BLOCK⌉), :func:`_block_path`)
    or after the last step (..., S).  Works in place on two (..., S, K) work buffers kept per
    thread (:func:`_buffers`): this is the inner loop of every bisection.  The upper bettor's
    term is formed as μv − u, the exact negation of u − μv, so it needs no extra pass.  The
    factors 1 + λY are multiplied within each block and the product logged once
    (:func:`_block_log`): a quarter of the logarithms (the log1p of every step was the
    costliest pass) for the same sums up to ~1e-16 per block, so a decision against a level
    moves only where a capital is that close to it (data/kbp-sim: outputs byte-identical)."""
    mu = np.asarray(mu, float)[..., None]
    y, room = _buffers(np.broadcast_shapes(mu.shape, streams.u.shape))
    np.multiply(mu, streams.v, out=y)
    if side > 0:
        np.subtract(streams.u, y, out=y)  # Y = u − μv
        np.multiply(mu, streams.lo1, out=room)
        np.subtract(room, streams.lo0, out=room)  # −min Y
    else:
        np.subtract(y, streams.u, out=y)  # −Y
        np.multiply(mu, streams.hi1, out=room)
        np.subtract(streams.hi0, room, out=room)  # max Y
    # the bet: min(plug-in, cap/room), no truncation where the range allows no loss (room ≤ 0)
    np.maximum(room, 1e-300, out=room)  # no room to lose (≤ 0): a cap far above any bet
    np.divide(streams.cap, room, out=room)
    np.minimum(room, bets, out=room)
    np.multiply(room, y, out=y)
    return _factor_path(streams, y, room, running)


def _factor_path(streams, y: np.ndarray, work: np.ndarray, running: bool) -> np.ndarray:
    """:func:`_log_path` from the steps' λY in ``y`` (..., S, K; overwritten, as ``work``)."""
    np.maximum(y, -1.0 + 1e-15, out=y)
    np.add(y, 1.0, out=y)  # the factor 1 + λY of the capital
    if not streams.dense:
        np.copyto(y, 1.0, where=~np.asarray(streams.active, bool))
    blocks = _block_log(y, work)
    if not np.isfinite(blocks).all():  # a block's product left the floats: step by step
        np.log(y, out=y)
        return _block_path(y) if running else y.sum(axis=-1)
    return np.cumsum(blocks, axis=-1) if running else blocks.sum(axis=-1)


def _block_log(factor: np.ndarray, work: np.ndarray) -> np.ndarray:
    """log of the product of ``factor`` over each block of :data:`BLOCK` steps (and the last,
    shorter one) (..., ⌈K/BLOCK⌉): one logarithm per block instead of one per step (the sum of
    the steps' logarithms up to rounding, ~1e-16 per block).  ``work``: a buffer of the
    factors' shape."""
    K = factor.shape[-1]
    whole = K - K % BLOCK
    n = whole // BLOCK
    prod = work.reshape(-1)[: factor[..., 0].size * (n + (whole < K))]
    prod = prod.reshape(*factor.shape[:-1], n + (whole < K))
    head = prod[..., :n]
    with np.errstate(over="ignore", under="ignore"):  # the caller checks the logs are finite
        np.multiply(factor[..., 0:whole:BLOCK], factor[..., 1:whole:BLOCK], out=head)
        for j in range(2, BLOCK):
            np.multiply(head, factor[..., j:whole:BLOCK], out=head)
        if whole < K:
            np.prod(factor[..., whole:], axis=-1, out=prod[..., n])
    with np.errstate(divide="ignore"):
        return np.log(prod)


_LOCAL = threading.local()


def _buffers(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Two work arrays of ``shape`` for :func:`_log_path`, views of buffers kept per thread and
    grown as needed (fresh arrays of this size on every capital evaluation cost a third of it)."""
    size = int(np.prod(shape))
    held = getattr(_LOCAL, "buffers", None)
    if held is None or held[0].size < size:
        held = (np.empty(size), np.empty(size))
        _LOCAL.buffers = held
    return held[0][:size].reshape(shape), held[1][:size].reshape(shape)


def _block_path(step: np.ndarray) -> np.ndarray:
    """The path Σ_{k ≤ t} step_k at the ends of blocks of :data:`BLOCK` steps and at the last
    step (..., ⌈K/BLOCK⌉): block sums, then their running sum.  The running maximum over these
    steps only is at most the one over every step, so a capital that reaches a level here
    reaches it in the full sequence too: rejecting less, the sequence stays valid at every
    step (Ville's bound holds for any set of times) and is at most a block's drift wider."""
    K = step.shape[-1]
    whole = K - K % BLOCK
    blocks = step[..., :whole].reshape(*step.shape[:-1], whole // BLOCK, BLOCK)
    sums = blocks @ np.ones(BLOCK)  # a matrix product: far faster than .sum over a short axis
    if whole < K:
        sums = np.concatenate([sums, step[..., whole:].sum(axis=-1, keepdims=True)], axis=-1)
    return np.cumsum(sums, axis=-1)


def rejected(
    streams: BettingStreams, bets: np.ndarray, mu: np.ndarray, alpha: float | np.ndarray
) -> np.ndarray:
    """Whether the two-sided sequence at level α rejects ``mu`` at some step (S,)."""
    level = np.log(2.0 / np.asarray(alpha, float))
    low = sup_log_capital(streams, bets, mu, +1) >= level
    high = sup_log_capital(streams, bets, mu, -1) >= level
    return low | high


def confidence_bounds(
    streams: BettingStreams,
    alphas: np.ndarray | list[float],
    search: tuple[float, float] | tuple[np.ndarray, np.ndarray] = (0.0, 1.0),
    *,
    alpha_bets: float = 0.05,
    prior_mean: np.ndarray | float = 0.5,
    horizon: np.ndarray | None = None,
    prior_scale: np.ndarray | float | None = None,
    iterations: int = 40,
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper ends (A, S) of the two-sided confidence sequence of every stream at every
    level α in ``alphas``, after the last step, intersected over all steps.

    Each end is the last value the one-sided bettor (at α/2) rejects, found by bisection inside
    ``search`` (the parameter's possible range); a rejected value is reported, so the ends are
    conservative by at most the bisection's resolution, never anti-conservative.  A stream with
    no active step gets the whole search range.  Valid at every step and under any stopping rule
    (module docstring); the bets are tuned for ``alpha_bets`` (and ``horizon``:
    :func:`plugin_bets`).
    """
    alphas = np.atleast_1d(np.asarray(alphas, float))
    S = streams.shape[0]
    bets = plugin_bets(streams, alpha_bets, prior_mean, horizon, prior_scale)
    lo_s = np.broadcast_to(np.asarray(search[0], float), (S,))
    hi_s = np.broadcast_to(np.asarray(search[1], float), (S,))
    # one_sided_ends takes the streams in chunks (memory) and spreads them over the workers
    return _bisect(streams, bets, alphas, lo_s, hi_s, iterations)


def _parts(streams) -> int:
    """How many bettors' work arrays one capital needs (a mixture's parts, else 1)."""
    return len(streams.parts) if isinstance(streams, MixedStreams) else 1


def _bisect(streams, bets, alphas, lo_s, hi_s, iterations):
    """Both ends (A, S) by bisection on the monotone capitals (see :func:`confidence_bounds`),
    the guided search started from :func:`_normal_guess` (the same ends, fewer capitals)."""
    A, S = alphas.size, streams.shape[0]
    level = np.log(2.0 / alphas)[:, None] * np.ones((A, S))
    search = (lo_s, hi_s)

    def end(side: int) -> np.ndarray:
        guess = _normal_guess(streams, alphas, search, side)
        return one_sided_ends(streams, bets, level, side, search, iterations, guess=guess)

    lower, upper = end(+1), end(-1)
    return lower, np.maximum(upper, lower)


#: where :func:`_normal_guess` puts each end, in normal standard errors from the point (side
#: +1 the lower end): the betting ends on data/kbp-sim lie a median 1.23 (precision) and 1.11
#: (pooled recall) of them below the point, 1.92 and 1.59 above (their capitals are tuned to
#: the horizon and truncated: skewed); a guess moves only the number of capital evaluations
GUESS_WIDTH = {+1: 1.2, -1: 1.7}


def _normal_guess(streams, alphas: np.ndarray, search, side: int) -> np.ndarray | None:
    """A guess (A, S) of ``side``'s ends for the guided search (:func:`_guided_chunk`), which
    then finds the bisection's ends bit for bit with about half the capital evaluations
    (data/kbp-sim's precision and pooled-recall sequences: 12 per end -> 6): the point
    Σu/Σv ∓ :data:`GUESS_WIDTH`·z_{1−α/2}·SE, SE = sqrt(Σ(u − μ̂v)²)/Σv over the counted
    steps, inside ``search``; the range's middle where the point is not finite.  None for a
    mixture (no single term)."""
    if not isinstance(streams, BettingStreams):
        return None
    from statistics import NormalDist

    act = np.asarray(streams.active, bool)
    u = np.where(act, streams.u, 0.0)
    v = np.where(act, streams.v, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        total = v.sum(axis=1)
        point = u.sum(axis=1) / total
        se = np.sqrt(np.square(u - point[:, None] * v).sum(axis=1)) / total
    z = np.array([NormalDist().inv_cdf(1.0 - a / 2.0) for a in alphas])[:, None]
    lo, hi = search
    guess = np.clip(point[None, :] - side * GUESS_WIDTH[side] * z * se[None, :], lo, hi)
    return np.where(np.isfinite(guess), guess, (np.asarray(lo) + np.asarray(hi)) / 2.0)


def one_sided_ends(
    streams, bets, level, side, search, iterations, running: bool = True, guess=None
) -> np.ndarray:
    """The end (A, S) that the one-sided bettor ``side`` leaves at the log-levels ``level``
    (A, S): side +1 the lower end (its running capital is decreasing in μ, the rejected set is
    {μ ≤ L}), −1 the upper end.  The reported value is a rejected one (or the range end where
    nothing is rejected; the other range end where everything is), so conservative by at most
    the resolution (search range / 2^iterations).  ``running`` False: the capital after the
    last step instead of its running maximum (:func:`log_capital`).  Streams are taken in
    chunks so the (levels × streams × steps) work arrays stay near :data:`CHUNK` entries.
    ``guess`` (A, S): a guess of the ends; the same ends are found with fewer capital
    evaluations when it is close (:func:`_guided_chunk`)."""
    A, S = level.shape
    if guess is not None:
        guess = np.broadcast_to(np.asarray(guess, float), (A, S))
    work = A * streams.shape[1] * _parts(streams)
    step = max(1, CHUNK // max(work, 1))
    if work * S >= PARALLEL_WORK:  # at least one chunk per worker
        step = min(step, -(-S // WORKERS))
    if step >= S:
        return _one_sided_chunk(streams, bets, level, side, search, iterations, running, guess)
    lo_s, hi_s = (np.broadcast_to(np.asarray(e, float), (S,)) for e in search)
    out = np.empty((A, S))

    def chunk(start: int) -> None:
        rows = slice(start, min(start + step, S))
        near = None if guess is None else guess[:, rows]
        out[:, rows] = _one_sided_chunk(streams.take(rows), bets[rows], level[:, rows], side,
                                        (lo_s[rows], hi_s[rows]), iterations, running,
                                        near)  # fmt: skip

    _run_chunks(chunk, range(0, S, step))
    return out


def bracketed_ends(
    streams, bets, level, side, near, span, iterations, guess=None, crossing: bool = False
):
    """:func:`one_sided_ends` on (0, 1) at the resolution 2^-``iterations``, searched first in
    the bracket ``near`` ± ``span`` (S,) (e.g. the end at a neighbouring θ), with fewer
    bisection steps for the same resolution; the streams whose end is outside the bracket are
    searched again over the whole range.  ``level`` (1, S).  With ``guess`` (S,), a guess of
    the ends, the same ends are found with fewer capital evaluations (:func:`_guided_bracket`).
    ``crossing``: also return where each capital crosses its level, estimated between the
    two values the search ended between (regula falsi on their capitals; the end itself where
    the guided search did not end): finer than the resolution, a better guess for a
    neighbour's end than the end."""
    lo = np.clip(np.asarray(near, float) - span, 0.0, 1.0)
    hi = np.clip(np.asarray(near, float) + span, 0.0, 1.0)
    inner = max(1, iterations - int(np.floor(np.log2(1.0 / (2.0 * span)))))
    if guess is None or min(inner, iterations) < GUIDE_MIN // 2:
        out = _bracketed_plain(streams, bets, level, side, (lo, hi), (inner, iterations))
        return (out, out.copy()) if crossing else out
    out, done, cross = _guided_bracket(
        streams, bets, level, side, (lo, hi), (inner, iterations), guess
    )
    rows = np.flatnonzero(~done)
    if rows.size:
        part = streams.take(rows)
        out[rows] = _bracketed_plain(part, bets[rows], level[:, rows], side,
                                     (lo[rows], hi[rows]), (inner, iterations))  # fmt: skip
    if not crossing:
        return out
    return out, np.where(done & np.isfinite(cross), cross, out)


def _bracketed_plain(streams, bets, level, side, bracket, steps) -> np.ndarray:
    """:func:`bracketed_ends` evaluating the bracket's ends first."""
    S = level.shape[1]
    lo, hi = bracket
    inner, iterations = steps
    a, b = (lo, hi) if side > 0 else (hi, lo)
    at_a = log_capital(streams, bets, a[None, :], side, True)[0] >= level[0]
    at_b = log_capital(streams, bets, b[None, :], side, True)[0] >= level[0]
    # a must be rejected (or the range end), b not (or the range end)
    edge_a = (a == 0.0) if side > 0 else (a == 1.0)
    edge_b = (b == 1.0) if side > 0 else (b == 0.0)
    inside = (at_a | edge_a) & (~at_b | edge_b) & ~(edge_a & ~at_a) & ~(edge_b & at_b)
    out = np.empty(S)
    rows = np.flatnonzero(inside)
    if rows.size:
        out[rows] = _one_sided_rows(streams, bets, level, side, (lo, hi), inner, rows)
    rest = np.flatnonzero(~inside)
    if rest.size:
        full = (np.zeros(S), np.ones(S))
        out[rest] = _one_sided_rows(streams, bets, level, side, full, iterations, rest)
    return out


def _one_sided_rows(streams, bets, level, side, search, iterations, rows) -> np.ndarray:
    """:func:`one_sided_ends` of the streams ``rows`` (one level)."""
    part = streams if rows.size == level.shape[1] else streams.take(rows)
    lo, hi = (np.asarray(e, float)[rows] for e in search)
    return one_sided_ends(part, bets[rows], level[:, rows], side, (lo, hi), iterations)[0]


def _run_chunks(chunk, starts) -> None:
    """``chunk(start)`` for every start, on :data:`WORKERS` threads (numpy's array operations
    release the GIL, and every chunk writes its own columns).  The threads are kept between
    calls (:func:`_pool`): their work buffers (:func:`_buffers`) live as long as they do.  A
    chunk that splits its own work again runs those parts on its thread (waiting on the pool
    from inside it could leave every worker waiting)."""
    starts = list(starts)
    nested = threading.current_thread().name.startswith(_POOL_NAME)  # a chunk's own chunks
    if WORKERS == 1 or len(starts) == 1 or nested:
        for start in starts:
            chunk(start)
        return
    list(_pool().map(chunk, starts))


_POOL: list = []
_POOL_NAME = "receval-betting"


def _pool():
    """The module's thread pool of :data:`WORKERS` threads, started on first use."""
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor

        _POOL.append(ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix=_POOL_NAME))
    return _POOL[0]


def _one_sided_chunk(
    streams, bets, level, side, search, iterations, running, guess=None
) -> np.ndarray:
    """:func:`one_sided_ends` on streams whose work arrays fit in memory at once: the guided
    search (:func:`_guided_chunk`, from ``guess`` if given) where the bisection is long enough
    to gain from it."""
    if iterations < GUIDE_MIN:
        return _bisected_chunk(streams, bets, level, side, search, iterations, running)
    return _guided_chunk(streams, bets, level, side, search, iterations, running, guess)


def _bisected_chunk(streams, bets, level, side, search, iterations, running) -> np.ndarray:
    """:func:`one_sided_ends` by plain bisection on streams whose work arrays fit in memory."""

    def capital(mu: np.ndarray) -> np.ndarray:
        return log_capital(streams, bets, mu, side, running)

    return bisected_ends(capital, level, side, search, iterations)


def bisected_ends(capital, level: np.ndarray, side: int, search, iterations: int) -> np.ndarray:
    """The end (A, S) of the values ``capital`` (a log-capital of candidate values (A, S),
    monotone in them) rejects at log-levels ``level`` (A, S), by ``iterations`` bisection steps
    inside ``search`` = (lower, upper) (scalars or (S,)): side +1 the lower end, −1 the upper.
    A rejected value is reported, or the range end where nothing is rejected, the other where
    everything is."""
    lo_s, hi_s = search
    A, S = level.shape
    # side +1: the rejected set is {μ ≤ L}; a stays rejected (or the range end), b not
    a = np.broadcast_to(lo_s if side > 0 else hi_s, (A, S)).copy()
    b = np.broadcast_to(hi_s if side > 0 else lo_s, (A, S)).copy()
    none = capital(a) < level  # the range end itself stands
    far = capital(b) >= level  # every value rejected
    for _ in range(iterations):
        mid = (a + b) / 2.0
        rej = capital(mid) >= level
        a = np.where(rej, mid, a)
        b = np.where(rej, b, mid)
    end = np.where(none, np.broadcast_to(lo_s if side > 0 else hi_s, (A, S)), a)
    return np.where(far, b, end)


#: rounds of the guided search (:func:`_guided_chunk`) before an end falls back to bisection,
#: and the bisection steps from which it is used
GUIDE_ROUNDS = 4
GUIDE_MIN = 8


def _replay(a, b, iterations, guess, known):
    """The bisection of :func:`_one_sided_chunk` from (a, b), in side coordinates (x·side: the
    rejected set is {x ≤ L}), with the oracle "rejected" where the value is known rejected
    (≤ R), "not" where known not rejected (≥ Q), else "below ``guess``".  Returns the last
    (a, b): the mids are computed exactly as the bisection computes them."""
    R, Q = known[0], known[2]
    for _ in range(iterations):
        mid = (a + b) / 2.0
        rej = (mid <= R) | ((mid < Q) & (mid <= guess))
        a = np.where(rej, mid, a)
        b = np.where(rej, b, mid)
    return a, b


def _learn(known, x, c):
    """Update (R, c_R, Q, c_Q) — the largest value known rejected with its capital − level and
    the smallest known not rejected — with the values ``x`` (side coordinates) whose capital −
    level is ``c`` (rejected where c ≥ 0)."""
    R, cR, Q, cQ = known
    up = (c >= 0) & (x > R)
    down = (c < 0) & (x < Q)  # an unknown c (NaN) teaches nothing
    return (np.where(up, x, R), np.where(up, c, cR), np.where(down, x, Q), np.where(down, c, cQ))


def _next_guess(known, pair, fallback):
    """The next guess of the end (side coordinates): the secant step of the last two evaluated
    values when it falls strictly between the known ends, else regula falsi between them, else
    ``fallback``."""
    R, cR, Q, cQ = known
    (xa, ca), (xb, cb) = pair
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (cb - ca) / (xb - xa)
        newton = xa - ca / slope
        falsi = R + cR * (Q - R) / (cR - cQ)
    good = (slope < 0) & (newton > R) & (newton < Q) & np.isfinite(newton)
    both = np.isfinite(R) & np.isfinite(Q) & np.isfinite(falsi)
    return np.where(good, newton, np.where(both, falsi, fallback))


def _capitals(streams, bets, mu, side, running, rows=None) -> np.ndarray:
    """:func:`log_capital` at ``mu`` (A, S') of the streams ``rows`` (sorted indices, S' of
    them; all S without), the streams in chunks as :func:`one_sided_ends`.  A chunk is a run of
    consecutive rows, cut as views; rows between two wanted ones, up to :data:`GAP` of them, are
    evaluated too and dropped (copying scattered rows costs about as much as evaluating them)."""
    A, S = mu.shape
    work = A * streams.shape[1] * _parts(streams)
    step = max(1, CHUNK // max(work, 1))
    if work * S >= PARALLEL_WORK:
        step = min(step, -(-S // WORKERS))
    if rows is None:
        rows = np.arange(S)
    if step >= S and rows[-1] - rows[0] + 1 == S:
        cut = slice(int(rows[0]), int(rows[-1]) + 1)
        return log_capital(streams.take(cut), bets[cut], mu, side, running)
    out = np.empty((A, S))
    pieces = _pieces(rows, step)

    def chunk(piece) -> None:
        cols, first, last = piece  # out columns, the streams' rows first..last
        span = np.arange(first, last + 1)
        wide = np.full((A, span.size), np.nan)
        keep = np.searchsorted(span, rows[cols])
        wide[:, keep] = mu[:, cols]
        wide = np.where(np.isnan(wide), mu[:, cols][:, :1], wide)  # dropped rows: any value
        cut = slice(first, last + 1)
        value = log_capital(streams.take(cut), bets[cut], wide, side, running)
        out[:, cols] = value[:, keep]

    _run_chunks(chunk, pieces)
    return out


def _level_capitals(streams, bets, mu, side, running, rows=None) -> np.ndarray:
    """:func:`_capitals` at ``mu`` (A, S'), each stream's capital evaluated once where every
    level asks for it at the same value (the levels share one capital function per stream)."""
    if mu.shape[0] == 1:
        return _capitals(streams, bets, mu, side, running, rows)
    same = (mu == mu[:1]).all(axis=0)
    if not same.any():
        return _capitals(streams, bets, mu, side, running, rows)
    out = np.empty(mu.shape)
    every = np.arange(mu.shape[1]) if rows is None else np.asarray(rows)
    for cols, A in ((np.flatnonzero(same), 1), (np.flatnonzero(~same), mu.shape[0])):
        if cols.size:
            part = None if cols.size == every.size and rows is None else every[cols]
            out[:, cols] = _capitals(streams, bets, mu[:A, cols], side, running, part)
    return out


#: rows not wanted that :func:`_capitals` evaluates to keep a chunk one run of rows
GAP = 2


def _pieces(rows: np.ndarray, step: int) -> list[tuple[slice, int, int]]:
    """``rows`` (sorted) in pieces of at most ``step`` rows spanned, each (positions in
    ``rows``, first row, last row): a new piece where the next row is more than :data:`GAP`
    rows on or the piece would span more than ``step``."""
    pieces, start = [], 0
    for k in range(1, rows.size + 1):
        if k == rows.size or rows[k] - rows[k - 1] > GAP + 1 or rows[k] - rows[start] >= step:
            pieces.append((slice(start, k), int(rows[start]), int(rows[k - 1])))
            start = k
    return pieces


def _verified(a, b, start, known) -> np.ndarray:
    """Whether the replayed bisection's last (a, b) (side coordinates) is the bisection's own:
    a is known rejected (or never moved) and b known not rejected, so every mid the replay
    decided by the guess was decided as the capitals decide it (monotone) — or b never moved
    and is known rejected (every value is: the bisection then reports b)."""
    b_ok = (b >= known[2]) | ((b == start[1]) & (b <= known[0]))
    return ((a == start[0]) | (a <= known[0])) & b_ok


def _full_end(a, b, start, known) -> np.ndarray:
    """The end (side coordinates) of a verified replay on the whole range (:func:`_verified`):
    b's start where it is rejected (every value is), else a (:func:`_one_sided_chunk`)."""
    return np.where((b == start[1]) & (b <= known[0]), start[1], a)


class _Guide:
    """The state of a guided search (:func:`_guided_chunk`): what is known of the capitals in
    side coordinates, the guess, and the ends found ((A, S) each)."""

    def __init__(self, shape, guess):
        inf = np.full(shape, np.inf)
        nan = np.full(shape, np.nan)
        self.known = (-inf, nan, inf, nan.copy())
        self.prev = (nan.copy(), nan.copy())  # the values evaluated last but one, and last
        self.last = (nan.copy(), nan.copy())
        self.guess = guess
        self.out = np.full(shape, np.nan)
        self.done = np.zeros(shape, bool)

    def settle(self, ok, value) -> None:
        new = ok & ~self.done
        self.out = np.where(new, value, self.out)
        self.done |= new

    def learn(self, streams, bets, level, side, pair, running, fallback) -> None:
        """Evaluate the capitals at the values of the pair (side coordinates) not known yet on
        the streams with an end still open, learn from them and move the guess."""
        R, Q = self.known[0], self.known[2]
        need = [(R < x) & (x < Q) & ~self.done for x in pair]
        first = np.where(need[0], pair[0], pair[1])
        for x, mask in ((first, need[0] | need[1]), (pair[1], need[0] & need[1])):
            rows = np.flatnonzero(mask.any(axis=0))
            if rows.size:
                raw = np.full(x.shape, np.nan)
                mu = x[:, rows] * side
                some = None if rows.size == level.shape[1] else rows
                raw[:, rows] = _level_capitals(streams, bets, mu, side, running, some)
                raw = np.where(mask, raw, np.nan)
                self.record(x, raw - level, mask, raw, level)
        self.guess = _next_guess(self.known, (self.prev, self.last), fallback)

    def record(self, x, c, mask, raw=None, level=None) -> None:
        """Learn the capitals − level ``c`` at ``x`` where ``mask``; keep the last two.  With
        the capitals ``raw`` and the levels, every level learns from every level's values too:
        the levels of a stream share one capital function (rejected at level ℓ: raw ≥ ℓ, the
        bisection's own comparison, so what is learnt is exact)."""
        self.known = _learn(self.known, x, c)
        if raw is not None and x.shape[0] > 1:
            for b in range(x.shape[0]):
                self.known = _learn(self.known, np.broadcast_to(x[b], x.shape), raw[b] - level)
        pairs = zip(self.last, self.prev, strict=True)
        self.prev = tuple(np.where(mask, last, prev) for last, prev in pairs)
        self.last = (np.where(mask, x, self.last[0]), np.where(mask, c, self.last[1]))

    def bisect(self, streams, bets, level, side, start, steps, running) -> None:
        """The bisection's first ``steps`` steps (side coordinates), learnt; the guess then
        regula falsi between the values known rejected and not."""
        a, b = start
        for _ in range(steps):
            mid = (a + b) / 2.0
            raw = _level_capitals(streams, bets, mid * side, side, running)
            c = raw - level
            self.record(mid, c, np.ones(c.shape, bool), raw, level)
            a, b = np.where(c >= 0, mid, a), np.where(c >= 0, b, mid)
        R, cR, Q, cQ = self.known
        with np.errstate(divide="ignore", invalid="ignore"):
            falsi = R + cR * (Q - R) / (cR - cQ)
        self.guess = np.where(np.isfinite(falsi), falsi, (a + b) / 2.0)


def _guided_chunk(streams, bets, level, side, search, iterations, running, guess=None):
    """:func:`_bisected_chunk`'s ends, found with few capital evaluations: the bisection is
    replayed with an oracle that guesses the end (secant steps on the capitals evaluated so
    far), and the two values it ends between are evaluated; where the capitals confirm them
    (one rejected, the other not) every guessed decision was the capitals' own (each capital is
    monotone in μ), so the end is the bisection's, bit for bit.  Ends still open after
    :data:`GUIDE_ROUNDS` evaluations are bisected."""
    A, S = level.shape
    lo_s, hi_s = (np.broadcast_to(np.asarray(e, float), (S,)) for e in search)
    start = tuple(side * np.broadcast_to(e, (A, S)) for e in ((lo_s, hi_s)[::side]))
    g = _Guide((A, S), None)
    if guess is None:
        g.guess = (start[0] + start[1]) / 2.0
        g.learn(streams, bets, level, side, start, running, g.guess)
        if running:  # the running maximum is far from linear over the whole range
            g.bisect(streams, bets, level, side, start, iterations // 4, running)
    else:
        g.guess = side * np.broadcast_to(np.asarray(guess, float), (A, S))
    for r in range(GUIDE_ROUNDS + 1):
        a, b = _replay(*start, iterations, g.guess, g.known)
        g.settle(_verified(a, b, start, g.known), _full_end(a, b, start, g.known))
        if g.done.all() or r == GUIDE_ROUNDS:
            break
        gap = (np.maximum(g.known[0], start[0]) + np.minimum(g.known[2], start[1])) / 2.0
        g.learn(streams, bets, level, side, (a, b), running, gap)
    out = side * g.out
    rows = np.flatnonzero((~g.done).any(axis=0))
    if rows.size:
        part = streams if rows.size == S else streams.take(rows)
        rest = _bisected_chunk(part, bets[rows], level[:, rows], side,
                               (lo_s[rows], hi_s[rows]), iterations, running)  # fmt: skip
        out[:, rows] = np.where(g.done[:, rows], out[:, rows], rest)
    return out


def _guided_bracket(streams, bets, level, side, bracket, steps, guess):
    """:func:`bracketed_ends`' ends (S,) found as :func:`_guided_chunk` finds them, and which
    were found (S,): the bracket's bisection (``steps`` = (inner, whole-range iterations)) where
    the bracket is known to hold the end, the whole range's where it is known not to."""
    lo, hi = bracket
    S = lo.size
    br = tuple(side * e[None, :] for e in (lo, hi)[::side])
    whole = tuple(np.full((1, S), side * e) for e in (0.0, 1.0)[::side])
    g = _Guide((1, S), side * np.asarray(guess, float)[None, :])
    for r in range(GUIDE_ROUNDS + 1):
        R, Q = g.known[0], g.known[2]
        a1, b1 = _replay(*br, steps[0], g.guess, g.known)
        a2, b2 = _replay(*whole, steps[1], g.guess, g.known)
        inside = (R >= br[0]) & (Q <= br[1])
        outside = (Q <= br[0]) | (R >= br[1])
        g.settle(inside & _verified(a1, b1, br, g.known), a1)
        g.settle(outside & _verified(a2, b2, whole, g.known), _full_end(a2, b2, whole, g.known))
        if g.done.all() or r == GUIDE_ROUNDS:
            break
        mode = inside | (~outside & (g.guess > br[0]) & (g.guess < br[1]))
        ends = (np.where(mode, br[0], whole[0]), np.where(mode, br[1], whole[1]))
        gap = (np.maximum(R, ends[0]) + np.minimum(Q, ends[1])) / 2.0
        pair = (np.where(mode, a1, a2), np.where(mode, b1, b2))
        g.learn(streams, bets, level, side, pair, True, gap)
    R, cR, Q, cQ = g.known
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.clip(R + cR * (Q - R) / (cR - cQ), R, Q)  # regula falsi between R and Q
    return side * g.out[0], g.done[0], side * cross[0]
