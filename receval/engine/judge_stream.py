"""The judge's pool sums without the self-join: one streamed pass over the distinct (system,
fact) pairs, a slice of the facts at a time (issue 35 × issue 38).

``score --estimator ppi`` centres each draw's judge term by its known expectation, built from
four (m × m) sums over the pool (:mod:`receval.engine.judge_totals`, Chaganty et al. 2017 §3;
Angelopoulos et al. 2023 eq. 1) for every map v of the judge's keys
(:mod:`receval.engine.judge`):

    GS[i, k] = Σ_x A_i(x) A_k(x) v(x)/q₀(x),   G1[i, k] = the same with v = 1,
    PS[i, k] = Σ_x A_i(x) t_i(x) A_k(x) v(x)/q₀(x),   PM[i, k] = the same with v = 1,

over the facts x with q₀(x) > 0, A_i(x) = [system i output x], q₀(x) = Σ_k c_k A_k(x).  Each is
a product Lᵀ diag(w) A of the (facts × m) incidence matrix A (and T, A's entries times t_i(x))
with a per-fact weight w: Σ_x |S(x)|² multiply-adds in all, S(x) the systems that output x, as
the self-join's joined rows — but in compiled sparse products instead of a hash join and an
aggregation over that many rows (at 5·10⁷ output rows and 50 systems: 10⁹ joined rows).

The engine numbers the pool's facts once (table ``judge_pool_f``: f, the fact's key, its
query's "not graded" key) and stores the pairs as integers (``judge_incidence``: f, system
code), both in f order; each slice of f is then read by a range condition that the stored
order lets the engine prune to the slice's row groups.  Python holds one slice of the pairs
(:data:`PAIRS_PER_SLICE`), per-key values, and the (2m × (C + 1)m) sums.

The sums run in another order than the in-memory path's sparse products (and than SQL's): the
totals agree to ~1e-15 relative; the outputs, rounded as they are written, are the same bytes.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from receval.engine.base import Engine

#: cells (facts × systems × (maps + 3)) of one block of the dense products (~32 MB)
CHUNK_CELLS = 1 << 22

#: the distinct (system, fact) pairs held in Python at once (with the sparse products' copies
#: about 100 bytes each: ~10⁸ bytes)
PAIRS_PER_SLICE = 1_000_000

#: per pool fact (``judge_pool``): its number f (by query and answer hash), its key, its
#: query's "not graded" key and whether its class's terms come from the small tables
#: (receval.engine.judge_classes), stored in f order
POOL_NUMBERED = """
SELECT (row_number() OVER (ORDER BY p.query_id, p.a) - 1)::BIGINT AS f, p.query_id, p.a,
       p.key, mk.key AS mkey, p.classed
FROM judge_pool p LEFT JOIN judge_missing mk ON p.query_id = mk.query_id
ORDER BY f
"""

#: every distinct (system, fact) pair as integers, stored in (f, system code) order (a total
#: order: the sums over a slice's pairs add in the same order whatever the join's threads did)
INCIDENCE = """
SELECT k.f, p.code::INTEGER AS code
FROM judge_pairs p JOIN judge_pool_f k ON p.query_id = k.query_id AND p.a = k.a
ORDER BY k.f, code
"""


def number_pool(engine: Engine) -> int:
    """Tables ``judge_pool_f`` and ``judge_incidence`` (module docstring) from ``judge_pool``
    and ``judge_pairs``; returns the number of pool facts.  The stored f order is asked for
    with DuckDB's ``preserve_insertion_order`` for these two statements only (the slices stay
    right without it, only slower)."""
    with insertion_order(engine.con):
        engine.create_table("judge_pool_f", POOL_NUMBERED)
        engine.create_table("judge_incidence", INCIDENCE)
    return int(engine.con.execute("SELECT count(*) FROM judge_pool_f").fetchone()[0])


@contextmanager
def insertion_order(con):
    """DuckDB's ``preserve_insertion_order`` on for the statements inside, then as it was."""
    kept = con.execute("SELECT current_setting('preserve_insertion_order')").fetchone()[0]
    con.execute("SET preserve_insertion_order = true")
    try:
        yield con
    finally:
        con.execute(f"SET preserve_insertion_order = {'true' if kept else 'false'}")


@dataclass(frozen=True)
class PoolSums:
    """The sums of the module docstring for C maps: ``g1``, ``pm`` (m, m); ``gs``, ``ps``
    (C, m, m); per system Σ t v_c over its outputs (``jp`` (C, m)) and its graded outputs
    (``scored`` (m,)); ``by_query`` (``--cluster-queries``): g1, pm, gs, ps over each query's
    facts alone, with a query axis before the (m, m) ones (None when not asked for)."""

    g1: np.ndarray
    pm: np.ndarray
    gs: np.ndarray
    ps: np.ndarray
    jp: np.ndarray
    scored: np.ndarray
    by_query: PoolSums | None = None
    #: per query and sampler kind, Σ_{x∈q} s_j(x) (the per-query sums of rounds of other
    #: designs than uniform, receval.engine.judge_designs; None otherwise)
    mass_q: np.ndarray | None = None

    def plus(self, other: PoolSums) -> PoolSums:
        """The sums of both parts of a pool (e.g. the runs' pass and the classes' terms)."""
        names = ("g1", "pm", "gs", "ps", "jp", "scored")
        sums = {n: getattr(self, n) + getattr(other, n) for n in names}
        if self.by_query is not None and other.by_query is not None:
            sums["by_query"] = self.by_query.plus(other.by_query)
        if self.mass_q is not None and other.mass_q is not None:
            sums["mass_q"] = self.mass_q + other.mass_q
        return PoolSums(**sums)


def split_sums(
    total: np.ndarray, m: int, C: int, width: int | None = None
) -> dict[str, np.ndarray]:
    """g1, pm, gs, ps of the blocks Lᵀ R (…, 2m, (C + 1)·width) of :func:`_slice_sums`
    (``width`` = m, the samplers' systems) or of the sums over the samplers' kinds
    (:mod:`receval.engine.judge_designs`: ``width`` = U)."""
    w = m if width is None else width
    top, bottom = total[..., :m, :], total[..., m:, :]

    def maps(part: np.ndarray) -> np.ndarray:
        return np.stack([part[..., (j + 1) * w : (j + 2) * w] for j in range(C)])

    return {"g1": top[..., :w], "pm": bottom[..., :w], "gs": maps(top), "ps": maps(bottom)}


def stream_sums(
    engine: Engine,
    facts: int,
    pairs: float,
    c: np.ndarray,
    targets: np.ndarray,
    values: np.ndarray,
    graded_keys: int,
    by_query: bool = False,
) -> PoolSums:
    """:class:`PoolSums` by slices of the numbered pool (:func:`number_pool`), with the sums
    over each query's facts when ``by_query``.

    ``c`` (m,): the mixture's c_k; ``targets`` (m, Q): t_i per system and query code;
    ``values`` (C, K): each map's value per key; keys below ``graded_keys`` are graded facts',
    the rest the queries' "not graded" keys (key − graded_keys is then the query code).  The
    facts of classes of two or more (``classed``) are left out: their terms come from the
    small tables (:func:`receval.engine.judge_classes.class_sums`)."""
    m, C = c.size, values.shape[0]
    total = np.zeros((2 * m, (C + 1) * m))
    per_query = np.zeros((targets.shape[1], 2 * m, (C + 1) * m)) if by_query else None
    jp, scored = np.zeros((C, m)), np.zeros(m)
    slices = max(1, int(np.ceil(pairs / PAIRS_PER_SLICE)))
    step = max(1, int(np.ceil(facts / slices)))
    for lo in range(0, facts, step):
        f, code, key, query = _read_slice(engine, lo, min(lo + step, facts), graded_keys)
        part = _slice_sums(f, code, key, query, c, targets, values, graded_keys, per_query)
        total += part[0]
        jp += part[1]
        scored += part[2]
    queries = None
    if per_query is not None:
        queries = PoolSums(**split_sums(per_query, m, C), jp=jp, scored=scored)
    return PoolSums(**split_sums(total, m, C), jp=jp, scored=scored, by_query=queries)


def _read_slice(engine: Engine, lo: int, hi: int, graded_keys: int):
    """(f − lo, system code) of the pairs of facts [lo, hi) but the classed facts', and each
    fact's key and query code (facts in f order)."""
    where = f"f >= {int(lo)} AND f < {int(hi)}"
    with insertion_order(engine.con):  # the pairs in stored order: the sums' bits fixed
        pairs = engine.con.execute(
            f"SELECT f, code FROM judge_incidence WHERE {where}"
        ).fetchnumpy()
    facts = engine.con.execute(
        f"SELECT f, key, mkey, classed FROM judge_pool_f WHERE {where} ORDER BY f"
    ).fetchnumpy()
    n = hi - lo
    key = np.zeros(n, np.int64)
    query = np.zeros(n, np.int64)
    classed = np.zeros(n, bool)
    at = np.asarray(facts["f"], np.int64) - lo
    key[at] = np.asarray(facts["key"], np.int64)
    query[at] = np.asarray(facts["mkey"], np.int64) - graded_keys
    classed[at] = np.asarray(facts["classed"]) != 0
    f = np.asarray(pairs["f"], np.int64) - lo
    code = np.asarray(pairs["code"], np.int64)
    keep = ~classed[f]
    return f[keep], code[keep], key, query


def _slice_sums(f, code, key, query, c, targets, values, graded_keys, per_query=None):
    """One slice's (Lᵀ R (2m × (C + 1)m), jp (C, m), scored (m,)), L = [A | T] and
    R = [A/q₀ | A v_0/q₀ | …] over the slice's facts with q₀ > 0 (:func:`slice_products` with
    each fact's own systems as the draws' probabilities: uniform rounds)."""
    q0 = np.bincount(f, weights=c[code], minlength=key.size)
    return slice_products(f, code, key, query, q0, targets, values, graded_keys, per_query)


def slice_products(
    f, code, key, query, q0, targets, values, graded_keys, per_query=None, entries=None, width=None
):
    """One slice's (Lᵀ R (2m × (C + 1)·width), jp (C, m), scored (m,)): L = [A | T] and
    R = [P/q₀ | P v_0/q₀ | …] over the slice's facts with q₀ > 0, P the facts' probabilities
    per column — A itself (width m) without ``entries``, else the (fact, column, p) ``entries``
    sorted by fact (width columns: the sampler kinds of
    :func:`receval.engine.judge_designs.design_sums`).  Dense products of
    :data:`CHUNK_CELLS`-sized blocks of facts; each block's product also added to
    ``per_query`` (Q, 2m, (C + 1)·width) at its query when given (blocks then end where a
    query does: a query's facts are consecutive in f)."""
    m, C = targets.shape[0], values.shape[0]
    width = m if width is None else width
    n = key.size
    t = targets[code, query[f]]
    v = values[:, key]  # (C, n)
    jp = np.stack([np.bincount(code, weights=t * v[j][f], minlength=m) for j in range(C)])
    scored = np.bincount(code, weights=(key[f] < graded_keys).astype(float), minlength=m)
    with np.errstate(divide="ignore"):
        inv = np.where(q0 > 0, 1.0 / q0, 0.0)
    weights = np.vstack([inv, v * inv]).T  # (n, C + 1)
    out = np.zeros((2 * m, (C + 1) * width))
    order = np.argsort(f, kind="stable")
    f, code, t = f[order], code[order], t[order]
    rows = max(1, CHUNK_CELLS // (max(m, width) * (C + 3)))
    starts = np.arange(0, n, rows)
    if per_query is not None:
        starts = np.union1d(starts, np.flatnonzero(np.diff(query)) + 1)
    ends = np.append(starts[1:], n)
    bounds = np.searchsorted(f, np.append(starts, n))
    if entries is not None:
        e_bounds = np.searchsorted(entries[0], np.append(starts, n))
    for b in range(starts.size):
        lo, hi = bounds[b], bounds[b + 1]
        if lo == hi:
            continue
        first = int(starts[b])
        size = int(ends[b]) - first
        local = f[lo:hi] - first
        left = np.zeros((size, 2 * m))
        left[local, code[lo:hi]] = 1.0
        left[local, m + code[lo:hi]] = t[lo:hi]
        if entries is None:
            P = left[:, :m]
        else:
            P = _block_probabilities(entries, e_bounds[b], e_bounds[b + 1], first, size, width)
        w = weights[first : first + size]  # (size, C + 1)
        right = (P[:, None, :] * w[:, :, None]).reshape(size, (C + 1) * width)
        block = left.T @ right
        out += block
        if per_query is not None:
            per_query[query[first]] += block
    return out, jp, scored


def _block_probabilities(entries, e_lo: int, e_hi: int, first: int, size: int, width: int):
    """The (size, width) probabilities of a block's facts from the (fact, column, p) entries
    e_lo..e_hi (the block's, sorted by fact)."""
    e_f, e_col, e_p = entries
    P = np.zeros((size, width))
    P[e_f[e_lo:e_hi] - first, e_col[e_lo:e_hi]] = e_p[e_lo:e_hi]
    return P
