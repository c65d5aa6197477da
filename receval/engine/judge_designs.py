"""The judge's pool sums when rounds were drawn by other designs than uniform (issue 35):
``score --estimator ppi`` on the engine path with ``sample --by-judge`` (``judge-strata``) and
``--entity-relation`` rounds.

The prediction-powered control is centred by its known expectation under each sampler
(:func:`receval.estimators.ppi.judge_totals`; Angelopoulos et al. 2023 eq. 1).  With
``--weighting size`` every system's mixture is q₀(x) = Σ_j (n_j/N) s_j(x), and sampler j of
system k and design d gives

    E_j[S_i] = (w_ij/n_j) Σ_x s_j(x) t_i(x) A_i(x) v(x)/q₀(x),   E_j[num_i] = Σ_x s_j(x) A_i(x) v(x)/(N q₀(x)),
    E_j[den] = Σ_x s_j(x) v(x)/(N q₀(x))  (and the same with v = 1),

so the uniform case's m × m sums (:mod:`receval.engine.judge_stream`: the sampler's column
A_k/|X_k|) become m × U sums over the **sampler kinds** u = (k, d) of the samplers, the right
factor P_u(x) = A_k(x) p_{k,d}(x).  On the engine path p_{k,d}(x) is a function of the pair's
cell: a constant per system (uniform), per (system, query) (entity-relation:
:func:`receval.engine.sampled_data.design_probabilities`), per (system, judge level)
(``judge-strata``: :func:`receval.engine.strata.strata_probabilities`, the fact's level read
by the engine, table ``judge_pool_level{j}``); q₀(x) is Σ_u (n_u/N) P_u(x) over the pairs of
fact x.  E_j[den] is the column (k, u) of the sums (P_u vanishes off X_k); with
``--cluster-queries`` the conditional expectations divide by Σ_{x∈q} s_j(x), summed from the
same pairs.  Equivalence classes: a class is drawn with its members' summed probability, so
its P_u is Σ over the members k output of p_{k,d} (:func:`class_design_sums`).

The sums run in another order than the in-memory path's sparse products: they agree to about
1e-15 relative; the outputs, rounded as written, are the same bytes (tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from receval.engine.judge_classes import JudgeClasses
    from receval.engine.judge_stream import PoolSums
    from receval.estimators.sample_data import SampleData


def uniform_only(data: SampleData) -> bool:
    """Whether every sampler of ``data`` is uniform (the m × m sums of the stream suffice)."""
    return all(d == "uniform" for d in data.sampler_design)


@dataclass(frozen=True)
class SamplerKinds:
    """The distinct (system, design) of ``data``'s samplers: ``system`` (U,) codes, ``design``
    (U,) names, ``of_sampler`` (J,) each sampler's kind, ``share`` (U,) n_u/N (the kind's
    judged draws over all), ``column`` per design (m,) each system's kind (−1: none)."""

    system: np.ndarray
    design: tuple[str, ...]
    of_sampler: np.ndarray
    share: np.ndarray
    column: dict[str, np.ndarray]

    @property
    def size(self) -> int:
        return self.system.size

    @classmethod
    def of(cls, data: SampleData) -> SamplerKinds:
        """The kinds of ``data``'s samplers, sorted by (system, design)."""
        systems, names = data.sampler_system, data.sampler_design
        each = [(int(k), str(d)) for k, d in zip(systems, names, strict=True)]
        pairs = sorted(set(each))
        index = {p: u for u, p in enumerate(pairs)}
        of = np.array([index[p] for p in each], np.int64)
        N = float(data.sampler_n.sum())
        n = np.bincount(of, weights=data.sampler_n, minlength=len(pairs))
        column: dict[str, np.ndarray] = {}
        for u, (k, d) in enumerate(pairs):
            column.setdefault(d, np.full(data.m, -1, np.int64))[k] = u
        return cls(
            system=np.array([k for k, _ in pairs], np.int64),
            design=tuple(d for _, d in pairs),
            of_sampler=of,
            share=n / N if N > 0 else np.zeros(len(pairs)),
            column=column,
        )


class PairProbabilities:
    """p_{k,d}(x) of every design of the kinds at the pool's (fact, system) pairs, as tables
    over each design's cells: (m, Q) per (system, query) for uniform and entity-relation (Q
    the judge keys' queries), (m, L + 1) per (system, level) for a judge's strata, the pool
    facts' levels read from the engine (:meth:`levels_of`)."""

    def __init__(self, judge: Any, designs: Any, names: tuple[str, ...]) -> None:
        self.judge, self.designs = judge, designs
        self.tables: dict[str, np.ndarray] = {}
        self.judge_of: dict[str, int] = {}
        for name in sorted(set(names)):
            self._table(name)

    def _table(self, design: str) -> None:
        from receval.design import JUDGE_STRATA, parse_judge_strata

        judge, m = self.judge, len(self.judge.summary.systems)
        if design.startswith(JUDGE_STRATA + ":"):
            from receval.engine.strata import JudgeLevels, strata_probabilities

            who, _ = parse_judge_strata(design)
            levels = self.designs.judge_levels(who)
            width = 0 if levels is None else levels.counts.shape[1]
            grid = JudgeLevels(levels.counts, np.arange(width)) if levels is not None else None
            systems = np.repeat(np.arange(m), width)
            facts = np.tile(np.arange(width), m)
            p = strata_probabilities(design, grid, judge.summary.sizes, systems, facts)
            self.tables[design] = p.reshape(m, width)
            self.judge_of[design] = judge.names.index(who)
            return
        cells = self.designs.cells(design)
        queries = judge.keys.queries
        table = np.zeros((m, len(queries)))
        systems = pd.Index(judge.summary.systems)
        i = systems.get_indexer(cells.index.get_level_values(0))
        q = queries.get_indexer(cells.index.get_level_values(1))
        ok = (i >= 0) & (q >= 0)
        table[i[ok], q[ok]] = cells.to_numpy(float)[ok]
        self.tables[design] = table

    @property
    def judges(self) -> list[int]:
        """The judges whose levels the pairs need (one per ``judge-strata`` design's judge)."""
        return sorted(set(self.judge_of.values()))

    def missing_level(self, j: int) -> int:
        """The level of a fact judge ``j`` did not grade (the strata tables' last column)."""
        return next(self.tables[d].shape[1] - 1 for d, k in self.judge_of.items() if k == j)

    def at(self, design: str, code: np.ndarray, query: np.ndarray, levels: dict) -> np.ndarray:
        """p of ``design`` at pairs of systems ``code`` whose facts have query codes ``query``
        and, per judge, levels ``levels[j]``."""
        table = self.tables[design]
        if design in self.judge_of:
            return table[code, levels[self.judge_of[design]]]
        return table[code, query]


#: per pool fact (in f order): judge {j}'s level of it (the facts it graded)
POOL_LEVELS = """
SELECT k.f, l.level FROM judge_pool_f k
JOIN (SELECT query_id, {h} AS a, level FROM judge_levels WHERE j = {j}) l
ON k.query_id = l.query_id AND k.a = l.a
ORDER BY k.f
"""


def pool_levels(engine, judges: list[int]) -> None:
    """Tables ``judge_pool_level{j}`` (:data:`POOL_LEVELS`) for the judges ``judges``, once
    per session."""
    from receval.engine.judge_stream import insertion_order

    h = engine.dialect.hash64("answer")
    for j in judges:
        name = f"judge_pool_level{j}"
        if engine.con.execute(
            f"SELECT count(*) FROM information_schema.tables WHERE table_name = '{name}'"
        ).fetchone()[0]:
            continue
        with insertion_order(engine.con):
            engine.create_table(name, POOL_LEVELS.format(h=h, j=int(j)))


def _read_levels(engine, probs: PairProbabilities, lo: int, hi: int) -> dict[int, np.ndarray]:
    """Per judge: the level of each fact of [lo, hi) (its missing level where not graded)."""
    out = {}
    for j in probs.judges:
        got = engine.con.execute(
            f"SELECT f, level FROM judge_pool_level{j} WHERE f >= {int(lo)} AND f < {int(hi)}"
        ).fetchnumpy()
        level = np.full(hi - lo, probs.missing_level(j), np.int64)
        level[np.asarray(got["f"], np.int64) - lo] = np.asarray(got["level"], np.int64)
        out[j] = level
    return out


#: per (pair, kind of its system): p, the kind's probability of the pair's fact (Spark's
#: self-join; the parts of :func:`joined_pair_probabilities`)
CELL_PART = """
SELECT x.code, x.query_id, x.a, c.u, c.p FROM judge_pairs x
JOIN {cells} c ON x.code = c.code AND x.query_id = c.query_id
"""
LEVEL_PART = """
SELECT x.code, x.query_id, x.a, c.u, c.p FROM judge_pairs x
LEFT JOIN judge_plevel{j} l ON x.query_id = l.query_id AND x.a = l.a
JOIN {cells} c ON x.code = c.code AND coalesce(l.level, {missing}) = c.level
"""
#: per pool fact: q₀ = Σ_u (n_u/N) P_u over the pairs of the fact
KINDS_Q0 = """
SELECT y.query_id, y.a, sum(y.p * s.share) AS q0
FROM judge_pair_p y JOIN judge_kinds s ON y.u = s.u
GROUP BY y.query_id, y.a
"""
#: per query and kind: Σ_{x∈q} P_u(x) over the facts outside classes of several
QUERY_MASS = """
SELECT y.query_id, y.u, sum(y.p) AS p
FROM judge_pair_p y JOIN judge_pool k ON y.query_id = k.query_id AND y.a = k.a
WHERE k.classed = 0
GROUP BY y.query_id, y.u
"""


def joined_pair_probabilities(engine, kinds: SamplerKinds, probs: PairProbabilities, cache) -> None:
    """Tables ``judge_pair_p`` (:data:`CELL_PART`, :data:`LEVEL_PART`: every pair's p under
    each kind of its system), ``judge_kinds`` and ``judge_q0_kinds`` (:data:`KINDS_Q0`) for the
    self-join of :func:`receval.engine.judge.pair_sums`; kept while ``kinds`` stay the same
    (``cache``)."""
    stamp = (kinds.design, kinds.system.tobytes(), kinds.share.tobytes())
    if cache.get("kinds") == stamp:
        return
    h = engine.dialect.hash64("answer")
    parts = []
    for n, design in enumerate(sorted(kinds.column)):
        column, table = kinds.column[design], probs.tables[design]
        code, cell = np.nonzero((column[:, None] >= 0) & (table > 0))
        name = f"judge_cellp{n}"
        by = "level" if design in probs.judge_of else "query_id"
        where = cell if by == "level" else probs.judge.keys.queries.to_numpy(object)[cell]
        engine.register(name, pd.DataFrame({
            "code": code.astype(np.int64), by: where,
            "u": column[code].astype(np.int64), "p": table[code, cell],
        }))  # fmt: skip
        if by == "query_id":
            parts.append(CELL_PART.format(cells=name))
            continue
        j = probs.judge_of[design]
        engine.create_table(
            f"judge_plevel{j}",
            f"SELECT query_id, {h} AS a, level FROM judge_levels WHERE j = {int(j)}",
        )
        parts.append(LEVEL_PART.format(cells=name, j=j, missing=probs.missing_level(j)))
    engine.create_table("judge_pair_p", "\nUNION ALL\n".join(parts))
    engine.register(
        "judge_kinds",
        pd.DataFrame({"u": np.arange(kinds.size, dtype=np.int64), "share": kinds.share}),
    )
    engine.create_table("judge_q0_kinds", KINDS_Q0)
    cache["kinds"] = stamp


def joined_query_mass(engine, queries: pd.Index, U: int) -> np.ndarray:
    """(Q, U) Σ_{x∈q} P_u(x) over the pool's facts outside classes of several
    (:data:`QUERY_MASS`), Q the codes of ``queries``."""
    frame = engine.query(QUERY_MASS)
    out = np.zeros((len(queries), U))
    at = (queries.get_indexer(frame["query_id"]), frame["u"].to_numpy(np.int64))
    out[at] = frame["p"].to_numpy(float)
    return out


def stream_design_sums(
    engine,
    facts: int,
    pairs: float,
    kinds: SamplerKinds,
    probs: PairProbabilities,
    targets: np.ndarray,
    values: np.ndarray,
    graded_keys: int,
    by_query: bool = False,
) -> PoolSums:
    """:class:`~receval.engine.judge_stream.PoolSums` over the sampler kinds (module
    docstring: g1, pm (m, U); gs, ps (C, m, U); with ``by_query`` per query too and
    ``mass_q`` (Q, U), Σ_{x∈q} P_u(x)) by slices of the numbered pool, as
    :func:`receval.engine.judge_stream.stream_sums` reads them."""
    from receval.engine import judge_stream as stream

    m, U, C = targets.shape[0], kinds.size, values.shape[0]
    Q = targets.shape[1]
    pool_levels(engine, probs.judges)
    total = np.zeros((2 * m, (C + 1) * U))
    per_query = np.zeros((Q, 2 * m, (C + 1) * U)) if by_query else None
    mass_q = np.zeros((Q, U)) if by_query else None
    jp, scored = np.zeros((C, m)), np.zeros(m)
    slices = max(1, int(np.ceil(pairs / stream.PAIRS_PER_SLICE)))
    step = max(1, int(np.ceil(facts / slices)))
    for lo in range(0, facts, step):
        hi = min(lo + step, facts)
        f, code, key, query = stream._read_slice(engine, lo, hi, graded_keys)
        levels = _read_levels(engine, probs, lo, hi)
        entries = _entries(f, code, query, levels, kinds, probs)
        part = _slice(f, code, key, query, entries, kinds, targets, values, graded_keys, per_query)
        total += part[0]
        jp += part[1]
        scored += part[2]
        if mass_q is not None:
            e_f, e_col, e_p = entries
            np.add.at(mass_q, (query[e_f], e_col), e_p)
    queries = None
    if per_query is not None:
        queries = stream.PoolSums(
            **stream.split_sums(per_query, m, C, U), jp=jp, scored=scored, mass_q=mass_q
        )
    return stream.PoolSums(
        **stream.split_sums(total, m, C, U), jp=jp, scored=scored, by_query=queries
    )


def _entries(f, code, query, levels, kinds: SamplerKinds, probs: PairProbabilities):
    """(fact, kind column, p) of every pair and design its system was sampled by, in f order."""
    fs, cols, ps = [], [], []
    for design in sorted(kinds.column):
        col = kinds.column[design][code]
        ok = col >= 0
        fs.append(f[ok])
        cols.append(col[ok])
        ps.append(
            probs.at(design, code[ok], query[f[ok]], {j: v[f[ok]] for j, v in levels.items()})
        )
    e_f, e_col, e_p = (np.concatenate(x) for x in (fs, cols, ps))
    order = np.argsort(e_f, kind="stable")
    return e_f[order], e_col[order], e_p[order]


def _slice(f, code, key, query, entries, kinds, targets, values, graded_keys, per_query):
    """One slice's (Lᵀ R (2m × (C + 1)U), jp (C, m), scored (m,)): L = [A | T] as in
    :func:`receval.engine.judge_stream._slice_sums`, R = [P/q₀ | P v_0/q₀ | …] with P the
    facts' (fact × kind) probabilities ``entries``
    (:func:`receval.engine.judge_stream.slice_products`)."""
    from receval.engine.judge_stream import slice_products

    e_f, e_col, e_p = entries
    q0 = np.bincount(e_f, weights=e_p * kinds.share[e_col], minlength=key.size)
    return slice_products(
        f, code, key, query, q0, targets, values, graded_keys, per_query, entries, kinds.size
    )


def class_design_sums(
    classes: JudgeClasses,
    kinds: SamplerKinds,
    designs: Any,
    targets: np.ndarray,
    strings: np.ndarray,
    values: np.ndarray,
    graded: np.ndarray,
    by_query: bool = False,
) -> PoolSums:
    """The classes' terms (:func:`receval.engine.judge_classes.class_sums`) over the sampler
    kinds: a class's P_u = Σ p_{k,d} over the members system k output (``designs``: the view's
    :class:`receval.engine.sampled_data.EngineDesigns`, at the small facts)."""
    from receval.engine.judge_classes import sums_by_query

    fact, code = classes.rows
    cls = classes.of[np.searchsorted(classes.group, fact)]
    P = np.zeros((classes.heads.size, kinds.size))
    for design in sorted(kinds.column):
        col = kinds.column[design][code]
        ok = col >= 0
        p = designs.at_function(design)(code[ok], fact[ok])
        np.add.at(P, (cls[ok], col[ok]), p)

    def terms(rows):
        return _class_terms(classes, kinds, P, targets, strings, values, graded, rows)

    shape = (targets.shape[1], targets.shape[0], strings.shape[0], kinds.size)
    return sums_by_query(classes, terms, shape, by_query, lambda rows: P[rows].sum(axis=0))


def _class_terms(classes, kinds, P, targets, strings, values, graded, rows) -> dict:
    """The terms of :func:`class_design_sums` of the classes ``rows`` (a mask or slice)."""
    M = classes.count[rows]  # (n, m) the strings each system output
    A = (M > 0).astype(float)
    Pu = P[rows]  # (n, U)
    q0 = Pu @ kinds.share
    with np.errstate(divide="ignore"):
        inv = np.where(q0 > 0, 1.0 / q0, 0.0)
    t = targets[:, classes.query[rows]].T * A
    fact, code = classes.rows
    cls = classes.of[np.searchsorted(classes.group, fact)]
    keep = np.zeros(classes.heads.size, bool)
    keep[rows] = True
    at = np.cumsum(keep) - 1
    fact, code, cls = fact[keep[cls]], code[keep[cls]], at[cls[keep[cls]]]
    heads = classes.heads[rows]
    right = Pu * inv[:, None]
    gs, ps, jp = [], [], []
    for c in range(strings.shape[0]):
        G = np.zeros_like(M)
        np.add.at(G, (cls, code), strings[c, fact])
        s = values[c, heads]
        gs.append(A.T @ (right * s[:, None]))
        ps.append((t * G).T @ right)
        jp.append((t * s[:, None]).sum(axis=0))
    return {
        "g1": A.T @ right,
        "pm": (t * M).T @ right,
        "gs": np.stack(gs),
        "ps": np.stack(ps),
        "jp": np.stack(jp),
        "scored": (A * graded[heads][:, None]).sum(axis=0),
    }


def design_expectations(data: SampleData, grams: dict, kinds: SamplerKinds, N: float):
    """(expected_score, expected_mass), each (J, 2m + 1), from the kinds' sums (module
    docstring; :func:`receval.engine.judge.expectations` for uniform samplers)."""
    from receval.estimators.precision import mixture_weights

    w = mixture_weights(data, "size")
    u, k = kinds.of_sampler, data.sampler_system
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(data.sampler_n > 0, w / data.sampler_n, 0.0)  # (m, J)
    inv_n = 1.0 / N if N > 0 else 0.0
    out = []
    for s_name, m_name in (("ps", "gs"), ("pm", "g1")):
        prec = scale.T * grams[s_name][:, u].T  # (J, m)
        num = grams[m_name][:, u].T * inv_n
        den = grams[m_name][k, u] * inv_n  # (J,)
        out.append(np.concatenate([prec, num, den[:, None]], axis=1))
    return out[0], out[1]


def design_query_expectations(
    data: SampleData, grams: dict, mass_q: np.ndarray, kinds: SamplerKinds, N: float
) -> dict[str, np.ndarray]:
    """``expected_score_q``, ``expected_mass_q`` (J, Q, 2m + 1) from the per-query sums over
    the kinds (``grams``: (Q, m, U) each; ``mass_q`` (Q, U) Σ_{x∈q} s_j(x)), Q ``data``'s
    queries (:func:`receval.estimators.ppi._query_expectations`)."""
    from receval.estimators.precision import mixture_weights

    w = mixture_weights(data, "size")
    u, k = kinds.of_sampler, data.sampler_system
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(data.sampler_n > 0, w / data.sampler_n, 0.0)
        mass = mass_q[:, u].T  # (J, Q)
        inv = np.where(mass > 0, 1.0 / mass, 0.0)[:, :, None]
    inv_n = 1.0 / N if N > 0 else 0.0
    out = []
    for s_name, m_name in (("ps", "gs"), ("pm", "g1")):
        prec = scale.T[:, None, :] * grams[s_name][:, :, u].transpose(2, 0, 1)
        num = grams[m_name][:, :, u].transpose(2, 0, 1) * inv_n
        den = grams[m_name][:, k, u].T * inv_n  # (J, Q)
        out.append(np.concatenate([prec, num, den[:, :, None]], axis=2) * inv)
    return {"expected_score_q": out[0], "expected_mass_q": out[1]}
