"""The runs' summary from one per-fact aggregation with system masks
(:func:`receval.engine.summary.masked_facts`, Spark's and one runs table's path) equals the
per-(system, query) aggregation DuckDB runs on one file per system (:data:`RUN_CELLS`, the pool
in batches): sizes, rows, cells, pool, unique facts per team, members."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import receval.engine.summary as summary
from receval.engine.base import connect


def _normed(systems: int, teams: bool, seed: int = 0) -> pd.DataFrame:
    """Runs of ``systems`` systems over 5 queries (answers from a small shared vocabulary, so
    facts are output by many systems, some by one only), duplicates included; ``teams``: a
    named team for some systems (three systems share ``t0``), a blank cell for the others."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(systems):
        team = (f"t{s % 7}" if s % 3 else None) if teams else None
        for q in range(5):
            docs = rng.choice(40 + s, size=int(rng.integers(0, 12)), replace=True)
            rows += [(f"S{s:03d}", team, f"q{q}", f"d{d}") for d in docs]
    return pd.DataFrame(rows, columns=["system", "team", "query_id", "answer"])


def _summaries(normed: pd.DataFrame, pool: bool = True):
    engine = connect("duckdb")
    try:
        engine.register("normed", normed)
        wanted = normed.drop_duplicates(["query_id", "answer"]).iloc[::5][["query_id", "answer"]]
        wanted = wanted.reset_index(drop=True).rename_axis("fact").reset_index()
        systems = sorted(normed["system"].unique())
        known = set(normed["query_id"]) | {"q9"}
        args = (engine, wanted, {}, known, ("EMPTY",))
        masked = summary.summarise_runs(*args, by_system=None, pool=pool)
        batched = summary.summarise_runs(*args, by_system=systems, pool=pool)
    finally:
        engine.close()
    return masked, batched


def _same(masked, batched, pool: bool = True) -> None:
    assert masked.systems == batched.systems
    assert masked.teams == batched.teams
    np.testing.assert_array_equal(masked.sizes, batched.sizes)
    np.testing.assert_array_equal(masked.rows, batched.rows)
    key = ["system", "query_id"]
    a = masked.cells.sort_values(key).reset_index(drop=True)
    b = batched.cells.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    assert masked.pool_size == batched.pool_size
    if pool:
        pd.testing.assert_series_equal(masked.unique_facts(), batched.unique_facts())
    key = ["fact", "system"]
    a = masked.members.sort_values(key).reset_index(drop=True)
    b = batched.members.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


@pytest.mark.parametrize(("systems", "teams"), [(5, False), (5, True), (130, False), (130, True)])
def test_masks_count_what_the_per_system_aggregation_counts(systems, teams):
    """Up to three mask blocks (130 systems: bits 0-62 of each), named teams or none."""
    normed = _normed(systems, teams)
    masked, batched = _summaries(normed)
    _same(masked, batched)
    assert masked.pool_size == len(normed.drop_duplicates(["query_id", "answer"]))
    assert masked.sizes.sum() == len(normed.drop_duplicates(["system", "query_id", "answer"]))


def test_masks_summed_in_chunks_of_columns(monkeypatch):
    """More sums than one query takes: the masks kept in a table, summed a chunk at a time."""
    monkeypatch.setattr(summary, "SUMS_PER_QUERY", 7)
    masked, batched = _summaries(_normed(20, True))
    _same(masked, batched)


def test_masks_without_the_pool():
    masked, batched = _summaries(_normed(9, True), pool=False)
    _same(masked, batched, pool=False)
    assert masked.team_facts.empty and masked.pool_size == -1


def test_system_bits_stay_non_negative():
    bits = summary.system_bits([f"S{i}" for i in range(127)])
    assert (bits["bit"] > 0).all()
    assert bits["block"].max() == 2 and bits["bit"].max() == 1 << 62
    assert list(bits["bit"].iloc[63:65]) == [1, 2]
