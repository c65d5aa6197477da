"""Sampling designs: per-system precision samples, exhaustive units, what still needs a label.

A **sampler** is one (sample round, system) pair: ``n_j`` i.i.d. draws *with replacement* from a
known distribution ``s_j`` over the system's distinct facts (Chaganty et al. 2017, §3: "X̂_j is a
multiset of n_j i.i.d. draws from p_j").  Two distributions are built in:

* ``uniform``: s_j(x) = 1/|X_j| (micro precision's natural proposal);
* ``judge-uncertainty`` (``receval sample --by-judge``): favours facts an automatic judge is
  unsure about, s_j(x) = ½ · 1/|X_j| + ½ · u(x) / Σ_{X_j} u, u = s(x)(1 − s(x)) with s the
  judge's score (``judge.tsv``; imputed where missing).  Half the mass stays uniform, so no fact
  gets less than half its uniform probability (importance weights stay ≤ 2); like every design it
  is recorded in samples.tsv, so every estimator stays unbiased (the judge only decides where the
  human labels go; cf. active statistical inference, Zrnic & Candès 2024);
* ``judge-strata:<judge>:<u_0>,…,<u_L>`` (``receval sample --by-judge``): strata are the
  levels of one judge (its grades, or equal-count bins of a continuous score, and a last level
  for facts it did not grade: :func:`receval.judge.judge_levels`) and
  s_j(x) = a/|X_j| + (1 − a) u_h(x)/Σ_{X_j} u_h with a = :data:`JUDGE_STRATA_FLOOR`.  With
  u_h = √(p_h(1 − p_h)), p_h the share correct of level h estimated from the labels so far,
  this is Neyman allocation for the prediction-powered estimators (whose draws' terms are
  the residuals f − p of the calibrated judge, of variance p_h(1 − p_h) in stratum h); the
  floor keeps every fact at ≥ a times its uniform probability.  The weights are written into
  the design's name, so samples.tsv alone says what was drawn
  (:func:`receval.estimators.judge_calibration.judge_strata_design` computes them);
* ``entity-relation``: the distribution of the paper's evaluation service,
  s_j(x) ∝ (#distinct facts of subj(x) in X_j) / (#facts with subj(x) · #facts with rel(x)),
  where subj is the query's ``entity`` column (default: the query id) and rel its ``slot``
  column (default: one relation for all).

Every draw is recorded in ``samples.tsv`` with ``prob`` = s_j(x), the probability that *one draw*
picks that answer; :func:`infer_designs` checks recorded probabilities against the declared (or
inferred) distribution, so samples drawn elsewhere are accepted when their probabilities say which
design they follow.

``receval sample`` writes each round's rows in a uniformly random order (the order of hashed
keys, :func:`in_hashed_order`) and records it with ``order`` = ``random`` on every row
of the round (:data:`ORDER_COLUMN`): read in that order, the round is a sequence of draws from
the mixture of the samplers still to come, which the anytime intervals use for every system
(:mod:`receval.estimators.anytime`).  A round without the marker (older bundles, samples drawn
elsewhere) is read sampler by sampler, as before.

The draws of ``receval sample`` are hashed: a deterministic function of (seed, round, system,
draw index) and the system's facts (:func:`hashed_precision_samples`, :func:`hashed_units`;
the uniforms in :mod:`receval.draw_hash`), the same in memory and in every engine
(:mod:`receval.engine.draws`), so ``--in-memory`` and ``--out-of-core`` record the same round.
:func:`draw_precision_samples` and :func:`draw_exhaustive_units` draw from a
``numpy.random.Generator`` instead, for the simulations (:mod:`receval.simulation`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from receval.errors import BundleError
from receval.formats.tables import LINE

DISTRIBUTIONS = ("uniform", "entity-relation", "judge-uncertainty")
#: samples.tsv column marking a round written in a uniformly random order (value
#: :data:`RANDOM_ORDER` on every row of the round; empty: the rows' order carries no randomness)
ORDER_COLUMN = "order"
RANDOM_ORDER = "random"
#: the uniform share of the ``judge-uncertainty`` design
JUDGE_UNIFORM_SHARE = 0.5
#: prefix of the ``judge-strata`` designs (Neyman allocation over one judge's levels)
JUDGE_STRATA = "judge-strata"
#: the uniform share a of the ``judge-strata`` designs (each fact keeps ≥ a × uniform)
JUDGE_STRATA_FLOOR = 0.3
#: the output column holding a judge's level (``judge_level:<name>``)
LEVEL_COLUMN = "judge_level:"


def known_design(distribution: str) -> bool:
    """Whether ``distribution`` names a built-in design (a ``judge-strata`` one parses)."""
    if distribution in DISTRIBUTIONS:
        return True
    try:
        parse_judge_strata(distribution)
    except ValueError:
        return False
    return True


def parse_judge_strata(design: str) -> tuple[str, np.ndarray]:
    """(judge name, stratum weights u (L + 1,)) of a ``judge-strata:<judge>:<u_0>,…`` design;
    ``ValueError`` when it is not one."""
    head, _, rest = str(design).partition(":")
    name, _, weights = rest.rpartition(":")
    if head != JUDGE_STRATA or not weights:
        raise ValueError(f"{design!r} is not a {JUDGE_STRATA}:<judge>:<weights> design")
    try:
        u = np.array([float(w) for w in weights.split(",")], float)
    except ValueError:
        raise ValueError(f"{design!r}: the stratum weights must be numbers") from None
    if not np.all(np.isfinite(u)) or (u < 0).any() or not u.sum() > 0:
        raise ValueError(f"{design!r}: the stratum weights must be ≥ 0 with a positive sum")
    return name, u


def sampling_probabilities(
    outputs: pd.DataFrame, queries: pd.DataFrame, distribution: str, *, rows=None
) -> pd.Series | np.ndarray:
    """s_j(x) for every row of ``outputs`` (one row per system × fact), normalised per system;
    with ``rows`` (positions), only at those rows, as an array.

    Parameters
    ----------
    outputs : frame with ``system, query_id, fact``.
    queries : frame with ``query_id`` and optionally ``entity`` and ``slot``.
    distribution : ``"uniform"`` or ``"entity-relation"`` (module docstring).

    Returns
    -------
    Series aligned with ``outputs.index``; sums to 1 within each system (an array of the values
    at ``rows`` when given).
    """
    from receval.formats.coded import system_codes

    if distribution == "uniform":  # 1/|X_j|: no temporary as long as the outputs but the result
        codes = system_codes(outputs["system"])[0]
        size = chunked_bincount(codes)
        at = codes if rows is None else codes[np.asarray(rows, dtype=np.int64)]
        prob = (1.0 / np.maximum(size, 1))[at] if len(codes) else np.zeros(len(at))
        return prob if rows is not None else pd.Series(prob, index=outputs.index, name="prob")
    sys_codes = system_codes(outputs["system"])[0].astype(np.int64)
    if distribution == "judge-uncertainty":
        return _judge_uncertainty(outputs, sys_codes, rows)
    if str(distribution).startswith(JUDGE_STRATA + ":"):
        return _judge_strata(outputs, sys_codes, distribution, rows)
    if distribution != "entity-relation":
        raise ValueError(
            f"unknown sampling distribution {distribution!r} (known: {', '.join(DISTRIBUTIONS)})"
        )
    q = queries.set_index("query_id")
    entity = q["entity"] if "entity" in q.columns else pd.Series(q.index, index=q.index)
    slot = q["slot"] if "slot" in q.columns else pd.Series("", index=q.index)
    # integer codes per query, then per row (no string per row)
    q_codes, q_values = system_codes(outputs["query_id"])
    subj_of = pd.factorize(entity.reindex(q_values), use_na_sentinel=False)[0].astype(np.int64)
    rel_of = pd.factorize(slot.reindex(q_values), use_na_sentinel=False)[0].astype(np.int64)
    subj = _group_key(sys_codes, subj_of[q_codes])
    rel = _group_key(sys_codes, rel_of[q_codes])
    # instances = input rows (a fact output twice, e.g. with two provenances, is two instances)
    inst = outputs["copies"].to_numpy(float) if "copies" in outputs else np.ones(len(sys_codes))
    distinct = np.bincount(subj)[subj].astype(float)  # counts and integer sums: exact
    inst_subj = np.bincount(subj, weights=inst)[subj]
    inst_rel = np.bincount(rel, weights=inst)[rel]
    weight = distinct / (inst_subj * inst_rel)
    total = pd.Series(weight).groupby(sys_codes, observed=True).transform("sum").to_numpy()
    if rows is not None:
        rows = np.asarray(rows, dtype=np.int64)
        return weight[rows] / total[rows]
    return pd.Series(weight / total, index=outputs.index, name="prob")


def _judge_uncertainty(outputs: pd.DataFrame, sys_codes: np.ndarray, rows=None):
    """s_j(x) = a/|X_j| + (1 − a) u(x)/Σ_{X_j} u, u = s(1 − s), a = JUDGE_UNIFORM_SHARE."""
    if "judge_score" not in outputs.columns:
        raise ValueError("the judge-uncertainty design needs the judge's scores (judge.tsv)")
    s = outputs["judge_score"].to_numpy(float)
    return _floored_mixture(outputs, sys_codes, s * (1.0 - s), JUDGE_UNIFORM_SHARE, rows)


def _judge_strata(outputs: pd.DataFrame, sys_codes: np.ndarray, design: str, rows=None):
    """s_j(x) = a/|X_j| + (1 − a) u_h(x)/Σ_{X_j} u_h of a ``judge-strata`` design (module
    docstring), a = JUDGE_STRATA_FLOOR; the level h(x) from ``judge_level:<judge>``."""
    _, u = parse_judge_strata(design)
    level = _design_levels(outputs, design)
    m = int(sys_codes.max(initial=-1)) + 1
    counts = np.bincount(sys_codes * u.size + level, minlength=m * u.size).reshape(m, u.size)
    from receval.engine.draws import strata_mass

    total = strata_mass(counts, u)
    return _floored_mixture(outputs, sys_codes, u[level], JUDGE_STRATA_FLOOR, rows, total)


def floored_share(size: np.ndarray, total: np.ndarray, w: np.ndarray, floor: float):
    """a/|X_j| + (1 − a) w/Σ_{X_j} w elementwise (uniform where the sum is 0), a = ``floor``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, w / total, 1.0 / size)
    return floor / size + (1.0 - floor) * share


def _floored_mixture(outputs: pd.DataFrame, sys_codes: np.ndarray, w: np.ndarray, floor: float,
                     rows=None, total=None):  # fmt: skip
    """s_j(x) = a/|X_j| + (1 − a) w(x)/Σ_{X_j} w, a = ``floor`` (uniform where a system's
    weights sum to 0; ``total`` the sums when given): each row's probability, or ``rows``'."""
    size = np.bincount(sys_codes).astype(float)
    total = np.bincount(sys_codes, weights=w) if total is None else total
    prob = floored_share(size[sys_codes], total[sys_codes], w, floor)
    if rows is not None:
        return prob[np.asarray(rows, dtype=np.int64)]
    return pd.Series(prob, index=outputs.index, name="prob")


def chunked_bincount(codes: np.ndarray, minlength: int = 0, chunk: int = 1 << 22) -> np.ndarray:
    """``np.bincount`` of small integer codes a few million at a time (bincount converts its
    input to intp: 8 bytes per value at once otherwise)."""
    size = np.zeros(max(int(codes.max(initial=-1)) + 1, minlength), dtype=np.int64)
    for lo in range(0, len(codes), chunk):
        size += np.bincount(codes[lo : lo + chunk], minlength=len(size))
    return size


def _group_key(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Dense integer codes of the pairs ``(first, second)`` (both non-negative integers)."""
    width = int(second.max(initial=0)) + 1
    key = first * width + second
    if int(first.max(initial=0)) * width < 50_000_000:
        return key
    return np.unique(key, return_inverse=True)[1].ravel()


def draw_precision_samples(
    outputs: pd.DataFrame,
    queries: pd.DataFrame,
    per_system: int | dict[str, int],
    rng: np.random.Generator,
    *,
    distribution: str = "uniform",
    sample: str = "round-1",
    systems: list[str] | None = None,
) -> pd.DataFrame:
    """Draw each system's precision sample i.i.d. with replacement from s_j.

    Returns a ``samples.tsv`` frame: ``sample, system, query_id, answer, prob, draw, design`` with
    one row per draw (a fact drawn twice appears twice).  ``answer`` is the system's own
    (un-normalised) answer string.  One uniform per draw, systems in sorted order, mapped through
    each system's cumulative distribution (inverse CDF), so the draws are a pure function of the
    generator's state; no loop over systems.
    """
    columns = ["sample", "system", "query_id", "answer", "prob", "draw", "design"]
    probs = sampling_probabilities(outputs, queries, distribution).to_numpy()
    chosen, sizes = _chosen_sizes(outputs, per_system, systems)
    if not chosen:
        return pd.DataFrame(columns=columns)
    # rows of the chosen systems in system order; one uniform per draw, inverse CDF per system
    from receval.formats.coded import system_codes as text_codes

    out_codes, names = text_codes(outputs["system"])
    code = np.append(pd.Index(chosen).get_indexer(names), -1)  # name code -> chosen (-1: not)
    system_codes = code.astype(np.int32)[out_codes]  # 4 bytes per row
    # rows of each chosen system in row order (a stable sort puts the others, -1, first)
    counts = chunked_bincount(system_codes + 1, minlength=len(chosen) + 1)
    rows = np.argsort(system_codes, kind="stable")[counts[0] :]
    del system_codes
    stop = np.cumsum(counts[1:])
    start = stop - counts[1:]
    cum = probs[rows]
    np.cumsum(cum, out=cum)
    low = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
    high = cum[stop - 1]
    owner = np.repeat(np.arange(len(chosen)), sizes)
    u = rng.random(int(sizes.sum()))
    target = low[owner] + u * (high[owner] - low[owner])
    pick = np.searchsorted(cum, target, side="right")
    pick = np.clip(pick, start[owner], stop[owner] - 1)  # guard the block ends against rounding
    drawn = outputs.iloc[rows[pick]]
    answer = drawn["answer_raw"] if "answer_raw" in drawn else drawn["answer"]
    frame = pd.DataFrame(
        {
            "sample": sample,
            "system": drawn["system"].to_numpy(),
            "query_id": drawn["query_id"].to_numpy(),
            "answer": answer.to_numpy(),
            "prob": probs[rows[pick]],
            "draw": np.concatenate([np.arange(1, n + 1) for n in sizes]),
            "design": distribution,
        },
        columns=columns,
    )
    frame.attrs["rows"] = rows[pick]  # the drawn rows of ``outputs`` (for new_sample_round)
    return frame


#: design of weighted exhaustive units: independent draws with replacement, p_u ∝ weight
UNIT_DESIGN_PPS = "pps-wr"


def draw_exhaustive_units(
    candidates: pd.DataFrame, m: int, rng: np.random.Generator, *, exclude: set[str] | None = None
) -> pd.DataFrame:
    """Draw ``m`` units (documents) to annotate exhaustively.

    ``candidates`` has ``unit`` and optionally ``prob`` (relative selection weights).

    * **Uniform** (no weights): ``m`` distinct units without replacement, skipping the units in
      ``exclude`` (annotated in an earlier round).  A simple random sample of the remaining units
      joined to an earlier simple random sample is a simple random sample of the union's size, so
      every unit keeps the same inclusion probability and θ̂'s unit weights stay 1 (``prob`` left
      empty, which the bundle reads as uniform).
    * **Weighted** (``prob`` given for every candidate): ``m`` independent draws *with
      replacement* with single-draw probability p_u = w_u / Σ w over **all** candidates
      (``exclude`` is ignored: a unit annotated earlier may be drawn again and costs no new
      annotation).  The Hansen–Hurwitz weight of a draw, 1/(m p_u), is exact, and draws of
      several rounds from the same candidate table pool into one with-replacement sample
      (Σ_draws a_u/p_u estimates m·A in every round), so θ̂'s weights are exact across rounds.
      Returned once per distinct unit with ``prob`` = p_u, ``draws`` = how often it was drawn
      and ``design`` = ``pps-wr`` — the columns ``exhaustive_units.tsv`` records.

    Before receval 0.x the weighted design drew without replacement from the shrinking pool and
    recorded p_u as if it were the inclusion probability (a biased θ̂, −17 SE at 30% of 431
    documents in the issue-9 audit).
    """
    return _draw_units(
        candidates,
        m,
        exclude,
        weighted=lambda p: rng.choice(len(p), size=m, replace=True, p=p),
        uniform=lambda pool: rng.choice(len(pool), size=m, replace=False),
    )


def _draw_units(candidates: pd.DataFrame, m: int, exclude: set[str] | None, *, weighted, uniform):
    """:func:`draw_exhaustive_units`'s two designs, ``weighted(p)`` the positions of the ``m``
    pps-wr draws (p_u over the candidates), ``uniform(pool)`` those of the ``m`` units of
    ``pool`` (the candidates not in ``exclude``) drawn without replacement."""
    if "prob" in candidates.columns and candidates["prob"].notna().all() and len(candidates):
        w = candidates["prob"].to_numpy(float)
        if (w < 0).any() or not w.sum() > 0:
            raise ValueError("unit weights must be >= 0 with a positive sum")
        p = w / w.sum()
        counts = np.bincount(weighted(p), minlength=len(candidates))
        chosen = np.flatnonzero(counts)
        return pd.DataFrame(
            {
                "unit": candidates["unit"].to_numpy()[chosen],
                "prob": p[chosen],
                "draws": counts[chosen].astype(np.int64),
                "design": UNIT_DESIGN_PPS,
            }
        )
    pool = candidates if not exclude else candidates[~candidates["unit"].isin(exclude)]
    if m > len(pool):
        raise ValueError(f"asked for {m} exhaustive units but only {len(pool)} candidates remain")
    return pd.DataFrame({"unit": pool["unit"].to_numpy()[np.sort(uniform(pool))]})


def with_unit_rows(todo: pd.DataFrame, unit_rows: pd.DataFrame) -> pd.DataFrame:
    """``to_annotate`` rows ``todo`` (``kind, query_id, answer, systems, unit, prob``) with a
    ``kind`` = ``unit`` row per drawn unit (:func:`draw_exhaustive_units`'s frame); with
    ``draws`` and ``design`` columns when the units are pps-wr draws."""
    unit_todo = pd.DataFrame(
        {
            "kind": "unit",
            "query_id": "",
            "answer": "",
            "systems": 0,
            "unit": unit_rows["unit"].to_numpy(),
            "prob": unit_rows["prob"].to_numpy() if "prob" in unit_rows else np.nan,
        }
    )
    if "draws" in unit_rows:  # pps-wr: record draws and design in exhaustive_units.tsv
        unit_todo["draws"] = unit_rows["draws"].to_numpy()
        unit_todo["design"] = unit_rows["design"].to_numpy()
        todo["draws"] = pd.array([pd.NA] * len(todo), dtype="Int64")
        todo["design"] = ""
    return pd.concat([todo, unit_todo], ignore_index=True)


def unit_weights(units: pd.DataFrame) -> np.ndarray:
    """Estimation weight of every row of ``exhaustive_units`` (U,), the design it records.

    * ``design`` = ``pps-wr`` (``receval sample`` with weighted candidates): ``draws / prob``,
      the Hansen–Hurwitz weight summed over the unit's draws (``draws`` defaults to 1);
    * ``prob`` without a ``pps-wr`` design: ``prob`` is the unit's *inclusion probability*
      (a without-replacement design drawn elsewhere): the Horvitz–Thompson weight 1/prob;
    * no ``prob``: uniform, weight 1.

    Ratios of weighted totals (θ̂, simple recall) only need the weights up to a constant factor.
    """
    if not len(units):
        return np.empty(0)
    prob = units["prob"].to_numpy(float) if "prob" in units else np.full(len(units), np.nan)
    design = (
        units["design"].fillna("").astype(str).str.strip().to_numpy()
        if "design" in units
        else np.full(len(units), "")
    )
    draws = (
        pd.to_numeric(units["draws"], errors="coerce").fillna(1.0).to_numpy(float)
        if "draws" in units
        else np.ones(len(units))
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        inverse = np.where(np.isnan(prob), 1.0, 1.0 / np.where(np.isnan(prob), 1.0, prob))
    return np.where(design == UNIT_DESIGN_PPS, draws * inverse, inverse)


def facts_to_annotate(
    outputs: pd.DataFrame, drawn_facts: np.ndarray, labelled: pd.Index
) -> pd.DataFrame:
    """The drawn facts that have no label yet, each once (labels are shared across systems).

    Returns ``query_id, answer, systems`` (how many systems output the fact; the answer string is
    the first system's spelling in sorted system order).
    """
    need = np.setdiff1d(np.unique(drawn_facts), labelled.to_numpy())
    rows = outputs[outputs["fact"].isin(need)].sort_values(["fact", "system"])
    counts = rows.groupby("fact", observed=True)["system"].size()
    first = rows.drop_duplicates("fact").set_index("fact")
    raw = first["answer_raw"] if "answer_raw" in first else first["answer"]
    out = pd.DataFrame(
        {"query_id": first["query_id"], "answer": raw, "systems": counts.reindex(first.index)}
    )
    return out.reset_index(drop=True).sort_values(["query_id", "answer"], ignore_index=True)


def round_to_annotate(task, drawn: pd.DataFrame) -> pd.DataFrame:
    """The fact rows of ``to_annotate.tsv`` after a new round ``drawn`` (``attrs["rows"]``: its
    output rows), as the engine path lists them
    (:func:`receval.engine.sampled._round_to_annotate`): every fact drawn in this round or an
    earlier one without a label, once, spelled as the first system (sorted) that drew it
    recorded it, with how many systems output it; ``kind, query_id, answer, systems, unit,
    prob``, sorted by (query_id, answer)."""
    rows = drawn.attrs.get("rows", np.empty(0, np.int64))
    outputs, earlier = task.outputs, task.samples
    fact = outputs["fact"].to_numpy(np.int64)
    raw = "answer_raw" if "answer_raw" in earlier else "answer"
    old = len(earlier) > 0
    spelled = pd.DataFrame(
        {
            "fact": np.r_[earlier["fact"].to_numpy(np.int64) if old else [], fact[rows]],
            "system": np.r_[earlier["system"].astype(str).to_numpy(object) if old else [],
                            drawn["system"].astype(str).to_numpy(object)],
            "query_id": np.r_[earlier["query_id"].astype(str).to_numpy(object) if old else [],
                              drawn["query_id"].astype(str).to_numpy(object)],
            "answer": np.r_[earlier[raw].astype(str).to_numpy(object) if old else [],
                            drawn["answer"].astype(str).to_numpy(object)],
        }
    ).astype({"fact": np.int64})  # fmt: skip
    need = np.setdiff1d(np.unique(spelled["fact"]), task.labels.index.to_numpy())
    first = spelled[spelled["fact"].isin(need)].sort_values(["fact", "system"])
    first = first.drop_duplicates("fact")
    owners = np.bincount(fact[np.isin(fact, need)], minlength=int(need.max(initial=-1)) + 1)
    out = pd.DataFrame(
        {
            "kind": "fact",
            "query_id": first["query_id"].to_numpy(),
            "answer": first["answer"].to_numpy(),
            "systems": owners[first["fact"].to_numpy(np.int64)].astype(np.int64),
        }
    )
    out = out.sort_values(["query_id", "answer"], ignore_index=True)
    out["unit"] = ""
    out["prob"] = np.nan
    return out


@dataclass(frozen=True)
class Sampler:
    """One (sample round, system) sampler: ``n`` draws from distribution ``design``."""

    sample: str
    system: str
    design: str
    n: int


def output_rows(outputs: pd.DataFrame, systems, facts: np.ndarray) -> np.ndarray:
    """The row (position) in ``outputs`` of every ``(system, fact)`` pair; -1 where that system
    never output that fact.  Integer keys over the outputs of those facts only."""
    from receval.formats.coded import system_codes

    out_codes, names = system_codes(outputs["system"])
    codes = names.get_indexer(pd.Index(systems)).astype(np.int64)
    fact = outputs["fact"].to_numpy(np.int64)
    facts = np.asarray(facts, dtype=np.int64)
    width = int(max(fact.max(initial=0), facts.max(initial=0))) + 1
    near = np.flatnonzero(np.isin(fact, np.unique(facts)))
    key = out_codes[near].astype(np.int64) * width + fact[near]
    order = np.argsort(key, kind="stable")
    want = codes * width + facts
    pos = np.searchsorted(key[order], want)
    pos = np.minimum(pos, max(len(order) - 1, 0))
    found = (codes >= 0) & (len(order) > 0)
    found &= key[order][pos] == want if len(order) else False
    return np.where(found, near[order][pos] if len(order) else -1, -1)


def infer_designs(
    samples: pd.DataFrame, outputs: pd.DataFrame, queries: pd.DataFrame, path
) -> list[Sampler]:
    """Check every recorded ``prob`` against its sampler's design and return the samplers.

    A sampler's design is its ``design`` column when given, else the built-in distribution that
    reproduces every recorded probability (relative tolerance 1e-4, so probabilities written
    with 5 significant digits still match).  A probability that fits no design is a
    :class:`BundleError` naming the line: the estimators need s_j(x) for facts that were *not*
    drawn, which only a known design gives.
    """
    if samples.empty:
        return []
    random_order_rows(samples, path)
    # every draw's row in outputs (-1: not an output), then each design's s_j at those rows
    at = output_rows(outputs, samples["system"], samples["fact"].to_numpy(np.int64))
    expected = _DrawProbabilities(outputs, queries, samples, at)
    judged = "judge_score" in outputs.columns
    out = []
    declared_col = (
        samples["design"] if "design" in samples.columns else pd.Series("", index=samples.index)
    )
    for (sample, system), rows in samples.groupby(["sample", "system"], sort=True, observed=True):
        where = (path, sample, system)
        candidates = _candidate_designs(declared_col.loc[rows.index], rows, judged, where)
        chosen = _matching_design(expected, candidates, rows, where)
        out.append(Sampler(sample=str(sample), system=str(system), design=chosen, n=len(rows)))
    return out


def random_order_rows(samples: pd.DataFrame, path: Path | str = "samples.tsv") -> np.ndarray:
    """Which rows of ``samples`` belong to a round recorded as written in a uniformly random
    order (``order`` = ``random``; module docstring).  A :class:`BundleError` naming the line for
    another value, or for a round that marks some of its rows and not others (a round's order
    is random as a whole or not at all)."""
    if ORDER_COLUMN not in samples.columns:
        return np.zeros(len(samples), bool)
    text = samples[ORDER_COLUMN].astype("string").fillna("").str.strip().str.lower()
    text = text.mask(text.isin(["nan", "<na>"]), "")
    marked = (text == RANDOM_ORDER).to_numpy(bool)
    line = samples[LINE].to_numpy() if LINE in samples.columns else np.arange(len(samples)) + 2
    unknown = np.flatnonzero(~marked & (text != "").to_numpy(bool))
    if unknown.size:
        i = int(unknown[0])
        raise BundleError(path, int(line[i]), f"{ORDER_COLUMN} {samples[ORDER_COLUMN].iloc[i]!r} "
                          f"is not {RANDOM_ORDER!r} or empty")  # fmt: skip
    rounds = samples["sample"].astype(str).to_numpy()
    some = np.isin(rounds, np.unique(rounds[marked]))
    mixed = np.flatnonzero(some & ~marked)
    if mixed.size:
        i = int(mixed[0])
        raise BundleError(path, int(line[i]), f"sample {rounds[i]!r} is marked {ORDER_COLUMN} "
                          f"{RANDOM_ORDER!r} on some rows but not on this one: a round's rows are "
                          "in a random order as a whole or not at all")  # fmt: skip
    return marked


def in_random_order(frame: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """``frame`` (a round's samples.tsv rows, ``attrs["rows"]`` their output rows) in a uniformly
    random order drawn from ``rng``, marked ``order`` = ``random`` (module docstring)."""
    shuffle = rng.permutation(len(frame))
    rows = frame.attrs.get("rows")
    out = frame.iloc[shuffle].reset_index(drop=True)
    out[ORDER_COLUMN] = RANDOM_ORDER
    out.attrs = {} if rows is None else {"rows": np.asarray(rows)[shuffle]}
    return out


class _DrawProbabilities:
    """s_j of a design at every draw of ``samples`` (``at``: each draw's row in outputs, -1 when
    not an output), computed when a sampler first asks for it."""

    def __init__(
        self, outputs: pd.DataFrame, queries: pd.DataFrame, samples: pd.DataFrame, at: np.ndarray
    ) -> None:
        self.outputs, self.queries, self.samples, self.at = outputs, queries, samples, at
        self.cache: dict[str, pd.Series] = {}

    def __call__(self, design: str) -> pd.Series:
        if design not in self.cache:
            at = self.at
            s = sampling_probabilities(self.outputs, self.queries, design, rows=np.maximum(at, 0))
            self.cache[design] = pd.Series(np.where(at >= 0, s, np.nan), index=self.samples.index)
        return self.cache[design]


def _candidate_designs(
    declared_values: pd.Series, rows: pd.DataFrame, judged: bool, where: tuple
) -> list[str]:
    """The designs a sampler may have: the one it declares (checked known), else every built-in
    one (judge-uncertainty only with judge scores).  ``where`` is (path, sample, system)."""
    path, sample, system = where
    names = declared_values.astype(str).str.strip()
    declared = set(names) - {""}
    if len(declared) > 1:
        given = names[names != ""]
        other = (given != given.iloc[0]).to_numpy().argmax()
        raise BundleError(
            path,
            int(rows[LINE].loc[given.index[other]]),
            f"sample {sample!r} of system {system!r} declares two designs: "
            f"{given.iloc[0]!r} and {given.iloc[other]!r}",
        )
    inferable = [d for d in DISTRIBUTIONS if d != "judge-uncertainty" or judged]
    candidates = list(declared) if declared else inferable
    for d in candidates:
        if not known_design(d):
            raise BundleError(
                path,
                int(rows[LINE].iloc[0]),
                f"unknown design {d!r} (known: {', '.join(DISTRIBUTIONS)})",
            )
    return candidates


def _matching_design(
    expected: _DrawProbabilities, candidates: list[str], rows: pd.DataFrame, where: tuple
) -> str:
    """The first candidate reproducing every recorded prob of ``rows``, else a BundleError at
    the first disagreeing line of the first candidate."""
    path, sample, system = where
    worst = None
    for d in candidates:
        try:
            want = expected(d).loc[rows.index].to_numpy()
        except ValueError as exc:  # a judge-strata design without that judge's grades
            raise BundleError(path, int(rows[LINE].iloc[0]), str(exc)) from None
        got = rows["prob"].to_numpy(float)
        ok = np.isclose(got, want, rtol=1e-4, atol=0)
        if ok.all():
            return d
        if worst is None:
            i = int((~ok).nonzero()[0][0])
            worst = (d, i, got[i], want[i])
    d, i, got_i, want_i = worst
    raise BundleError(
        path,
        int(rows[LINE].iloc[i]),
        f"prob {got_i:.6g} disagrees with the {d} design of system {system!r} in sample {sample!r} "
        f"(expected {want_i:.6g}); declare the design in a 'design' column or fix the prob",
    )


@dataclass(frozen=True)
class SampleRound:
    """A new sample round: the draws to append to samples.tsv and what needs annotating."""

    name: str
    samples: pd.DataFrame  # samples.tsv rows
    units: pd.DataFrame  # exhaustive units drawn (unit, prob)
    to_annotate: pd.DataFrame  # kind, query_id, answer, systems, unit, prob, label, annotator
    sizes: dict[str, int]


def next_round_name(samples: pd.DataFrame) -> tuple[str, int]:
    """``round-K`` with K one more than the number of rounds recorded so far, and K."""
    k = int(samples["sample"].nunique()) + 1 if len(samples) else 1
    existing = set(samples["sample"]) if len(samples) else set()
    while f"round-{k}" in existing:
        k += 1
    return f"round-{k}", k


def new_sample_round(
    task,
    per_system: int | dict[str, int],
    *,
    seed: int,
    distribution: str = "uniform",
    systems: list[str] | None = None,
    units: pd.DataFrame | None = None,
    exhaustive_units: int = 0,
    name: str | None = None,
) -> SampleRound:
    """Draw a new round of per-system samples (and exhaustive units) for ``task``.

    The draws, units and row order are hashed functions of ``(seed, round number, system,
    draw)`` (:func:`hashed_precision_samples`, :func:`hashed_units`, :func:`in_hashed_order`):
    the same round as ``sample --out-of-core`` in any engine, a later round with the same seed
    draws different items, and the same call on the same bundle draws the same ones.
    ``to_annotate`` holds every drawn fact — of this round or an earlier one — that has no label
    yet (once: labels are shared by all systems) and each unit drawn now.
    """
    default, k = next_round_name(task.samples)
    name = name or default
    if len(task.samples) and name in set(task.samples["sample"]):
        raise ValueError(f"sample round {name!r} exists already; choose another --name")
    drawn = hashed_precision_samples(
        task.outputs,
        task.queries,
        per_system,
        seed=seed,
        round_number=k,
        distribution=distribution,
        sample=name,
        systems=systems,
        raw_outputs=task.raw_outputs,
        strip=task.config.matching.strip,
    )
    todo = round_to_annotate(task, drawn)
    unit_rows = pd.DataFrame(columns=["unit", "prob"])
    if exhaustive_units:
        if units is None:
            raise ValueError("exhaustive units need a table of candidate units")
        done = set(task.exhaustive_units["unit"]) if len(task.exhaustive_units) else set()
        unit_rows = hashed_units(units, exhaustive_units, seed, k, done)
        todo = with_unit_rows(todo, unit_rows)
    drawn = in_hashed_order(drawn, seed, k) if len(drawn) else drawn
    todo["label"] = ""  # to fill in; `receval judgments add` reads the file back
    todo["annotator"] = ""
    sizes = drawn.groupby("system", observed=True).size().to_dict() if len(drawn) else {}
    return SampleRound(name=name, samples=drawn, units=unit_rows, to_annotate=todo, sizes=sizes)


# ---------------------------------------------------------------------------------------------
# hashed draws: the engine's function of (seed, round, system, draw), in memory


def hashed_precision_samples(
    outputs: pd.DataFrame,
    queries: pd.DataFrame,
    per_system: int | dict[str, int],
    *,
    seed: int,
    round_number: int,
    distribution: str = "uniform",
    sample: str = "round-1",
    systems: list[str] | None = None,
    raw_outputs: pd.DataFrame | None = None,
    strip: bool = True,
) -> pd.DataFrame:
    """Each system's precision sample, i.i.d. with replacement from s_j, drawn by the hashed
    function every engine draws with (:mod:`receval.engine.draws`): the same facts, spellings
    and ``prob`` as ``sample --out-of-core`` for the same seed and round.

    A system's distinct facts are ordered by ``(query_id, tail(a), a)`` (``a`` the normalised
    answer, ``tail`` its last character, code-point order: UTF-8 byte order); draw ``d`` takes
    the uniform ``u`` of :func:`receval.draw_hash.draw_uniform` (seed, round, system, d) and
    the fact of rank

    * ``uniform``: k = ⌊u · N_j⌋ (:func:`receval.engine.draws.draw_ranks`);
    * ``entity-relation``: the inverse CDF over the queries' masses N_jq w_jq
      (:func:`receval.engine.draws.weighted_ranks`);
    * ``judge-strata``: u < a a uniform rank, else the inverse CDF over the levels' masses,
      then a uniform rank among the level's facts
      (:func:`receval.engine.draws.strata_ranks`; ties of (query, tail) broken by level);
    * ``judge-uncertainty`` (in memory only): u < a a uniform rank ⌊(u/a) · N_j⌋, else the
      inverse CDF of w(x) = s(1 − s) over the facts in that order at t = (u − a)/(1 − a) · Σ w
      (:func:`_mixture_ranks`).

    ``answer`` is the system's first spelling of the fact (the smallest of its input rows'
    answers, from ``raw_outputs``, else the kept row's; stripped of surrounding spaces unless
    ``strip`` is False, ``[matching] strip = false``), as the engine reads it.  Only the draws are hashed; the chosen systems' rows are sorted once by integer
    codes.  Returns the frame of :func:`draw_precision_samples` (``attrs["rows"]``: the drawn
    rows of ``outputs``).
    """
    columns = ["sample", "system", "query_id", "answer", "prob", "draw", "design"]
    chosen, sizes = _chosen_sizes(outputs, per_system, systems)
    if not chosen:
        return pd.DataFrame(columns=columns)
    from receval.draw_hash import draw_uniform

    uniforms = {
        s: draw_uniform(seed, round_number, s, int(n)) for s, n in zip(chosen, sizes, strict=True)
    }
    level = _design_levels(outputs, distribution)
    order = FactOrder.of(outputs, chosen, level)
    rows, prob = _hashed_rows(outputs, queries, distribution, order, uniforms, level)
    answer = first_spellings(outputs, raw_outputs, rows, strip)
    frame = pd.DataFrame(
        {
            "sample": sample,
            "system": _texts_at(outputs["system"], rows),
            "query_id": _texts_at(outputs["query_id"], rows),
            "answer": answer,
            "prob": prob,
            "draw": np.concatenate([np.arange(1, n + 1, dtype=np.int64) for n in sizes]),
            "design": distribution,
        },
        columns=columns,
    )
    frame.attrs["rows"] = rows
    return frame


def _chosen_sizes(
    outputs: pd.DataFrame, per_system: int | dict[str, int], systems: list[str] | None
) -> tuple[list[str], np.ndarray]:
    """The systems to draw from (sorted, with at least one draw and one output) and their
    draws."""
    present = sorted(str(s) for s in outputs["system"].unique())
    chosen = present if systems is None else sorted(set(systems) & set(present))
    sizes = np.array(
        [per_system.get(c, 0) if isinstance(per_system, dict) else int(per_system) for c in chosen],
        np.int64,
    )
    keep = sizes > 0
    return [c for c, k in zip(chosen, keep, strict=True) if k], sizes[keep]


def _design_levels(outputs: pd.DataFrame, distribution: str) -> np.ndarray | None:
    """The judge's level of every output row for a ``judge-strata`` design, else None."""
    if not str(distribution).startswith(JUDGE_STRATA + ":"):
        return None
    name, u = parse_judge_strata(distribution)
    column = LEVEL_COLUMN + name
    if column not in outputs.columns:
        raise ValueError(f"the design {distribution!r} needs judge {name!r}'s grades (judge.tsv)")
    level = outputs[column].to_numpy(np.int64)
    if level.size and level.max() >= u.size:
        raise ValueError(
            f"the design {distribution!r} has {u.size} weights, judge {name!r} more levels"
        )
    return level


def _text_ranks(column: pd.Series) -> np.ndarray:
    """Every row's rank among the column's distinct texts in code-point order (= UTF-8 byte
    order, the engines' string order), through a Categorical's codes when it is one."""
    from receval.formats.coded import system_codes

    codes, values = system_codes(column)
    return _value_ranks(_arrow_texts(values))[codes]


def _arrow_texts(values: pd.Index):
    """``values`` (distinct texts) as an Arrow string array (no copy when Arrow-backed)."""
    import pyarrow as pa

    try:
        return pa.array(values.array)
    except (TypeError, pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array(values.astype(str).to_numpy(object), type=pa.string())


def _value_ranks(values) -> np.ndarray:
    """The rank of each of ``values`` (distinct texts, an Arrow array) in UTF-8 byte order."""
    import pyarrow.compute as pc

    rank = np.empty(len(values), dtype=np.int64)
    rank[pc.array_sort_indices(values).to_numpy()] = np.arange(len(values))
    return rank


def _tail_ranks(values) -> np.ndarray:
    """The rank of each text's last character (code point; "" for "") among the tails, in
    UTF-8 byte order (the engines' ``right(a, 1)``)."""
    import pyarrow.compute as pc

    tails = pc.dictionary_encode(pc.utf8_slice_codeunits(values, start=-1))
    return _value_ranks(tails.dictionary)[tails.indices.to_numpy(zero_copy_only=False)]


def _texts_at(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The texts of ``column`` at ``rows`` (positions), as Python strings."""
    return column.take(rows).astype(str).to_numpy(object)


@dataclass(frozen=True)
class FactOrder:
    """The chosen systems' output rows in the engines' draw order (:mod:`receval.engine.draws`):
    ``rows`` sorted by (system, query_id, tail(answer), level, answer), system ``i`` (of
    ``systems``, sorted) at ``rows[start[i]:start[i] + size[i]]``; with levels, ``by_level``
    the same rows stably sorted by (system, level) and ``level_start[i, h]`` where each
    (system, level) block begins."""

    systems: list[str]
    rows: np.ndarray
    start: np.ndarray
    size: np.ndarray
    by_level: np.ndarray | None = None
    level_start: np.ndarray | None = None

    @classmethod
    def of(cls, outputs: pd.DataFrame, chosen: list[str], level: np.ndarray | None) -> FactOrder:
        from receval.formats.coded import system_codes

        codes, names = system_codes(outputs["system"])
        own = np.append(pd.Index(chosen).get_indexer(names), -1)[codes]
        rows = np.flatnonzero(own >= 0)
        own = own[rows]
        answer_codes, answers = system_codes(outputs["answer"])
        texts = _arrow_texts(answers)
        tail_rank = _tail_ranks(texts)
        a = answer_codes[rows]
        keys = [_value_ranks(texts)[a]]
        if level is not None:
            keys.append(level[rows])
        keys += [tail_rank[a], _text_ranks(outputs["query_id"])[rows], own]
        order = _lexsort(keys)
        rows, own = rows[order], own[order]
        size = np.bincount(own, minlength=len(chosen))
        start = np.cumsum(size) - size
        if level is None:
            return cls(chosen, rows, start, size)
        width = int(level.max(initial=0)) + 1
        key = own * width + level[rows]
        by_level = rows[np.argsort(key, kind="stable")]
        counts = np.bincount(key, minlength=len(chosen) * width)
        level_start = (np.cumsum(counts) - counts).reshape(len(chosen), width)
        return cls(chosen, rows, start, size, by_level, level_start)

    def system_index(self, system: np.ndarray) -> np.ndarray:
        return pd.Index(self.systems).get_indexer(system)


def _lexsort(keys: list[np.ndarray]) -> np.ndarray:
    """``np.lexsort(keys)`` (the last key first) of non-negative integer keys that are
    distinct together (one row per system and fact): one argsort of the keys packed into one
    int64 when their ranges fit, else ``np.lexsort``."""
    packed = np.zeros(len(keys[0]), np.int64)
    span = 1
    for key in keys:
        width = int(key.max(initial=0)) + 1
        if span * width >= 1 << 62:
            return np.lexsort(keys)
        packed += key.astype(np.int64) * span
        span *= width
    return np.argsort(packed)  # distinct keys: any sort gives lexsort's order


def _hashed_rows(
    outputs: pd.DataFrame,
    queries: pd.DataFrame,
    distribution: str,
    order: FactOrder,
    uniforms: dict[str, np.ndarray],
    level: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(the drawn output rows, their prob) in (system, draw) order (module function
    :func:`hashed_precision_samples`)."""
    from receval.engine import draws as drawing

    sizes = pd.DataFrame({"system": order.systems, "facts": order.size})
    if distribution == "uniform":
        ranks = drawing.draw_ranks(sizes, uniforms)
    elif distribution == "entity-relation":
        ranks = drawing.weighted_ranks(_entity_relation_cells(outputs, queries, order), uniforms)
    elif level is not None:
        return _strata_rows(distribution, order, uniforms, level)
    elif distribution == "judge-uncertainty":
        return _mixture_rows(outputs, queries, distribution, order, uniforms)
    else:
        raise ValueError(
            f"unknown sampling distribution {distribution!r} (known: {', '.join(DISTRIBUTIONS)})"
        )
    at = order.start[order.system_index(ranks["system"].to_numpy(object))]
    return order.rows[at + ranks["k"].to_numpy(np.int64)], ranks["prob"].to_numpy(float)


def _entity_relation_cells(
    outputs: pd.DataFrame, queries: pd.DataFrame, order: FactOrder
) -> pd.DataFrame:
    """``system, query_id, facts, weight`` per (system, query) in (system, query) order, as
    :func:`receval.engine.sampled.entity_relation_cells` gives them."""
    from receval.engine.draws import entity_relation_weights

    rows = order.rows
    own = np.repeat(np.arange(len(order.systems)), order.size)
    query = _text_ranks(outputs["query_id"])[rows]
    copies = (
        outputs["copies"].to_numpy(np.int64)[rows]
        if "copies" in outputs
        else np.ones(len(rows), np.int64)
    )
    new = np.r_[True, (own[1:] != own[:-1]) | (query[1:] != query[:-1])]
    first = np.flatnonzero(new)
    cell = np.cumsum(new) - 1
    cells = pd.DataFrame(
        {
            "system": np.asarray(order.systems, dtype=object)[own[first]],
            "query_id": _texts_at(outputs["query_id"], rows[first]),
            "facts": np.bincount(cell).astype(np.int64),
            "copies": np.bincount(cell, weights=copies).astype(np.int64),
        }
    )
    return entity_relation_weights(cells, queries)[["system", "query_id", "facts", "weight"]]


def _strata_rows(
    distribution: str, order: FactOrder, uniforms: dict[str, np.ndarray], level: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The drawn rows and prob of a ``judge-strata`` design
    (:func:`receval.engine.draws.strata_ranks`, :func:`receval.engine.draws.strata_probability`)."""
    from receval.engine import draws as drawing

    _, weights = parse_judge_strata(distribution)
    width = order.level_start.shape[1]
    counts = np.diff(np.r_[order.level_start.ravel(), len(order.rows)])
    pairs = np.flatnonzero(counts > 0)
    level_sizes = pd.DataFrame(
        {
            "system": np.asarray(order.systems, dtype=object)[pairs // width],
            "level": (pairs % width).astype(np.int64),
            "facts": counts[pairs].astype(np.int64),
        }
    )
    ranks = drawing.strata_ranks(level_sizes, weights, JUDGE_STRATA_FLOOR, uniforms)
    i = order.system_index(ranks["system"].to_numpy(object))
    k = ranks["k"].to_numpy(np.int64)
    h = ranks["level"].to_numpy(np.int64)
    whole = order.rows[order.start[i] + k]
    within = order.by_level[order.level_start[i, np.maximum(h, 0)] + k]
    rows = np.where(h < 0, whole, within)
    prob = drawing.strata_probability(level_sizes, weights, JUDGE_STRATA_FLOOR)
    return rows, prob(ranks["system"].to_numpy(object), level[rows])


def _mixture_rows(
    outputs: pd.DataFrame,
    queries: pd.DataFrame,
    distribution: str,
    order: FactOrder,
    uniforms: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """The drawn rows and prob of the ``judge-uncertainty`` design (drawn in memory only):
    draw ``d`` with uniform v takes, among the system's facts in the engines' order, the one
    of rank ⌊(v/a) · N_j⌋ when v < a (a = :data:`JUDGE_UNIFORM_SHARE`, or always when the
    weights sum to 0), else the first whose cumulative weight w = s(1 − s) exceeds
    t = (v − a)/(1 − a) · Σ w (inverse CDF)."""
    if "judge_score" not in outputs.columns:
        raise ValueError("the judge-uncertainty design needs the judge's scores (judge.tsv)")
    s = outputs["judge_score"].to_numpy(float)
    a = JUDGE_UNIFORM_SHARE
    picked = []
    for i, system in enumerate(order.systems):
        block = order.rows[order.start[i] : order.start[i] + order.size[i]]
        v, n = uniforms[system], len(block)
        w = s[block] * (1.0 - s[block])
        cum = np.cumsum(w)
        total = cum[-1] if n else 0.0
        uniform = (v < a) | ~(total > 0)
        share = np.where(total > 0, a, 1.0)
        k = np.minimum(np.floor(v / share * n), n - 1).astype(np.int64)
        t = (v - a) / (1.0 - a) * total
        last = int(np.flatnonzero(w > 0)[-1]) if total > 0 else 0
        weighted = np.minimum(np.searchsorted(cum, t, side="right"), last)
        picked.append(block[np.where(uniform, k, weighted)])
    rows = np.concatenate(picked)
    return rows, np.asarray(sampling_probabilities(outputs, queries, distribution, rows=rows))


def first_spellings(
    outputs: pd.DataFrame, raw_outputs: pd.DataFrame | None, rows: np.ndarray, strip: bool = True
) -> np.ndarray:
    """The answer of each drawn output row as the engine reads it: the smallest (code-point
    order) of the system's input spellings of that fact (``raw_outputs``; without them, the
    kept row's), stripped of surrounding spaces when ``strip`` (``[matching] strip``: the
    same fact)."""

    def trim(texts) -> list[str]:
        return [a.strip(" ") for a in texts] if strip else list(texts)

    raw = outputs["answer_raw"] if "answer_raw" in outputs else outputs["answer"]
    out = np.array(trim(_texts_at(raw, rows)), dtype=object)
    copies = outputs["copies"].to_numpy()[rows] if "copies" in outputs else np.ones(len(rows))
    several = np.flatnonzero(copies > 1)
    if raw_outputs is None or not several.size or "answer_raw" not in raw_outputs:
        return out
    fact = outputs["fact"].to_numpy(np.int64)[rows[several]]
    system = _texts_at(outputs["system"], rows[several])
    near = raw_outputs[np.isin(raw_outputs["fact"].to_numpy(np.int64), fact)]
    spelled = pd.DataFrame(
        {
            "system": near["system"].astype(str).to_numpy(object),
            "fact": near["fact"].to_numpy(np.int64),
            "answer": trim(near["answer_raw"].astype(str)),
        }
    )
    first = spelled.groupby(["system", "fact"], sort=False)["answer"].min()
    out[several] = first.reindex(pd.MultiIndex.from_arrays([system, fact])).to_numpy(object)
    return out


def hashed_units(
    candidates: pd.DataFrame, m: int, seed: int, round_number: int, exclude: set[str]
) -> pd.DataFrame:
    """:func:`draw_exhaustive_units`'s designs, each draw a function of (seed, round, unit) or
    (seed, round, draw) (:mod:`receval.draw_hash`): uniform candidates, the ``m`` of the units
    not in ``exclude`` whose key MD5(``unit ␟ seed ␟ round ␟ unit``) is smallest (a simple
    random sample without replacement); weighted ones, ``m`` draws with replacement, draw ``d``
    the inverse CDF of p_u = w_u / Σ w (candidates in table order) at the uniform of
    MD5(``seed ␟ round ␟ unit␟ ␟ d``).  Every path (in memory, every engine) draws units so."""
    from receval.draw_hash import SEP, draw_uniform, python_key

    def weighted(p: np.ndarray) -> np.ndarray:
        cum = np.cumsum(p)
        u = draw_uniform(seed, round_number, f"unit{SEP}", m)
        return np.minimum(np.searchsorted(cum, u * cum[-1], side="right"), len(p) - 1)

    def uniform(pool: pd.DataFrame) -> np.ndarray:
        head = f"unit{SEP}{int(seed)}{SEP}{int(round_number)}{SEP}"
        keys = np.array([python_key(head + u) for u in pool["unit"].astype(str)], np.int64)
        return np.argsort(keys, kind="stable")[:m]

    return _draw_units(candidates, m, exclude, weighted=weighted, uniform=uniform)


def in_hashed_order(frame: pd.DataFrame, seed: int, round_number: int) -> pd.DataFrame:
    """``frame`` (a round's samples.tsv rows in (system, draw) order, ``attrs["rows"]`` their
    output rows) in the random order of :func:`receval.draw_hash.random_order`, marked
    ``order`` = ``random`` (module docstring), as every engine writes a round."""
    from receval.draw_hash import random_order

    shuffle = random_order(seed, round_number, frame["system"].to_numpy(), frame["draw"].to_numpy())
    rows = frame.attrs.get("rows")
    out = frame.iloc[shuffle].reset_index(drop=True)
    out[ORDER_COLUMN] = RANDOM_ORDER
    out.attrs = {} if rows is None else {"rows": np.asarray(rows)[shuffle]}
    return out
