""":class:`~receval.estimators.sample_data.SampleData` from the engine: the estimators' arrays
built from SQL aggregates over the runs (:mod:`receval.engine.sampled`) and the bundle's small
tables, never holding the output rows in Python.

Scope today: uniform samplers (``receval sample --per-system``, either path), the ``micro``
target, no exhaustive units and no equivalence classes in the judgments; anything else is a
``ValueError`` naming what to use instead (the in-memory :func:`build_sample_data`).  Within
that scope the arrays equal :func:`~receval.estimators.sample_data.build_sample_data`'s, except
that ``facts`` holds the drawn facts' 60-bit keys (sorted) instead of the loader's fact ids, so
the drawn facts are in another order (sums over them may differ in the last bits).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from receval.errors import BundleError
from receval.formats.checks import raise_first_bad

if TYPE_CHECKING:
    from receval.estimators.sample_data import SampleData


def _small_tables(bundle) -> tuple:
    """(config, query ids, checked samples, checked judgments, samples path) of ``bundle``."""
    from receval.config import load_config
    from receval.task import _check_judgments, _check_queries, _check_samples, _table_source

    bundle.check_folder()
    root = Path(bundle.root)
    files: dict[str, Path] = {}
    config = load_config(root / "task.toml", default_name=root.resolve().name)
    queries = list(_check_queries(_table_source(root, "queries", files))["query_id"])
    known = set(queries)
    samples = _check_samples(_table_source(root, "samples", files), known)
    judgments = _check_judgments(_table_source(root, "judgments", files), config, known)
    for table in ("exhaustive_units", "exhaustive"):
        if bundle.table(table) is not None:
            raise ValueError(
                f"{table}: exhaustive units are not in the engine's sample data yet; "
                "use the in-memory path"
            )
    if (judgments["equivalence_class"] != "").any():
        raise ValueError(
            "judgments: equivalence classes are not in the engine's sample data yet; "
            "use the in-memory path"
        )
    return config, queries, samples, judgments, files.get("samples", root / "samples.tsv")


def _labels(judgments: pd.DataFrame, config) -> pd.Series:
    """Merged label per fact key (:func:`receval.merge.merge_labels` over keyed facts)."""
    from receval.engine.sampled import _fact_keys
    from receval.merge import merge_labels

    if judgments.empty:
        return pd.Series([], dtype=float)
    keys = _fact_keys(judgments["query_id"], judgments["answer"], config.matching)
    labels = merge_labels(judgments.assign(fact=keys), config.merge_rule, config.tie_policy).labels
    labels = labels.astype(float)
    query = pd.Series(judgments["query_id"].astype(str).str.strip().to_numpy(), index=keys)
    labels.attrs["query"] = query[~query.index.duplicated()].reindex(labels.index).to_numpy()
    return labels


def _samplers(samples: pd.DataFrame, sizes: pd.Series, path: Path) -> list:
    """The (sample, system) samplers in sorted order, each checked to be uniform
    (prob = 1/|X_j| within 1e-4, as :func:`receval.design.infer_designs` checks)."""
    from receval.design import Sampler

    declared = samples["design"] if "design" in samples else pd.Series("", index=samples.index)
    expected = 1.0 / sizes.reindex(samples["system"]).to_numpy(float)
    ok = np.isclose(samples["prob"].to_numpy(float), expected, rtol=1e-4, atol=0)
    ok &= declared.astype(str).str.strip().isin(["", "uniform"]).to_numpy()
    raise_first_bad(
        samples,
        path,
        ~ok,
        "not a uniform draw of this system's facts: the engine's sample data covers the "
        "uniform design only (use the in-memory path)",
    )
    groups = samples.groupby(["sample", "system"], sort=True, observed=True).size()
    return [Sampler(str(a), str(b), "uniform", int(n)) for (a, b), n in groups.items()]


def engine_sample_data(bundle, *, engine: str = "duckdb") -> SampleData:
    """The estimators' arrays for ``bundle`` computed in ``engine`` (module docstring).

    Python holds the draws, the labels, (D × m) membership of the drawn and labelled facts and
    per-system / per-query aggregates: memory flat in the number of output rows.
    """
    from receval.engine.sampled import (
        QUERY_SIZES,
        _fact_keys,
        _round_engine,
        joint_aggregates,
        register_keyed,
        register_system_facts,
    )

    config, queries, samples, judgments, path = _small_tables(bundle)
    labels = _labels(judgments, config)
    keys = (
        _fact_keys(samples["query_id"], samples["answer"], config.matching)
        if len(samples)
        else np.empty(0, np.int64)
    )
    with _round_engine(bundle, engine) as con:
        register_keyed(con, config.matching)
        register_system_facts(con, queries=True)
        agg = joint_aggregates(con, np.concatenate([keys, labels.index.to_numpy(np.int64)]))
        cells = con.query(QUERY_SIZES)
    return _assemble(agg, cells, queries, samples, keys, labels, path)


def _assemble(agg, cells, queries, samples, keys, labels, path) -> SampleData:
    """The arrays of :func:`build_sample_data` from the aggregates (same names, same meaning)."""
    from receval.estimators.sample_data import SampleData, _sampler_rounds

    systems, m = agg.systems, len(agg.systems)
    sys_index = {s: i for i, s in enumerate(systems)}
    sizes = agg.sizes
    samplers = _samplers(samples, pd.Series(sizes, index=systems), path) if len(samples) else []
    key_of = {(s.sample, s.system): j for j, s in enumerate(samplers)}
    j_all = np.array(
        [key_of[(a, b)] for a, b in zip(samples["sample"], samples["system"], strict=True)],
        np.int64,
    )
    label_all = labels.reindex(keys).to_numpy(float) if len(keys) else np.empty(0)
    judged = ~np.isnan(label_all)
    draw_row = np.flatnonzero(judged).astype(np.int64)
    j_all, f_all = j_all[judged], keys[judged]
    sampler_n = np.bincount(j_all, minlength=len(samplers)).astype(float)
    drawn, draw_fact = np.unique(f_all, return_inverse=True)
    member = agg.member[np.searchsorted(agg.keys, drawn)] if drawn.size else np.zeros((0, m), bool)
    own = np.array([sys_index[s.system] for s in samplers], np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        target = member / sizes
        proposal = member[:, own] / sizes[own]
    labelled = labels.index.to_numpy(np.int64)
    lab_member = agg.member[np.searchsorted(agg.keys, labelled)]
    judged_out = lab_member.sum(axis=0).astype(float)
    correct = (lab_member * labels.to_numpy(float)[:, None]).sum(axis=0)
    census = (sizes - judged_out == 0) & (sizes > 0)
    q_index = pd.Series(np.arange(len(queries)), index=queries)
    query_sizes = np.zeros((len(queries), m))
    query_sizes[
        q_index.reindex(cells["query_id"]).to_numpy(np.int64),
        cells["system"].map(sys_index).to_numpy(np.int64),
    ] = cells["facts"].to_numpy(float)
    draw_query = q_index.reindex(samples["query_id"].astype(str).str.strip().to_numpy()[judged])
    return SampleData(
        systems=systems,
        sizes=sizes,
        sampler_system=own,
        sampler_n=sampler_n,
        sampler_design=[s.design for s in samplers],
        sampler_names=[(s.sample, s.system) for s in samplers],
        draw_sampler=j_all,
        draw_fact=draw_fact.astype(np.int64),
        facts=drawn,
        label=labels.reindex(drawn).to_numpy(float),
        member=member,
        target=np.nan_to_num(target),
        proposal=np.nan_to_num(proposal),
        overlap=agg.uniform_overlap[:, own],
        unit_weight=np.empty(0),
        unit_found=np.empty(0),
        unit_pooled=np.empty(0),
        unit_by_system=np.zeros((0, m)),
        unit_names=[],
        unjudged_draws=int((~np.isnan(label_all)).size - judged.sum()),
        unjudged_facts=int(np.unique(keys[~judged]).size),
        census=census,
        census_precision=np.where(census, correct / np.maximum(sizes, 1), np.nan),
        judged=judged_out,
        target_kind="micro",
        queries=list(queries),
        draw_query=draw_query.to_numpy(np.int64),
        query_sizes=query_sizes,
        query_correct=_query_correct(lab_member, labels, q_index, m),
        draw_row=draw_row,
        sampler_round=_sampler_rounds(samples, samplers),
    )


def _query_correct(lab_member: np.ndarray, labels: pd.Series, q_index: pd.Series, m: int):
    """Σ of the labels of each (query, system)'s labelled outputs (Q × m)."""
    out = np.zeros((len(q_index), m))
    query = labels.attrs.get("query")
    if query is None or not len(labels):
        return out
    rows = q_index.reindex(query).to_numpy(np.int64)
    np.add.at(out, rows, lab_member * labels.to_numpy(float)[:, None])
    return out


def joint_estimates(
    bundle,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    engine: str = "duckdb",
) -> pd.DataFrame:
    """Joint precision and pooled recall of every system from :func:`engine_sample_data`
    (Chaganty et al. 2017, §3: π̂_i, Theorem 1; ν̂_i self-normalised), in the precision form
    ``score`` picks by default (``auto``), with **percentile bootstrap** intervals at ``level``
    (``bootstrap`` replicates shared by all systems, seeded).  No pool coverage (no exhaustive
    units here), no small-sample expansion, no output set: the estimator's core at any size,
    until ``score`` itself runs on the engine's arrays.

    Returns ``system, outputs, precision, precision_lo, precision_hi, pooled_recall,
    pooled_recall_lo, pooled_recall_hi, interval``.
    """
    from receval.estimators.base import ScoringContext
    from receval.estimators.joint import JointEstimator
    from receval.scoring import fit

    data = engine_sample_data(bundle, engine=engine)
    if data.K == 0:
        raise BundleError(bundle.root / "samples.tsv", None, "no judged sample draws")
    run = fit(ScoringContext.of(data, bootstrap=bootstrap, seed=seed), JointEstimator()).run
    tail = (1.0 - level) / 2 * 100
    out = pd.DataFrame({"system": data.systems, "outputs": data.sizes.astype(np.int64)})
    for metric in ("precision", "pooled_recall"):
        out[metric] = run.point[metric].reshape(-1)
        lo, hi = np.nanpercentile(run.replicates[metric], [tail, 100 - tail], axis=0)
        out[f"{metric}_lo"], out[f"{metric}_hi"] = lo, hi
    out["interval"] = f"percentile bootstrap {level:g} (B={bootstrap})"
    return out
