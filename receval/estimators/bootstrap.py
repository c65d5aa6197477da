"""One bootstrap engine for every estimator and every system.

Every receval estimator is a smooth function of *totals*: sums of per-row terms over the rows of
one or more random **stages** — the draws of each sampler (resampled with replacement within the
sampler, its stratum), the exhaustive units (resampled as clusters), ….  A replicate is a matrix
of resampling counts per stage; the replicate totals are ``counts @ terms``.  The same counts
serve every system, so differences and ranks between systems are paired.  No Python loop runs over
replicates or systems: each stage is one matrix product per chunk of replicates.

Intervals: ``percentile``, ``basic`` (reverse percentile) and ``BCa`` (bias-corrected and
accelerated; the acceleration comes from the delete-one jackknife over every row of every stage,
with the deleted row's stratum rescaled by n_s/(n_s − 1)).  Efron & Tibshirani, *An Introduction to
the Bootstrap* (1993), ch. 13–14; scipy.stats.bootstrap uses the same definitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

METHODS = ("percentile", "basic", "BCa")


@dataclass(frozen=True)
class Stage:
    """One random stage.

    ``strata[c]`` is the stratum of resampling unit c (units are resampled with replacement
    within their stratum).  By default every term row is its own unit; with ``rows``, term row r
    belongs to unit ``rows[r]`` and takes that unit's count (cluster resampling, e.g. documents
    whose facts span several queries).  With ``query``, row r is also weighted by the resampling
    count of query ``query[r]`` (the counts of the stage named :data:`QUERY_STAGE`; −1: none), so
    queries are resampled as clusters across every stage at once.
    """

    name: str
    strata: np.ndarray
    rows: np.ndarray | None = None
    query: np.ndarray | None = None

    @property
    def units(self) -> int:
        """Number of resampling units."""
        return int(self.strata.size)

    @property
    def size(self) -> int:
        """Number of term rows."""
        return int(self.strata.size if self.rows is None else self.rows.size)


#: The stage whose resampling counts weight the rows of query-clustered stages.
QUERY_STAGE = "queries"


@dataclass(frozen=True)
class Replicates:
    """Resampling counts per stage: ``counts[name]`` has shape (B, rows of the stage)."""

    seed: int | None
    B: int
    counts: dict[str, np.ndarray]

    def save(self, path: Path) -> None:
        """Save the replicate counts (``.npz``) so another run can reuse exactly these replicates."""
        arrays = {
            f"stage_{k}": v.astype(np.uint16 if v.max(initial=0) < 65535 else np.int32)
            for k, v in self.counts.items()
        }
        np.savez_compressed(
            path,
            B=np.array(self.B),
            seed=np.array(-1 if self.seed is None else self.seed),
            **arrays,
        )

    @classmethod
    def load(cls, path: Path, stages: list[Stage]) -> Replicates:
        """Load counts saved by :meth:`save`; they must be replicates of these stages: one
        row per replicate, whole non-negative counts that resample every stratum to its size.
        Anything else is a :class:`~receval.errors.BundleError` naming the file."""
        import zipfile

        from receval.errors import BundleError

        try:
            archive = np.load(path, allow_pickle=False)
        except EOFError:
            raise BundleError(
                path, None, "empty: not a replicates file of --save-replicates"
            ) from None
        except (OSError, ValueError, zipfile.BadZipFile):
            raise BundleError(
                path, None, "not a replicates file of --save-replicates (not an .npz archive)"
            ) from None
        if not hasattr(archive, "files"):  # a bare .npy array
            raise BundleError(path, None, "not a replicates file of --save-replicates (no archive)")
        with archive as z:
            B, seed = (_saved_integer(z, key, path) for key in ("B", "seed"))
            counts = {stage.name: _saved_counts(z, stage, B, path) for stage in stages}
        return cls(seed=None if seed < 0 else seed, B=B, counts=counts)


def _saved_integer(z, key: str, path: Path) -> int:
    from receval.errors import BundleError

    value = z[key] if key in z.files else None
    if value is None or value.shape != () or value.dtype.kind not in "iu":
        raise BundleError(path, None, f"no integer {key!r} in the replicates file")
    return int(value)


def _saved_counts(z, stage: Stage, B: int, path: Path) -> np.ndarray:
    """The saved counts of ``stage``, checked: shape (B, units), whole and non-negative, and
    every replicate drawing each stratum's size (``n_s`` from ``n_s``)."""
    from receval.errors import BundleError

    key = f"stage_{stage.name}"
    if key not in z.files:
        raise BundleError(path, None, f"no replicates for stage {stage.name!r}")
    c = z[key]
    if c.shape != (B, stage.units):
        raise BundleError(
            path,
            None,
            f"replicates for stage {stage.name!r} have shape {c.shape}, expected "
            f"{(B, stage.units)} (saved for another task or sample?)",
        )
    if c.dtype.kind not in "iu" or (c.size and c.min() < 0):
        raise BundleError(path, None, f"counts of stage {stage.name!r} are not whole numbers >= 0")
    c = c.astype(np.int32)
    if stage.units:
        _, codes, sizes = np.unique(stage.strata, return_inverse=True, return_counts=True)
        order = np.argsort(codes, kind="stable")
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        drawn = np.add.reduceat(c[:, order], starts, axis=1)
        if (drawn != sizes[None, :]).any():
            raise BundleError(
                path,
                None,
                f"counts of stage {stage.name!r} do not resample each stratum to its size "
                "(saved for another sample?)",
            )
    return c


#: Replicates resampled per block in :func:`stratified_counts` (a block's arrays stay in cache).
COUNT_BLOCK = 32


def stratified_counts(strata: np.ndarray, B: int, rng: np.random.Generator) -> np.ndarray:
    """Resampling counts (B × n, int32): each stratum's rows drawn with replacement, n_s from n_s.

    Vectorised in blocks of :data:`COUNT_BLOCK` replicates: per block one uniform matrix and one
    ``bincount``.  The generator fills the blocks in row order, so the counts are the ones a
    single B × n uniform matrix gives (same seed, same replicates), at a fraction of the memory
    and about 35 % less time (``bench/score.py``).
    """
    strata = np.asarray(strata)
    n = strata.size
    if n == 0:
        return np.zeros((B, 0), np.int32)
    order = np.argsort(strata, kind="stable")
    identity = bool(np.all(order == np.arange(n)))
    _, start, size = np.unique(strata[order], return_index=True, return_counts=True)
    stratum_of = np.repeat(np.arange(size.size), size)
    scale = size[stratum_of].astype(float)
    offset = start[stratum_of]
    rows = np.arange(COUNT_BLOCK, dtype=np.int64)[:, None] * n
    out = np.empty((B, n), np.int32)
    for lo in range(0, B, COUNT_BLOCK):
        k = min(COUNT_BLOCK, B - lo)
        u = rng.random((k, n))
        u *= scale
        picks = u.astype(np.int64)  # truncation = floor for u ≥ 0: a position in the stratum
        picks += offset
        if not identity:  # positions in stratum order -> original rows
            picks = order[picks]
        picks += rows[:k]
        out[lo : lo + k] = np.bincount(picks.ravel(), minlength=k * n).reshape(k, n)
    return out


def draw_replicates(
    stages: list[Stage], B: int, rng: np.random.Generator, seed: int | None = None
) -> Replicates:
    """Draw ``B`` replicates for every stage from one generator (stages in the given order)."""
    return Replicates(
        seed=seed, B=B, counts={s.name: stratified_counts(s.strata, B, rng) for s in stages}
    )


def replicate_totals(counts: np.ndarray, terms: np.ndarray, chunk: int = 256) -> np.ndarray:
    """``counts @ terms`` (B × F) in chunks of replicates, with NaN columns kept NaN."""
    terms = np.asarray(terms, float)
    if terms.ndim == 1:
        terms = terms[:, None]
    nan_cols = np.isnan(terms).any(axis=0)
    clean = np.where(np.isnan(terms), 0.0, terms)
    out = np.empty((counts.shape[0], terms.shape[1]))
    for start in range(0, counts.shape[0], chunk):
        out[start : start + chunk] = counts[start : start + chunk] @ clean  # ints promote to float
    out[:, nan_cols] = np.nan
    return out


def row_weights(
    stage: Stage, replicates: Replicates, lo: int = 0, hi: int | None = None
) -> np.ndarray:
    """Resampling weight of every term row of ``stage`` in replicates ``lo:hi`` ((hi − lo) × rows).

    A row's weight is its unit's count, times its query's count when the stage is clustered by
    query (see :class:`Stage`).
    """
    counts = replicates.counts[stage.name][lo:hi]
    weights = counts if stage.rows is None else counts[:, stage.rows]
    weights = weights.astype(float)
    if stage.query is not None:
        q = replicates.counts[QUERY_STAGE][lo:hi].astype(float)
        has = stage.query >= 0
        weights[:, has] *= q[:, stage.query[has]]
    return weights


def stage_totals(
    stage: Stage, terms: np.ndarray, replicates: Replicates, chunk: int = 256
) -> np.ndarray:
    """Replicate totals of one stage (B × F): row weights @ terms, chunked; NaN columns stay NaN."""
    if stage.rows is None and stage.query is None:
        return replicate_totals(replicates.counts[stage.name], terms, chunk)
    terms = np.asarray(terms, float)
    terms = terms[:, None] if terms.ndim == 1 else terms
    nan_cols = np.isnan(terms).any(axis=0)
    clean = np.where(np.isnan(terms), 0.0, terms)
    out = np.empty((replicates.B, terms.shape[1]))
    for lo in range(0, replicates.B, chunk):
        out[lo : lo + chunk] = row_weights(stage, replicates, lo, lo + chunk) @ clean
    out[:, nan_cols] = np.nan
    return out


def jackknife_totals(terms: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """Totals with row k deleted and its stratum rescaled by n_s/(n_s − 1) (n × F).

    A stratum of one row contributes 0 once that row is deleted (no information is left).
    """
    terms = np.asarray(terms, float)
    if terms.ndim == 1:
        terms = terms[:, None]
    strata = np.asarray(strata)
    _, inverse, size = np.unique(strata, return_inverse=True, return_counts=True)
    stratum_sum = np.zeros((size.size, terms.shape[1]))
    np.add.at(stratum_sum, inverse, terms)
    total = stratum_sum.sum(axis=0)
    n_s = size[inverse].astype(float)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        rest = np.where(n_s > 1, (stratum_sum[inverse] - terms) * n_s / (n_s - 1), 0.0)
    return total[None, :] - stratum_sum[inverse] + rest


@dataclass(frozen=True)
class ConfidenceInterval:
    """Interval ends (arrays), the method and the level."""

    low: np.ndarray
    high: np.ndarray
    method: str
    level: float


def bca_acceleration(jackknife: np.ndarray) -> np.ndarray:
    """a = Σ (θ̄ − θ_(k))³ / (6 [Σ (θ̄ − θ_(k))²]^{3/2}) over jackknife values (n × m) -> (m,)."""
    jack = np.asarray(jackknife, float)
    mean = np.nanmean(jack, axis=0)
    d = mean[None, :] - jack
    num = np.nansum(d**3, axis=0)
    den = 6.0 * np.nansum(d**2, axis=0) ** 1.5
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, 0.0)


def _nanquantile_cols(values: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per-column quantile at per-column level q (values B × m, q (m,))."""
    out = np.full(values.shape[1], np.nan)
    for col in range(values.shape[1]):  # m columns, not replicates: cheap
        v = values[:, col]
        v = v[~np.isnan(v)]
        if v.size and np.isfinite(q[col]):
            out[col] = np.quantile(v, q[col])
    return out


def confidence_interval(
    point: np.ndarray,
    replicates: np.ndarray,
    *,
    method: str = "percentile",
    level: float = 0.95,
    jackknife: np.ndarray | None = None,
    bounds: tuple[float, float] | None = (0.0, 1.0),
    max_nan_share: float = 0.01,
    draws: np.ndarray | None = None,
) -> ConfidenceInterval:
    """Bootstrap interval per column.

    Parameters
    ----------
    point : (m,) full-sample estimates.
    replicates : (B, m) replicate estimates (NaN where a replicate cannot be evaluated).
    method : ``percentile``, ``basic`` or ``BCa`` (BCa needs ``jackknife`` (n × m)).
    level : two-sided confidence level.
    bounds : the parameter's range; ``basic`` intervals are clipped to it.
    max_nan_share : a column whose replicates are NaN more often than this gets a NaN interval.
    draws : (m,) the number of draws each column's variance rests on: the replicates are read at
        the expanded level of :func:`receval.estimators.small_sample.expanded_alpha` (Hesterberg
        2015; NaN: not expanded).  None: the plain ``level``.
    """
    if method not in METHODS:
        raise ValueError(f"unknown interval method {method!r} (known: {', '.join(METHODS)})")
    point = np.asarray(point, float)
    reps = np.asarray(replicates, float)
    m = point.size
    if draws is None:
        alpha = np.full(m, (1.0 - level) / 2.0)
    else:
        from receval.estimators.small_sample import expanded_alpha

        alpha = expanded_alpha(1.0 - level, draws, m) / 2.0
    nan_share = np.isnan(reps).mean(axis=0) if reps.size else np.ones(m)
    if method == "percentile":
        lo = _nanquantile_cols(reps, alpha)
        hi = _nanquantile_cols(reps, 1 - alpha)
    elif method == "basic":
        qlo = _nanquantile_cols(reps, alpha)
        qhi = _nanquantile_cols(reps, 1 - alpha)
        lo, hi = 2 * point - qhi, 2 * point - qlo
        if bounds is not None:
            lo, hi = np.clip(lo, *bounds), np.clip(hi, *bounds)
    else:
        if jackknife is None:
            raise ValueError("BCa needs jackknife values")
        from scipy.special import ndtr, ndtri  # lazy: the official census never needs it

        valid = ~np.isnan(reps)
        below = np.where(valid, reps < point[None, :], False).sum(axis=0)
        equal = np.where(valid, reps == point[None, :], False).sum(axis=0)
        count = valid.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = (below + 0.5 * equal) / count
        z0 = ndtri(np.clip(share, 1e-12, 1 - 1e-12))
        a = bca_acceleration(jackknife)
        z = ndtri(np.stack([alpha, 1 - alpha]))
        adj = []
        for zq in z:
            with np.errstate(invalid="ignore", divide="ignore"):
                adj.append(ndtr(z0 + (z0 + zq) / (1 - a * (z0 + zq))))
        lo = _nanquantile_cols(reps, adj[0])
        hi = _nanquantile_cols(reps, adj[1])
        degenerate = np.nanmax(reps, axis=0, initial=-np.inf) == np.nanmin(
            reps, axis=0, initial=np.inf
        )
        lo = np.where(degenerate, point, lo)
        hi = np.where(degenerate, point, hi)
    bad = (nan_share > max_nan_share) | np.isnan(point)
    lo = np.where(bad, np.nan, lo)
    hi = np.where(bad, np.nan, hi)
    return ConfidenceInterval(low=lo, high=hi, method=method, level=level)


Statistic = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass(frozen=True)
class BootstrapRun:
    """Point estimates, replicate estimates and jackknife values of every metric (arrays (…, m))."""

    point: dict[str, np.ndarray]
    replicates: dict[str, np.ndarray]
    jackknife: dict[str, np.ndarray] | None
    #: the stage totals behind them (full sample, replicates, jackknife per stage), so that
    #: :func:`reevaluate` can apply another statistic without resampling again
    totals: tuple | None = None
    #: per metric, the number of draws its variance rests on (per system): intervals are
    #: expanded for small samples (:mod:`receval.estimators.small_sample`); None: not expanded
    draws: dict[str, np.ndarray] | None = None


def reevaluate(run: BootstrapRun, statistic: Statistic) -> BootstrapRun:
    """``run`` with ``statistic`` applied to the same stage totals (no new matrix products)."""
    if run.totals is None:
        raise ValueError("this bootstrap run kept no totals")
    full, reps_totals, jack_totals = run.totals
    jack = None
    if jack_totals is not None:
        pieces: dict[str, list[np.ndarray]] = {}
        for totals in jack_totals:
            for key, value in statistic(totals).items():
                pieces.setdefault(key, []).append(value)
        jack = {k: np.concatenate(v, axis=0) for k, v in pieces.items()}
    return BootstrapRun(
        point=statistic(full),
        replicates=statistic(reps_totals),
        jackknife=jack,
        totals=run.totals,
    )


def run_bootstrap(
    stages: list[Stage],
    terms: dict[str, np.ndarray],
    statistic: Statistic,
    replicates: Replicates,
    *,
    jackknife: bool = False,
) -> BootstrapRun:
    """Evaluate ``statistic`` on the full sample, every replicate and (optionally) the jackknife.

    ``terms[stage.name]`` is the (rows × F) term matrix of each stage; ``statistic`` maps a dict
    of stage totals (each (…, F)) to a dict of metric arrays (…, m).
    """
    full: dict[str, np.ndarray] = {}
    for s in stages:  # NaN columns stay NaN
        t = np.asarray(terms[s.name], float)
        t = t[:, None] if t.ndim == 1 else t
        full[s.name] = np.where(
            np.isnan(t).any(axis=0), np.nan, t.sum(axis=0) if t.size else np.zeros(t.shape[1])
        )
    point = statistic(full)
    reps_totals = {s.name: stage_totals(s, terms[s.name], replicates) for s in stages}
    reps = statistic(reps_totals)
    jack = None
    jack_totals = None
    if jackknife:
        jack_totals = []
        if any(s.rows is not None or s.query is not None for s in stages):
            raise ValueError(
                "BCa's jackknife is not available with clustered resampling; use percentile or basic"
            )
        pieces: dict[str, list[np.ndarray]] = {}
        for s in stages:
            if s.size == 0:
                continue
            jt = jackknife_totals(terms[s.name], s.strata)
            totals = {
                o.name: np.broadcast_to(full[o.name], (s.size, full[o.name].size)) for o in stages
            }
            totals[s.name] = jt
            jack_totals.append(totals)
            for key, value in statistic(totals).items():
                pieces.setdefault(key, []).append(value)
        jack = {k: np.concatenate(v, axis=0) for k, v in pieces.items()}
    return BootstrapRun(
        point=point, replicates=reps, jackknife=jack, totals=(full, reps_totals, jack_totals)
    )
